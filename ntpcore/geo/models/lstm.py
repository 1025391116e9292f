r"""Two-layer LSTM language model of the geometry experiments [geo, Sec. 3, Fig. 2].

Token embedding (width ``dim``), ``nn.LSTM(dim, dim, num_layers=2)``, RMSNorm of the last
hidden state (the context embedding :math:`h_j`), and an output layer
``Linear(dim, V)`` **with a bias** as in the authors' code (the theory has no bias, so the
logits are :math:`L = W H + b\,1^\top`; book: *Trained models*, deviations, item 5).
Linear and embedding weights are initialised :math:`\mathcal N(0, 0.02^2)` (the output
bias at 0), the LSTM with PyTorch's default :math:`U(\pm 1/\sqrt{\rm dim})`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class LSTMConfig:
    vocab_in: int  # size of the context (input) vocabulary
    vocab_out: int  # V, number of next tokens
    dim: int = 128  # embedding and hidden width d
    n_layers: int = 2  # stacked LSTM layers
    output_bias: bool = True  # the authors' output layer has a bias
    norm_eps: float = 1e-5  # RMSNorm epsilon
    init_std: float = 0.02  # std of the normal initialisation


class LSTMModel(nn.Module):
    """``forward(tokens)`` maps token ids (B, T) to next-token logits (B, V)."""

    def __init__(self, cfg: LSTMConfig, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.embedding = nn.Embedding(cfg.vocab_in, cfg.dim)
        self.lstm = nn.LSTM(cfg.dim, cfg.dim, num_layers=cfg.n_layers, batch_first=True)
        self.norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_out, bias=cfg.output_bias)
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        gen = generator if generator is not None else torch.default_generator
        bound = 1.0 / math.sqrt(self.cfg.dim)
        with torch.no_grad():
            self.embedding.weight.normal_(0.0, self.cfg.init_std, generator=gen)
            for p in self.lstm.parameters():
                p.uniform_(-bound, bound, generator=gen)
            self.norm.reset_parameters()
            self.output.weight.normal_(0.0, self.cfg.init_std, generator=gen)
            if self.output.bias is not None:
                self.output.bias.zero_()

    @property
    def output_weight(self) -> torch.Tensor:
        """Word embeddings W (V, dim)."""
        return self.output.weight

    @property
    def output_bias(self) -> torch.Tensor | None:
        return self.output.bias

    def features(self, tokens: torch.Tensor) -> torch.Tensor:
        """Context embeddings h (B, dim): RMSNorm of the last hidden state of the top layer."""
        out, _ = self.lstm(self.embedding(tokens))  # (B, T, dim)
        return self.norm(out[:, -1])

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.output(self.features(tokens))  # (B, V)
