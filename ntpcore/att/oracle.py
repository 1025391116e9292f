r"""One-layer self-attention model of the ``att`` paper (torch, float64).

.. math::
    s(X; W) = \mathbb S(X W \bar x) \in \Delta^{T-1}, \qquad f_W(X) = C X^\top s(X; W)

with the combined key-query matrix ``W`` (d, d) as the only trainable parameter, the last token
:math:`\bar x` as query (it also attends to itself) and identity value matrix (book
``att-eq-model``).

Heads
    ``"identity"``: :math:`C E^\top = I_K`, so :math:`f_W(X)_k = \sum_{t:a_t=k} s_t` is the
    attention mass on token k — a probability vector over the vocabulary.  Implemented by
    scattering the attention onto token ids (valid for any K); :meth:`head_matrix` returns the
    explicit :math:`C = (E E^\top)^{-1} E` when E has full row rank.
    ``"general"`` (book ``att-conj-local``): :math:`C = E`, i.e. vocabulary logits
    :math:`E X^\top s`.

This module is the autograd oracle of the closed-form, batched numpy gradients in
:mod:`ntpcore.att.dynamics`; the experiments use the latter.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["OneLayerAttention", "attention_loss", "descent_step"]


class OneLayerAttention(nn.Module):
    """Single attention layer ``f_W(X) = C X^T softmax(X W xbar)`` on a fixed vocabulary.

    Parameters
    ----------
    E : (K, d) tensor or array   token embeddings (fixed), row k = token k
    head : "identity" | "general"
    init : "zero" | "uniform"    W(0) = 0 or i.i.d. U(-1/sqrt(d), 1/sqrt(d)) (PyTorch Linear)
    generator : torch.Generator used by ``init="uniform"``
    """

    def __init__(self, E, *, head: str = "identity", init: str = "zero", generator=None):
        super().__init__()
        if head not in ("identity", "general"):
            raise ValueError(f"head must be 'identity' or 'general', got {head!r}")
        E = torch.as_tensor(E, dtype=torch.float64)
        self.register_buffer("E", E)  # (K, d)
        self.head = head
        d = E.shape[1]
        W = torch.zeros(d, d, dtype=torch.float64)
        if init == "uniform":
            W.uniform_(-1 / math.sqrt(d), 1 / math.sqrt(d), generator=generator)
        elif init != "zero":
            raise ValueError(f"init must be 'zero' or 'uniform', got {init!r}")
        self.W = nn.Parameter(W)  # (d, d) combined key-query matrix

    @property
    def K(self) -> int:
        return int(self.E.shape[0])

    def head_matrix(self) -> torch.Tensor:
        """Explicit prediction head C (K, d): ``(E E^T)^{-1} E`` (identity) or ``E`` (general)."""
        if self.head == "general":
            return self.E
        return torch.linalg.solve(self.E @ self.E.T, self.E)

    def forward(self, tokens: torch.Tensor, query: torch.Tensor | None = None):
        """Return ``(out, attn)``.

        tokens : (n, T) long   token ids, last column = last token
        query : (n, d)         optional query (default: the last token's embedding)
        out : (n, K)           identity head: probabilities f_W(X); general head: logits
        attn : (n, T)          attention s(X; W)
        """
        X = self.E[tokens]  # (n, T, d)
        q = X[:, -1] if query is None else query  # (n, d)
        scores = torch.einsum("ntd,de,ne->nt", X, self.W, q)  # x_t^T W xbar
        attn = torch.softmax(scores, dim=-1)  # (n, T)
        if self.head == "identity":
            out = torch.zeros(tokens.shape[0], self.K, dtype=attn.dtype)
            out = out.scatter_add(1, tokens, attn)  # f_k = sum_{t: a_t = k} s_t
        else:
            out = torch.einsum("nt,ntd,kd->nk", attn, X, self.E)  # logits E X^T s
        return out, attn


def attention_loss(out: torch.Tensor, labels: torch.Tensor, *, head: str, loss: str):
    """Mean loss: identity head ``"log"`` (-log f_y) or ``"squared"`` ((1-f_y)^2); general head
    ``"ce"`` (cross-entropy on the logits) or ``"squared"`` ((1 - softmax(u)_y)^2)."""
    if head == "identity":
        f_y = out.gather(1, labels[:, None])[:, 0]
        if loss == "log":
            return -torch.log(f_y).mean()
        if loss == "squared":
            return ((1 - f_y) ** 2).mean()
    elif head == "general":
        if loss == "ce":
            return nn.functional.cross_entropy(out, labels)
        if loss == "squared":
            p_y = torch.softmax(out, dim=-1).gather(1, labels[:, None])[:, 0]
            return ((1 - p_y) ** 2).mean()
    raise ValueError(f"unsupported head/loss combination {(head, loss)}")


def descent_step(
    model: OneLayerAttention, tokens, labels, *, eta: float, loss: str, normalized: bool = True
) -> float:
    """One (normalized) gradient step with autograd; returns the loss before the step."""
    model.zero_grad()
    out, _ = model(tokens)
    value = attention_loss(out, labels, head=model.head, loss=loss)
    value.backward()
    with torch.no_grad():
        g = model.W.grad
        if normalized:
            g = g / (g.norm() + 1e-12)
        model.W -= eta * g
    return float(value.detach())
