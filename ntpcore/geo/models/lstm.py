r"""Two-layer LSTM language model of the geometry experiments [geo, Sec. 3, Fig. 2].

Token embedding (width ``dim``), ``nn.LSTM(dim, dim, num_layers=2)``, RMSNorm of the last
hidden state (the context embedding :math:`h_j`), and an output layer
``Linear(dim, V)`` **with a bias** as in the authors' code (the theory has no bias, so the
logits are :math:`L = W H + b\,1^\top`; book: *Trained models*, deviations, item 5).
Linear and embedding weights are initialised :math:`\mathcal N(0, 0.02^2)` (the output
bias at 0), the LSTM with PyTorch's default :math:`U(\pm 1/\sqrt{\rm dim})`.

Implementation choice that does not change the function (only the cost): **prefix
sharing**.  The LSTM's state after :math:`x_{1:t}` depends only on that prefix, so
:meth:`LSTMModel.features` also takes the contexts' :class:`~ntpcore.geo.models.trie.PrefixTrie`
and runs each cell once per distinct prefix (node), depth by depth: layer 1 on the node's
token embedding and its parent's :math:`(h, c)`, layer 2 on layer 1's :math:`h` at the node
and its parent's layer-2 state -- with ``nn.LSTM``'s own parameters (same state dict, same
initialisation; the gate order ``i, f, g, o`` and :math:`c' = f c + i g`,
:math:`h' = o \tanh c'` of its documentation).  Three more savings follow from the trie:
layer 1's input projection :math:`W_{ih} x + b_{ih} + b_{hh}` runs once per distinct
token, the recurrent projection :math:`W_{hh} h` once per parent (not per child), and
depth 1 has no recurrent term (:math:`h_0 = c_0 = 0`).  On the real-text set (425 contexts
of length 5; 1000 nodes, 575 of them parents, 157 tokens) one epoch (forward + backward)
is about 0.94 GFLOP of matrix products instead of 3.3 for ``nn.LSTM`` on the (context,
position) grid; ``tests/geo/test_models.py`` checks outputs and gradients against
``nn.LSTM``'s forward.  The two projections are oneDNN's products on the CPU in float32
(:func:`ntpcore.geo.models.fused.linear`): an epoch took 9.9 ms against 13.6 ms with
torch's ``linear`` (MKL) on an AMD EPYC of family 26, medians of 5 interleaved rounds of 80
epochs, ranges 9.8-11.5 and 13.4-15.0 ms (2026-11-29).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ntpcore.geo.models.fused import linear
from ntpcore.geo.models.trie import PrefixTrie


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
    """``forward(tokens)`` maps token ids (B, T), or their :class:`PrefixTrie`, to
    next-token logits (B, V)."""

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

    def features(self, tokens: torch.Tensor | PrefixTrie) -> torch.Tensor:
        """Context embeddings h (B, dim): RMSNorm of the last hidden state of the top layer.

        ``tokens`` is a (B, T) tensor of ids (``nn.LSTM`` over every position) or its
        :class:`PrefixTrie` (the same result, each distinct prefix computed once).
        """
        if isinstance(tokens, PrefixTrie):
            return self.norm(self._last_hidden_trie(tokens))
        out, _ = self.lstm(self.embedding(tokens))  # (B, T, dim)
        return self.norm(out[:, -1])

    def _last_hidden_trie(self, trie: PrefixTrie) -> torch.Tensor:
        """Top-layer hidden state at the contexts' leaves (B, dim), node by node."""
        x = self.embedding(trie.tokens)  # (distinct tokens, dim)
        sizes = [stop - start for start, stop in trie.levels]
        for layer in range(self.cfg.n_layers):
            w_ih, w_hh, b_ih, b_hh = (
                getattr(self.lstm, f"{name}_l{layer}")
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
            )
            pre = linear(x, w_ih, b_ih + b_hh)  # (k or n, 4 dim) input projection
            if layer == 0:
                pre = pre.index_select(0, trie.token_row)  # (n, 4 dim): per token, then node
            hs = self._recur_trie(pre.split(sizes), w_hh, trie)
            x = torch.cat(hs)  # (n, dim) hidden state of every node
        return hs[-1].index_select(0, trie.leaf - trie.levels[-1][0])  # the deepest level

    @staticmethod
    def _recur_trie(
        pre: tuple[torch.Tensor, ...], w_hh: torch.Tensor, trie: PrefixTrie
    ) -> list[torch.Tensor]:
        """One LSTM layer over the trie, depth by depth: ``pre[t]`` holds the input
        projections (with both biases) of the nodes of depth ``t + 1``; returns their
        hidden states, level by level."""
        hs: list[torch.Tensor] = []
        c_prev = rec = None
        for t, gates in enumerate(pre):
            if t > 0:  # the parent's state; h_0 = c_0 = 0 at depth 1
                start, stop = trie.levels[t]
                par = trie.parent[start:stop] - trie.levels[t - 1][0]
                gates = gates + rec.index_select(0, par)
            i, f, g, o = gates.chunk(4, dim=1)
            c = torch.sigmoid(i) * torch.tanh(g)
            if t > 0:
                c = c + torch.sigmoid(f) * c_prev.index_select(0, par)
            h = torch.sigmoid(o) * torch.tanh(c)
            hs.append(h)
            if t + 1 < len(pre):  # W_hh h once per parent, gathered per child
                rec, c_prev = linear(h, w_hh), c
        return hs

    def forward(self, tokens: torch.Tensor | PrefixTrie) -> torch.Tensor:
        return self.output(self.features(tokens))  # (B, V)
