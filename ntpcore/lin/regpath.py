r"""Regularization path of the CE loss [lin, eq. (8), Theorem 1].

.. math::
    \widehat W_B = \arg\min_{\|W\|_F\le B}\mathrm{CE}(W).

Theorem 1: under compatibility and separability, :math:`\widehat W_B/\|\widehat W_B\|\to
W^{\mathrm{mm}}/\|W^{\mathrm{mm}}\|` and :math:`P_F(\widehat W_B)\to W^\star` as
:math:`B\to\infty`.

Solvers.  ``"newton"`` (default) uses Lagrange duality: the minimiser lies on the sphere
:math:`\|W\| = B` (the proof's step 1) and equals the ridge minimiser
:math:`W(\mu) = \arg\min \mathrm{CE}(W) + \tfrac\mu2\|W\|^2` for the unique :math:`\mu>0` with
:math:`\|W(\mu)\| = B`.  Each :math:`W(\mu)` is found by damped Newton (exact Hessian,
restricted to :math:`W = X U_r^\top` with :math:`U_r` an orthonormal basis of span(H), where
every minimiser lives), and :math:`\mu` by Newton's method on :math:`\log\|W(\mu)\| = \log B`
in :math:`\log\mu` using :math:`\tfrac{d}{d\mu}W(\mu) = -(\nabla^2\mathrm{CE}+\mu I)^{-1}W`.
This stays accurate far beyond the point where CE - H drops below an interior-point
solver's tolerance (on the A.2 data CE - H ~ 1e-9 at B = 80, where such a solver stops
short of the sphere).  ``"cvxpy"`` solves the exponential-cone program of eq. (8)
verbatim with Clarabel (reference; unreliable once CE - H < ~1e-8, where it raises
SolverError rather than return an inaccurate point).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.linalg as sla
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.logits import softmax
from ntpcore.core.validate import check_choice, check_cvxpy_solver, check_number, check_numbers
from ntpcore.errors import ParameterError, SolverError
from ntpcore.lin.data import check_data
from ntpcore.lin.loss import loss_and_grad
from ntpcore.lin.svm_reference import RETRIES_CONE, solve_strict

Array = NDArray[np.float64]


class _Reduced:
    """CE in the coordinates X (V, r) with W = X U^T, U an orthonormal basis of span(H)."""

    def __init__(self, H: Array, P: Array, pi: Array):
        U, s, Vt = np.linalg.svd(H, full_matrices=False)
        r = int(np.sum(s > 1e-12 * s[0]))
        self.U = U[:, :r]
        self.Y = s[:r, None] * Vt[:r]  # (r, m) = U^T H
        self.P, self.pi = P, pi
        self.V, self.r = P.shape[0], r
        V = self.V
        scale = float(np.linalg.eigvalsh((self.Y * pi) @ self.Y.T)[-1]) if r else 1.0
        self.lineality = scale * np.kron(np.full((V, V), 1.0 / V), np.eye(r))

    def loss_grad(self, X: Array) -> tuple[float, Array]:
        return loss_and_grad(X, self.Y, self.P, self.pi)

    def hessian(self, X: Array) -> Array:
        """Dense Hessian of CE in row-major vec(X), (V r, V r)."""
        V, r, Y, pi = self.V, self.r, self.Y, self.pi
        Sg = softmax(X @ Y)  # (V, m)
        Hs = np.zeros((V * r, V * r))
        for v in range(V):
            blk = (Y * (pi * Sg[v])) @ Y.T
            Hs[v * r : (v + 1) * r, v * r : (v + 1) * r] = blk
        Z = (Sg[:, None, :] * Y[None, :, :] * np.sqrt(pi)[None, None, :]).reshape(V * r, -1)
        Hs -= Z @ Z.T
        return Hs


def _ridge_newton(
    red: _Reduced, mu: float, X0: Array, tol: float = 1e-13, max_iter: int = 200
) -> tuple[Array, Array]:
    """Minimise CE(X) + mu/2 ||X||^2 by damped Newton; return X and the factorised Hessian."""
    X = X0.copy()
    shape = X.shape
    best = np.inf
    stall = 0
    for _ in range(max_iter):
        f, g = red.loss_grad(X)
        f += 0.5 * mu * float(np.vdot(X, X))
        g = g + mu * X
        # CE is invariant under X -> X + 1 x^T, so its Hessian is singular along
        # 1 (x) R^r; the gradient (and mu X, from X0 = 0) has no component there, so adding
        # curvature along it changes no step but keeps the factorisation well conditioned.
        Hm = red.hessian(X) + mu * np.eye(X.size) + red.lineality
        try:
            cf = sla.cho_factor(Hm, lower=True)
        except np.linalg.LinAlgError as exc:
            raise SolverError(
                f"ridge Newton: Hessian not positive definite at mu={mu:.3g} "
                "(CE - H below double precision?)"
            ) from exc
        step = sla.cho_solve(cf, g.ravel()).reshape(shape)
        dec = float(np.vdot(g, step))  # Newton decrement^2
        gn = float(np.linalg.norm(g))
        if dec <= tol**2:
            return X, cf
        # Stop when the gradient no longer decreases (double-precision floor).
        stall = stall + 1 if gn >= 0.5 * best else 0
        best = min(best, gn)
        if stall >= 3 and dec < 1e-20:
            return X, cf
        t = 1.0
        if dec > 1e-12:  # damped phase; below this the full step is taken (quadratic phase)
            while True:
                Xn = X - t * step
                fn = red.loss_grad(Xn)[0] + 0.5 * mu * float(np.vdot(Xn, Xn))
                if fn <= f - 0.25 * t * dec or t < 1e-10:
                    break
                t *= 0.5
        X = X - t * step
    raise SolverError(f"ridge Newton did not converge (mu={mu:.3g})")


def ridge_solution(H: ArrayLike, P: ArrayLike, pi: ArrayLike | None, mu: float) -> Array:
    r""":math:`\arg\min_W \mathrm{CE}(W) + \tfrac\mu2\|W\|_F^2` (V, d), by damped Newton."""
    H, P, pi = check_data(H, P, pi)
    mu = check_number(mu, "mu", lo=0, lo_open=True)
    red = _Reduced(H, P, pi)
    X, _ = _ridge_newton(red, mu, np.zeros((red.V, red.r)))
    return X @ red.U.T


def regularization_path(
    H: ArrayLike,
    P: ArrayLike,
    pi: ArrayLike | None,
    B_list: Sequence[float],
    *,
    rtol: float = 1e-8,
    on_fail: str = "raise",
) -> dict[str, Array]:
    r"""Solutions :math:`\widehat W_B` of eq. (8) for increasing radii ``B_list``.

    Returns ``{"B", "W" (n, V, d), "mu" (ridge multipliers), "norm"}``.  When
    :math:`\|\widehat W_B\| = B` cannot be met to ``rtol`` (B so large that CE - H is below
    double precision) it raises SolverError, or with ``on_fail="stop"`` returns the radii
    solved so far (``"n_failed"`` counts the others).
    """
    H, P, pi = check_data(H, P, pi)
    B_arr = check_numbers(B_list, "B_list", lo=0, lo_open=True)
    if np.any(np.diff(B_arr) < 0):
        raise ParameterError(f"B_list must be non-decreasing, got {B_arr.tolist()}")
    rtol = check_number(rtol, "rtol", lo=0, hi=1, lo_open=True, hi_open=True)
    check_choice(on_fail, "on_fail", ("raise", "stop"))
    red = _Reduced(H, P, pi)
    X = np.zeros((red.V, red.r))
    _, g0 = red.loss_grad(X)
    Ws, mus, norms = [], [], []
    mu = None
    for B in B_arr:
        try:
            X, mu, nx = _solve_radius(red, B, X, mu, g0, rtol)
        except SolverError:
            if on_fail == "stop":
                break
            raise
        Ws.append(X @ red.U.T)
        mus.append(mu)
        norms.append(nx)
    n = len(Ws)
    W_out = np.stack(Ws) if Ws else np.zeros((0, P.shape[0], H.shape[0]))
    return {
        "B": B_arr[:n],
        "W": W_out,
        "mu": np.asarray(mus),
        "norm": np.asarray(norms),
        "n_failed": int(B_arr.size - n),
    }


def _solve_radius(
    red: _Reduced, B: float, X: Array, mu: float | None, g0: Array, rtol: float
) -> tuple[Array, float, float]:
    """Find mu with ||X(mu)|| = B by safeguarded Newton in log mu (warm-started)."""
    if mu is None:
        mu = float(np.linalg.norm(g0)) / B
    lo, hi = 0.0, np.inf  # bracket on log mu: norm(lo) > B > norm(hi)
    for _ in range(100):
        X, cf = _ridge_newton(red, mu, X)
        nx = float(np.linalg.norm(X))
        if abs(nx - B) <= rtol * B:
            break
        if nx > B:
            lo = max(lo, mu) if lo else mu
        else:
            hi = min(hi, mu)
        # d log||X|| / d log mu = -mu X^T (Hess + mu I)^{-1} X / ||X||^2
        w = sla.cho_solve(cf, X.ravel())
        slope = -mu * float(X.ravel() @ w) / nx**2
        new = mu * np.exp((np.log(B) - np.log(nx)) / slope) if slope < 0 else mu * 0.5
        if not (lo < new < hi) or not np.isfinite(new):
            new = (
                np.sqrt(lo * hi)
                if (lo > 0 and np.isfinite(hi))
                else (mu * 10 if nx > B else mu / 10)
            )
        mu = float(new)
    else:
        raise SolverError(
            f"regularization path: could not reach ||W|| = {B} "
            f"(got {nx:.6g}); CE - H may be below double precision"
        )
    return X, mu, nx


def regularization_path_cvxpy(
    H: ArrayLike,
    P: ArrayLike,
    pi: ArrayLike | None,
    B_list: Sequence[float],
    *,
    solver: str = "CLARABEL",
    **solve_kw,
) -> dict[str, Array]:
    """Reference: eq. (8) as an exponential-cone program solved by cvxpy.

    Each radius must end with status ``optimal``; ``optimal_inaccurate`` (common once
    CE - H < ~1e-8) is retried with more iterations and with SCS at tight tolerances
    (:func:`ntpcore.lin.svm_reference.solve_strict`), then raises SolverError naming the
    statuses.  Returns ``{"B", "W", "norm", "status", "backend"}``.
    """
    import cvxpy as cp

    H, P, pi = check_data(H, P, pi)
    B_list = check_numbers(B_list, "B_list", lo=0)
    solver = check_cvxpy_solver(solver)
    V, d = P.shape[0], H.shape[0]
    W = cp.Variable((V, d))
    Bp = cp.Parameter(nonneg=True)
    L = W @ H
    obj = pi @ cp.log_sum_exp(L, axis=0) - cp.sum(cp.multiply(P * pi[None, :], L))
    prob = cp.Problem(cp.Minimize(obj), [cp.norm(W, "fro") <= Bp])
    Ws, status, backend = [], [], []
    for B in B_list:
        Bp.value = float(B)
        what = f"the regularization path (eq. 8) at B={B}"
        name, _ = solve_strict(prob, solver, solve_kw, RETRIES_CONE, what)
        if prob.status != cp.OPTIMAL or W.value is None:
            raise SolverError(f"cvxpy/{name} failed on {what}: status {prob.status!r}")
        Ws.append(np.asarray(W.value))
        status.append(prob.status)
        backend.append(name)
    Wst = np.stack(Ws)
    return {
        "B": np.asarray(B_list, dtype=float),
        "W": Wst,
        "norm": np.linalg.norm(Wst, axis=(1, 2)),
        "status": np.asarray(status),
        "backend": np.asarray(backend),
    }
