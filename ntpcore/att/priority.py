r"""Token-priority graphs (TPGs) and their strongly connected components (SCCs).

This module implements the combinatorial layer of Li, Huang, Ildiz, Rawat & Oymak,
*Mechanics of Next Token Prediction with Self-Attention* (AISTATS 2024), key ``att``.

Data
----
A vocabulary ``[K] = {0, ..., K-1}`` (0-based ids, as in the code), sequences of token ids
``tokens`` of shape ``(n, T)`` whose **last column is the last token** (the attention query)
``k_i = tokens[i, -1]``, and next-token labels ``labels`` of shape ``(n,)``.  ``V_i`` is the set of
distinct tokens of sequence ``i``.

Token-priority graph (book ``att-def-tpg``)
-------------------------------------------
For every token ``k`` the TPG :math:`G^{(k)}` is the directed graph on the nodes ``[K]`` with
an edge

.. math::
    y_i \to j \qquad \text{for every } j \in V_i,\ j \ne y_i,

for every sample ``i`` whose last token is ``k`` (and whose label lies in its sequence).  The edge
reads "the label has priority over every other token of its context"; the last token itself is
part of the context.  Only samples with last token ``k`` contribute to :math:`G^{(k)}`; untouched
nodes are isolated singletons; repeated edges are irrelevant.

SCCs and priority order (book ``att-def-scc``)
----------------------------------------------
``i ≍_k j`` (same SCC) iff ``i`` and ``j`` reach each other in :math:`G^{(k)}`;
``i ⇒_k j`` (strictly higher priority) iff ``j`` is reachable from ``i`` but not conversely;
pairs that reach each other in neither direction are **incomparable**.  The condensation of
:math:`G^{(k)}` (one node per SCC) is a DAG; the *priority level* of an SCC is the length of the
longest path from it to a sink of the condensation, so an edge between different SCCs always goes
from a strictly higher level to a lower one.  A TPG is *acyclic* iff all its SCCs are singletons.

A sample is *cyclic* iff the SCC of its label in :math:`G^{(k_i)}` contains another token of
its sequence; its *reduced* sequence keeps only the positions whose token lies in that SCC.

SCCs come from :func:`networkx.strongly_connected_components` (via ``nx.condensation``); nothing
here is a hand-written Tarjan.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.validate import as_float_array, as_index_array, check_number
from ntpcore.errors import DataError


def check_tokens(
    tokens: ArrayLike, labels: ArrayLike, K: int, *, require_label_in_sequence: bool = True
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Validate token ids and labels; return them as int64 arrays ``(n, T)`` and ``(n,)``.

    Raises
    ------
    DataError  if shapes disagree, an id is outside ``[0, K)``, ids are not integers, or (with
               ``require_label_in_sequence``) a label does not occur in its sequence — the
               realizability assumption of the identity head, without which the log-loss is +inf.
    """
    K = check_number(K, "K (the vocabulary size)", lo=1, integer=True)
    tok = np.asarray(tokens)
    lab = np.asarray(labels)
    for name, a in (("tokens", tok), ("labels", lab)):
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise DataError(f"{name} must be integer token ids, got dtype {a.dtype}")
    if tok.ndim != 2 or tok.shape[1] < 1:
        raise DataError(f"tokens must have shape (n, T) with T >= 1, got shape {tok.shape}")
    if tok.shape[0] == 0:
        raise DataError("the dataset is empty (n = 0 sequences): the TPGs need data")
    if lab.shape != (tok.shape[0],):
        raise DataError(f"labels must have shape (n,) = ({tok.shape[0]},), got {lab.shape}")
    for name, a in (("tokens", tok), ("labels", lab)):
        if a.size and not np.issubdtype(a.dtype, np.integer):
            if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
                raise DataError(f"{name} must be integer token ids, got dtype {a.dtype}")
        a_int = a.astype(np.int64)
        if a_int.size and (a_int.min() < 0 or a_int.max() >= K):
            bad = a_int[(a_int < 0) | (a_int >= K)]
            raise DataError(
                f"{name} contains ids outside [0, K) = [0, {K}): e.g. {int(bad.flat[0])}"
            )
    tok = tok.astype(np.int64)
    lab = lab.astype(np.int64)
    if require_label_in_sequence:
        missing = np.flatnonzero(~np.any(tok == lab[:, None], axis=1))
        if missing.size:
            i = int(missing[0])
            raise DataError(
                f"label {int(lab[i])} of sample {i} does not occur in its sequence "
                f"{tok[i].tolist()} ({missing.size} such samples); the identity head needs "
                "y_i in X_i (realizability), otherwise the log-loss is +inf"
            )
    return tok, lab


