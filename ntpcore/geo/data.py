r"""Next-token datasets as distinct contexts with sparse soft labels [geo, Sec. 2].

A training set of ``n`` pairs (context, next word) with fixed-length contexts is summarised,
without loss for the NTP loss, by its ``m`` *distinct* contexts and the joint counts

.. math::
    n_{z,j} = \#\{i : x_i = \bar x_j,\ z_i = z\},\qquad
    \hat\pi_j = \tfrac{1}{n}\textstyle\sum_z n_{z,j},\qquad
    \hat p_{j,z} = n_{z,j} / \textstyle\sum_{z'} n_{z',j}

(book: ``geo-eq-ce``).  Orientation: ``counts``, ``P`` and ``S`` are ``(V, m)`` -- rows are
next words, columns are contexts.  The supports :math:`\mathcal S_j=\{z:\hat p_{j,z}>0\}`
form the support matrix ``S``; contexts with identical supports form a *support group*
(:func:`support_groups`), the contexts whose embeddings collapse (book:
``geo-def-collapse``).  The empirical conditional entropy

.. math:: \mathcal H = -\textstyle\sum_j \hat\pi_j \sum_{z\in\mathcal S_j}
          \hat p_{j,z}\log \hat p_{j,z}

is the infimum of the CE loss, reached only as the logits diverge.

:class:`ContextDataset` holds such a set; :func:`dataset_from_pairs` builds one from counts
of (context, next word) pairs, :func:`resample_counts` draws the paper's uniform
multiplicities, :func:`subset_contexts` cuts a set down to a few support groups and
:func:`head_contexts` to its first ``k`` contexts.  The counts are held sparse
(``scipy.sparse``): a corpus-scale set of thousands of contexts over a vocabulary of
thousands of words stores only its observed pairs, and the dense ``(V, m)`` views are made
on demand.  The generators are :mod:`ntpcore.geo.synthetic`, :mod:`ntpcore.geo.text` and
:mod:`ntpcore.geo.wiki`.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from ntpcore.errors import DataError


class ContextDataset:
    """Distinct contexts with their next-word counts.

    The counts are stored sparse (:class:`scipy.sparse.csc_array`, one column per
    context), so that a corpus with thousands of contexts and a vocabulary of thousands of
    words costs memory in proportion to its ``(context, next word)`` pairs; the dense
    views ``counts``, ``P`` and ``S`` are produced on demand (``counts`` once, then kept).

    Parameters
    ----------
    name : str
        Short name printed in the book ("synthetic", "lee_background", ...).
    contexts : (m, T) int array
        Input-token ids (into ``input_vocab``) of the ``m`` distinct contexts.
    counts : (V, m) int array or scipy.sparse matrix
        Joint counts ``n_{z,j}``: how often next word ``z`` follows context ``j``.
    input_vocab : sequence of str
        Id -> word for context tokens.
    next_vocab : sequence of str
        Id -> word for next tokens (``V`` words, the rows of ``counts``).
    description : str
        One line on how the set was built (printed in the book).
    n_original : int
        Number of contexts before synonym expansion (``m`` when there was none).

    Raises
    ------
    DataError
        On inconsistent shapes, negative counts, a context with an empty support, duplicated
        contexts or out-of-range token ids.
    """

    def __init__(
        self,
        name: str,
        contexts: ArrayLike,
        counts: ArrayLike | sp.sparray | sp.spmatrix,
        input_vocab: Sequence[str],
        next_vocab: Sequence[str],
        description: str = "",
        n_original: int = -1,
    ) -> None:
        contexts = np.array(contexts, copy=True)
        if contexts.ndim != 2 or contexts.shape[0] < 1 or contexts.shape[1] < 1:
            raise DataError(f"contexts must be a non-empty (m, T) array, got {contexts.shape}")
        if not (np.issubdtype(contexts.dtype, np.integer)):
            raise DataError(f"contexts must hold integer token ids, got {contexts.dtype}")
        dense, C = _as_counts(counts)
        m = contexts.shape[0]
        if C.shape[1] != m:
            raise DataError(
                f"counts has {C.shape[1]} columns but there are {m} contexts "
                "(counts is (V, m): rows are next words, columns are contexts)"
            )
        if C.shape[0] != len(next_vocab):
            raise DataError(
                f"counts has {C.shape[0]} rows but next_vocab has {len(next_vocab)} words"
            )
        if C.shape[0] < 2:
            raise DataError("the next-token vocabulary needs at least 2 words")
        if np.any(C.data < 0):
            raise DataError("counts must be non-negative")
        C.eliminate_zeros()
        empty = np.flatnonzero(np.diff(C.indptr) == 0)
        if empty.size:
            raise DataError(
                f"context(s) {empty[:5].tolist()} have an empty support (no next word observed)"
            )
        if contexts.min() < 0 or contexts.max() >= len(input_vocab):
            raise DataError("context token ids must index input_vocab")
        if np.unique(contexts, axis=0).shape[0] != m:
            raise DataError("contexts must be distinct (merge duplicated rows by adding counts)")
        contexts = contexts.astype(np.int64)
        contexts.setflags(write=False)
        C.sort_indices()
        for arr in (C.data, C.indices, C.indptr):
            arr.setflags(write=False)
        fields = {
            "name": str(name),
            "contexts": contexts,
            "input_vocab": tuple(str(w) for w in input_vocab),
            "next_vocab": tuple(str(w) for w in next_vocab),
            "description": str(description),
            "n_original": m if n_original < 0 else int(n_original),
            "_csc": C,
        }
        for key, val in fields.items():
            object.__setattr__(self, key, val)
        if dense is not None:  # keep the caller's dense array as the dense view
            self.__dict__["counts"] = dense

    name: str
    contexts: NDArray[np.int64]
    input_vocab: tuple[str, ...]
    next_vocab: tuple[str, ...]
    description: str
    n_original: int
    _csc: sp.csc_array

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"ContextDataset is immutable (cannot set {key!r})")

    def __repr__(self) -> str:
        return (
            f"ContextDataset(name={self.name!r}, m={self.m}, V={self.V}, T={self.T}, "
            f"n={self.n}, pairs={self._csc.nnz})"
        )

    # -- sizes -------------------------------------------------------------------------
    @property
    def m(self) -> int:
        """Number of distinct contexts."""
        return int(self.contexts.shape[0])

    @property
    def T(self) -> int:
        """Context length (number of input tokens)."""
        return int(self.contexts.shape[1])

    @property
    def V(self) -> int:
        """Size of the next-token vocabulary."""
        return int(self._csc.shape[0])

    @property
    def n(self) -> int:
        """Number of training pairs (sum of all counts)."""
        return int(self._csc.data.sum())

    @property
    def n_pairs(self) -> int:
        """Number of distinct (context, next word) pairs, the non-zeros of ``counts``."""
        return int(self._csc.nnz)

    # -- counts, soft labels, supports -----------------------------------------------------
    @property
    def counts_sparse(self) -> sp.csc_array:
        """(V, m) joint counts as a read-only :class:`scipy.sparse.csc_array` (int64)."""
        return self._csc

    @functools.cached_property
    def counts(self) -> NDArray[np.int64]:
        """(V, m) dense joint counts ``n_{z,j}`` (read-only; built on first use)."""
        dense = self._csc.toarray(order="C")  # row-major, as a dense input would be
        dense.setflags(write=False)
        return dense

    @property
    def P(self) -> NDArray[np.float64]:
        """(V, m) conditional next-word distributions, columns sum to 1."""
        c = self.counts.astype(np.float64)
        return c / c.sum(axis=0, keepdims=True)

    @property
    def pi(self) -> NDArray[np.float64]:
        """(m,) empirical context probabilities."""
        c = self._column_totals().astype(np.float64)
        return c / c.sum()

    @property
    def S(self) -> NDArray[np.bool_]:
        """(V, m) boolean support matrix, ``S[z, j] = n_{z,j} > 0``."""
        return self.counts > 0

    @property
    def S_sparse(self) -> sp.csc_array:
        """(V, m) support matrix as a boolean :class:`scipy.sparse.csc_array`."""
        C = self._csc
        return sp.csc_array(
            (np.ones(C.nnz, dtype=bool), C.indices.copy(), C.indptr.copy()), shape=C.shape
        )

    @property
    def support_sizes(self) -> NDArray[np.int64]:
        """(m,) support sizes ``k_j``."""
        return np.diff(self._csc.indptr).astype(np.int64)

    @property
    def entropy(self) -> float:
        """Empirical conditional entropy in nats (the CE lower bound)."""
        C = self._csc
        c = C.data.astype(np.float64)
        col = np.repeat(self._column_totals().astype(np.float64), np.diff(C.indptr))
        return float(-(c * np.log(c / col)).sum() / c.sum())

    @property
    def support_groups(self) -> list[NDArray[np.int64]]:
        """Column indices grouped by identical support, in order of first appearance."""
        return support_groups(self._csc)

    def _column_totals(self) -> NDArray[np.int64]:
        """(m,) ``n_j``: number of training pairs with context ``j``."""
        C = self._csc
        return np.add.reduceat(C.data, C.indptr[:-1]).astype(np.int64)

    # -- convenience -------------------------------------------------------------------
    def context_strings(self) -> list[str]:
        """The contexts as space-joined words."""
        return [" ".join(self.input_vocab[t] for t in row) for row in self.contexts]

    def samples(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Expand to the ``n`` training pairs: (context index (n,), next-word id (n,))."""
        C = self._csc
        z = C.indices.astype(np.int64)
        j = np.repeat(np.arange(self.m, dtype=np.int64), np.diff(C.indptr))
        reps = C.data
        # order by context then word, for readability
        order = np.lexsort((z, j))
        return np.repeat(j[order], reps[order]), np.repeat(z[order], reps[order])

    def stats(self) -> dict[str, float | int | str]:
        """Summary statistics printed by the book."""
        k = self.support_sizes
        return {
            "name": self.name,
            "m": self.m,
            "V": self.V,
            "n": self.n,
            "T": self.T,
            "input_vocab": len(self.input_vocab),
            "entropy": self.entropy,
            "support_groups": len(self.support_groups),
            "mean_support": float(k.mean()),
            "max_support": int(k.max()),
            "n_original": self.n_original,
        }


