r"""Decoder-only transformer of the geometry experiments [geo, Sec. 3, Figs. 1-3].

Llama-style blocks as in the authors' code: token embedding over the
context vocabulary, ``n_layers`` pre-RMSNorm blocks (causal multi-head attention with
``n_heads`` heads of width ``head_dim = (dim // n_heads // 2) * 2`` = 20 for the paper's
128/6, projected back to ``dim``; SwiGLU feed-forward ``w2(silu(w1 x) * w3 x)`` of hidden
width ``4 * dim``; no biases), a final RMSNorm, and an untied output layer
``Linear(dim, V, bias=False)`` whose weight is the word-embedding matrix :math:`W`.
**No positional encoding** (only the causal mask): the context embedding
:math:`h_j` is the final-norm output at the **last** position.

Initialisation (the authors' code): every linear layer and the token embedding
:math:`\mathcal N(0, 0.02^2)`; the residual-branch outputs ``w3`` and ``wo``
:math:`\mathcal N(0, (0.02/\sqrt{2 n_{\rm layers}})^2)`.

Implementation choices that do not change the function (only the cost):

* **prefix sharing**: with a causal mask and no positional encoding, the hidden state at
  position :math:`t` depends only on the prefix :math:`x_{1:t}`, so contexts that share a
  prefix share those states.  :class:`PrefixTrie` lists the distinct prefixes (the nodes of
  the contexts' trie) with their ancestors; every block then runs once per *node* (queries
  attend to the node's ancestors, keys/values are gathered from them) instead of once per
  (context, position).  On the synthetic set 72 nodes replace 80 positions; on real text
  with synonym expansion about 40% of the work disappears;
* the q/k/v projections are one ``Linear(dim, 3 * n_heads * head_dim)`` and ``w1``/``w3``
  are one ``Linear(dim, 2 * hidden)``, initialised block by block as above (the trie path
  multiplies by their row blocks separately: keys and values of every node, queries only
  where needed, and no concatenation of the gradients of ``w1 x`` and ``w3 x``);
* the last block computes only the last position (queries, residual and feed-forward),
  since nothing downstream reads the other positions (the mask is causal);
* the first block's normalisation and q/k/v projections see only the token embedding, so
  on the trie they run once per distinct token (157 instead of 1000 nodes on real text)
  and are gathered per node;
* on the trie each query attends to at most ``T`` ancestors, so the attention is written
  out (scores, masked softmax and weighted sum over the ancestors' keys and values) instead
  of ``scaled_dot_product_attention``, whose per-(node, head) overhead dominated at these
  sizes;
* that attention, the trie path's RMSNorms and its SwiGLU gates run the fused kernels of
  :mod:`ntpcore.geo.models.fused` (compiled, one pass over the rows, a hand-written
  backward) where the extension was built, else the same function in torch's operations;
  its matrix products (forward and backward) are oneDNN's on the CPU in float32
  (:func:`~ntpcore.geo.models.fused.linear`).
  Nothing here makes the result independent of the number of threads: the runner trains on
  one (``OMP_NUM_THREADS=1``).

The choices above but the last took one real-text epoch (forward, backward, AdamW; 1 thread)
from 119 to 101 ms (interleaved, medians of 7 rounds; 5.3 GFLOP of matrix products); the
outputs agree with the previous code to float32 rounding (4e-7 relative at initialisation).
The fused kernels then took it from 86.9 to 76.6 ms on this project's 2-core AMD EPYC
(medians of 5 interleaved rounds of 80 epochs against ``NTP_COMPILED=0``, ranges 85.6-87.9
and 73.7-78.6 ms, 2026-11-29).  The trie path's matrix products are oneDNN's
(:func:`ntpcore.geo.models.fused.linear`): on an AMD EPYC of family 26 an epoch took
37.7 ms against 60.6 ms with torch's (MKL's AVX2 kernels; ``NTP_ONEDNN=0``), medians of 5
interleaved rounds of 80 epochs, ranges 36.4-38.3 and 58.8-62.5 ms (2026-11-29).  The
plain :meth:`Block.forward` on the (context, position) grid uses none of this
(``torch.nn.RMSNorm``, ``scaled_dot_product_attention``, ``nn.Linear``): the tests compare
the two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ntpcore.geo.models.fused import linear, rms_norm, swiglu, trie_attention
from ntpcore.geo.models.trie import PrefixTrie

__all__ = ["Block", "PrefixTrie", "Transformer", "TransformerConfig"]


@dataclass(frozen=True)
class TransformerConfig:
    vocab_in: int  # size of the context (input) vocabulary
    vocab_out: int  # V, number of next tokens
    dim: int = 128  # model width d (= embedding dimension)
    n_layers: int = 4  # number of blocks
    n_heads: int = 6  # attention heads
    hidden_mult: int = 4  # feed-forward hidden width = hidden_mult * dim
    norm_eps: float = 1e-5  # RMSNorm epsilon
    init_std: float = 0.02  # std of the normal initialisation

    @property
    def head_dim(self) -> int:
        return (self.dim // self.n_heads // 2) * 2


class Block(nn.Module):
    """Pre-norm block: x + Attn(RMSNorm(x)), then + SwiGLU(RMSNorm(.))."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        width = cfg.n_heads * cfg.head_dim
        self.hidden = cfg.hidden_mult * cfg.dim
        self.attention_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.wqkv = nn.Linear(cfg.dim, 3 * width, bias=False)
        self.wo = nn.Linear(width, cfg.dim, bias=False)
        self.ffn_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.w13 = nn.Linear(cfg.dim, 2 * self.hidden, bias=False)
        self.w2 = nn.Linear(self.hidden, cfg.dim, bias=False)

    def reset_parameters(self, std: float, residual_std: float, gen: torch.Generator) -> None:
        with torch.no_grad():
            self.wqkv.weight.normal_(0.0, std, generator=gen)
            self.wo.weight.normal_(0.0, residual_std, generator=gen)
            self.w13.weight[: self.hidden].normal_(0.0, std, generator=gen)  # w1
            self.w13.weight[self.hidden :].normal_(0.0, residual_std, generator=gen)  # w3
            self.w2.weight.normal_(0.0, std, generator=gen)
            self.attention_norm.reset_parameters()
            self.ffn_norm.reset_parameters()

    def forward(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        B, T, _ = x.shape  # (B, T, dim)
        h = self.attention_norm(x)
        q, k, v = self.wqkv(h).split(self.n_heads * self.head_dim, dim=-1)  # 3 x (B, T, width)
        k = k.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
        v = v.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        if last_only:
            # The last query attends to every position: no mask needed.
            x = x[:, -1:]  # (B, 1, dim)
            q = q[:, -1:].view(B, 1, self.n_heads, self.head_dim).transpose(1, 2)
            att = F.scaled_dot_product_attention(q, k, v)  # (B, nh, 1, hd)
        else:
            q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hd)
        att = att.transpose(1, 2).reshape(B, x.shape[1], -1)  # (B, T', width)
        x = x + self.wo(att)
        return self._ffn(x, self.ffn_norm(x), lambda a, b: F.silu(a) * b, F.linear)

    def _ffn(self, x: torch.Tensor, hidden: torch.Tensor, gate, mm) -> torch.Tensor:
        """``x`` plus the feed-forward of its normalised ``hidden``; ``gate(a, b)`` is
        ``silu(a) * b``, ``mm(a, w)`` is ``a @ w.T``."""
        w1, w3 = self.w13.weight.split(self.hidden)  # row blocks of the fused w1/w3
        return x + mm(gate(mm(hidden, w1), mm(hidden, w3)), self.w2.weight)

    def forward_trie(
        self,
        x: torch.Tensor,
        trie: PrefixTrie,
        queries: torch.Tensor | None = None,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The block on the trie's nodes: ``x`` (n, dim) holds the nodes' states, or, with
        ``rows`` (n,), node ``u``'s state is ``x[rows[u]]`` (the first block, whose input is
        the token embedding: ``x`` then holds one row per distinct token).  Computes only
        the nodes ``queries`` (q,) if given; returns (n or q, dim)."""
        nh, hd = self.n_heads, self.head_dim
        wq, wk, wv = self.wqkv.weight.split(nh * hd)  # row blocks of the fused projection
        norm = self.attention_norm
        h = rms_norm(x, norm.weight, norm.eps)
        k, v = linear(h, wk), linear(h, wv)  # (rows of x, width)
        anc, mask = trie.ancestors, trie.mask  # (n, T)
        if queries is not None:
            anc, mask = anc.index_select(0, queries), mask.index_select(0, queries)
        own = queries if rows is None else rows if queries is None else rows[queries]
        if rows is not None:  # few distinct tokens: q per token, then per node
            q = linear(h, wq).index_select(0, own)
            anc = rows[anc]
        else:
            q = linear(h if own is None else h.index_select(0, own), wq)
        if own is not None:
            x = x.index_select(0, own)
        att = trie_attention(q, k, v, anc, mask, nh, hd**-0.5)  # (N, width)
        x = x + linear(att, self.wo.weight)  # (N, dim)
        h = rms_norm(x, self.ffn_norm.weight, self.ffn_norm.eps)
        return self._ffn(x, h, swiglu, linear)


class Transformer(nn.Module):
    r"""Causal transformer without positional encoding; ``features`` = last-position embedding.

    ``forward(tokens)`` maps token ids (B, T) to next-token logits (B, V).
    """

    def __init__(self, cfg: TransformerConfig, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_in, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_out, bias=False)
        self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        gen = generator if generator is not None else torch.default_generator
        std = self.cfg.init_std
        residual_std = std / math.sqrt(2 * self.cfg.n_layers)
        with torch.no_grad():
            self.tok_embeddings.weight.normal_(0.0, std, generator=gen)
            for layer in self.layers:
                layer.reset_parameters(std, residual_std, gen)
            self.norm.reset_parameters()
            self.output.weight.normal_(0.0, std, generator=gen)

    @property
    def output_weight(self) -> torch.Tensor:
        """Word embeddings W (V, dim)."""
        return self.output.weight

    @property
    def output_bias(self) -> None:
        return None

    def features(self, tokens: torch.Tensor | PrefixTrie) -> torch.Tensor:
        """Context embeddings h (B, dim): final-norm output at the last position.

        ``tokens`` is a (B, T) tensor of ids or its :class:`PrefixTrie` (same result,
        computed once per distinct prefix).
        """
        if isinstance(tokens, PrefixTrie):
            return self._features_trie(tokens)
        x = self.tok_embeddings(tokens)  # (B, T, dim)
        n = len(self.layers)
        for i, layer in enumerate(self.layers):
            x = layer(x, last_only=(i == n - 1))
        return self.norm(x[:, -1])  # (B, dim)

    def _features_trie(self, trie: PrefixTrie) -> torch.Tensor:
        x = self.tok_embeddings(trie.tokens)  # (distinct tokens, dim)
        n = len(self.layers)
        for i, layer in enumerate(self.layers):
            x = layer.forward_trie(
                x,
                trie,
                queries=trie.leaf if i == n - 1 else None,
                rows=trie.token_row if i == 0 else None,
            )
        return rms_norm(x, self.norm.weight, self.norm.eps)  # (B, dim): the leaves only

    def forward(self, tokens: torch.Tensor | PrefixTrie) -> torch.Tensor:
        return self.output(self.features(tokens))  # (B, V)
