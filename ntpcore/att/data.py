r"""Data for the self-attention paper (key ``att``): random embeddings, sequences, labels with
graph-conditioned rejection sampling, and exact toy datasets for the Graph-SVM (book
``att-def-graph-svm``), the finite component (``att-def-wfin``) and the conceptual figure.

Random protocol of the paper's experiments (re-derived; no data or code of the authors is used)
    * embeddings: rows i.i.d. :math:`N(0, I_d)` normalised to unit norm (``"gaussian"``), or the
      first K rows of a random orthogonal matrix (``"orthonormal"``, needs K <= d);
    * sequences: T **distinct** tokens drawn uniformly (T <= K); for T > K a random permutation
      of all K tokens followed by T - K tokens drawn with replacement;
    * labels: :math:`y_i \sim \mathrm{Unif}(V_i)`.  Both of the authors' label rules
      (``y ~ Unif[K]`` patched into a random position, or ``Unif[K]`` with rejection until
      ``y in X``) produce exactly this distribution when the tokens of a sequence are distinct;
    * graph condition (rejection sampling of the whole token/label draw): ``"acyclic"`` = every
      TPG acyclic, ``"cyclic"`` = at least one TPG has an SCC of size >= 2, ``"any"``.
      Rejected draws are counted and returned, never silently skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ntpcore.att.priority import is_acyclic, scc_structures, token_priority_graphs
from ntpcore.core.validate import as_index_array, check_choice, check_number
from ntpcore.errors import DataError, ParameterError

#: kinds of :func:`unit_embeddings`
EMBEDDINGS = ("gaussian", "orthonormal")


def unit_embeddings(rng: np.random.Generator, K: int, d: int, kind: str = "gaussian"):
    """Token embeddings E (K, d): unit-norm Gaussian rows, or orthonormal rows (K <= d)."""
    K = check_number(K, "K", lo=1, integer=True)
    d = check_number(d, "d", lo=1, integer=True)
    check_choice(kind, "embeddings kind", EMBEDDINGS)
    if kind == "gaussian":
        E = rng.standard_normal((K, d))
        return E / np.linalg.norm(E, axis=1, keepdims=True)
    if K > d:
        raise ParameterError(f"orthonormal embeddings need K <= d, got K={K}, d={d}")
    Q, R = np.linalg.qr(rng.standard_normal((d, d)))
    Q = Q * np.sign(np.diag(R))  # Haar-distributed orthogonal matrix
    return Q[:K].copy()


def random_sequences(rng: np.random.Generator, n: int, T: int, K: int) -> NDArray[np.int64]:
    """Token ids (n, T): distinct tokens when T <= K, else a permutation then T-K repeats."""
    n = check_number(n, "n", lo=1, integer=True)
    T = check_number(T, "T", lo=1, integer=True)
    K = check_number(K, "K", lo=1, integer=True)
    if T <= K:
        return np.argsort(rng.random((n, K)), axis=1)[:, :T].astype(np.int64)
    perm = np.argsort(rng.random((n, K)), axis=1)
    extra = rng.integers(0, K, size=(n, T - K))
    return np.concatenate([perm, extra], axis=1).astype(np.int64)


def random_labels(rng: np.random.Generator, tokens) -> NDArray[np.int64]:
    """Labels uniform over the distinct tokens of each sequence, ``y_i ~ Unif(V_i)``."""
    tok = as_index_array(tokens, "tokens", ndim=2)
    if tok.shape[1] == 0:
        raise DataError("tokens must have at least one position")
    out = np.empty(tok.shape[0], dtype=np.int64)
    for i, seq in enumerate(tok):
        V = np.unique(seq)
        out[i] = V[rng.integers(len(V))]
    return out


@dataclass(frozen=True)
class AttDataset:
    """A dataset of the attention experiments."""

    E: NDArray[np.float64]  # (K, d) embeddings
    tokens: NDArray[np.int64]  # (n, T) token ids, last column = last token
    labels: NDArray[np.int64]  # (n,)
    n_rejected: int = 0  # token/label draws rejected by the graph condition

    @property
    def K(self) -> int:
        return int(self.E.shape[0])


def _graph_ok(tokens, labels, K: int, graph: str) -> bool:
    if graph == "any":
        return True
    acyc = is_acyclic(scc_structures(token_priority_graphs(tokens, labels, K)))
    return acyc if graph == "acyclic" else not acyc


def sample_dataset(
    rng: np.random.Generator,
    n: int,
    T: int,
    K: int,
    d: int,
    *,
    graph: str = "any",
    embeddings: str = "gaussian",
    max_draws: int = 100_000,
) -> AttDataset:
    """Draw tokens and labels until the TPGs satisfy ``graph``, then the embeddings.

    Raises
    ------
    DataError  if no admissible draw is found within ``max_draws``.
    """
    check_choice(graph, "graph", ("any", "acyclic", "cyclic"))
    check_choice(embeddings, "embeddings", EMBEDDINGS)
    n = check_number(n, "n", lo=1, integer=True)
    T = check_number(T, "T", lo=1, integer=True)
    K = check_number(K, "K", lo=1, integer=True)
    d = check_number(d, "d", lo=1, integer=True)
    max_draws = check_number(max_draws, "max_draws", lo=1, integer=True)
    for draw in range(max_draws):
        tok = random_sequences(rng, n, T, K)
        lab = random_labels(rng, tok)
        if _graph_ok(tok, lab, K, graph):
            E = unit_embeddings(rng, K, d, embeddings)
            return AttDataset(E=E, tokens=tok, labels=lab, n_rejected=draw)
    raise DataError(f"no {graph} dataset found in {max_draws} draws (n={n}, T={T}, K={K})")


#: Exact toy datasets (E = I_K, 0-based ids).  Values in comments are exact.
TOYS: dict[str, tuple[list[list[int]], list[int], int]] = {
    # Graph-SVM toy: edges 0->1, 0->2 in G^(2); W_svm[:, 2] = (2/3, -1/3, -1/3).
    "acyclic": ([[0, 1, 2]], [0], 3),
    # cyclic toy: SCCs {0,1}, {2}; W_svm[:, 2] = (1/3, 1/3, -2/3); W_fin = (log 2 / 2)(e0 - e1)e2^T;
    # composition on (0, 1, 2): (2/3, 1/3, 0).
    "cyclic": ([[0, 1, 2], [0, 1, 2], [1, 0, 2]], [0, 0, 1], 3),
    # the cyclic toy with label frequencies 3:1 -> composition (3/4, 1/4).
    "cyclic-3to1": ([[0, 1, 2]] * 3 + [[1, 0, 2]], [0, 0, 0, 1], 3),
    # conceptual figure (last token 5): SCCs A={0,1} > B={2,3} > {4}, {5} (incomparable
    # sinks); W_svm[:, 5] = (1, 1, 0, 0, -1, -1), ||W_svm||^2 = 4;
    # W_fin = (log 2 / 2)(e0 - e1)e5^T (labels 0,0,1 in A; 2,3 in B).
    "conceptual": (
        [[0, 1, 2, 5], [1, 0, 3, 5], [2, 3, 4, 5], [3, 2, 4, 5], [0, 1, 2, 5]],
        [0, 1, 2, 3, 0],
        6,
    ),
    # G^(2) is one SCC {0,1,2} -> W_svm = 0 and GD converges to the finite point
    # W_fin[:, 2] = (2 log 2 / 3, -log 2 / 3, -log 2 / 3): composition (1/2, 1/4, 1/4).
    "fully-cyclic": ([[0, 1, 2], [1, 0, 2], [0, 1, 2], [0, 1, 2]], [0, 0, 1, 2], 3),
}


def toy_dataset(name: str) -> AttDataset:
    """One of :data:`TOYS` with orthonormal embeddings ``E = I_K``."""
    if name not in TOYS:
        raise ParameterError(f"unknown toy {name!r}; choose from {sorted(TOYS)}")
    tok, lab, K = TOYS[name]
    return AttDataset(E=np.eye(K), tokens=np.array(tok, np.int64), labels=np.array(lab, np.int64))
