r"""The nuclear-norm NTP-SVM program [geo, Sec. 2] (book: ``geo-eq-svm``), its certificates
and its exact reduction.

.. math::
    L^{mm}=\arg\min_{L\in\mathbb R^{V\times m}}\|L\|_*\quad\text{s.t.}\quad L e_j\in C_j,\qquad
    C_j=\{x:\ x_z=a\ \forall z\in\mathcal S_j,\ x_v\le a-1\ \forall v\notin\mathcal S_j,\
    a\in\mathbb R\}.

Dual (book: ``geo-lem-dual``); with :math:`J=\mathbf 1\mathbf 1^\top`:

.. math::
    \max_G\ -\langle J-S,G\rangle\quad\text{s.t.}\quad\|G\|_{op}\le1,\
    \mathbf 1^\top G=0,\ G_{vj}\le0\ \text{if}\ S_{vj}=0.

Derivation: :math:`\|L\|_*=\max_{\|G\|_{op}\le1}\langle G,L\rangle`; a point of :math:`C_j` is
:math:`a\mathbf 1-(\mathbf 1-s_j)-t` with :math:`t\ge0` off the support, so
:math:`\min_{x\in C_j}\langle g,x\rangle` is finite iff :math:`\mathbf 1^\top g=0` and
:math:`g\le0` off the support, and then equals :math:`-\langle\mathbf 1-s_j,g\rangle`.  Any
dual-feasible ``G`` certifies :math:`\|L^{mm}\|_*\ge-\langle J-S,G\rangle`.

Exact reductions used by the specialised solver
-----------------------------------------------
*Identical columns.*  If :math:`\mathcal S_j=\mathcal S_{j'}`, swapping columns ``j, j'``
maps the feasible set onto itself and preserves :math:`\|\cdot\|_*` (a permutation is
orthogonal).  Averaging an optimal ``L`` over all permutations within each class of
identical columns gives a feasible point (the constraints are convex) with no larger norm
(convexity), i.e. an optimal point constant on each class; if :math:`L^{mm}` is unique it
is that point.  Identical ROWS of ``S`` (words with the same co-support pattern) are
handled identically (a row swap maps every :math:`C_j` onto itself).  So
:math:`L=F L_r E^\top` with class indicators :math:`F` (V x r), :math:`E` (m x u) and class
sizes :math:`D_r=F^\top F`, :math:`D_c=E^\top E`.  Since :math:`F D_r^{-1/2}` and
:math:`E D_c^{-1/2}` have orthonormal columns,
:math:`\|FL_rE^\top\|_*=\|D_r^{1/2}L_rD_c^{1/2}\|_*`.  With :math:`N=D_r^{1/2}L_rD_c^{1/2}`,
:math:`\omega=\mathrm{diag}(D_r)^{1/2}`, :math:`\delta=\mathrm{diag}(D_c)^{1/2}` and
:math:`\alpha_g=\delta_g a_g` the reduced problem is

.. math::
    \min\|N\|_*\ \text{s.t.}\ N_{wg}=\omega_w\alpha_g\ (w\in\mathcal S_g),\quad
    N_{wg}\le\omega_w(\alpha_g-\delta_g)\ (w\notin\mathcal S_g),

an (r x u) problem with the same structure; its dual is that of §2.3(6) with
:math:`\omega^\top G=0` and objective :math:`-\sum_{g}\delta_g\sum_{w\notin\mathcal S_g}
\omega_wG_{wg}`, and :math:`G_{full}=FD_r^{-1/2}GD_c^{-1/2}E^\top` is a certificate for the
full problem with the same value.  On the real-text set (m=425, V=91) this reduces the
problem from 91 x 425 to 54 x 40 (word classes x support groups).

This module holds the program, its checks and certificates, the exact reduction and the
building blocks that both specialised solvers share (the column-wise projection onto the
:math:`C_j`, singular-value soft-thresholding, the dual repair and the map back to (V, m)):
:func:`ntpcore.geo.svm.solve_nuclear_svm` (ADMM) and
:func:`ntpcore.geo.svm_scale.solve_nuclear_svm_scale` (large vocabularies).  The solvers and
their dispatch (:mod:`ntpcore.geo.svm`) build on it; it imports none of them.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.validate import as_float_array, as_support, check_number
from ntpcore.errors import DataError

__all__ = [
    "NuclearSVMResult",
    "check_certificate",
    "polar_certificate",
    "reduce_support",
    "svm_constraint_violation",
]


@dataclasses.dataclass(frozen=True, eq=False)
class NuclearSVMResult:
    """Solution of the nuclear-norm NTP-SVM.

    Attributes
    ----------
    L : (V, m) primal solution ``L_mm`` (columns centred, feasible up to rounding).
    G : (V, m) dual certificate (``||G||_op <= 1``, column sums 0, ``<= 0`` off support).
    objective : ``||L||_*``.
    dual_objective : ``-<J - S, G>`` (a certified lower bound on the optimum).
    violation : worst constraint violation of ``L`` (see :func:`svm_constraint_violation`).
    iterations : solver iterations.
    solver : "admm" or "cvxpy-<NAME>".
    reduced_shape : (r, u) size of the problem actually solved after deduplication.
    seconds : wall time.
    """

    L: NDArray[np.float64]
    G: NDArray[np.float64]
    objective: float
    dual_objective: float
    violation: float
    iterations: int
    solver: str
    reduced_shape: tuple[int, int]
    seconds: float

    @property
    def gap(self) -> float:
        """Relative duality gap ``(objective - dual) / objective``."""
        return (self.objective - self.dual_objective) / max(self.objective, 1e-300)


def _check_margin_support(S: NDArray[np.bool_]) -> None:
    if S.all():
        raise DataError(
            "every context has the full vocabulary as support: the NTP-SVM has no margin "
            "constraints (L_mm = 0)"
        )


def svm_constraint_violation(L: ArrayLike, S: ArrayLike) -> float:
    r"""Worst violation of the NTP-SVM constraints by ``L``.

    ``max_j max(spread_j, 1 - margin_j)`` with spread = max - min of ``L e_j`` on the
    support (equality constraints) and margin = min on the support - max off it.
    """
    S = as_support(S)
    L = as_float_array(L, "L", shape=S.shape)
    on_max = np.where(S, L, -np.inf).max(axis=0)
    on_min = np.where(S, L, np.inf).min(axis=0)
    off_max = np.where(S, -np.inf, L).max(axis=0)
    viol = np.maximum(on_max - on_min, 1.0 - (on_min - off_max))
    return float(max(0.0, viol.max()))


def check_certificate(G: ArrayLike, S: ArrayLike, L: ArrayLike | None = None) -> dict[str, float]:
    """Feasibility of a dual certificate ``G`` (book: ``geo-lem-dual``); the gap if ``L`` is given.

    Returns ``op_norm``, ``colsum`` (max abs column sum), ``off_pos`` (largest positive
    off-support entry), ``dual`` (= -<J - S, G>), and with ``L``: ``primal`` (= ||L||_*),
    ``gap`` (relative), ``alignment`` (= <G, L> / ||L||_*, 1 for a subgradient) and
    ``violation`` (primal constraint violation).
    """
    S = as_support(S)
    G = as_float_array(G, "G", shape=S.shape)
    out = {
        "op_norm": float(np.linalg.norm(G, 2)),
        "colsum": float(np.abs(G.sum(axis=0)).max()),
        "off_pos": float(max(0.0, np.where(S, -np.inf, G).max())),
        "dual": float(-G[~S].sum()),
    }
    if L is not None:
        L = as_float_array(L, "L", shape=S.shape)
        nuc = float(np.linalg.svd(L, compute_uv=False).sum())
        out.update(
            primal=nuc,
            gap=(nuc - out["dual"]) / nuc,
            alignment=float((G * L).sum() / nuc),
            violation=svm_constraint_violation(L, S),
        )
    return out


def _polar(A: NDArray[np.float64], tol: float = 1e-9) -> NDArray[np.float64]:
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    r = int(np.sum(s > tol * max(1.0, s[0])))
    return U[:, :r] @ Vt[:r]


def polar_certificate(S: ArrayLike, tol: float = 1e-9) -> dict[str, float | bool]:
    r"""Test whether the proxy :math:`\tilde S` is optimal via its polar factor.

    :math:`G_0=UV^\top` (compact SVD of :math:`\tilde S`) has :math:`\|G_0\|_{op}=1`,
    :math:`\mathbf 1^\top G_0=0` (because :math:`\mathbf 1^\top\tilde S=0`) and
    :math:`-\langle J-S,G_0\rangle=\langle\tilde S,G_0\rangle=\|\tilde S\|_*`.  If also
    :math:`G_0\le0` off the support, it is dual feasible and :math:`\tilde S=L^{mm}`.  (The
    converse fails: a rank-deficient :math:`\tilde S` may be certified by
    :math:`G_0+W_\perp` instead; compare norms with :func:`nuclear_svm` to decide.)

    Returns ``max_off`` (largest off-support entry of G_0; <= tol means certified) and
    ``certified``.
    """
    S = as_support(S)
    _check_margin_support(S)
    tol = check_number(tol, "tol", lo=0, hi=1, hi_open=True)
    St = S - S.mean(axis=0, keepdims=True)
    G0 = _polar(St)
    max_off = float(np.where(S, -np.inf, G0).max())
    return {"max_off": max_off, "certified": bool(max_off <= tol)}


@dataclasses.dataclass(frozen=True)
class _Reduction:
    Sr: NDArray[np.bool_]  # (r, u) distinct rows x distinct columns
    row_of: NDArray[np.intp]  # (V,) class of each word
    col_of: NDArray[np.intp]  # (m,) class of each context
    omega: NDArray[np.float64]  # (r,) sqrt(row class sizes)
    delta: NDArray[np.float64]  # (u,) sqrt(column class sizes)


def reduce_support(S: ArrayLike) -> _Reduction:
    """Classes of identical columns and of identical rows of ``S`` (see module docstring)."""
    S = as_support(S)
    Su, col_of, ccount = np.unique(S.T, axis=0, return_inverse=True, return_counts=True)
    Sr, row_of, rcount = np.unique(Su.T, axis=0, return_inverse=True, return_counts=True)
    return _Reduction(
        Sr=Sr.astype(bool),
        row_of=row_of.ravel(),
        col_of=col_of.ravel(),
        omega=np.sqrt(rcount.astype(np.float64)),
        delta=np.sqrt(ccount.astype(np.float64)),
    )


#: columns are processed in blocks of about this many entries, so that the working arrays of
#: the column-wise projections stay in cache whatever the size of the matrix
_BLOCK_ENTRIES = 2**16

#: finite stand-in for minus infinity in the breakpoint arrays (0 * _NEVER = 0, unlike -inf)
_NEVER = -1e300


def _breakpoint_roots(
    T: NDArray[np.float64],
    A: NDArray[np.float64],
    B: NDArray[np.float64],
    w2: NDArray[np.float64],
    alpha: NDArray[np.float64],
    max_steps: int = 50,
) -> NDArray[np.float64]:
    r"""Per column ``g`` of ``T``, the root of the increasing concave piecewise-linear
    :math:`\phi_g(a)=B_ga-A_g-\sum_w w2_w\,(T_{wg}-a)_+` by Newton's method from ``alpha``.

    For the active set :math:`\{w: T_{wg}>a\}` Newton's step is
    :math:`a\leftarrow(A_g+\sum_{\mathcal A}w2_wT_{wg})/(B_g+\sum_{\mathcal A}w2_w)`; a
    column is settled when the step returns the same value (its active set is that of the
    root).  Entries equal to :data:`_NEVER` never enter.  Columns not settled after
    ``max_steps`` (never seen) are solved exactly by sorting the breakpoints
    (:func:`_roots_by_sorting`).  Returns the roots.
    """
    act = np.empty(T.shape, dtype=bool)
    TA = np.empty_like(T)
    for _ in range(max_steps):
        np.greater(T, alpha, out=act)
        np.multiply(T, act, out=TA)
        new = (A + w2 @ TA) / (B + w2 @ act)
        if np.array_equal(new, alpha):
            return new
        prev, alpha = alpha, new
    moving = alpha != prev
    alpha[moving] = _roots_by_sorting(T[:, moving], A[moving], B[moving], w2)
    return alpha


def _roots_by_sorting(
    T: NDArray[np.float64],
    A: NDArray[np.float64],
    B: NDArray[np.float64],
    w2: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Exact roots of :func:`_breakpoint_roots`' :math:`\\phi` by sorting the breakpoints:
    with the ``p`` largest entries active, the first ``p`` whose root is at least the next
    breakpoint."""
    r, u = T.shape
    order = np.argsort(-T, axis=0, kind="stable")
    bs = np.take_along_axis(T, order, axis=0)
    off = bs > _NEVER
    num = np.where(off, bs * w2[order], 0.0)
    den = np.where(off, w2[order], 0.0)
    cnum = np.vstack([np.zeros((1, u)), np.cumsum(num, axis=0)])
    cden = np.vstack([np.zeros((1, u)), np.cumsum(den, axis=0)])
    alpha_p = (A[None, :] + cnum) / (B[None, :] + cden)
    ok = alpha_p >= np.vstack([np.where(off, bs, -np.inf), np.full((1, u), -np.inf)])
    return alpha_p[np.argmax(ok, axis=0), np.arange(u)]


