r"""Coordinates shared by the Graph-SVM, the finite component and the regularization path of the
self-attention paper (key ``att``): edge generators, row-orthonormal bases, projections.

Attention weights ``W`` (d, d) score position ``t`` of sequence ``i`` by
:math:`z_{it} = x_{it}^\top W \bar x_i` (book ``att-eq-model``).  Every constraint of the
Graph-SVM and every generator of the subspaces :math:`S`, :math:`S_\mathrm{fin}` is a rank-one
matrix

.. math::
    (e_i - e_j)\, e_k^\top, \qquad
    \operatorname{vec}\big((e_i - e_j) e_k^\top\big) = (e_i - e_j) \otimes e_k

with the row-major ``ravel`` used throughout [att, App. Defs. 3–4] (book
``att-def-subspaces``).  A subspace is stored as a row-orthonormal basis ``B`` (r, d*d), and
the orthogonal projection on it is :math:`\Pi_B(W) = \operatorname{vec}^{-1}(B^\top B
\operatorname{vec} W)`.  In a basis ``B`` the score of position ``t`` along basis matrix ``b``
is the Jacobian entry :math:`J_{itb} = x_{it}^\top B_b \bar x_i`, so that
:math:`z_{it} = \sum_b J_{itb} a_b` for :math:`W = \sum_b a_b B_b`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ntpcore.core.validate import as_float_array
from ntpcore.errors import DataError

RANK_TOL = 1e-10  # relative singular-value threshold for bases and null spaces
#: Clarabel settings for test-grade references (the defaults stop at ~1e-8 gaps, i.e. ~1e-5
#: relative error in the solution of these small, flat problems).
CLARABEL_TIGHT = {
    "tol_gap_abs": 1e-10,
    "tol_gap_rel": 1e-10,
    "tol_feas": 1e-10,
    "tol_ktratio": 1e-8,
}


def check_embeddings(E, K: int | None = None) -> NDArray[np.float64]:
    """Validate the embedding matrix ``E`` (K, d): finite float64, row ``k`` = token ``k``."""
    E = as_float_array(E, "E", ndim=2)
    if K is not None and E.shape[0] != K:
        raise DataError(f"E must have K = {K} rows (one per token), got {E.shape[0]}")
    return E


def orth_rows(A: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row-orthonormal basis of the row space of ``A`` (relative threshold RANK_TOL)."""
    if A.shape[0] == 0:
        return np.zeros((0, A.shape[1]))
    _, s, Vt = np.linalg.svd(A, full_matrices=False)
    r = int(np.sum(s > RANK_TOL * max(s[0], 1e-300))) if s.size else 0
    return Vt[:r]


def project_onto_span(W, B: NDArray[np.float64]) -> NDArray[np.float64]:
    r"""Orthogonal projection :math:`\Pi_B(W)` of ``W`` (..., d, d) onto the span of the rows of
    ``B`` (r, d*d) (row-orthonormal).  Batched over leading axes."""
    W = as_float_array(W, "W")
    if W.ndim < 2 or W.shape[-1] != W.shape[-2]:
        raise DataError(f"W must be a (..., d, d) stack of square matrices, got {W.shape}")
    d = W.shape[-1]
    B = as_float_array(B, "B", ndim=2, shape=(None, d * d))
    w = W.reshape(*W.shape[:-2], d * d)
    return ((w @ B.T) @ B).reshape(W.shape)


def project_onto_spans(traj: NDArray[np.float64], bases: Sequence[NDArray[np.float64]]):
    r"""Project a trajectory ``traj`` (S, B, d, d) of ``B`` trials onto one span per trial.

    ``bases[b]`` (r_b, d*d) is row-orthonormal; ranks may differ (zero rows pad them, which
    leaves :math:`\Pi` unchanged).  Returns :math:`\Pi_{B_b} W_b(\tau)`, shape (S, B, d, d)."""
    S, Bt, d, _ = traj.shape
    r = max([b.shape[0] for b in bases] + [1])
    padded = np.zeros((len(bases), r, d * d))  # (B, r_max, p)
    for i, b in enumerate(bases):
        padded[i, : b.shape[0]] = b
    w = traj.reshape(S, Bt, d * d).transpose(1, 0, 2)  # (B, S, p)
    c = np.matmul(w, padded.transpose(0, 2, 1))  # (B, S, r) coordinates
    return np.matmul(c, padded).transpose(1, 0, 2).reshape(traj.shape)


def generator_rows(
    E: NDArray[np.float64], triples: Sequence[tuple[int, int, int]]
) -> NDArray[np.float64]:
    """Stack ``vec((e_i - e_j) e_k^T) = kron(e_i - e_j, e_k)`` for each triple ``(i, j, k)``."""
    d = E.shape[1]
    if not triples:
        return np.zeros((0, d * d))
    t = np.asarray(triples, dtype=np.int64)
    diff = E[t[:, 0]] - E[t[:, 1]]  # (m, d)
    return (diff[:, :, None] * E[t[:, 2]][:, None, :]).reshape(len(t), d * d)


def score_jacobian(E: NDArray[np.float64], tokens, B: NDArray[np.float64]) -> NDArray[np.float64]:
    """``J[i, t, b] = x_it^T B_b xbar_i`` (n, T, r): the score of position ``t`` of sequence
    ``i`` along basis matrix ``b`` of a row-orthonormal basis ``B`` (r, d*d)."""
    d = E.shape[1]
    X = E[np.asarray(tokens)]  # (n, T, d)
    return np.einsum("ntd,bde,ne->ntb", X, B.reshape(-1, d, d), X[:, -1])