def token_priority_graphs(tokens: ArrayLike, labels: ArrayLike, K: int) -> list[nx.DiGraph]:
    r"""The K token-priority graphs :math:`G^{(k)}`, one per last token ``k``.

    Parameters
    ----------
    tokens : (n, T) int array   token ids, last column = last token (the query)
    labels : (n,) int array     next-token labels
    K : int                     vocabulary size

    Returns
    -------
    graphs : list of K ``networkx.DiGraph``, nodes ``0..K-1``; ``graphs[k]`` has the edge
        ``labels[i] -> j`` for every sample ``i`` with ``tokens[i, -1] == k`` and every token
        ``j != labels[i]`` of sequence ``i``.

    Raises
    ------
    DataError  for ids out of range or a label that is not in its sequence.
    """
    tok, lab = check_tokens(tokens, labels, K)
    graphs = [nx.DiGraph() for _ in range(K)]
    for G in graphs:
        G.add_nodes_from(range(K))
    for seq, y in zip(tok, lab, strict=True):
        k = int(seq[-1])
        graphs[k].add_edges_from((int(y), int(j)) for j in set(seq.tolist()) if j != y)
    return graphs


@dataclass(frozen=True)
class SCCStructure:
    """SCC decomposition and priority order of one TPG ``G^(k)``.

    Attributes
    ----------
    k : int                 the last token the graph belongs to
    scc : (K,) int array    SCC id of every token; ids follow a topological order of the
                            condensation (an edge between SCCs goes from a smaller to a larger id)
    level : (K,) int array  priority level of the token's SCC: longest path to a sink of the
                            condensation (higher = higher priority; 0 for sinks and isolated nodes)
    reach : (K, K) bool     ``reach[i, j]``: j is reachable from i (reflexive)
    touched : (K,) bool     the token has at least one edge in ``G^(k)``
    """

    k: int
    scc: NDArray[np.int64]
    level: NDArray[np.int64]
    reach: NDArray[np.bool_]
    touched: NDArray[np.bool_]

    @property
    def K(self) -> int:
        return int(self.scc.shape[0])

    @property
    def n_sccs(self) -> int:
        return int(self.scc.max()) + 1

    @property
    def is_acyclic(self) -> bool:
        return self.n_sccs == self.K

    @functools.cached_property
    def _components(self) -> tuple[tuple[int, ...], ...]:  # computed once per structure
        return tuple(tuple(np.flatnonzero(self.scc == c).tolist()) for c in range(self.n_sccs))

    def components(self) -> list[tuple[int, ...]]:
        """SCCs as sorted tuples of tokens, in the order of their ids."""
        return list(self._components)

    def nontrivial_components(self) -> list[tuple[int, ...]]:
        """SCCs with at least two tokens (the cycles of ``G^(k)``)."""
        return [c for c in self._components if len(c) > 1]

    def same(self, i: int, j: int) -> bool:
        """``i ≍_k j``."""
        return bool(self.scc[i] == self.scc[j])

    def higher(self, i: int, j: int) -> bool:
        """``i ⇒_k j``: j reachable from i, i not reachable from j."""
        return bool(self.reach[i, j] and not self.reach[j, i])

    def comparable(self, i: int, j: int) -> bool:
        return bool(self.reach[i, j] or self.reach[j, i])


def scc_structure(G: nx.DiGraph, k: int = -1) -> SCCStructure:
    """SCCs (networkx), priority levels and reachability of a TPG.

    A function of the edge set: computed once per distinct ``(K, k, edges)`` (the experiments
    ask for the structures of one trial's TPGs many times); the arrays are read-only."""
    check_graphs([G])
    K = G.number_of_nodes()
    k = check_number(k, "k", lo=-1, hi=K - 1, integer=True)
    return _scc_structure(K, k, tuple(sorted((int(i), int(j)) for i, j in G.edges)))


