r"""Logit-space geometry of next-token prediction (paper ``geo``: Zhao, Behnia, Vakilian,
Thrampoulidis, *Implicit Geometry of Next-token Prediction*, COLM 2024).

Orientation: logits, probabilities and supports are ``(V, m)`` -- rows are words, columns
are the ``m`` distinct contexts.  With soft labels ``P`` (columns :math:`\hat p_j`), context
probabilities :math:`\hat\pi` and supports :math:`\mathcal S_j = \{z : \hat p_{j,z} > 0\}`:

* CE loss :math:`\mathrm{CE}(L)=\sum_j\hat\pi_j[\mathrm{LSE}(\ell_j)-\hat p_j^\top\ell_j]
  \ge\mathcal H` (entropy), gradient :math:`(Q(L)-P)\Pi`.
* In-support subspace :math:`F=\mathrm{span}\{(e_z-e_{z'})e_j^\top: z,z'\in\mathcal S_j\}`;
  its projection :math:`P_F` centres each column on its support and zeroes the rest.
* Finite part :math:`L^{in}\in F`: centred in-support log-odds (:func:`finite_logits`).
* Max-margin part :math:`L^{mm}`: the nuclear-norm NTP-SVM (:func:`nuclear_svm`)

  .. math:: \min\|L\|_*\ \text{s.t.}\ L_{zj}=L_{z'j}\ (z,z'\in\mathcal S_j),\quad
            L_{zj}-L_{vj}\ge1\ (z\in\mathcal S_j,\ v\notin\mathcal S_j),

  which depends only on the support matrix ``S``; its proxy is the centred support
  :math:`\tilde S=(I-\mathbf 1\mathbf 1^\top/V)S` (:func:`centered_support`).
* Regularization path (spec §2.4, reconstructed theorem): the minimiser :math:`L_\lambda` of
  :math:`\mathrm{CE}(L)+\lambda\|L\|_*` satisfies :math:`P_F(L_\lambda)\to L^{in}` and
  :math:`L_\lambda/\|L_\lambda\|_*\to L^{mm}/\|L^{mm}\|_*` as :math:`\lambda\to0`
  (:func:`regularization_path`).
* Embeddings: the balanced factorisation :math:`W=U\Sigma^{1/2}`, :math:`H=\Sigma^{1/2}V^\top`
  (:func:`balanced_factors`), cosine matrices, the structural correlation of §3.3 and the
  subspace-collapse measure of §2.5.

The nuclear-norm SVM has a reference solver (cvxpy, :func:`nuclear_svm_cvxpy`) and a
specialised ADMM solver with exact reductions and a certified duality gap
(:mod:`ntpcore.geo.svm`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.logits import (
    ce,
    ce_excess,
    ce_grad,
    entropy,
    project_F,
    support_matrix,
)
from ntpcore.core.validate import as_float_array, as_prob_matrix, as_support
from ntpcore.errors import DataError
from ntpcore.geo.regpath import reg_path_cvxpy, regularization_path
from ntpcore.geo.svm import (
    NuclearSVMResult,
    check_certificate,
    dual_certificate_cvxpy,
    nuclear_svm,
    nuclear_svm_cvxpy,
    polar_certificate,
    solve_nuclear_svm,
    svm_constraint_violation,
)

__all__ = [
    "NuclearSVMResult",
    "balanced_factors",
    "ce_excess",
    "ce_grad",
    "ce",
    "centered_support",
    "check_certificate",
    "cosine_matrix",
    "direction_distance",
    "dual_certificate_cvxpy",
    "entropy",
    "finite_logits",
    "gram_distance",
    "mm_embeddings",
    "nuclear_norm",
    "nuclear_svm",
    "nuclear_svm_cvxpy",
    "offdiag_correlation",
    "polar_certificate",
    "project_F",
    "reg_path_cvxpy",
    "regularization_path",
    "same_support_pairs",
    "solve_nuclear_svm",
    "structural_correlation",
    "subspace_collapse",
    "support_matrix",
    "svm_constraint_violation",
]


# --------------------------------------------------------------------------------------
# Data, loss, subspace F
# --------------------------------------------------------------------------------------


def finite_logits(P: ArrayLike) -> NDArray[np.float64]:
    r"""In-support (finite) component :math:`L^{in}` of spec §2.2.

    The unique element of :math:`F` with :math:`(e_z-e_{z'})^\top L^{in}e_j=\log(p_{j,z}/p_{j,z'})`
    for :math:`z,z'\in\mathcal S_j`: the log-probabilities centred on each support
    (:math:`P_F` of :math:`\log P` restricted to the support), zero off the support.

    Raises
    ------
    DataError
        If a column of ``P`` is not a probability vector.
    """
    P = as_prob_matrix(P)
    S = P > 0
    with np.errstate(divide="ignore"):
        logP = np.where(S, np.log(np.where(S, P, 1.0)), 0.0)
    return project_F(logP, S)


def centered_support(S: ArrayLike) -> NDArray[np.float64]:
    r"""Centred support :math:`\tilde S=(I-\mathbf 1\mathbf 1^\top/V)S` (proxy of :math:`L^{mm}`).

    Column :math:`j` equals :math:`1-k_j/V` on :math:`\mathcal S_j` and :math:`-k_j/V` off it, so
    it satisfies the NTP-SVM constraints with all margins exactly 1.
    """
    S = as_support(S).astype(np.float64)
    return S - S.mean(axis=0, keepdims=True)


def nuclear_norm(L: ArrayLike) -> float:
    """Sum of singular values."""
    return float(np.linalg.svd(np.asarray(L, dtype=np.float64), compute_uv=False).sum())


# --------------------------------------------------------------------------------------
# Embeddings and metrics (§2.5, §3.3)
# --------------------------------------------------------------------------------------


def balanced_factors(
    L: ArrayLike, tol: float = 1e-6
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Balanced factorisation :math:`W=U\Sigma^{1/2}` (V, r), :math:`H=\Sigma^{1/2}V^\top` (r, m).

    Singular values below ``tol * max(1, sigma_max)`` are dropped (rank ``r``).  Then
    :math:`WH=L`, :math:`W^\top W=HH^\top=\Sigma` and
    :math:`\tfrac12(\|W\|_F^2+\|H\|_F^2)=\|L\|_*`.
    """
    L = as_float_array(L, "L", ndim=2)
    U, s, Vt = np.linalg.svd(L, full_matrices=False)
    r = int(np.sum(s > tol * max(1.0, s[0] if s.size else 0.0)))
    root = np.sqrt(s[:r])
    return U[:, :r] * root[None, :], root[:, None] * Vt[:r]


