r"""NTP-separability [lin, Def. 2, eqs. (6a)-(6b); Lemma 1], decided exactly.

The data are NTP-separable iff some W has equal logits on every support (6a) and a margin
of at least 1 against every off-support token (6b).  Only :math:`W\bar H` enters, so W may
be restricted to span(H): with :math:`Y = U_r^\top\bar H` (r = rank H) the question is the
feasibility LP in :math:`(X, \beta)`, :math:`X\in\mathbb R^{V\times r}`,

.. math::
    x_v^\top y_j - \beta_j = 0\ (v\in\mathcal S_j),\qquad
    x_v^\top y_j - \beta_j \le -1\ (v\notin\mathcal S_j),

solved by HiGHS (:func:`separability_lp`).  With full-column-rank H (d >= m) it always
holds (Lemma 1).  For programs too large for the LP, :func:`infeasibility_bound` turns a
direction of the unbounded NTP-SVM dual into a Farkas-type certificate.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import linprog

from ntpcore.core.validate import as_float_array
from ntpcore.errors import SolverError
from ntpcore.lin.svm_problem import check_svm_data

Array = NDArray[np.float64]


def separability_lp(H: ArrayLike, S: ArrayLike) -> dict:
    r"""Decide NTP-separability (Def. 2) with an LP; returns {'separable', 'status', ...}.

    Variables: W restricted to span(H) (V x r, r = rank H; no loss of generality since
    only :math:`W\bar H` enters) and :math:`\beta\in\mathbb R^m`.  Constraints
    :math:`w_v^\top y_j - \beta_j = 0` for :math:`v\in\mathcal S_j` and
    :math:`\le -1` otherwise, with :math:`Y = U_r^\top\bar H`.
    """
    H, S = check_svm_data(H, S)
    V, m = S.shape
    U, s, Vt = np.linalg.svd(H, full_matrices=False)
    r = int(np.sum(s > 1e-12 * s[0])) if s.size and s[0] > 0 else 0
    Y = s[:r, None] * Vt[:r]  # (r, m)
    nv = V * r + m
    # Row (v, j): sum_i W[v, i] Y[i, j] - beta_j.
    rows = np.repeat(np.arange(V * m), r + 1)
    vv, jj = np.divmod(np.arange(V * m), m)
    colsW = vv[:, None] * r + np.arange(r)[None, :]  # (Vm, r)
    cols = np.concatenate([colsW, (V * r + jj)[:, None]], axis=1).ravel()
    vals = np.concatenate([Y.T[jj], -np.ones((V * m, 1))], axis=1).ravel()
    A = sp.csr_matrix((vals, (rows, cols)), shape=(V * m, nv))
    insup = S[vv, jj]
    # HiGHS' default (dual simplex) occasionally ends with status "unknown" on these
    # zero-objective programs; the interior-point and primal simplex codes then decide.
    for method in ("highs", "highs-ipm", "highs-ds"):
        res = linprog(
            np.zeros(nv),
            A_ub=A[~insup],
            b_ub=-np.ones(int((~insup).sum())),
            A_eq=A[insup],
            b_eq=np.zeros(int(insup.sum())),
            bounds=(None, None),
            method=method,
        )
        if res.status in (0, 2):
            break
    else:
        raise SolverError(f"HiGHS could not decide NTP-separability: {res.message}")
    if res.status == 0:  # double-check the certificate of separability
        Wr = res.x[: V * r].reshape(V, r)
        L = Wr @ Y - res.x[V * r :][None, :]
        if np.abs(L[S]).max(initial=0) > 1e-6 or L[~S].max(initial=-1) > -1 + 1e-6:
            raise SolverError("HiGHS returned an inaccurate separating point")
    return {
        "separable": res.status == 0,
        "status": int(res.status),
        "message": res.message,
        "rank_H": r,
        "method": method,
    }


def is_ntp_separable(H: ArrayLike, P_or_S: ArrayLike) -> bool:
    """True iff the data are NTP-separable (Def. 2); accepts P (V, m) or a support matrix."""
    arr = np.asarray(P_or_S)
    S = arr if arr.dtype == np.bool_ else (as_float_array(arr, "P", ndim=2) > 0)
    return bool(separability_lp(H, S)["separable"])


def infeasibility_bound(
    Y: Array, H: Array, S: NDArray[np.bool_], off: NDArray[np.bool_], max_iter: int = 300
) -> dict:
    r"""Try to turn Y (the growth of C, a dual ascent direction) into a Farkas certificate.

    Alternating projections between the subspace
    :math:`\{Y\bar H^\top = 0,\ 1^\top Y = 0\}` (rows onto null(H), then columns onto zero
    sums; the two commute) and the cone :math:`\{Y_{off}\le 0\}`.  For Y in the subspace
    and any W with margins >= 1 and equal in-support logits,
    :math:`0 = \langle W, Y\bar H^\top\rangle = -\sum_{off} Y_{vj}\,\mathrm{margin}_{vj}`, so
    :math:`n \le p\,\sqrt2\,\|W\|_F\max_j\|\bar h_j\|` with n (p) the sum of the negative
    (positive) off-support entries: every separating W has
    :math:`\|W\|_F \ge n / (\sqrt2\,p\max_j\|\bar h_j\|)`.  Returns that bound (inf when p = 0:
    an exact certificate)."""
    U, s, _ = np.linalg.svd(H, full_matrices=False)
    r = int(np.sum(s > 1e-12 * s[0])) if s.size and s[0] > 0 else 0
    if r == H.shape[1]:
        return {"norm_lower_bound": 0.0, "rank": r}  # full column rank: separable (Lemma 1)
    Q = np.linalg.qr(H.T)[0][:, :r]  # orthonormal basis of the row space of H (m, r)
    hmax = float(np.sqrt(np.einsum("ij,ij->j", H, H).max()))
    bound = 0.0
    for _ in range(max_iter):
        Y = Y - (Y @ Q) @ Q.T
        Y -= Y.mean(axis=0, keepdims=True)
        Yoff = Y[off]
        n_part = -float(np.minimum(Yoff, 0.0).sum())
        p_part = float(np.maximum(Yoff, 0.0).sum())
        if n_part <= 0:
            break
        bound = np.inf if p_part == 0 else n_part / (np.sqrt(2.0) * p_part * hmax)
        if bound >= 1e8:
            break
        Y = np.where(off, np.minimum(Y, 0.0), Y)
    return {"norm_lower_bound": bound, "rank": r}
