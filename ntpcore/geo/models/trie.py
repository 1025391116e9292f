r"""The distinct prefixes of a batch of contexts, as a trie (prefix sharing).

A model whose state at position :math:`t` depends only on the prefix :math:`x_{1:t}` (the
transformer without positional encoding under its causal mask, an LSTM) computes the same
state for every context that shares that prefix.  :class:`PrefixTrie` lists the distinct
prefixes once, so such a model can run once per prefix (node) instead of once per (context,
position): on the real-text set of [geo, Sec. 3] (425 contexts of length 5) 1000 nodes
replace 2125 positions; on the synthetic set 72 replace 80.  It changes the cost, never the
function.
"""

from __future__ import annotations

import torch

__all__ = ["PrefixTrie"]


class PrefixTrie:
    r"""The distinct prefixes of a batch of equal-length contexts, as a trie.

    Node ``u`` is a distinct prefix :math:`x_{1:t}` of some context (``depth[u] = t``,
    ``token[u] = x_t``); ``ancestors[u, s]`` is the node of its prefix of length ``s + 1``
    for ``s < t`` (so ``ancestors[u, t - 1] = u``) and ``u`` itself as padding after that;
    ``parent[u]`` is the node of :math:`x_{1:t-1}` (``-1`` at depth 1); ``leaf[j]`` is the
    node of the whole context ``j``; ``tokens`` are the distinct tokens (sorted) and
    ``token_row[u]`` the row of ``token[u]`` in it (a model's first layer, which sees only
    the token, runs once per distinct token).  Nodes are numbered by depth, then by first
    appearance, so the nodes of depth ``t`` are the range ``levels[t - 1]`` = ``(start, stop)``.

    Parameters
    ----------
    tokens : (B, T) int array or tensor   token ids of the contexts
    """

    def __init__(self, tokens: torch.Tensor) -> None:
        tok = torch.as_tensor(tokens).cpu()
        B, T = tok.shape
        ids: dict[tuple[int, ...], int] = {}
        node_of = torch.empty(B, T, dtype=torch.long)  # node of the prefix x_{1:t+1}
        rows = tok.tolist()
        levels = []
        for t in range(T):  # nodes ordered by depth, then by first appearance
            start = len(ids)
            for j, row in enumerate(rows):
                node_of[j, t] = ids.setdefault(tuple(row[: t + 1]), len(ids))
            levels.append((start, len(ids)))
        n = len(ids)
        self.token = torch.empty(n, dtype=torch.long)
        self.depth = torch.empty(n, dtype=torch.long)
        self.ancestors = torch.empty(n, T, dtype=torch.long)
        self.parent = torch.full((n,), -1, dtype=torch.long)
        for j in range(B):
            for t in range(T):
                u = int(node_of[j, t])
                self.token[u], self.depth[u] = tok[j, t], t + 1
                pad = node_of[j, t].repeat(T - t - 1)
                self.ancestors[u] = torch.cat([node_of[j, : t + 1], pad])
                if t > 0:
                    self.parent[u] = node_of[j, t - 1]
        self.mask = torch.arange(T)[None, :] < self.depth[:, None]  # (n, T) valid ancestors
        self.leaf = node_of[:, -1].clone()  # (B,)
        self.tokens, self.token_row = torch.unique(self.token, return_inverse=True)
        self.levels: tuple[tuple[int, int], ...] = tuple(levels)
        self.n_nodes, self.batch, self.length = n, B, T

    def to(self, device: torch.device | str) -> PrefixTrie:
        for name in (
            "token",
            "depth",
            "ancestors",
            "parent",
            "mask",
            "leaf",
            "tokens",
            "token_row",
        ):
            setattr(self, name, getattr(self, name).to(device))
        return self
