r"""NTP-UFM: the unconstrained-features model of next-token prediction [geo, Sec. 2].

Every distinct context :math:`\bar x_j` gets a free embedding :math:`h_j \in \R^d` (the
columns of :math:`H \in \R^{d\times m}`) and every next token a free word embedding
:math:`w_z` (the rows of :math:`W \in \R^{V\times d}`); the logits are
:math:`L = W H \in \R^{V\times m}`.  As a network this is a one-hot input layer
``Linear(m, d, bias=False)`` (weight :math:`H`) followed by ``Linear(d, V, bias=False)``
(weight :math:`W`), initialised like PyTorch's ``nn.Linear`` default,
:math:`U(\pm 1/\sqrt{\text{fan-in}})`, as in the authors' code.  Book: ``geo-def-ufm``.

Two implementations share the initialisation :func:`init_ufm`: the torch module
:class:`UFM` (autograd, used as an oracle and on the GPU) and the closed-form AdamW loop of
:func:`ntpcore.geo.train.numpy_ufm.train_ufm_numpy` (the default: two matrices need no autograd).
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn


def init_ufm(
    m: int, V: int, d: int, rng: np.random.Generator
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""PyTorch-default initialisation of the UFM, drawn from ``rng`` in float64.

    Returns ``W`` (V, d) with entries :math:`U(\pm 1/\sqrt d)` (fan-in of the output layer)
    and ``H`` (d, m) with entries :math:`U(\pm 1/\sqrt m)` (fan-in of the one-hot layer).
    """
    H = rng.uniform(-1.0, 1.0, size=(d, m)) / np.sqrt(m)  # (d, m)
    W = rng.uniform(-1.0, 1.0, size=(V, d)) / np.sqrt(d)  # (V, d)
    return W, H


class UFM(nn.Module):
    r"""Unconstrained features model: ``forward(j) = W h_j`` for context indices ``j``.

    Parameters
    ----------
    n_contexts : int   m, number of distinct contexts (one free embedding each)
    vocab_size : int   V, number of next tokens
    d : int            embedding dimension (paper: 128)
    """

    def __init__(
        self,
        n_contexts: int,
        vocab_size: int,
        d: int = 128,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.H = nn.Parameter(torch.empty(d, n_contexts))  # (d, m): columns h_j
        self.W = nn.Parameter(torch.empty(vocab_size, d))  # (V, d): rows w_z
        gen = generator if generator is not None else torch.default_generator
        bound_h, bound_w = 1.0 / np.sqrt(n_contexts), 1.0 / np.sqrt(d)
        with torch.no_grad():
            self.H.uniform_(-bound_h, bound_h, generator=gen)
            self.W.uniform_(-bound_w, bound_w, generator=gen)

    @classmethod
    def from_arrays(cls, W: np.ndarray, H: np.ndarray, dtype: torch.dtype = torch.float64) -> UFM:
        """A UFM holding copies of given ``W`` (V, d) and ``H`` (d, m)."""
        V, d = W.shape
        model = cls(H.shape[1], V, d, generator=torch.Generator().manual_seed(0)).to(dtype)
        with torch.no_grad():
            model.W.copy_(torch.as_tensor(W))
            model.H.copy_(torch.as_tensor(H))
        return model

    @property
    def output_weight(self) -> torch.Tensor:
        """Word embeddings W (V, d)."""
        return self.W

    @property
    def output_bias(self) -> None:
        """The UFM has no output bias."""
        return None

    def features(self, idx: torch.Tensor) -> torch.Tensor:
        """Context embeddings of the contexts ``idx`` (B,), as rows: (B, d)."""
        return self.H.t()[idx]

    def output(self, feats: torch.Tensor) -> torch.Tensor:
        """Logits (B, V) from context embeddings (B, d), like the networks' output layer."""
        return feats @ self.W.t()

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (B, V) of the contexts ``idx`` (B,)."""
        return self.output(self.features(idx))