def _as_counts(
    counts: ArrayLike | sp.sparray | sp.spmatrix,
) -> tuple[NDArray[np.int64] | None, sp.csc_array]:
    """(dense read-only int64 copy or None, csc int64 copy) of a dense or sparse count matrix."""
    if sp.issparse(counts):
        C = sp.csc_array(counts, copy=True)
        if C.ndim != 2:
            raise DataError(f"counts must be a (V, m) array, got shape {C.shape}")
        C.sum_duplicates()
        C.data = _integer_counts(C.data)
        return None, C
    arr = np.array(counts, copy=True)
    if arr.ndim != 2:
        raise DataError(f"counts must be a (V, m) array, got shape {arr.shape}")
    arr = _integer_counts(arr)
    arr.setflags(write=False)
    return arr, sp.csc_array(arr)


def _integer_counts(a: NDArray) -> NDArray[np.int64]:
    if not np.issubdtype(a.dtype, np.integer):
        if np.issubdtype(a.dtype, np.floating) and np.all(a == np.round(a)):
            return a.astype(np.int64)
        raise DataError(f"counts must be integers, got dtype {a.dtype}")
    return a.astype(np.int64)


def support_groups(S: ArrayLike | sp.sparray | sp.spmatrix) -> list[NDArray[np.int64]]:
    """Group the columns of a (V, m) support matrix by identical pattern.

    ``S`` may be dense (boolean or 0/1) or a scipy.sparse matrix (its non-zero pattern).
    Groups are listed in order of their first column; each is an increasing index array.
    """
    if sp.issparse(S):
        C = sp.csc_array(S, copy=True)
        C.eliminate_zeros()
        C.sort_indices()
        members: dict[bytes, list[int]] = {}
        ind, ptr = C.indices.astype(np.int64), C.indptr
        for j in range(C.shape[1]):
            members.setdefault(ind[ptr[j] : ptr[j + 1]].tobytes(), []).append(j)
        return [np.array(g, dtype=np.int64) for g in members.values()]
    S = np.asarray(S, dtype=bool)
    _, first, inverse = np.unique(S.T, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(first, kind="stable")
    return [np.flatnonzero(inverse == g).astype(np.int64) for g in order]


# --------------------------------------------------------------------------------------
# Building and cutting datasets
# --------------------------------------------------------------------------------------


def dataset_from_pairs(
    name: str,
    pair_counts: Mapping[tuple[tuple[str, ...], str], int],
    *,
    description: str = "",
    n_original: int = -1,
    group_order: bool = True,
) -> ContextDataset:
    """Build a :class:`ContextDataset` from counts of (context words, next word) pairs.

    Contexts are ordered by support group (groups contiguous, in order of first appearance
    in ``pair_counts``), next words by the first context that uses them (so ``S`` shows a
    staircase), input words by first appearance.
    """
    ctx_order: list[tuple[str, ...]] = []
    supp: dict[tuple[str, ...], dict[str, int]] = defaultdict(dict)
    for (ctx, z), c in pair_counts.items():
        if c < 0:
            raise DataError(f"negative count for ({' '.join(ctx)!r}, {z!r})")
        if c == 0:
            continue
        if ctx not in supp:
            ctx_order.append(ctx)
        supp[ctx][z] = supp[ctx].get(z, 0) + int(c)
    if not ctx_order:
        raise DataError(f"{name}: no (context, next word) pairs with a positive count")
    lengths = {len(c) for c in ctx_order}
    if len(lengths) != 1:
        raise DataError(f"{name}: contexts must all have the same length, got {sorted(lengths)}")
    if group_order:
        key_of = {c: frozenset(supp[c]) for c in ctx_order}
        first: dict[frozenset[str], int] = {}
        for i, c in enumerate(ctx_order):
            first.setdefault(key_of[c], i)
        ctx_order = sorted(ctx_order, key=lambda c: first[key_of[c]])  # stable
    next_vocab: list[str] = []
    seen: set[str] = set()
    for c in ctx_order:
        for z in sorted(supp[c], key=lambda w: (-supp[c][w], w)):
            if z not in seen:
                seen.add(z)
                next_vocab.append(z)
    in_vocab: list[str] = []
    in_seen: dict[str, int] = {}
    for c in ctx_order:
        for w in c:
            if w not in in_seen:
                in_seen[w] = len(in_vocab)
                in_vocab.append(w)
    z_id = {z: i for i, z in enumerate(next_vocab)}
    rows, cols, vals = [], [], []
    for j, c in enumerate(ctx_order):
        for z, cnt in supp[c].items():
            rows.append(z_id[z])
            cols.append(j)
            vals.append(cnt)
    counts = sp.csc_array(
        (np.array(vals, dtype=np.int64), (np.array(rows), np.array(cols))),
        shape=(len(next_vocab), len(ctx_order)),
    )
    contexts = np.array([[in_seen[w] for w in c] for c in ctx_order], dtype=np.int64)
    return ContextDataset(
        name=name,
        contexts=contexts,
        counts=counts,
        input_vocab=tuple(in_vocab),
        next_vocab=tuple(next_vocab),
        description=description,
        n_original=n_original,
    )


def resample_counts(
    supports: Mapping[tuple[str, ...], Iterable[str]],
    rng: np.random.Generator,
    max_repeat: int,
) -> dict[tuple[tuple[str, ...], str], int]:
    """Draw a multiplicity uniform in {1, ..., max_repeat} for every (context, word) pair."""
    out: dict[tuple[tuple[str, ...], str], int] = {}
    for ctx, words in supports.items():
        for z in words:
            out[(ctx, z)] = int(rng.integers(1, max_repeat + 1))
    return out


def subset_contexts(ds: ContextDataset, k: int, per_group: int = 3) -> ContextDataset:
    """``k`` contexts of ``ds`` covering several support groups (quick profile).

    Takes the first ``per_group`` members of each support group, groups in data order,
    until ``k`` contexts are chosen; they keep their data order (groups stay contiguous,
    and groups of two or more keep same-support pairs).  Next words that no chosen context
    uses are dropped.  ``k = 0`` or ``k >= m`` returns ``ds``.
    """
    if k <= 0 or k >= ds.m:
        return ds
    chosen = np.concatenate([grp[:per_group] for grp in ds.support_groups])[:k]
    return _keep_contexts(
        ds,
        np.sort(chosen),
        name=f"{ds.name}[{k} contexts]",
        description=f"{k} contexts (up to {per_group} per support group) of: {ds.description}",
    )


def head_contexts(ds: ContextDataset, k: int) -> ContextDataset:
    """The first ``k`` contexts of ``ds`` in data order (the ``k`` most frequent for a set
    ordered by frequency, as :func:`ntpcore.geo.text.corpus_dataset` builds it).

    Next words that none of them uses are dropped.  ``k = 0`` or ``k >= m`` returns ``ds``.
    """
    if k <= 0 or k >= ds.m:
        return ds
    return _keep_contexts(
        ds,
        np.arange(k),
        name=f"{ds.name}[first {k}]",
        description=f"first {k} contexts of: {ds.description}",
    )


def _keep_contexts(
    ds: ContextDataset, keep: NDArray[np.int64], *, name: str, description: str
) -> ContextDataset:
    """The contexts ``keep`` (increasing) of ``ds``, dropping next words none of them uses."""
    counts = ds.counts_sparse[:, keep]
    used = np.diff(counts.tocsr().indptr) > 0
    return ContextDataset(
        name=name,
        contexts=ds.contexts[keep],
        counts=counts[used, :],
        input_vocab=ds.input_vocab,
        next_vocab=tuple(w for w, u in zip(ds.next_vocab, used, strict=True) if u),
        description=description,
    )
