r"""Solvers of the nuclear-norm NTP-SVM [geo, Sec. 2] (book: ``geo-eq-svm``): the cvxpy
reference, the specialised ADMM and the dispatch :func:`nuclear_svm`.

The program, its dual, its certificates and the exact reduction by identical rows and
columns are in :mod:`ntpcore.geo.svm_problem`; the large-vocabulary solver in
:mod:`ntpcore.geo.svm_scale`.

ADMM
----
Splitting ``N = Z``: ``X <- SVT_{1/rho}(Z - U)`` (singular-value soft-thresholding),
``Z <- Proj_C(X + U)`` (column-separable, :func:`_project_columns`), ``U <- U + X - Z``,
with residual-balancing ``rho``.  ``Z`` is feasible up to rounding at every iteration and
``G = rho (Z - U - X)`` is an exact subgradient of ``||X||_*`` with ``||G||_op <= 1``;
repairing its signs/column sums and rescaling gives a dual-feasible ``G`` and hence a
certified duality gap, which is the stopping rule.  Start: ``Z`` = centred support (feasible,
margin 1), ``U = -G_0/rho`` with ``G_0`` its polar factor (a near-optimal certificate).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.validate import as_support, check_cvxpy_solver, check_number
from ntpcore.errors import ParameterError, SolverError
from ntpcore.geo.svm_problem import (
    NuclearSVMResult,
    _check_margin_support,
    _dual_repair,
    _project_columns,
    _svt,
    expand_solution,
    reduce_support,
    reduced_start,
    svm_constraint_violation,
)
from ntpcore.geo.svm_scale import solve_nuclear_svm_scale

__all__ = [
    "NUCLEAR_SOLVERS",
    "SCALE_SWITCH",
    "dual_certificate_cvxpy",
    "nuclear_svm",
    "nuclear_svm_cvxpy",
    "solve_nuclear_svm",
]


def _anchor_system(S: NDArray[np.bool_]) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Selection matrices on vec(L) (column-major) for the anchored constraints (§2.3).

    Anchor ``a_j`` = first support element; equalities ``L[z,j] - L[a_j,j] = 0`` for the
    other support words, inequalities ``L[a_j,j] - L[v,j] >= 1`` for words off the support.
    ``m (V - 1)`` rows in total.
    """
    V, m = S.shape
    anchor = np.argmax(S, axis=0)
    idx = np.arange(V * m).reshape(m, V).T  # idx[z, j] = z + V j
    is_anchor = np.zeros_like(S)
    is_anchor[anchor, np.arange(m)] = True
    eq_z, eq_j = np.nonzero(S & ~is_anchor)
    in_v, in_j = np.nonzero(~S)

    def build(z: NDArray[np.intp], j: NDArray[np.intp], sign: float) -> sp.csr_matrix:
        k = z.size
        rows = np.concatenate([np.arange(k), np.arange(k)])
        cols = np.concatenate([idx[anchor[j], j], idx[z, j]])
        vals = np.concatenate([np.full(k, sign), np.full(k, -sign)])
        return sp.csr_matrix((vals, (rows, cols)), shape=(k, V * m))

    return build(eq_z, eq_j, 1.0), build(in_v, in_j, 1.0)


