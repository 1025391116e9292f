r"""Reference NTP-SVM: the program of [lin, Def. 3] verbatim, solved by cvxpy (Clarabel).

.. math::
    \min_W \tfrac12\|W\|_F^2\quad\text{s.t.}\quad
    (e_{z_j} - e_{z'})^\top W\bar h_j = 0\ (z'\in\mathcal S_j\setminus\{z_j\}),\qquad
    (e_{z_j} - e_v)^\top W\bar h_j \ge 1\ (v\notin\mathcal S_j),

eqs. (6a)-(6b) in anchor form.  An interior-point solve of the whole program: the
yardstick the specialised dual solvers of :mod:`ntpcore.lin.dual` are tested against.
"""

from __future__ import annotations

import time

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.errors import InfeasibleError, SolverError
from ntpcore.lin.subspace import anchor_tokens
from ntpcore.lin.svm import SVMResult, check_svm_data, svm_result

Array = NDArray[np.float64]


def svm_cvxpy(H: ArrayLike, S: ArrayLike, *, solver: str = "CLARABEL", **solve_kw) -> SVMResult:
    """Reference NTP-SVM: the program of Def. 3 in anchor form, solved by cvxpy."""
    import cvxpy as cp

    t0 = time.perf_counter()
    H, S = check_svm_data(H, S)
    V, m = S.shape
    d = H.shape[0]
    z = anchor_tokens(S)
    nonanchor = S.copy()
    nonanchor[z, np.arange(m)] = False
    t_eq, c_eq = np.nonzero(nonanchor)
    t_in, c_in = np.nonzero(~S)
    W = cp.Variable((V, d))
    L = W @ H
    cons = [L[z[c_in], c_in] - L[t_in, c_in] >= 1]
    if t_eq.size:
        cons.append(L[z[c_eq], c_eq] - L[t_eq, c_eq] == 0)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(W)), cons)
    try:
        prob.solve(solver=solver, **solve_kw)
    except cp.error.SolverError as exc:
        raise SolverError(f"cvxpy/{solver} failed on the NTP-SVM: {exc}") from exc
    if prob.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise InfeasibleError(
            f"the data are not NTP-separable: {solver} certified that no W with equal "
            "in-support logits (6a) reaches margin 1 against every off-support token (6b) "
            f"(status {prob.status}; V={V}, d={d}, m={m})"
        )
    if prob.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or W.value is None:
        raise SolverError(f"cvxpy/{solver} returned status {prob.status!r} on the NTP-SVM")
    it = int(prob.solver_stats.num_iters or 0) if prob.solver_stats else 0
    return svm_result(
        np.asarray(W.value),
        H,
        S,
        "cvxpy",
        prob.status,
        it,
        t0,
        extra={"backend": solver, "solve_time_s": prob.solver_stats.solve_time},
    )
