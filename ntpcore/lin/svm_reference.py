r"""Reference NTP-SVM: the program of [lin, Def. 3] verbatim, solved by cvxpy (Clarabel).

.. math::
    \min_W \tfrac12\|W\|_F^2\quad\text{s.t.}\quad
    (e_{z_j} - e_{z'})^\top W\bar h_j = 0\ (z'\in\mathcal S_j\setminus\{z_j\}),\qquad
    (e_{z_j} - e_v)^\top W\bar h_j \ge 1\ (v\notin\mathcal S_j),

eqs. (6a)-(6b) in anchor form.  An interior-point solve of the whole program: the
yardstick the specialised dual solvers of :mod:`ntpcore.lin.dual` are tested against.

Only a solve that ends with status ``optimal`` (or a certified ``infeasible``) is
accepted: ``optimal_inaccurate`` (the solver stopped at its reduced tolerances) is a
failure, retried with more iterations and with other solvers (:func:`solve_strict`), and
a :class:`~ntpcore.errors.SolverError` naming every status is raised when no attempt
succeeds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.errors import InfeasibleError, SolverError
from ntpcore.lin.separability import separability_lp
from ntpcore.lin.subspace import anchor_tokens
from ntpcore.lin.svm_problem import NTPSVMResult, check_svm_data, svm_result

Array = NDArray[np.float64]

#: Retries after an inaccurate or failed solve, per kind of program: the requested solver
#: with more iterations, then other solvers at tight tolerances (OSQP with its polish step
#: for the quadratic program; SCS for the exponential cone).
RETRIES_QP: tuple[tuple[str, dict], ...] = (
    ("CLARABEL", {"max_iter": 1000}),
    ("OSQP", {"eps_abs": 1e-10, "eps_rel": 1e-10, "max_iter": 200_000, "polish": True}),
    ("SCS", {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200_000}),
)
RETRIES_CONE: tuple[tuple[str, dict], ...] = (
    ("CLARABEL", {"max_iter": 1000}),
    ("SCS", {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200_000}),
)


def solve_strict(
    prob,
    solver: str,
    solve_kw: dict,
    retries: Sequence[tuple[str, dict]],
    what: str,
) -> tuple[str, list[str]]:
    """Solve a cvxpy problem, accepting only the statuses ``optimal`` and ``infeasible``.

    Tries ``solver`` with ``solve_kw`` first, then each of ``retries`` (those not
    installed are skipped).  Returns the solver that answered and the log of failed
    attempts; raises SolverError naming every attempt's status when none answers.
    """
    import cvxpy as cp

    installed = set(cp.installed_solvers())
    attempts = [(solver, dict(solve_kw))]
    # a retry with the requested solver keeps the caller's settings (tolerances)
    attempts += [
        (s, {**solve_kw, **kw} if s == solver else dict(kw)) for s, kw in retries if s in installed
    ]
    tried: list[str] = []
    for name, kw in attempts:
        try:
            prob.solve(solver=name, **kw)
        except cp.error.SolverError as exc:
            tried.append(f"{name}: {exc}")
            continue
        if prob.status in (cp.OPTIMAL, cp.INFEASIBLE):
            return name, tried
        tried.append(f"{name}: status {prob.status!r}")
    raise SolverError(
        f"cvxpy could not solve {what} to full accuracy (an inaccurate status is never "
        "accepted): " + "; ".join(tried)
    )


def ntp_svm_cvxpy(
    H: ArrayLike, S: ArrayLike, *, solver: str = "CLARABEL", **solve_kw
) -> NTPSVMResult:
    """Reference NTP-SVM: the program of Def. 3 in anchor form, solved by cvxpy.

    A status other than ``optimal`` is retried (:func:`solve_strict`); an
    ``infeasible_inaccurate`` ending is decided by the separability LP.

    Raises InfeasibleError (not NTP-separable), SolverError (no attempt ends ``optimal``,
    or the answer fails the post-check of :func:`ntpcore.lin.svm_problem.svm_result`).
    """
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
        backend, tried = solve_strict(prob, solver, solve_kw, RETRIES_QP, "the NTP-SVM")
    except SolverError:
        # e.g. every attempt ended "infeasible_inaccurate": the LP decides separability
        if separability_lp(H, S)["separable"]:
            raise
        backend, tried = "HiGHS (separability LP)", [f"{solver}: status {prob.status!r}"]
    if backend.startswith("HiGHS") or prob.status != cp.OPTIMAL:
        raise InfeasibleError(
            f"the data are not NTP-separable: {backend} certified that no W with equal "
            "in-support logits (6a) reaches margin 1 against every off-support token (6b) "
            f"(status {prob.status}; V={V}, d={d}, m={m})"
        )
    if W.value is None:
        raise SolverError(f"cvxpy/{backend} returned no point on the NTP-SVM")
    it = int(prob.solver_stats.num_iters or 0) if prob.solver_stats else 0
    return svm_result(
        np.asarray(W.value),
        H,
        S,
        "cvxpy",
        prob.status,
        it,
        t0,
        extra={
            "backend": backend,
            "solve_time_s": prob.solver_stats.solve_time,
            "failed_attempts": tried,
        },
    )