def check_graphs(graphs: Any, K: int | None = None) -> list[nx.DiGraph]:
    """``graphs`` as a list of TPGs: ``networkx.DiGraph`` with the nodes ``0..K-1`` (one K for
    all; ``K`` given: that one); a :class:`DataError` otherwise."""
    if isinstance(graphs, nx.DiGraph) or not isinstance(graphs, Sequence | np.ndarray):
        raise DataError(f"graphs must be a list of TPGs (networkx.DiGraph), got {type(graphs)}")
    out = list(graphs)
    for k, G in enumerate(out):
        if not isinstance(G, nx.DiGraph):
            raise DataError(f"graphs[{k}] must be a TPG (networkx.DiGraph), got {type(G).__name__}")
        n = G.number_of_nodes() if K is None else K
        if sorted(G.nodes) != list(range(n)):
            raise DataError(
                f"graphs[{k}]: a TPG must have the nodes 0..K-1 (here 0..{n - 1}), got "
                f"{sorted(G.nodes)[:10]}"
            )
        K = n
    return out


def _compute_scc_structure(K: int, k: int, edges: tuple[tuple[int, int], ...]) -> SCCStructure:
    G = nx.DiGraph()
    G.add_nodes_from(range(K))
    G.add_edges_from(edges)
    eye = np.eye(K, dtype=bool)
    if G.number_of_edges() == 0:
        idx = np.arange(K, dtype=np.int64)
        return _frozen(SCCStructure(int(k), idx, np.zeros(K, np.int64), eye, np.zeros(K, bool)))
    # Reachability: transitive closure of the adjacency matrix by repeated squaring.
    reach = eye.copy()
    for i, j in G.edges:
        reach[i, j] = True
    while True:
        nxt = (reach.astype(np.int64) @ reach.astype(np.int64)) > 0
        if np.array_equal(nxt, reach):
            break
        reach = nxt
    comps = [sorted(c) for c in nx.strongly_connected_components(G)]
    rep = [c[0] for c in comps]  # one representative per SCC
    n_desc = [int(reach[r].sum()) for r in rep]
    # In the condensation DAG an SCC has strictly more descendants than any SCC it reaches, so
    # sorting by (-#descendants, smallest member) is a deterministic topological order.
    order = sorted(range(len(comps)), key=lambda c: (-n_desc[c], comps[c][0]))
    scc = np.empty(K, dtype=np.int64)
    for new_id, c in enumerate(order):
        scc[comps[c]] = new_id
    # Priority level = longest path to a sink = 1 + max level of the SCCs it reaches.
    lev = np.zeros(len(order), dtype=np.int64)
    for new_id in reversed(range(len(order))):
        r = rep[order[new_id]]
        below = np.unique(scc[reach[r] & (scc != new_id)])
        lev[new_id] = 1 + lev[below].max() if below.size else 0
    touched = np.array([G.degree(v) > 0 for v in range(K)], dtype=bool)
    return _frozen(SCCStructure(k=int(k), scc=scc, level=lev[scc], reach=reach, touched=touched))


#: one structure per distinct TPG (a plain function under the cache, not a decorated one, so
#: that code-level mutation testing, which skips decorated functions, reaches its body)
_scc_structure = functools.lru_cache(maxsize=4096)(_compute_scc_structure)


def _frozen(s: SCCStructure) -> SCCStructure:
    """``s`` with read-only arrays (it is shared by every caller asking for the same TPG)."""
    for a in (s.scc, s.level, s.reach, s.touched):
        a.flags.writeable = False
    return s


def scc_structures(graphs: Sequence[nx.DiGraph]) -> list[SCCStructure]:
    """:func:`scc_structure` of every TPG, ``k`` = position in the list."""
    return [scc_structure(G, k) for k, G in enumerate(check_graphs(graphs))]


def is_acyclic(structures: Sequence[SCCStructure]) -> bool:
    """True iff every TPG is acyclic (all SCCs singletons)."""
    return all(s.is_acyclic for s in structures)


def reduced_position_mask(tokens, labels, structures: Sequence[SCCStructure]) -> NDArray[np.bool_]:
    """``(n, T)`` bool: positions whose token lies in the SCC of the label in ``G^(k_i)``.

    This is the reduced sequence :math:`\\tilde X_i` of book ``att-def-wfin``; it always
    contains the label.
    """
    tok, lab = check_tokens(tokens, labels, _structures_K(structures))
    out = np.zeros(tok.shape, dtype=bool)
    for i, (seq, y) in enumerate(zip(tok, lab, strict=True)):
        s = structures[int(seq[-1])]
        out[i] = s.scc[seq] == s.scc[y]
    return out


