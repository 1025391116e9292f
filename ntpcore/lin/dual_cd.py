r"""Block-coordinate descent on the dual of the NTP-SVM [lin, Def. 3] (solver ``"dual-cd"``).

The dual in the coefficients C of :math:`W = C\bar H^\top` is described in
:mod:`ntpcore.lin.dual`; this solver works for any rank of H (d < m included):

``"dual-cd"``  (:func:`svm_dual_cd`) the same dual in C, for any rank of H (d < m
    included): exact block-coordinate descent over contexts (one projection onto
    :math:`\{1^\top x = 0, x_{off}\le 0\}` per block) with working sets, a certified
    duality gap, and an exact polish on the identified active set (the face solve above,
    which only needs the small blocks :math:`G_{J_vJ_v}` invertible: true for sparse
    supports); non-separable data are detected from the unbounded dual.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import scipy.linalg as sla
from numpy.typing import ArrayLike, NDArray

from ntpcore.errors import InfeasibleError, SolverError
from ntpcore.lin.dual import face_solve, initial_working_set, most_violated
from ntpcore.lin.separability import infeasibility_bound, separability_lp
from ntpcore.lin.subspace import anchor_tokens
from ntpcore.lin.svm_problem import NTPSVMResult, check_svm_data, svm_result

Array = NDArray[np.float64]


def project_column(y: Array, ins: NDArray[np.bool_]) -> tuple[Array, float]:
    r"""Euclidean projection of y onto {x : 1^T x = 0, x_v <= 0 for v not in ins}.

    KKT: :math:`x = y - \tau` on ``ins`` and :math:`x = \min(y - \tau, 0)` off it, with
    :math:`\tau` the root of the decreasing piecewise-linear
    :math:`g(\tau) = \sum_{ins}(y - \tau) + \sum_{off}\min(y - \tau, 0)`.  Off entries with
    :math:`y < \tau` form a prefix of the sorted off values, so the root is found exactly
    among the k + 1 candidate prefixes."""
    yin = y[ins]
    yoff = np.sort(y[~ins])
    n_in = yin.size
    cand = (yin.sum() + np.concatenate(([0.0], np.cumsum(yoff)))) / (
        n_in + np.arange(yoff.size + 1)
    )
    # prefix p is valid when yoff[p-1] < tau_p <= yoff[p]
    lo = np.concatenate(([-np.inf], yoff))
    hi = np.concatenate((yoff, [np.inf]))
    ok = (lo < cand) & (cand <= hi)
    p = int(np.argmax(ok)) if ok.any() else int(np.argmin(np.maximum(lo - cand, cand - hi)))
    tau = float(cand[p])
    x = y - tau
    off = ~ins
    x[off] = np.minimum(x[off], 0.0)
    return x, tau


def _kkt_state(W: Array, H: Array, C: Array, S: NDArray[np.bool_], z, cols) -> dict:
    """Margins, spread, objectives and duality gap of the pair (W = C H^T, C)."""
    L = W @ H
    off = ~S
    ref = np.where(S, L, 0.0).sum(axis=0) / S.sum(axis=0)  # mean in-support logit
    marg = ref[None, :] - L
    min_margin = float(marg[off].min())
    spread = float((np.where(S, L, -np.inf).max(axis=0) - np.where(S, L, np.inf).min(axis=0)).max())
    nw2 = float(np.vdot(W, W))
    sum_off = float(C[off].sum())
    dual = -0.5 * nw2 - sum_off  # a lower bound on the optimum (weak duality)
    # Feasible-rescaled primal point W / gamma (up to the in-support spread).
    gamma = min(1.0, min_margin)
    primal = 0.5 * nw2 / gamma**2 if gamma > 0 else np.inf
    return {
        "L": L,
        "marg": marg,
        "min_margin": min_margin,
        "spread": spread,
        "dual": dual,
        "primal": primal,
        "gap": primal - dual,
        "norm2": nw2,
    }


def _rel_gap(state: dict) -> float:
    """Certified relative duality gap (P - D) / P; inf while no margin is positive."""
    if not np.isfinite(state["primal"]):
        return np.inf
    return state["gap"] / max(state["primal"], 1e-300)


def svm_dual_cd(
    H: ArrayLike,
    S: ArrayLike,
    *,
    tol: float = 1e-9,
    max_epochs: int = 5000,
    add_per_epoch: int = 16,
    inner_epochs: int = 4,
    seed: int = 0,
    certify_infeasible: bool = True,
    polish: bool = True,
    lp_max_size: int = 20_000,
) -> NTPSVMResult:
    r"""NTP-SVM by dual block-coordinate descent over contexts (any rank of H).

    *The dual.*  With multipliers :math:`\alpha_{vj}` (free for :math:`v\in\mathcal S_j`,
    :math:`\ge 0` off the support) on the anchor-form constraints, stationarity of the
    Lagrangian in W gives :math:`W = C\bar H^\top` with
    :math:`c_j = \sum_{v\ne z_j}\alpha_{vj}(e_{z_j} - e_v)`; the set of such columns is
    exactly :math:`K_j = \{x\in\mathbb R^V : 1^\top x = 0,\ x_v\le 0\ (v\notin\mathcal S_j)\}`
    (the anchor entry is minus the sum of the others), and
    :math:`\sum_{v\notin\mathcal S_j}\alpha_{vj} = -\sum_{v\notin\mathcal S_j} C_{vj}`.  The
    dual of the NTP-SVM is therefore

    .. math::
        \min_{C}\ f(C) = \tfrac12\operatorname{tr}(C G C^\top) + \langle B, C\rangle
        \quad\text{s.t.}\ c_j\in K_j,\qquad G = \bar H^\top\bar H,\
        B_{vj} = [v\notin\mathcal S_j],

    and :math:`-f(C) \le \tfrac12\|W^{\mathrm{mm}}\|^2` for every feasible C (weak
    duality; equality at the optimum, Slater holds for the linear constraints).  G may be
    singular (d < m): C is then not unique, but :math:`W = C\bar H^\top` is, since the
    primal objective is strongly convex.

    *One block.*  As a function of column j alone (others fixed),
    :math:`f = \tfrac12 G_{jj}\|c_j\|^2 + c_j^\top(\ell_j - G_{jj}c_j^{old} + b_j)` + const,
    where :math:`\ell_j = W\bar h_j` are the current logits.  Its exact minimiser over
    :math:`K_j` is the Euclidean projection
    :math:`c_j^{new} = \Pi_{K_j}\big(c_j^{old} - (\ell_j + b_j)/G_{jj}\big)`, computed
    exactly by sorting (:func:`project_column`); then
    :math:`W \mathrel{+}= (c_j^{new} - c_j^{old})\bar h_j^\top` (Crammer-Singer / LIBLINEAR
    style dual coordinate descent, here with block size V and a zero-sum coupling).

    *Working sets (shrinking).*  Off-support entries whose multiplier is zero and whose
    margin exceeds 1 stay at zero; so each context j carries a working set
    :math:`R_j` = its support plus the off-support tokens that are active or were violated.
    A block update touches only the rows :math:`R_j` of W (cost :math:`|R_j|\,d`).  After
    ``inner_epochs`` sweeps (random order) over the contexts, one GEMM
    :math:`L = W\bar H` recomputes every margin; the (at most ``add_per_epoch`` per
    context) most violated off-support tokens enter :math:`R_j`, and inactive ones with
    margin above 1 leave it.

    *Stopping, certified.*  At each full check, with :math:`\gamma = \min(1, \text{min
    margin})` the point :math:`W/\gamma` satisfies every margin constraint, so
    :math:`P = \tfrac12\|W\|^2/\gamma^2 \ge \tfrac12\|W^{\mathrm{mm}}\|^2 \ge D = -f(C)`;
    the solver stops when the in-support spread is at most ``tol`` (times max(1, ||W||))
    and :math:`(P - D)/P \le` ``tol``.  The returned W is :math:`W/\gamma` (margins >= 1
    exactly, objective within ``tol`` relative of the optimum).

    *Polish.*  Whenever the relative gap has dropped by 3x (from 3e-2 on), and otherwise
    whenever the time since the last attempt is 4x what it cost, the active set
    A = {C_off < 0} is handed to :func:`_polish` (primal-dual active-set steps, each an
    exact KKT solve on the face); the polished point is returned when it is primal and
    dual feasible to ``tol`` with certified gap <= ``tol``, which usually happens long
    before the coordinate descent itself would reach ``tol``.

    *Infeasibility.*  When the data are not NTP-separable the primal is infeasible and
    the dual unbounded: C grows along a direction Y with :math:`Y\bar H^\top = 0`,
    :math:`1^\top Y = 0`, :math:`Y_{off}\le 0`, :math:`\langle B, Y\rangle < 0` (a Farkas
    certificate) while W stays bounded.  When D exceeds 10 (||W||^2/2) (checked at
    geometrically spaced checks) the separability LP decides for small problems
    (V m <= ``lp_max_size``); for larger ones C is cleaned into a certificate by alternating
    projections (:func:`infeasibility_bound`) and :class:`InfeasibleError` is raised when it
    proves that every separating W would have :math:`\|W\|_F \ge 10^8`.

    Raises InfeasibleError (not separable), SolverError (no convergence in
    ``max_epochs``, or the post-check of :func:`svm_result` fails).
    """
    t0 = time.perf_counter()
    H, S = check_svm_data(H, S)
    V, m = S.shape
    d = H.shape[0]
    rng = np.random.default_rng(seed)
    cols = np.arange(m)
    z = anchor_tokens(S)
    off = ~S
    Gd = np.einsum("ij,ij->j", H, H)
    if np.any(Gd <= 0):
        raise InfeasibleError(
            "a context has the zero embedding h_j = 0: its logits are all equal, so no W "
            "separates its support from the other tokens (the data are not NTP-separable)"
        )
    HT = np.ascontiguousarray(H.T)  # (m, d): rows h_j
    W = np.zeros((V, d))
    C = np.zeros((V, m))
    # Working sets: support + a few off-support tokens (those with the largest logit
    # under the centred support-indicator logits propagated through G, as in svm_dual).
    work = S | initial_working_set(S, lambda X: (X @ H.T) @ H, add_per_epoch)
    R = [np.flatnonzero(work[:, j]) for j in range(m)]
    INS = [S[R[j], j] for j in range(m)]
    epochs = 0
    n_checks = 0
    next_infeas_check = 3
    state = None
    polish_gap = 3e-2
    polish_end, polish_cost = t0, 0.0  # attempts take at most ~20% of the time
    n_polish = 0
    polished = False
    while True:
        for _ in range(inner_epochs):
            epochs += 1
            for j in rng.permutation(m):
                r = R[j]
                h = HT[j]
                Wr = W[r]
                c = C[r, j]
                g = Wr @ h
                g[~INS[j]] += 1.0
                x, _ = project_column(c - g / Gd[j], INS[j])
                delta = x - c
                if np.any(delta):
                    C[r, j] = x
                    W[r] = Wr + np.outer(delta, h)
        n_checks += 1
        state = _kkt_state(W, H, C, S, z, cols)
        nW = np.sqrt(state["norm2"])
        rel_gap = _rel_gap(state)
        viol_new = off & ~work & (state["marg"] < 1.0 - 0.1 * tol)
        if (
            state["spread"] <= tol * max(1.0, nW)
            and rel_gap <= tol
            and state["min_margin"] > 0
            and not viol_new.any()
        ):
            break
        if (
            polish
            and state["min_margin"] > 0
            and (rel_gap <= polish_gap or time.perf_counter() - polish_end >= 4.0 * polish_cost)
        ):
            # The active set is (probably) identified: solve the KKT system on it exactly.
            polish_gap = rel_gap / 3.0
            n_polish += 1
            tp = time.perf_counter()
            pol = _polish(H, S, C, z, cols, tol)
            polish_end = time.perf_counter()
            polish_cost = max(polish_end - tp, 0.25 * (polish_end - t0) / n_checks)
            if pol is not None:
                W, C, state = pol
                rel_gap = _rel_gap(state)
                polished = True
                break
        if epochs >= max_epochs:
            gap_txt = (
                f"relative gap {rel_gap:.3g}"
                if np.isfinite(rel_gap)
                else "no certified gap: the iterate has no positive margin yet"
            )
            raise SolverError(
                f"NTP-SVM dual CD: no convergence in {max_epochs} epochs ({gap_txt}, spread "
                f"{state['spread']:.3g}, min margin {state['min_margin']:.6g}, dual objective "
                f"{state['dual']:.6g} <= ||W^mm||^2/2); near the separability threshold the "
                "dual is ill-conditioned: use solver='auto' (falls back to cvxpy) or 'cvxpy'"
            )
        if (
            certify_infeasible
            and n_checks >= next_infeas_check
            and state["dual"] > 10.0 * 0.5 * state["norm2"]
        ):
            # D = -f(C) <= ||W^mm||^2 / 2 grows while W stays bounded: the dual looks
            # unbounded, i.e. the data look non-separable.  Decide.
            next_infeas_check = 2 * n_checks
            if V * m <= lp_max_size:
                if not separability_lp(H, S)["separable"]:
                    raise InfeasibleError(
                        "the data are not NTP-separable (Def. 2): the NTP-SVM dual is "
                        "unbounded and the separability LP (HiGHS) is infeasible "
                        f"(V={V}, d={d}, m={m})"
                    )
                certify_infeasible = False
            else:
                cert = infeasibility_bound(C.copy(), H, S, off)
                if cert["norm_lower_bound"] >= 1e8:
                    raise InfeasibleError(
                        "the data are not NTP-separable (Def. 2) to working precision: a "
                        "Farkas certificate from the unbounded NTP-SVM dual shows that every "
                        "W with equal in-support logits and margins >= 1 has ||W||_F >= "
                        f"{cert['norm_lower_bound']:.3g} (rank H = {cert['rank']} < m = {m}; "
                        f"V={V}, d={d})"
                    )
        # grow: most violated off-support tokens per context; shrink: inactive, margin > 1
        if viol_new.any():
            work |= most_violated(viol_new, state["marg"], add_per_epoch)
        drop = work & off & (C == 0.0) & (state["marg"] > 1.0 + 1e-3)
        if drop.any():
            work &= ~drop
        changed = np.flatnonzero((viol_new | drop).any(axis=0))
        for j in changed:
            R[j] = np.flatnonzero(work[:, j])
            INS[j] = S[R[j], j]
    gamma = min(1.0, state["min_margin"])
    W_out = W / gamma
    return svm_result(
        W_out,
        H,
        S,
        "dual-cd",
        "optimal",
        epochs,
        t0,
        C=C / gamma,
        extra={
            "epochs": epochs,
            "checks": n_checks,
            "working_set": int((work & off).sum()),
            "dual_objective": state["dual"],
            "primal_objective": state["primal"],
            "rel_gap": rel_gap,
            "polish_attempts": n_polish,
            "polished": polished,
        },
    )


def face_solve_dense(G: Array, T: NDArray[np.bool_], t: Array) -> Array:
    r""":func:`face_solve` for singular blocks: the KKT system of the face QP, densely.

    Minimise :math:`\tfrac12\operatorname{tr}(CGC^\top) - \langle t, C\rangle` over C
    supported on T with zero column sums: with c the entries on T (row-major), the Hessian
    is :math:`K = \operatorname{blockdiag}_v G_{J_vJ_v}` and the constraints :math:`Ac = 0`
    sum each column; :math:`[K\ A^\top; A\ 0][c; \mu] = [t; 0]` is solved in the
    symmetric-indefinite
    (LDL^T) sense with a 1e-12 relative ridge on K (K may be singular; W = C H^T is unique
    all the same), falling back to least squares."""
    V, m = T.shape
    vv, jj = np.nonzero(T)
    n = vv.size
    same = vv[:, None] == vv[None, :]
    K = np.where(same, G[jj[:, None], jj[None, :]], 0.0)
    A = np.zeros((m, n))
    A[jj, np.arange(n)] = 1.0
    M = np.block([[K, A.T], [A, np.zeros((m, m))]])
    rhs = np.concatenate([t[vv, jj], np.zeros(m)])
    ridge = 1e-12 * float(np.max(np.diag(G)))  # C is not unique (W is)
    sol = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", sla.LinAlgWarning)
            sol = sla.solve(
                M + ridge * np.diag(np.r_[np.ones(n), np.zeros(m)]), rhs, assume_a="sym"
            )
        if np.linalg.norm(M @ sol - rhs) > 1e-10 * max(1.0, np.linalg.norm(rhs)):
            sol = None
    except (np.linalg.LinAlgError, sla.LinAlgWarning):
        sol = None
    if sol is None:
        sol = np.linalg.lstsq(M, rhs, rcond=None)[0]
    C = np.zeros((V, m))
    C[vv, jj] = sol[:n]
    return C


def _polish(
    H: Array,
    S: NDArray[np.bool_],
    C: Array,
    z,
    cols,
    tol: float,
    max_iter: int = 8,
    dense_max: int = 2000,
):
    r"""Exact solve on the active set guessed from C; None when no correct set is found.

    With A = {off-support (v, j) : C_vj < 0} and T = S u A, the KKT conditions restricted
    to T are linear: C supported on T with zero column sums and
    :math:`(C G)_{vj} = \beta_j - [v\in A_j]` on T (:func:`face_solve`; needs each
    :math:`G_{J_vJ_v}`, :math:`J_v = \{j : (v, j)\in T\}`, invertible, which holds for
    sparse supports even when d < m).  A is then corrected by primal-dual active-set
    steps (Hintermueller-Ito-Kunisch: :math:`A \leftarrow \{-C_{vj} + \rho(1 -
    \mathrm{margin}_{vj}) > 0\}`) until it repeats.  The result is optimal iff it is primal
    feasible (all margins >= 1) and dual feasible (C <= 0 on A); it is accepted when both
    hold to ``tol`` and the certified relative duality gap is <= ``tol``."""
    off = ~S
    d = H.shape[0]
    A = off & (C < 0)
    n_start = int(A.sum())
    G = H.T @ H
    ridge = 1e-14 * float(np.max(np.diag(G)))
    rho = 1.0 / float(np.mean(np.diag(G)))
    for _ in range(max_iter):
        T = S | A
        t = np.where(A, -1.0, 0.0)
        Cp = None
        if not np.any(T.sum(axis=1) > d):
            try:
                Cp = face_solve(G, T, t, ridge)
            except (SolverError, np.linalg.LinAlgError, ValueError):
                Cp = None
        if Cp is None:  # some G_JJ singular (|J_v| > d): dense KKT system when small
            if int(T.sum()) + S.shape[1] > dense_max:
                return None
            Cp = face_solve_dense(G, T, t)
        Wp = Cp @ H.T
        st = _kkt_state(Wp, H, Cp, S, z, cols)
        A_new = off & (-Cp + rho * (1.0 - st["marg"]) > 0)
        if np.array_equal(A_new, A):
            break
        if A_new.sum() > 2 * n_start + 10:
            return None  # the guess was too far off: the active-set steps diverge
        A = A_new
    else:
        return None
    scale = max(1.0, float(np.abs(Cp).max()))
    if np.any(Cp[A] > tol * scale):
        return None
    if np.any(Cp[A] > 0):
        Cp[A] = np.minimum(Cp[A], 0.0)
        Wp = Cp @ H.T
        st = _kkt_state(Wp, H, Cp, S, z, cols)
    nW = np.sqrt(st["norm2"])
    if (
        st["min_margin"] < 1 - tol
        or st["spread"] > tol * max(1.0, nW)
        or st["gap"] > tol * st["primal"]
    ):
        return None
    return Wp, Cp, st