def nuclear_svm_cvxpy(
    S: ArrayLike, solver: str = "SCS", *, eps: float = 1e-8, verbose: bool = False
) -> NuclearSVMResult:
    """Reference solve of the nuclear-norm NTP-SVM with cvxpy (SCS or CLARABEL).

    SCS runs with ``eps_abs = eps_rel = eps`` (the authors used SCS); CLARABEL with its
    defaults is more accurate on small problems but reports ``optimal_inaccurate`` on some
    (e.g. the synthetic set) and runs out of memory from about V=60, m=150 (an SDP of
    size V + m), so it is not the default.

    The dual certificate is read from the dual variable of the anchored constraints:
    ``G = -(A_eq^T y_eq + A_in^T y_in)`` reshaped (the multiplier form of §2.3(6)).

    Raises
    ------
    SolverError
        If cvxpy does not report an optimal solution.
    """
    import cvxpy as cp

    S = as_support(S)
    _check_margin_support(S)
    solver = check_cvxpy_solver(solver)
    eps = check_number(eps, "eps", lo=0, hi=1, lo_open=True, hi_open=True)
    V, m = S.shape
    A_eq, A_in = _anchor_system(S)
    t0 = time.perf_counter()
    L = cp.Variable((V, m))
    x = cp.vec(L, order="F")
    cons = [A_in @ x >= 1]
    if A_eq.shape[0]:
        cons.append(A_eq @ x == 0)
    prob = cp.Problem(cp.Minimize(cp.normNuc(L)), cons)
    kw: dict[str, float | int | bool] = {}
    if solver.upper() == "SCS":
        kw = {"eps_abs": eps, "eps_rel": eps, "max_iters": 200_000}
    try:
        prob.solve(solver=solver.upper(), verbose=verbose, **kw)
    except cp.error.SolverError as exc:
        raise SolverError(f"cvxpy/{solver} failed on the nuclear-norm SVM: {exc}") from exc
    if prob.status not in ("optimal",):
        raise SolverError(f"cvxpy/{solver} returned status {prob.status!r}")
    Lv = np.asarray(L.value, dtype=np.float64)
    y_in = np.asarray(cons[0].dual_value, dtype=np.float64)
    g = A_in.T @ y_in
    if A_eq.shape[0]:
        g = g - A_eq.T @ np.asarray(cons[1].dual_value, dtype=np.float64)
    # Lagrangian ||L||_* - y_in^T(A_in x - 1) + y_eq^T A_eq x  =>  G = A_in^T y_in - A_eq^T y_eq
    G = g.reshape(m, V).T
    return NuclearSVMResult(
        L=Lv,
        G=G,
        objective=float(np.linalg.svd(Lv, compute_uv=False).sum()),
        dual_objective=float(-G[~S].sum()),
        violation=svm_constraint_violation(Lv, S),
        iterations=int(prob.solver_stats.num_iters or 0),
        solver=f"cvxpy-{solver.upper()}",
        reduced_shape=(V, m),
        seconds=time.perf_counter() - t0,
    )


def dual_certificate_cvxpy(S: ArrayLike, solver: str = "CLARABEL") -> NDArray[np.float64]:
    r"""Solve the dual of §2.3(6) directly (an SDP); returns the optimal ``G`` (V, m)."""
    import cvxpy as cp

    S = as_support(S)
    _check_margin_support(S)
    solver = check_cvxpy_solver(solver)
    G = cp.Variable(S.shape)
    off = (~S).astype(np.float64)
    cons = [cp.sigma_max(G) <= 1, cp.sum(G, axis=0) == 0, cp.multiply(off, G) <= 0]
    prob = cp.Problem(cp.Maximize(-cp.sum(cp.multiply(off, G))), cons)
    try:
        prob.solve(solver=solver.upper())
    except cp.error.SolverError as exc:
        raise SolverError(f"cvxpy/{solver} failed on the dual SVM: {exc}") from exc
    if prob.status != "optimal":
        raise SolverError(f"cvxpy/{solver} returned status {prob.status!r} on the dual")
    return np.asarray(G.value, dtype=np.float64)


