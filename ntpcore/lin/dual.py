r"""Dual solvers of the NTP-SVM [lin, Def. 3] in the coefficients C of W = C H^T.

With multipliers on the anchor-form constraints of (6a)-(6b), stationarity of the
Lagrangian gives :math:`W = C\bar H^\top` with every column :math:`c_j` in the cone
:math:`K_j = \{x : 1^\top x = 0,\ x_v \le 0\ (v\notin\mathcal S_j)\}`, and the dual is the
QP :math:`\min_C \tfrac12\operatorname{tr}(CGC^\top) + \langle B, C\rangle` over
:math:`c_j\in K_j`, :math:`G = \bar H^\top\bar H`, :math:`B_{vj} = [v\notin\mathcal S_j]`.
Two solvers share the working-set logic (:func:`initial_working_set`,
:func:`most_violated`) and the exact solve on a face (:func:`face_solve`):

``"dual"``   a specialised solver.  With multipliers :math:`\alpha_{v,j}` (free for
    in-support v, :math:`\ge 0` off-support) the KKT conditions give
    :math:`W = C\bar H^\top` where column j of C is
    :math:`c_j = \sum_{v\ne z_j}\alpha_{v,j}(e_{z_j} - e_v)` (zero-sum, non-positive off the
    support), and the dual is the bound-constrained QP

    .. math::
        \min_\alpha\ f(\alpha) = \tfrac12\langle C, CG\rangle
            - \sum_{v\notin\mathcal S_j}\alpha_{v,j}
        \quad\text{s.t.}\ \alpha_{v,j}\ge 0\ (v\notin\mathcal S_j),\qquad
        G = \bar H^\top\bar H,

    whose gradient is the margin minus its target: :math:`g_{v,j} = L_{z_j,j} - L_{v,j} -
    [v\notin\mathcal S_j]` with :math:`L = CG`.  It is solved by Bertsekas' projected Newton
    method (Armijo search along the projection arc), inside a working-set loop that adds
    violated margin constraints (so large problems never see all m(V-1) of them at once).

    *The Newton step without the (V m)^2 Hessian.*  On a face (the set T of entries whose
    multiplier is free, plus the anchors) the Newton system asks for C supported on T with
    zero column sums and :math:`(CG)_{v,j} = \beta_j + t_{v,j}` on T, where
    :math:`\beta_j = L_{z_j,j}` is the common in-support logit.  Row by row this is
    :math:`c_{v,J_v} = G_{J_vJ_v}^{-1}(\beta + t_v)_{J_v}` with :math:`J_v = \{j : (v,j)\in T\}`,
    and the zero-sum conditions leave one m x m SPD system
    :math:`\big(\sum_v G_{J_vJ_v}^{-1}\big)\beta = -\sum_v G_{J_vJ_v}^{-1}t_{v,J_v}`
    (blocks embedded in m x m).  Cost: :math:`\sum_v |J_v|^3 + m^3` per Newton step, with the
    inverses shared between tokens of equal pattern; nothing of size V m x V m or V d x V d
    is ever formed.  Requires :math:`G_{J_vJ_v}` invertible, i.e. H of full column rank (the
    overparameterized regime d >= m of Lemma 1); ``"auto"`` uses it for small full-rank
    programs only (:func:`solve_ntp_svm`).

``"dual-cd"`` (:func:`ntpcore.lin.dual_cd.svm_dual_cd`) solves the same dual by
    block-coordinate descent, for any rank of H, with the working-set logic and the face
    solve of this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import scipy.linalg as sla
from numpy.typing import ArrayLike, NDArray

from ntpcore.errors import SolverError
from ntpcore.lin.subspace import anchor_tokens
from ntpcore.lin.svm_problem import NTPSVMResult, check_svm_data, svm_result

Array = NDArray[np.float64]


def _spd_inverse(A: Array, ridge: float) -> Array:
    """Inverse of a symmetric positive-definite matrix (Cholesky; tiny ridge on failure)."""
    n = A.shape[0]
    for k in range(6):
        c, info = sla.lapack.dpotrf(A if k == 0 else A + (ridge * 10.0**k) * np.eye(n), lower=1)
        if info == 0:
            inv, info2 = sla.lapack.dpotri(c, lower=1)
            if info2 == 0:
                inv = np.tril(inv) + np.tril(inv, -1).T
                return inv
    raise SolverError("a principal submatrix of H^T H is singular; H lacks full column rank")


def face_solve(G: Array, T: NDArray[np.bool_], t: Array, ridge: float) -> Array:
    r"""C supported on T, zero column sums, with (C G)[v, j] = beta_j + t[v, j] on T.

    Row v of C lives on J_v = {j : T[v, j]}: c_{v,J} = G_JJ^{-1} (beta + t_v)_J; the zero
    column sums then fix beta through (sum_v G_JvJv^{-1}) beta = -sum_v G_JvJv^{-1} t_v."""
    V, m = T.shape
    R = np.zeros((m, m))
    rhs = np.zeros(m)
    cache: dict[bytes, Array] = {}
    rowsol: list[tuple[NDArray, Array] | None] = []
    for v in range(V):
        J = np.flatnonzero(T[v])
        if J.size == 0:
            rowsol.append(None)
            continue
        key = T[v].tobytes()  # tokens with the same pattern share the inverse
        Gi = cache.get(key)
        if Gi is None:
            Gi = _spd_inverse(G[np.ix_(J, J)], ridge)
            cache[key] = Gi
        R[np.ix_(J, J)] += Gi
        rhs[J] -= Gi @ t[v, J]
        rowsol.append((J, Gi))
    cR = sla.cho_factor(R, lower=True)
    beta = sla.cho_solve(cR, rhs)
    C = np.zeros((V, m))
    for v, rs in enumerate(rowsol):
        if rs is not None:
            J, Gi = rs
            C[v, J] = Gi @ (beta[J] + t[v, J])
    return C


def initial_working_set(
    S: NDArray[np.bool_], times_G: Callable[[Array], Array], k: int
) -> NDArray[np.bool_]:
    r"""First working set: per context, the (at most k) off-support tokens of largest logit.

    The logits are those of the centred support indicators propagated through
    :math:`G = \bar H^\top\bar H` (``times_G(X)`` = X G): the tokens that a W built from
    the supports alone would confuse with the support first.
    """
    off = ~S
    score = np.where(off, times_G(S - S.mean(axis=0, keepdims=True)), -np.inf)
    k0 = max(1, min(int(off.sum(axis=0).max()), k))
    work = np.zeros_like(off)
    work[np.argsort(-score, axis=0)[:k0], np.arange(S.shape[1])[None, :]] = True
    return work & off


def most_violated(viol: NDArray[np.bool_], marg: Array, k: int) -> NDArray[np.bool_]:
    """The (at most k per context) violated constraints of smallest margin."""
    order = np.argsort(np.where(viol, marg, np.inf), axis=0)[:k]
    add = np.zeros_like(viol)
    add[order, np.arange(viol.shape[1])[None, :]] = True
    return add & viol


def svm_dual(
    H: ArrayLike,
    S: ArrayLike,
    *,
    tol: float = 1e-10,
    max_newton: int = 500,
    max_rounds: int = 100,
    init_all: bool | None = None,
    add_per_round: int | None = None,
) -> NTPSVMResult:
    """Specialised NTP-SVM solver (projected Newton on the dual; see module docstring).

    Parameters
    ----------
    tol : KKT tolerance (projected dual gradient = margin residuals, absolute)
    init_all : start with every off-support constraint in the working set (default: when
        the first Newton step, an m x m inverse per token pattern, is cheap)
    add_per_round : at most this many violated constraints per context enter per round
    """
    t0 = time.perf_counter()
    H, S = check_svm_data(H, S)
    V, m = S.shape
    G = H.T @ H
    ev = np.linalg.eigvalsh(G)
    if ev[0] <= 1e-12 * ev[-1]:
        raise SolverError(
            "the dual NTP-SVM solver needs H of full column rank (d >= m, Lemma 1); "
            f"here rank(H) < m = {m}. Use solver='cvxpy' (or 'auto')."
        )
    ridge = 1e-14 * float(np.max(np.diag(G)))
    cols = np.arange(m)
    z = anchor_tokens(S)
    anchor = np.zeros((V, m), dtype=bool)
    anchor[z, cols] = True
    off = ~S
    inn = S & ~anchor
    offf = off.astype(float)
    diagM = 2.0 * np.diag(G)[None, :] * np.ones((V, 1))

    def to_C(alpha: Array) -> Array:
        C = -alpha
        C[z, cols] += alpha.sum(axis=0)
        return C

    def evaluate(alpha: Array) -> tuple[float, Array, Array]:
        C = to_C(alpha)
        L = C @ G
        f = 0.5 * float(np.vdot(C, L)) - float(alpha[off].sum())
        marg = L[z, cols][None, :] - L
        return f, marg, C

    if init_all is None:
        init_all = V * m**3 <= 4e9 or m * (V - 1) <= 20_000
    if add_per_round is None:
        add_per_round = V
    if init_all:
        work = off.copy()
    else:
        # Heuristic first working set: the off-support tokens whose logit is largest under
        # the centred support-indicator logits propagated through G.
        work = initial_working_set(S, lambda X: X @ G, 3)
    alpha = np.zeros((V, m))
    f, marg, C = evaluate(alpha)
    n_newton = 0
    n_rounds = 0
    sigma = 1e-4
    while True:
        n_rounds += 1
        var = inn | work
        for _ in range(max_newton):
            g = marg - offf
            pg = np.where(work, np.minimum(alpha, g), 0.0)
            kkt = max(float(np.abs(g[inn]).max(initial=0.0)), float(np.abs(pg).max(initial=0.0)))
            if kkt <= tol:
                break
            n_newton += 1
            # Bertsekas' epsilon-active set: bounded multipliers near 0 whose gradient pushes
            # them further out are fixed (scaled gradient step); the rest form the face,
            # on which the step is the exact Newton step.
            eps = min(1e-3, kkt)
            fixed = work & (alpha <= eps) & (g > 0)
            face = var & ~fixed
            t = np.where(face, -g, 0.0)
            Cd = face_solve(G, face | anchor, t, ridge)
            delta = np.where(face, -Cd, 0.0) + np.where(fixed, g / diagM, 0.0)
            gd_face = float(np.sum(np.where(face, g * delta, 0.0)))
            step = 1.0
            for _ls in range(60):
                trial = alpha - step * delta
                trial = np.where(work, np.maximum(trial, 0.0), trial)
                trial[~var] = 0.0
                f_new, marg_new, C_new = evaluate(trial)
                pred = step * gd_face + float(np.sum(np.where(fixed, g * (alpha - trial), 0.0)))
                if f - f_new >= sigma * pred - 1e-15 * max(1.0, abs(f)):
                    break
                step *= 0.5
            else:
                raise SolverError("NTP-SVM dual: line search failed (numerical trouble)")
            alpha, f, marg, C = trial, f_new, marg_new, C_new
        else:
            raise SolverError(
                f"NTP-SVM dual: no convergence in {max_newton} Newton steps "
                f"(KKT residual {kkt:.3g})"
            )
        viol = off & ~work & (marg < 1 - tol)
        if not viol.any():
            break
        if n_rounds >= max_rounds:
            raise SolverError(f"NTP-SVM dual: working set still growing after {max_rounds} rounds")
        # Add the most violated constraints, at most add_per_round per context.
        work |= most_violated(viol, marg, add_per_round)
    W = C @ H.T
    return svm_result(
        W,
        H,
        S,
        "dual",
        "optimal",
        n_newton,
        t0,
        C=C,
        extra={
            "rounds": n_rounds,
            "working_set": int(work.sum()),
            "kkt_residual": kkt,
            "dual_objective": -f,
        },
    )