def mm_embeddings(
    L_mm: ArrayLike, tol: float = 1e-6
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Predicted word / context embeddings ``W_mm`` (V, r) and ``H_mm`` (r, m) of ``L_mm``."""
    return balanced_factors(L_mm, tol)


def cosine_matrix(X: ArrayLike) -> NDArray[np.float64]:
    """Pairwise cosine similarity of the ROWS of ``X`` (zero rows give cosine 0)."""
    X = as_float_array(X, "X", ndim=2)
    norms = np.linalg.norm(X, axis=1)
    Xn = X / np.where(norms > 0, norms, 1.0)[:, None]
    return np.clip(Xn @ Xn.T, -1.0, 1.0)


def direction_distance(A: ArrayLike, B: ArrayLike) -> float:
    r""":math:`\|A/\|A\|_F-B/\|B\|_F\|_F` (0 = same direction, 2 = opposite)."""
    A = as_float_array(A, "A")
    B = as_float_array(B, "B", shape=A.shape)
    return float(np.linalg.norm(A / np.linalg.norm(A) - B / np.linalg.norm(B)))


def gram_distance(X: ArrayLike, Y: ArrayLike) -> float:
    r"""Distance of normalised row Grams, :math:`\|XX^\top/\|XX^\top\|_F-YY^\top/\|YY^\top\|_F\|_F`.

    Rotation invariant, so it compares e.g. trained word embeddings ``W`` (V, d) with
    ``W_mm`` (V, r) (for contexts pass ``H.T``).  Spec §3.3, Gram version of the direction
    metric.
    """
    X = as_float_array(X, "X", ndim=2)
    Y = as_float_array(Y, "Y", ndim=2)
    if X.shape[0] != Y.shape[0]:
        raise DataError(f"X and Y need the same number of rows, got {X.shape} and {Y.shape}")
    return direction_distance(X @ X.T, Y @ Y.T)


def structural_correlation(
    X: ArrayLike, Y: ArrayLike, C: float = 1e-5, *, paper_ddof: bool = True
) -> float:
    r"""Structure term of SSIM as used for the paper's Fig. 2(d) (spec §3.3).

    :math:`s=(\sigma_{XY}+C)/(\sigma_X\sigma_Y+C)` over ALL entries including the diagonal.
    With ``paper_ddof=True`` (default, the authors' convention, kept for comparability)
    :math:`\sigma_X,\sigma_Y` use ddof=1 and :math:`\sigma_{XY}` ddof=0, so that
    :math:`s(X,X)=1-1/N` for N entries (0.98 for 8 x 8, 0.99999 for 403 x 403); with
    ``paper_ddof=False`` all use ddof=0 and :math:`s(X,X)=1`.  Close to the Pearson
    correlation of the flattened matrices; the all-ones diagonal of cosine matrices inflates
    it, see :func:`offdiag_correlation`.
    """
    x = as_float_array(X, "X").ravel()
    y = as_float_array(Y, "Y", shape=np.shape(X)).ravel()
    sxy = float(np.mean((x - x.mean()) * (y - y.mean())))
    ddof = 1 if paper_ddof else 0
    return (sxy + C) / (float(x.std(ddof=ddof) * y.std(ddof=ddof)) + C)


def offdiag_correlation(X: ArrayLike, Y: ArrayLike) -> float:
    """Pearson correlation of the off-diagonal entries of two square similarity matrices."""
    X = as_float_array(X, "X", ndim=2)
    Y = as_float_array(Y, "Y", shape=X.shape)
    if X.shape[0] != X.shape[1] or X.shape[0] < 3:
        raise DataError("offdiag_correlation needs square matrices of size >= 3")
    mask = ~np.eye(X.shape[0], dtype=bool)
    return float(np.corrcoef(X[mask], Y[mask])[0, 1])


def same_support_pairs(S: ArrayLike) -> NDArray[np.int64]:
    """(p, 2) array of context pairs ``j < j'`` with identical supports."""
    S = as_support(S)
    from ntpcore.geo.corpus import support_groups

    pairs = [
        (int(g[a]), int(g[b]))
        for g in support_groups(S)
        if len(g) > 1
        for a in range(len(g))
        for b in range(a + 1, len(g))
    ]
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def subspace_collapse(
    W: ArrayLike, H: ArrayLike, pairs: ArrayLike, r: int
) -> dict[str, NDArray[np.float64]]:
    r"""Subspace-collapse measure of spec §2.5.

    ``W`` (V, d) word embeddings, ``H`` (d, m) context embeddings (columns), ``pairs``
    (p, 2) context pairs with identical supports, ``r = rank(L_mm)``.  With
    :math:`\Pi_r` the projector onto the top-``r`` right-singular subspace of ``W`` (the
    diverging word-embedding directions), returns per pair

    * ``raw_cos``: :math:`\cos(h_j,h_{j'})`;
    * ``proj_cos``: :math:`\cos(\Pi_rh_j,\Pi_rh_{j'})`;
    * ``proj_rel_diff``: :math:`\|\Pi_r(h_j-h_{j'})\|/\|\Pi_rh_j\|` (-> 0 under collapse).
    """
    W = as_float_array(W, "W", ndim=2)
    H = as_float_array(H, "H", ndim=2)
    if W.shape[1] != H.shape[0]:
        raise DataError(f"W is {W.shape} and H is {H.shape}: inner dimensions differ")
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    _, _, Vt = np.linalg.svd(W, full_matrices=False)
    B = Vt[:r]  # (r, d) orthonormal rows
    PH = B @ H  # coordinates of Pi_r h_j, (r, m)

    def cos(A: NDArray[np.float64]) -> NDArray[np.float64]:
        a, b = A[:, pairs[:, 0]], A[:, pairs[:, 1]]
        den = np.linalg.norm(a, axis=0) * np.linalg.norm(b, axis=0)
        return (a * b).sum(axis=0) / np.where(den > 0, den, 1.0)

    rel = np.linalg.norm(PH[:, pairs[:, 0]] - PH[:, pairs[:, 1]], axis=0) / np.maximum(
        np.linalg.norm(PH[:, pairs[:, 0]], axis=0), 1e-300
    )
    return {"raw_cos": cos(H), "proj_cos": cos(PH), "proj_rel_diff": rel}
