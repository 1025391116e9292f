r"""Word and context embeddings predicted by the max-margin logits, and how to compare them.

Logits factor as :math:`L=WH` with word embeddings :math:`W\in\mathbb R^{V\times d}` (rows
:math:`w_z`) and context embeddings :math:`H\in\mathbb R^{d\times m}` (columns :math:`h_j`).
For the NTP-UFM the ridge on the factors is the nuclear norm on the logits,
:math:`\min_{WH=L}\tfrac12(\|W\|_F^2+\|H\|_F^2)=\|L\|_*` (book: ``geo-lem-nuclear``),
attained by the **balanced factorisation** of the compact SVD :math:`L=U\Sigma V^\top`,

.. math:: W=U\Sigma^{1/2},\qquad H=\Sigma^{1/2}V^\top

(:func:`balanced_factors`; :func:`mm_embeddings` for :math:`L^{mm}`, giving the predicted
:math:`W^{mm}`, :math:`H^{mm}`).  Embeddings are compared up to rotation [geo, Sec. 3, Figs.
2(d) and 3]:

* cosine-similarity matrices :math:`\cos(W)` (V, V) and :math:`\cos(H^\top)` (m, m)
  (:func:`cosine_matrix`);
* the direction distance :math:`\|A/\|A\|_F-B/\|B\|_F\|_F` (:func:`direction_distance`) and
  its Gram version for embeddings (:func:`gram_distance`);
* the paper's "structural correlation" of two similarity matrices, the structure term of
  SSIM :math:`(\sigma_{XY}+C)/(\sigma_X\sigma_Y+C)` [geo, Fig. 2(d)]
  (:func:`structural_correlation`), and the off-diagonal Pearson correlation, which is not
  inflated by the unit diagonal (:func:`offdiag_correlation`);
* **subspace collapse** (book: ``geo-def-collapse``): contexts with identical supports
  (:func:`same_support_pairs`) have identical columns of :math:`L^{mm}`; their embeddings
  projected onto the top-:math:`r` right-singular subspace of :math:`W` collapse,
  :math:`\|\Pi_r(h_j-h_{j'})\|/\|\Pi_rh_j\|\to0` (:func:`subspace_collapse`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.validate import as_float_array, as_index_array, as_support, check_number
from ntpcore.errors import DataError
from ntpcore.geo.data import support_groups


def balanced_factors(
    L: ArrayLike, tol: float = 1e-6
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Balanced factorisation :math:`W=U\Sigma^{1/2}` (V, r), :math:`H=\Sigma^{1/2}V^\top` (r, m).

    Singular values below ``tol * max(1, sigma_max)`` are dropped (rank ``r``).  Then
    :math:`WH=L`, :math:`W^\top W=HH^\top=\Sigma` and
    :math:`\tfrac12(\|W\|_F^2+\|H\|_F^2)=\|L\|_*` (book: ``geo-lem-nuclear``).
    """
    L = as_float_array(L, "L", ndim=2)
    tol = check_number(tol, "tol", lo=0, hi=1, hi_open=True)
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
    ``W_mm`` (V, r) (for contexts pass ``H.T``): the Gram version of
    :func:`direction_distance` [geo, Sec. 3].
    """
    X = as_float_array(X, "X", ndim=2)
    Y = as_float_array(Y, "Y", ndim=2)
    if X.shape[0] != Y.shape[0]:
        raise DataError(f"X and Y need the same number of rows, got {X.shape} and {Y.shape}")
    return direction_distance(X @ X.T, Y @ Y.T)


def structural_correlation(
    X: ArrayLike, Y: ArrayLike, C: float = 1e-5, *, paper_ddof: bool = True
) -> float:
    r"""Structure term of SSIM as used for the paper's Fig. 2(d).

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
    C = check_number(C, "C", lo=0)
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
    pairs = [
        (int(g[a]), int(g[b]))
        for g in support_groups(as_support(S))
        if len(g) > 1
        for a in range(len(g))
        for b in range(a + 1, len(g))
    ]
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def subspace_collapse(
    W: ArrayLike, H: ArrayLike, pairs: ArrayLike, r: int
) -> dict[str, NDArray[np.float64]]:
    r"""Subspace-collapse measure (book: ``geo-def-collapse``).

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
    pairs = as_index_array(pairs, "pairs", shape=(None, 2), size=H.shape[1])
    r = check_number(r, "r", lo=0, integer=True)
    _, _, Vt = np.linalg.svd(W, full_matrices=False)
    B = Vt[:r]  # (r, d) orthonormal rows
    PH = B @ H  # coordinates of Pi_r h_j, (r, m)
    a, b = pairs[:, 0], pairs[:, 1]

    def cos(A: NDArray[np.float64]) -> NDArray[np.float64]:
        den = np.linalg.norm(A[:, a], axis=0) * np.linalg.norm(A[:, b], axis=0)
        return (A[:, a] * A[:, b]).sum(axis=0) / np.where(den > 0, den, 1.0)

    rel = np.linalg.norm(PH[:, a] - PH[:, b], axis=0) / np.maximum(
        np.linalg.norm(PH[:, a], axis=0), 1e-300
    )
    return {"raw_cos": cos(H), "proj_cos": cos(PH), "proj_rel_diff": rel}