def _project_columns(
    Y: NDArray[np.float64],
    Sr: NDArray[np.bool_],
    omega: NDArray[np.float64],
    delta: NDArray[np.float64],
    alpha0: NDArray[np.float64] | None = None,
    out: NDArray[np.float64] | None = None,
    support: tuple[NDArray[np.intp], NDArray[np.intp]] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Euclidean projection of each column of ``Y`` onto the weighted set
    :math:`C'_g=\{x: x_w=\omega_w\alpha\ (w\in\mathcal S_g),\ x_w\le\omega_w(\alpha-\delta_g)\}`.

    For fixed :math:`\alpha` the best ``x`` is :math:`\omega_w\alpha` on the support and
    :math:`\min(y_w,\omega_w(\alpha-\delta_g))` off it, leaving the convex piecewise quadratic
    :math:`f(\alpha)=\sum_{\mathcal S}(\omega_w\alpha-y_w)^2+\sum_{w\notin\mathcal S}
    \omega_w^2(\beta_w-\alpha)_+^2` with :math:`\beta_w=y_w/\omega_w+\delta_g`: off-support
    word ``w`` is active iff :math:`\alpha<\beta_w`.  :math:`f'/2=B\alpha-A-\sum_{w\notin
    \mathcal S}\omega_w^2(\beta_w-\alpha)_+` (:math:`A=\sum_{\mathcal S}\omega y`,
    :math:`B=\sum_{\mathcal S}\omega^2`) is increasing and concave, and for a fixed active set
    :math:`\mathcal A` its root :math:`\alpha=(A+\sum_{\mathcal A}\omega^2\beta)/(B+
    \sum_{\mathcal A}\omega^2)` is Newton's step, so from any start the iterates reach the
    root in finitely many steps (monotonically after the first); started at the previous
    iterate's :math:`\alpha` it takes 1-3 steps (:func:`_breakpoint_roots`).  The columns
    are processed in blocks that stay in cache, the support entries (a few per column) by
    their indices (``support = np.nonzero(Sr)``, computed if not given).  Returns (x, alpha);
    ``x`` is written to ``out`` if given (not ``Y``).
    """
    r, u = Y.shape
    w = omega[:, None]
    w2 = omega * omega
    unit = bool(np.all(omega == 1.0))
    rows, cols = np.nonzero(Sr) if support is None else support
    A = np.bincount(cols, weights=omega[rows] * Y[rows, cols], minlength=u)
    B = np.bincount(cols, weights=w2[rows], minlength=u)
    alpha = A / B if alpha0 is None else np.array(alpha0, dtype=np.float64)
    X = np.empty_like(Y) if out is None else out
    step = max(1, _BLOCK_ENTRIES // max(r, 1))
    for c0 in range(0, u, step):
        blk = slice(c0, min(u, c0 + step))
        Yb, db = Y[:, blk], delta[blk]
        T = Yb + db if unit else Yb / w + db
        T[Sr[:, blk]] = _NEVER
        a = _breakpoint_roots(T, A[blk], B[blk], w2, alpha[blk])
        alpha[blk] = a
        np.minimum(Yb, (a - db) if unit else w * (a - db), out=X[:, blk])
    X[rows, cols] = omega[rows] * alpha[cols]
    return X, alpha


def _svt(Y: NDArray[np.float64], tau: float) -> NDArray[np.float64]:
    r"""Singular-value soft-thresholding :math:`\mathrm{SVT}_\tau(Y)`.

    Computed from the eigen-decomposition of the small Gram matrix: with
    :math:`YY^\top=U\Sigma^2U^\top` (rows <= columns), :math:`\mathrm{SVT}_\tau(Y)=
    U_k\,\mathrm{diag}(1-\tau/\sigma_k)\,U_k^\top Y` over the values above ``tau``.  The
    squared condition number only perturbs values far below ``tau`` (absolute error
    ~ eps sigma_max^2 / sigma), which are thresholded to zero anyway.
    """
    if Y.shape[0] > Y.shape[1]:
        return _svt(Y.T, tau).T
    ev, U = scipy.linalg.eigh(Y @ Y.T, check_finite=False, driver="evd")
    keep = ev > tau * tau
    if not keep.any():
        return np.zeros_like(Y)
    Uk = U[:, keep]
    shrink = 1.0 - tau / np.sqrt(ev[keep])
    return (Uk * shrink[None, :]) @ (Uk.T @ Y)


def _dual_repair(
    G: NDArray[np.float64],
    Sr: NDArray[np.bool_],
    omega: NDArray[np.float64],
    delta: NDArray[np.float64],
) -> tuple[NDArray[np.float64], float]:
    """Make ``G`` dual feasible for the reduced problem; return it and its dual value."""
    G = np.where(Sr, G, np.minimum(G, 0.0))
    # restore omega^T G_g = 0 using the (sign-free) support entries
    w_on = np.where(Sr, omega[:, None], 0.0)
    corr = (omega[:, None] * G).sum(axis=0) / (w_on * w_on).sum(axis=0)
    G = G - w_on * corr[None, :]
    op = float(scipy.linalg.svdvals(G, check_finite=False)[0])
    G = G / max(1.0, op)
    dual = float(-(np.where(Sr, 0.0, G) * omega[:, None]).sum(axis=0) @ delta)
    return G, dual


def reduced_start(S: NDArray[np.bool_]):
    r"""The exact reduction of a validated support and the solvers' common start.

    Returns ``(red, Z, (U, s, Vt), k)``: the reduction (:func:`reduce_support`), the reduced
    centred support :math:`Z = D_r^{1/2}\tilde S_r D_c^{1/2}` (feasible), its thin SVD and
    its numerical rank ``k``.
    """
    red, Z = reduced_centred_support(S)
    U, s, Vt = np.linalg.svd(Z, full_matrices=False)
    return red, Z, (U, s, Vt), int(np.sum(s > 1e-9 * s[0]))


def reduced_centred_support(S: NDArray[np.bool_]) -> tuple[_Reduction, NDArray[np.float64]]:
    r"""The exact reduction of a validated support (:func:`reduce_support`) and the reduced
    centred support :math:`Z = D_r^{1/2}\tilde S_r D_c^{1/2}` (feasible, margin 1)."""
    _check_margin_support(S)
    red = reduce_support(S)
    Sr, omega, delta = red.Sr, red.omega, red.delta
    St_r = Sr - ((omega**2)[:, None] * Sr).sum(axis=0, keepdims=True) / float(S.shape[0])
    return red, omega[:, None] * St_r * delta[None, :]


def expand_solution(
    S: NDArray[np.bool_],
    red: _Reduction,
    Zb: NDArray[np.float64],
    Gb: NDArray[np.float64],
    dual: float,
    iterations: int,
    solver: str,
    t0: float,
    *,
    center: bool = False,
    objective: float | None = None,
) -> NuclearSVMResult:
    """Map a reduced primal/dual pair back to (V, m):
    ``L[z, j] = N[row_of z, col_of j] / (omega delta)`` (likewise ``G``)."""
    scale = red.omega[:, None] * red.delta[None, :]
    L = (Zb / scale)[np.ix_(red.row_of, red.col_of)]
    if center:
        L = L - L.mean(axis=0, keepdims=True)
    G = (Gb / scale)[np.ix_(red.row_of, red.col_of)]
    if objective is None:
        objective = float(np.linalg.svd(L, compute_uv=False).sum())
    return NuclearSVMResult(
        L=L,
        G=G,
        objective=objective,
        dual_objective=dual,
        violation=svm_constraint_violation(L, S),
        iterations=iterations,
        solver=solver,
        reduced_shape=red.Sr.shape,
        seconds=time.perf_counter() - t0,
    )
