r"""The automaton of the self-attention paper (key ``att``): hard retrieval followed by soft
composition [att, abstract] (book ``att-prop-automaton``).

After training, :math:`W(\tau) \approx R(\tau) \hat W^{\mathrm{svm}} + W^{\mathrm{fin}}` with
:math:`R(\tau) \to \infty`.  For an input X with last token k and token multiplicities
:math:`m_j`:

1. **Hard retrieval**: :math:`O(X) = \arg\max_{j \in V(X)} e_j^\top W^{\mathrm{svm}} e_k`.  Within
   an SCC of :math:`G^{(k)}` the scores are equal, across an edge between SCCs they differ by
   >= 1, so O(X) is the highest-priority SCC of :math:`G^{(k)}` present in X.  On a training
   sequence it is the label's SCC.
2. **Soft composition**: :math:`p(j \mid X) \propto m_j \exp(e_j^\top W^{\mathrm{fin}} e_k)` for
   :math:`j \in O(X)` and 0 otherwise.

What the theory does **not** decide: when the top score is tied between different SCCs (e.g. two
incomparable SCCs at the same level, or tokens never seen with last token k), the limit depends
on finite remainders (W^fin cross terms, second-order S_svm terms, the frozen
:math:`\Pi_{S^\perp} W(0)`), not on :math:`W^{\mathrm{svm}}` and :math:`W^{\mathrm{fin}}`.
:func:`automaton_predict` flags those cases with ``status="undecided"``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ntpcore.att.finite import finite_component
from ntpcore.att.linalg import check_embeddings
from ntpcore.att.priority import SCCStructure, scc_structures, token_priority_graphs
from ntpcore.att.svm import graph_svm
from ntpcore.core.validate import as_float_array, as_index_array, check_number
from ntpcore.errors import DataError


@dataclass(frozen=True)
class Automaton:
    """Everything the automaton needs: embeddings, W^svm, W^fin and the TPG structures."""

    E: NDArray[np.float64]
    W_svm: NDArray[np.float64]
    W_fin: NDArray[np.float64]
    structures: list[SCCStructure] = field(repr=False)
    last_tokens: frozenset[int] = frozenset()  # last tokens seen in training


@dataclass(frozen=True)
class AutomatonOutput:
    """Prediction of the automaton for one sequence."""

    sequence: tuple[int, ...]
    k: int  # last token
    scores: dict[int, float]  # W^svm score e_j^T W^svm e_k of every distinct token j of X
    retrieved: tuple[int, ...]  # O(X): tokens with the top score
    composition: NDArray[np.float64]  # (K,) p(j | X), supported on O(X)
    margin: float  # top score minus the best score outside O(X) (inf if O(X) = V(X))
    status: str  # "decided" | "undecided"
    notes: tuple[str, ...] = ()


def build_automaton(E, tokens, labels, *, W_svm=None, W_fin=None) -> Automaton:
    """Automaton of a training set (computes W^svm and W^fin unless given)."""
    E = check_embeddings(E)
    K, d = E.shape
    graphs = token_priority_graphs(tokens, labels, K)
    if W_svm is None:
        W_svm = graph_svm(E, tokens, labels)
    if W_fin is None:
        W_fin = finite_component(E, tokens, labels, graphs=graphs)
    W_svm = as_float_array(W_svm, "W_svm", shape=(d, d))
    W_fin = as_float_array(W_fin, "W_fin", shape=(d, d))
    last = frozenset(int(k) for k in np.asarray(tokens)[:, -1])
    return Automaton(
        E=E,
        W_svm=np.asarray(W_svm, float),
        W_fin=np.asarray(W_fin, float),
        structures=scc_structures(graphs),
        last_tokens=last,
    )


def _token_ids(sequence) -> NDArray[np.int64]:
    """Token ids from a sequence of integers or a string such as ``"0, 1, 4"``."""
    items = sequence.replace(",", " ").split() if isinstance(sequence, str) else sequence
    try:
        arr = np.asarray(items, dtype=object)
    except (TypeError, ValueError) as exc:
        raise DataError(f"a sequence of token ids is expected, got {sequence!r}") from exc
    if arr.ndim != 1:
        raise DataError(
            f"one sequence of token ids is expected (1-D), got shape {arr.shape}: {sequence!r}"
        )
    bad = []
    ids = []
    for t in arr:
        try:
            v = int(t)
            if v != float(t):
                raise ValueError
        except (TypeError, ValueError, OverflowError):
            bad.append(t)
            continue
        ids.append(v)
    if bad:
        raise DataError(
            f"token ids must be integers, got {', '.join(repr(b) for b in bad)} "
            f"in {sequence!r} (write e.g. '0, 1, 4')"
        )
    return np.asarray(ids, dtype=np.int64)


def automaton_predict(auto: Automaton, sequence, *, tol: float = 1e-6) -> AutomatonOutput:
    """Hard retrieval + soft composition for one token sequence (last entry = last token).

    ``tol`` is the score tolerance defining ties.  ``status`` is ``"undecided"`` when the top
    W^svm score is shared by tokens of different SCCs of ``G^(k)`` (or by tokens that ``G^(k)``
    never constrains): the theory then leaves retrieval to finite remainders.
    """
    seq = _token_ids(sequence)
    tol = check_number(tol, "tol", lo=0)
    K = auto.E.shape[0]
    if seq.size == 0:
        raise DataError("the sequence is empty: type at least one token id")
    bad = sorted({int(t) for t in seq if not 0 <= t < K})
    if bad:
        raise DataError(f"token ids {bad} are outside the vocabulary 0..{K - 1} of this dataset")
    k = int(seq[-1])
    S = auto.structures[k]
    V, mult = np.unique(seq, return_counts=True)
    score = auto.E[V] @ auto.W_svm @ auto.E[k]  # (|V|,)
    top = score.max()
    in_O = score >= top - tol
    O = V[in_O]
    rest = score[~in_O]
    margin = float(top - rest.max()) if rest.size else float("inf")
    notes: list[str] = []
    status = "decided"
    if k not in auto.last_tokens:
        # no graph constrains the scores of this query: the theory decides nothing
        status = "undecided"
        notes.append(f"no training sequence ends in token {k}: G^({k}) is empty")
    sccs_O = {int(S.scc[j]) for j in O}
    untouched = [int(j) for j in O if not S.touched[j]]
    if len(sccs_O) > 1:
        status = "undecided"
        groups = sorted({tuple(int(j) for j in O if S.scc[j] == c) for c in sccs_O})
        incomp = all(not S.comparable(a[0], b[0]) for a in groups for b in groups if a != b)
        kind = "incomparable SCCs" if incomp else "different SCCs"
        notes.append(
            f"tie of the W^svm score between {kind} {groups} of G^({k}): the theory does not "
            "decide which is retrieved (finite remainders do)"
        )
    if untouched:
        notes.append(f"tokens {untouched} are unconstrained in G^({k}) (never seen with it)")
        if len(O) > 1 or not rest.size:
            status = "undecided"
    # Soft composition on O(X) with the multiplicities.
    logit = np.log(mult[in_O]) + auto.E[O] @ auto.W_fin @ auto.E[k]
    p_O = np.exp(logit - logit.max())
    p_O /= p_O.sum()
    comp = np.zeros(K)
    comp[O] = p_O
    return AutomatonOutput(
        sequence=tuple(int(t) for t in seq),
        k=k,
        scores={int(j): float(s) for j, s in zip(V, score, strict=True)},
        retrieved=tuple(int(j) for j in O),
        composition=comp,
        margin=margin,
        status=status,
        notes=tuple(notes),
    )


def model_output(W, E, sequences) -> NDArray[np.float64]:
    """Identity-head output :math:`f_W(X)` (n, K): attention mass on each vocabulary token."""
    E = check_embeddings(E)
    K, d = E.shape
    tok = np.atleast_2d(as_index_array(sequences, "sequences", ndim=(1, 2), size=K))
    if tok.shape[1] == 0:
        raise DataError("the sequences are empty")
    X = E[tok]  # (n, T, d)
    W = as_float_array(W, "W", shape=(d, d))
    z = np.einsum("ntd,de,ne->nt", X, W, X[:, -1])
    s = np.exp(z - z.max(axis=1, keepdims=True))
    s /= s.sum(axis=1, keepdims=True)
    out = np.zeros((tok.shape[0], E.shape[0]))
    np.add.at(out, (np.repeat(np.arange(tok.shape[0]), tok.shape[1]), tok.ravel()), s.ravel())
    return out


def total_variation(p, q) -> NDArray[np.float64] | float:
    """Total-variation distance ``0.5 * sum |p - q|`` along the last axis (``p`` and ``q``
    of one shape, non-negative)."""
    p = as_float_array(p, "p")
    q = as_float_array(q, "q", shape=p.shape)
    if np.any(p < 0) or np.any(q < 0):
        raise DataError("p and q must be distributions (non-negative entries)")
    out = 0.5 * np.abs(p - q).sum(axis=-1)
    return float(out) if np.ndim(out) == 0 else out