def solve_nuclear_svm(
    S: ArrayLike,
    *,
    tol: float = 1e-8,
    max_iter: int = 20_000,
    check_every: int = 10,
    rho: float | None = None,
) -> NuclearSVMResult:
    """Specialised solver of the nuclear-norm NTP-SVM (ADMM on the reduced problem).

    Parameters
    ----------
    S : (V, m) bool or 0/1 support matrix.
    tol : relative duality gap certified at exit.
    max_iter : ADMM iteration limit.
    check_every : iterations between gap evaluations (two extra SVDs each).
    rho : initial ADMM penalty (default: from the scale of the centred support).

    Raises
    ------
    DataError
        On an invalid support matrix.
    SolverError
        If the certified gap is not reached within ``max_iter`` iterations.
    """
    S = as_support(S)
    tol = check_number(tol, "tol", lo=0, hi=1, lo_open=True, hi_open=True)
    max_iter = check_number(max_iter, "max_iter", lo=1, integer=True)
    check_every = check_number(check_every, "check_every", lo=1, integer=True)
    if rho is not None:
        rho = check_number(rho, "rho", lo=0, lo_open=True)
    t0 = time.perf_counter()
    red, Z, (U0, s0, Vt0), k0 = reduced_start(S)
    Sr, omega, delta = red.Sr, red.omega, red.delta
    if rho is None:
        rho = 0.2 / float(np.mean(s0[:k0]))  # 0.2: fewest iterations on test sets
    U = -(U0[:, :k0] @ Vt0[:k0]) / rho  # scaled dual = -G_0 / rho
    best: tuple[float, NDArray[np.float64], NDArray[np.float64], float] | None = None
    alpha: NDArray[np.float64] | None = None
    it = 0
    for it in range(1, max_iter + 1):
        Y = Z - U
        X = _svt(Y, 1.0 / rho)
        Z_old = Z
        Z, alpha = _project_columns(X + U, Sr, omega, delta, alpha)
        U = U + X - Z
        if it % check_every == 0 or it == max_iter:
            primal = float(scipy.linalg.svdvals(Z, check_finite=False).sum())
            G, dual = _dual_repair(rho * (Y - X), Sr, omega, delta)
            gap = (primal - dual) / primal
            if best is None or gap < best[0]:
                best = (gap, Z.copy(), G, dual)
            if gap <= tol:
                break
            # residual balancing
            r_norm = float(np.linalg.norm(X - Z))
            s_norm = rho * float(np.linalg.norm(Z - Z_old))
            if r_norm > 5.0 * s_norm:
                rho *= 2.0
                U /= 2.0
            elif s_norm > 5.0 * r_norm:
                rho /= 2.0
                U *= 2.0
    assert best is not None
    gap, Zb, Gb, dual = best
    if gap > tol:
        raise SolverError(
            f"ADMM reached max_iter={max_iter} with relative duality gap {gap:.2e} > tol={tol:.0e}"
        )
    # centring keeps feasibility and cannot increase the nuclear norm (it is a contraction),
    # so it only removes rounding
    return expand_solution(S, red, Zb, Gb, dual, it, "admm", t0, center=True)


#: reduced problems with at least this many entries (word classes x support groups) go to
#: the Anderson-accelerated solver of :mod:`ntpcore.geo.svm_scale` under ``solver="auto"``;
#: every support set of the book's figures is far below it (real text: 54 x 40)
SCALE_SWITCH = 50_000

#: the ``solver`` names :func:`nuclear_svm` accepts (the last two: cvxpy backends)
NUCLEAR_SOLVERS = ("auto", "admm", "dr-anderson", "scs", "clarabel")


def nuclear_svm(
    S: ArrayLike, *, solver: str = "auto", tol: float | None = None
) -> NDArray[np.float64]:
    r"""Max-margin logits :math:`L^{mm}` (V, m) of a support matrix ``S`` (book: ``geo-eq-svm``).

    ``solver="admm"`` uses :func:`solve_nuclear_svm` (default ``tol`` 1e-8);
    ``"dr-anderson"`` the large-vocabulary solver
    :func:`ntpcore.geo.svm_scale.solve_nuclear_svm_scale` (default ``tol`` 1e-6);
    ``"auto"`` (default) the first below :data:`SCALE_SWITCH` reduced entries, the second
    above; ``"scs"`` or ``"clarabel"`` the cvxpy reference :func:`nuclear_svm_cvxpy`.

    Raises
    ------
    DataError
        If ``S`` is not a 0/1 matrix with non-empty columns, or no column leaves a word out.
    SolverError
        If the solver fails to certify the requested accuracy.
    ParameterError
        If ``solver`` is none of these.
    """
    if str(solver).lower() not in NUCLEAR_SOLVERS:
        raise ParameterError(
            f"solver must be one of {', '.join(repr(x) for x in NUCLEAR_SOLVERS)}, got {solver!r}"
        )
    if tol is not None:  # checked before any solver runs (tol=-1 ran 20,000 iterations)
        tol = check_number(tol, "tol", lo=0, hi=1, lo_open=True, hi_open=True)
    if solver == "auto":
        r, u = reduce_support(S).Sr.shape
        solver = "admm" if r * u < SCALE_SWITCH else "dr-anderson"
    if solver == "admm":
        return solve_nuclear_svm(S, tol=1e-8 if tol is None else tol).L
    if solver == "dr-anderson":
        return solve_nuclear_svm_scale(S, tol=1e-6 if tol is None else tol).L
    return nuclear_svm_cvxpy(S, solver=solver).L