def _structures_K(structures: Sequence[SCCStructure]) -> int:
    """The vocabulary size of a list of structures (one per last token)."""
    if not structures or not all(isinstance(st, SCCStructure) for st in structures):
        raise DataError("structures must be the SCCStructure of every TPG (scc_structures)")
    return len(structures)


def cyclic_samples(tokens, labels, structures: Sequence[SCCStructure]) -> NDArray[np.bool_]:
    """``(n,)`` bool: sample i is cyclic iff its reduced sequence has a token other than y_i."""
    tok, lab = check_tokens(tokens, labels, _structures_K(structures))
    mask = reduced_position_mask(tok, lab, structures)
    return np.any(mask & (tok != lab[:, None]), axis=1)


def select_tokens(
    tokens, attention_weights, K: int, *, c_thres: float = 1e-2, e_thres: float = 9e-3
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    r"""Tokens selected by a trained attention layer (book ``att-conj-local``).

    ``mass[i, j] = sum_{t: a_it = j} s_it``; selected ``C_i = {j: mass_ij > c_thres}``, ambiguous
    ``E_i = {j: e_thres < mass_ij <= c_thres}``.

    Parameters
    ----------
    tokens : (n, T) int array; attention_weights : (n, T) array, rows in the simplex.

    Returns
    -------
    selected, ambiguous : (n, K) bool arrays.
    """
    K = check_number(K, "K (the vocabulary size)", lo=1, integer=True)
    tok = as_index_array(tokens, "tokens", ndim=2, size=K)
    if np.shape(attention_weights) != tok.shape:
        raise DataError(
            f"attention must have the shape of tokens {tok.shape}, got "
            f"{np.shape(attention_weights)}"
        )
    s = as_float_array(attention_weights, "attention_weights")
    if np.any(s < 0):
        raise DataError("attention_weights has negative entries")
    c_thres, e_thres = check_thresholds(c_thres, e_thres)
    n = tok.shape[0]
    mass = np.zeros((n, K))
    np.add.at(mass, (np.repeat(np.arange(n), tok.shape[1]), tok.ravel()), s.ravel())
    selected = mass > c_thres
    ambiguous = (mass > e_thres) & ~selected
    return selected, ambiguous


def local_token_priority_graphs(tokens, selected, ambiguous, K: int) -> list[nx.DiGraph]:
    r"""Local TPGs (book ``att-conj-local``) built from the tokens that attention actually selects.

    For every sample with last token ``k`` and every selected ``c in C_i``, add ``c -> j`` for all
    ``j in V_i \ ({c} ∪ E_i)`` (ambiguous tokens are left out to avoid numerical ties).
    """
    K = check_number(K, "K (the vocabulary size)", lo=1, integer=True)
    tok = as_index_array(tokens, "tokens", ndim=2, size=K)
    sel = _as_flags(selected, "selected", (tok.shape[0], K))
    amb = _as_flags(ambiguous, "ambiguous", (tok.shape[0], K))
    graphs = [nx.DiGraph() for _ in range(K)]
    for G in graphs:
        G.add_nodes_from(range(K))
    for i, seq in enumerate(tok):
        k = int(seq[-1])
        V = set(seq.tolist())
        for c in np.flatnonzero(sel[i]).tolist():
            if c not in V:
                raise DataError(f"selected token {c} of sample {i} is not in its sequence")
            graphs[k].add_edges_from((c, j) for j in V if j != c and not amb[i, j])
    return graphs


def check_thresholds(c_thres: float, e_thres: float) -> tuple[float, float]:
    """The attention-mass thresholds of :func:`select_tokens`: ``0 <= e_thres <= c_thres <= 1``."""
    c_thres = check_number(c_thres, "c_thres", lo=0, hi=1)
    e_thres = check_number(e_thres, "e_thres", lo=0, hi=c_thres)
    return c_thres, e_thres


def _as_flags(x: ArrayLike, name: str, shape: tuple[int, int]) -> NDArray[np.bool_]:
    """A boolean (or 0/1) array of ``shape``."""
    arr = np.asarray(x)
    if arr.shape != shape:
        raise DataError(f"{name} must have shape (n, K) = {shape}, got {arr.shape}")
    numeric = arr.dtype != object and arr.dtype.kind in "biuf"
    if arr.dtype != np.bool_ and (not numeric or not np.all((arr == 0) | (arr == 1))):
        raise DataError(f"{name} must be boolean (or 0/1)")
    return arr.astype(bool)
