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
multiplicities and :func:`subset_contexts` cuts a set down to a few support groups.  The
generators are :mod:`ntpcore.geo.synthetic` and :mod:`ntpcore.geo.text`.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping

import numpy as np
from numpy.typing import NDArray

from ntpcore.errors import DataError


@dataclasses.dataclass(frozen=True, eq=False)
class ContextDataset:
    """Distinct contexts with their next-word counts.

    Attributes
    ----------
    name : str
        Short name printed in the book ("synthetic", "lee_background", ...).
    contexts : (m, T) int64 array
        Input-token ids (into ``input_vocab``) of the ``m`` distinct contexts.
    counts : (V, m) int64 array
        Joint counts ``n_{z,j}``: how often next word ``z`` follows context ``j``.
    input_vocab : tuple of str
        Id -> word for context tokens.
    next_vocab : tuple of str
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

    name: str
    contexts: NDArray[np.int64]
    counts: NDArray[np.int64]
    input_vocab: tuple[str, ...]
    next_vocab: tuple[str, ...]
    description: str = ""
    n_original: int = -1

    def __post_init__(self) -> None:
        contexts = np.array(self.contexts, copy=True)
        counts = np.array(self.counts, copy=True)
        if contexts.ndim != 2 or contexts.shape[0] < 1 or contexts.shape[1] < 1:
            raise DataError(f"contexts must be a non-empty (m, T) array, got {contexts.shape}")
        if counts.ndim != 2:
            raise DataError(f"counts must be a (V, m) array, got shape {counts.shape}")
        if not (np.issubdtype(contexts.dtype, np.integer)):
            raise DataError(f"contexts must hold integer token ids, got {contexts.dtype}")
        if not np.issubdtype(counts.dtype, np.integer):
            if np.issubdtype(counts.dtype, np.floating) and np.all(counts == np.round(counts)):
                counts = counts.astype(np.int64)
            else:
                raise DataError(f"counts must be integers, got dtype {counts.dtype}")
        m = contexts.shape[0]
        if counts.shape[1] != m:
            raise DataError(
                f"counts has {counts.shape[1]} columns but there are {m} contexts "
                "(counts is (V, m): rows are next words, columns are contexts)"
            )
        if counts.shape[0] != len(self.next_vocab):
            raise DataError(
                f"counts has {counts.shape[0]} rows but next_vocab has {len(self.next_vocab)} words"
            )
        if counts.shape[0] < 2:
            raise DataError("the next-token vocabulary needs at least 2 words")
        if np.any(counts < 0):
            raise DataError("counts must be non-negative")
        empty = np.flatnonzero(counts.sum(axis=0) == 0)
        if empty.size:
            raise DataError(
                f"context(s) {empty[:5].tolist()} have an empty support (no next word observed)"
            )
        if contexts.min() < 0 or contexts.max() >= len(self.input_vocab):
            raise DataError("context token ids must index input_vocab")
        if np.unique(contexts, axis=0).shape[0] != m:
            raise DataError("contexts must be distinct (merge duplicated rows by adding counts)")
        contexts = contexts.astype(np.int64)
        counts = counts.astype(np.int64)
        contexts.setflags(write=False)
        counts.setflags(write=False)
        object.__setattr__(self, "contexts", contexts)
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "input_vocab", tuple(str(w) for w in self.input_vocab))
        object.__setattr__(self, "next_vocab", tuple(str(w) for w in self.next_vocab))
        if self.n_original < 0:
            object.__setattr__(self, "n_original", m)

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
        return int(self.counts.shape[0])

    @property
    def n(self) -> int:
        """Number of training pairs (sum of all counts)."""
        return int(self.counts.sum())

    # -- soft labels -------------------------------------------------------------------
    @property
    def P(self) -> NDArray[np.float64]:
        """(V, m) conditional next-word distributions, columns sum to 1."""
        c = self.counts.astype(np.float64)
        return c / c.sum(axis=0, keepdims=True)

    @property
    def pi(self) -> NDArray[np.float64]:
        """(m,) empirical context probabilities."""
        c = self.counts.sum(axis=0).astype(np.float64)
        return c / c.sum()

    @property
    def S(self) -> NDArray[np.bool_]:
        """(V, m) boolean support matrix, ``S[z, j] = n_{z,j} > 0``."""
        return self.counts > 0

    @property
    def support_sizes(self) -> NDArray[np.int64]:
        """(m,) support sizes ``k_j``."""
        return self.S.sum(axis=0).astype(np.int64)

    @property
    def entropy(self) -> float:
        """Empirical conditional entropy in nats (the CE lower bound)."""
        c = self.counts.astype(np.float64)
        col = c.sum(axis=0, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(c > 0, c * np.log(c / col), 0.0)
        return float(-terms.sum() / c.sum())

    @property
    def support_groups(self) -> list[NDArray[np.int64]]:
        """Column indices grouped by identical support, in order of first appearance."""
        return support_groups(self.S)

    # -- convenience -------------------------------------------------------------------
    def context_strings(self) -> list[str]:
        """The contexts as space-joined words."""
        return [" ".join(self.input_vocab[t] for t in row) for row in self.contexts]

    def samples(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Expand to the ``n`` training pairs: (context index (n,), next-word id (n,))."""
        z, j = np.nonzero(self.counts)
        reps = self.counts[z, j]
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


def support_groups(S: NDArray[np.bool_]) -> list[NDArray[np.int64]]:
    """Group the columns of a (V, m) support matrix by identical pattern.

    Groups are listed in order of their first column; each is an increasing index array.
    """
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
    counts = np.zeros((len(next_vocab), len(ctx_order)), dtype=np.int64)
    for j, c in enumerate(ctx_order):
        for z, cnt in supp[c].items():
            counts[z_id[z], j] = cnt
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
    keep = np.sort(chosen)
    counts = ds.counts[:, keep]
    used = counts.sum(axis=1) > 0
    return ContextDataset(
        name=f"{ds.name}[{k} contexts]",
        contexts=ds.contexts[keep],
        counts=counts[used],
        input_vocab=ds.input_vocab,
        next_vocab=tuple(w for w, u in zip(ds.next_vocab, used, strict=True) if u),
        description=f"{k} contexts (up to {per_group} per support group) of: {ds.description}",
    )
