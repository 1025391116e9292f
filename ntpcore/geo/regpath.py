r"""Convex regularization path of paper ``geo`` [geo, Sec. 2] (book: ``geo-thm-path``).

For :math:`\lambda>0` let :math:`L_\lambda=\arg\min_L\ \mathrm{CE}(L)+\lambda\|L\|_*`.  With
:math:`d\ge\min(V,m)` this is the NTP-UFM :math:`\min_{W,H}\mathrm{CE}(WH)+\tfrac\lambda2
(\|W\|_F^2+\|H\|_F^2)` (variational form of the nuclear norm, book: ``geo-lem-nuclear``),
which is what we solve:

* smooth objective in :math:`x=(W,H)`, scaled by :math:`1/\lambda` so that its size stays
  :math:`O(\|L\|_*)`: :math:`f=(\mathrm{CE}(WH)-\mathcal H)/\lambda+\tfrac12(\|W\|^2+\|H\|^2)`;
* :math:`\mathrm{CE}-\mathcal H=\sum_j\pi_j\mathrm{KL}(p_j\|q_j)` is evaluated without
  cancellation: with :math:`s_j` the softmax restricted to :math:`\mathcal S_j` and
  :math:`\varepsilon_j=\sum_{v\notin\mathcal S_j}e^{\ell_v-\mathrm{LSE}_{\mathcal S_j}(\ell_j)}`
  (tiny near the optimum), :math:`\mathrm{KL}_j=\mathrm{KL}(p_j\|s_j)+\log(1+\varepsilon_j)`;
* L-BFGS from the previous (larger) :math:`\lambda`'s solution, then a trust-region Newton
  polish with exact Hessian-vector products; where these, which judge a step by the
  objective, stop short of the certificate below (the objective's rounding floor at small
  :math:`\lambda`), Newton steps judged by the gradient norm;
* with :math:`d\ge\min(V,m)+1` every local minimum of the factorised problem is global
  (rank-deficient local minima are global for convex loss + nuclear norm), and we
  *check* global optimality in the convex problem: :math:`G=\nabla\mathrm{CE}(L)` must
  satisfy :math:`\|G\|_{op}\le\lambda` and :math:`\langle-G,L\rangle=\lambda\|L\|_*`
  (i.e. :math:`-G/\lambda\in\partial\|L\|_*`).  Both residuals are returned.

The generic reference is cvxpy; :func:`regularization_path_cvxpy` solves the convex problem directly
(exponential + semidefinite cones; small instances only).
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize, minimize_scalar

from ntpcore.core.logits import ce_excess_grad, context_weights
from ntpcore.core.validate import (
    as_float_array,
    as_prob_matrix,
    check_cvxpy_solver,
    check_number,
    check_numbers,
    check_seed,
)
from ntpcore.errors import DataError, SolverError
from ntpcore.geo.logits import nuclear_norm


class _UFM:
    """Objective, gradient and Hessian-vector product of the scaled factorised problem."""

    def __init__(self, P: NDArray[np.float64], pi: NDArray[np.float64], d: int) -> None:
        self.P, self.pi, self.d = P, pi, d
        self.V, self.m = P.shape
        self.lam = 1.0

    def split(self, x: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        k = self.V * self.d
        return x[:k].reshape(self.V, self.d), x[k:].reshape(self.d, self.m)

    def fg(self, x: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        W, H = self.split(x)
        exc, G, _ = ce_excess_grad(W @ H, self.P, self.pi)
        G = G / self.lam
        f = exc / self.lam + 0.5 * (float((W * W).sum()) + float((H * H).sum()))
        return f, np.concatenate([(G @ H.T + W).ravel(), (W.T @ G + H).ravel()])

    def hessp(self, x: NDArray[np.float64], v: NDArray[np.float64]) -> NDArray[np.float64]:
        W, H = self.split(x)
        dW, dH = self.split(v)
        _, G, Q = ce_excess_grad(W @ H, self.P, self.pi)
        G = G / self.lam
        dL = dW @ H + W @ dH
        # Hessian of CE, column j: pi_j (diag(q_j) - q_j q_j^T)
        D = self.pi[None, :] * (Q * dL - Q * (Q * dL).sum(axis=0, keepdims=True)) / self.lam
        return np.concatenate(
            [(D @ H.T + G @ dH.T + dW).ravel(), (W.T @ D + dW.T @ G + dH).ravel()]
        )


def _objective(
    L: NDArray[np.float64], P: NDArray[np.float64], pi: NDArray[np.float64], lam: float
) -> float:
    """Scaled convex objective (CE - H)/lambda + ||L||_*."""
    return ce_excess_grad(L, P, pi)[0] / lam + nuclear_norm(L)


def _line(
    t: float,
    L: NDArray[np.float64],
    D: NDArray[np.float64],
    P: NDArray[np.float64],
    pi: NDArray[np.float64],
    lam: float,
) -> float:
    return _objective(L + t * D, P, pi, lam)


def _balanced_x(L: NDArray[np.float64], d: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    U, s, Vt = np.linalg.svd(L, full_matrices=False)
    k = min(d, s.size)
    W = np.zeros((L.shape[0], d))
    H = np.zeros((d, L.shape[1]))
    W[:, :k] = U[:, :k] * np.sqrt(s[:k])
    H[:k] = np.sqrt(s[:k])[:, None] * Vt[:k]
    return W, H


def _solve_one(
    prob: _UFM,
    x: NDArray[np.float64],
    max_iter: int,
    polish: bool,
    tol: float = 1e-8,
    rounds: int = 8,
) -> NDArray[np.float64]:
    r"""L-BFGS on the factorised problem with saddle escapes.

    L-BFGS can stall near a saddle where a new singular direction of :math:`L_\lambda`
    should open (rank grows as :math:`\lambda` decreases).  The convex problem shows the way
    out: if :math:`\|G\|_{op}>\lambda` for :math:`G=\nabla\mathrm{CE}(L)`, the top singular
    pair :math:`(u,v)` of :math:`-G` is a descent direction :math:`L+tuv^\top`.  We re-balance
    the factors (:math:`W=U\Sigma^{1/2}`, :math:`H=\Sigma^{1/2}V^\top`), put the step ``t``
    (golden-section search on the convex objective) in the smallest singular slot, and
    restart L-BFGS.
    """
    P, pi, lam, d = prob.P, prob.pi, prob.lam, prob.d
    for _ in range(rounds):
        res = minimize(
            prob.fg,
            x,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": max_iter, "maxcor": 30, "ftol": 1e-16, "gtol": 1e-8},
        )
        x = res.x
        W, H = prob.split(x)
        L = W @ H
        G = ce_excess_grad(L, P, pi)[1]
        U, s, Vt = np.linalg.svd(-G)
        if s[0] <= lam * (1.0 + tol):
            break
        u, v = U[:, 0], Vt[0]
        phi = functools.partial(_line, L=L, D=np.outer(u, v), P=P, pi=pi, lam=lam)
        t_best = minimize_scalar(
            phi, bounds=(0.0, 1.0 + np.abs(L).max()), method="bounded", options={"xatol": 1e-10}
        ).x
        W, H = _balanced_x(L, d)
        # the last slot of a balanced factorisation with d > rank(L) is free
        W[:, -1] += np.sqrt(t_best) * u
        H[-1] += np.sqrt(t_best) * v
        x = np.concatenate([W.ravel(), H.ravel()])
    if polish:
        f0 = prob.fg(x)[0]
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            res2 = minimize(
                prob.fg,
                x,
                jac=True,
                hessp=prob.hessp,
                method="trust-krylov",
                options={"maxiter": 100, "gtol": 1e-10},
            )
        if np.isfinite(res2.fun) and res2.fun <= f0:
            x = res2.x
    return x


def _newton_on_gradient(prob: _UFM, x: NDArray[np.float64], steps: int = 30) -> NDArray[np.float64]:
    r"""Newton steps on the factorised problem that accept a step when the gradient norm
    falls, never asking the objective whether it fell.

    At small :math:`\lambda` the scaled objective is :math:`O(\|L\|_*)` while the steps that
    are left change it by less than its rounding, so L-BFGS and the trust-region polish
    (which both judge a step by the objective) stop with a gradient that is still too large
    for the certificate, at a point that depends on the CPU's rounding.  The gradient has
    no such floor near the optimum.  Each step solves :math:`\nabla^2 f\,p=-\nabla f` by
    MINRES with exact Hessian-vector products (the Hessian is singular along the
    rotations :math:`(W,H)\mapsto(WR,R^\top H)` of a factorisation, and MINRES handles a
    singular symmetric system) and halves the step until the gradient norm falls; it stops
    when no halving does or after ``steps`` steps.
    """
    from scipy.sparse.linalg import LinearOperator, minres

    g = prob.fg(x)[1]
    gnorm = float(np.linalg.norm(g))
    for _ in range(steps):
        H = LinearOperator((x.size, x.size), matvec=functools.partial(prob.hessp, x))
        p = minres(H, -g, rtol=1e-12, maxiter=10 * x.size)[0]
        t = 1.0
        while t >= 2.0**-20:
            g_new = prob.fg(x + t * p)[1]
            if float(np.linalg.norm(g_new)) < gnorm:
                break
            t /= 2
        else:
            break
        x, g, gnorm = x + t * p, g_new, float(np.linalg.norm(g_new))
    return x


def _residuals(
    L: NDArray[np.float64], P: NDArray[np.float64], pi: NDArray[np.float64], lam: float
) -> tuple[float, float, float, float]:
    """``(CE - H, ||L||_*, opt, align)`` at ``L``: the excess, the nuclear norm and the two
    optimality residuals of the convex problem (0 at a minimiser with ``L != 0``)."""
    exc, G, _ = ce_excess_grad(L, P, pi)
    nuc = nuclear_norm(L)
    if not np.isfinite(nuc):
        raise SolverError(f"regularization path diverged at lambda={lam:g}")
    opt = float(np.linalg.norm(G, 2)) / lam - 1.0
    align = float((-G * L).sum()) / (lam * nuc) - 1.0 if nuc > 0 else 0.0
    return exc, nuc, opt, align


def regularization_path(
    P: ArrayLike,
    pi: ArrayLike | None,
    lambdas: ArrayLike,
    *,
    seed: int = 0,
    d: int | None = None,
    max_iter: int = 5000,
    polish: bool = True,
    certify_tol: float = 1e-5,
) -> dict[str, NDArray[np.float64]]:
    r"""Minimisers :math:`L_\lambda` of :math:`\mathrm{CE}(L)+\lambda\|L\|_*` along a path.

    Parameters
    ----------
    P : (V, m) soft labels; pi : (m,) context probabilities (None = uniform).
    lambdas : decreasing positive values (solved in that order, warm-started).
    seed : seed of the small random initialisation.
    d : factor width (default ``min(V, m) + 1``, which makes the rank constraint inactive).
    certify_tol : every point must satisfy the optimality conditions of the convex problem,
        :math:`\|\nabla\mathrm{CE}(L)\|_{op} = \lambda` and
        :math:`\langle -\nabla\mathrm{CE}(L), L\rangle = \lambda\|L\|_*`, to this relative
        accuracy (or :math:`\|\nabla\mathrm{CE}(0)\|_{op}\le\lambda` at :math:`L = 0`).

    Returns
    -------
    dict with ``lambdas`` (k,), ``L`` (k, V, m), ``W`` (k, V, d), ``H`` (k, d, m),
    ``excess`` (CE - H), ``nuclear`` (||L||_*), ``opt_residual``
    (:math:`\|\nabla\mathrm{CE}\|_{op}/\lambda-1`, <= ~1e-6 at an optimum) and
    ``align_residual`` (:math:`\langle-\nabla\mathrm{CE},L\rangle/(\lambda\|L\|_*)-1`).

    Raises
    ------
    DataError
        On invalid ``P``/``pi``/``lambdas``.
    SolverError
        When a point of the path is not a certified minimiser (the residuals are named).
    """
    P = as_prob_matrix(P)
    pi = context_weights(pi, P.shape[1])
    lams = as_float_array(lambdas, "lambdas", ndim=1)
    if lams.size == 0 or np.any(lams <= 0) or np.any(np.diff(lams) >= 0):
        raise DataError("lambdas must be positive and strictly decreasing")
    V, m = P.shape
    d = min(V, m) + 1 if d is None else check_number(d, "d", lo=1, integer=True)
    seed = check_seed(seed)
    max_iter = check_number(max_iter, "max_iter", lo=1, integer=True)
    certify_tol = check_number(certify_tol, "certify_tol", lo=0, hi=1, lo_open=True)
    prob = _UFM(P, pi, d)
    rng = np.random.default_rng(seed)
    x = 0.1 * rng.standard_normal(V * d + d * m)
    out: dict[str, list[NDArray[np.float64] | float]] = {
        k: [] for k in ("L", "W", "H", "excess", "nuclear", "opt_residual", "align_residual")
    }
    # L = 0 is optimal iff ||grad CE(0)||_op <= lambda (then the factorised problem sits at a
    # saddle, so we record the exact zero and keep the random start for smaller lambdas)
    g0 = float(np.linalg.norm(ce_excess_grad(np.zeros((V, m)), P, pi)[1], 2))
    for lam in lams:
        prob.lam = float(lam)
        if g0 <= lam:
            W, H = np.zeros((V, d)), np.zeros((d, m))
        else:
            x = _solve_one(prob, x, max_iter, polish)
            W, H = prob.split(x)
        L = W @ H
        exc, nuc, opt, align = _residuals(L, P, pi, lam)
        if polish and nuc > 0 and max(abs(opt), abs(align)) > certify_tol:
            # the objective-driven solvers stopped at their rounding floor (see
            # _newton_on_gradient); points they certify are left exactly as they are
            x = _newton_on_gradient(prob, x)
            W, H = prob.split(x)
            L = W @ H
            exc, nuc, opt, align = _residuals(L, P, pi, lam)
        if nuc > 0 and max(abs(opt), abs(align)) > certify_tol:
            raise SolverError(
                f"regularization path: no certified minimiser at lambda={lam:g} "
                f"(||grad CE||_op/lambda - 1 = {opt:.1e}, alignment residual {align:.1e}, "
                f"tolerance {certify_tol:g}); raise max_iter or use regularization_path_cvxpy"
            )
        out["L"].append(L)
        out["W"].append(W.copy())
        out["H"].append(H.copy())
        out["excess"].append(exc)
        out["nuclear"].append(nuc)
        out["opt_residual"].append(opt)
        out["align_residual"].append(align)
    result = {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}
    result["lambdas"] = lams
    return result


def regularization_path_cvxpy(
    P: ArrayLike, pi: ArrayLike | None, lambdas: ArrayLike, *, solver: str = "CLARABEL"
) -> dict[str, NDArray[np.float64]]:
    r"""Reference: :math:`L_\lambda=\arg\min_L\mathrm{CE}(L)+\lambda\|L\|_*` with cvxpy at
    each of ``lambdas`` (small sizes); returns ``{"lambdas", "L"}`` (``L``: (k, V, m)), the
    keys of :func:`regularization_path` it checks."""
    import cvxpy as cp

    P = as_prob_matrix(P)
    pi = context_weights(pi, P.shape[1])
    lams = check_numbers(np.atleast_1d(np.asarray(lambdas)), "lambdas", lo=0)
    solver = check_cvxpy_solver(solver)
    V, m = P.shape
    L = cp.Variable((V, m))
    lam = cp.Parameter(nonneg=True)
    ce = sum(pi[j] * (cp.log_sum_exp(L[:, j]) - P[:, j] @ L[:, j]) for j in range(m))
    prob = cp.Problem(cp.Minimize(ce + lam * cp.normNuc(L)))
    out = []
    for value in lams:
        lam.value = float(value)
        try:
            prob.solve(solver=solver)
        except cp.error.SolverError as exc:
            raise SolverError(f"cvxpy/{solver} failed on the regularized CE: {exc}") from exc
        if prob.status not in ("optimal", "optimal_inaccurate"):
            raise SolverError(f"cvxpy/{solver} returned status {prob.status!r}")
        out.append(np.asarray(L.value, dtype=np.float64))
    return {"lambdas": lams, "L": np.stack(out)}
