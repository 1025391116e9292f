r"""Independent references for the checks of the linear paper (key ``lin``).

Everything here is computed again, from the raw data ``(H, P, pi)`` and the run's settings,
by code that shares nothing with the package's solvers and trainers, so that a fault in
those cannot pass both the figure and its check:

* :class:`PairwiseF` -- the data subspace F of eq. (5) spanned by *every* in-support pair
  (not the anchor generators of :mod:`ntpcore.lin.subspace`), its projection (dense SVD,
  or LSQR when the generator matrix is too large to form) and :math:`W^\star` as the
  minimum-norm solution of the log-odds equations (4) [lin, Def. 1];
* :func:`max_margin` -- the NTP-SVM of Def. 3 solved by cvxpy in a sparse vectorised form
  anchored at each context's *most probable* token (the package anchors at the smallest id);
* :func:`kkt_certificate` -- a solution of Def. 3 certified from its dual coefficients:
  margins from the raw supports, stationarity, dual feasibility and the duality gap;
* :func:`descend` -- GD, normalized GD and Adam re-implemented in torch (float64,
  autograd for the gradient, ``torch.optim`` for GD and Adam), returning the iterates at
  the requested steps, and :func:`run_metrics`, the quantities of Figs. 1, 4, 5 at them;
* :func:`excess_loss` / :func:`loss_gradient` -- CE - H and the gradient of CE (torch);
* :func:`lecun_init` -- the initialisation law of App. A.2, re-drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from scipy.sparse.linalg import LinearOperator, lsqr

Array = NDArray[np.float64]

#: Largest generator matrix (pairs x V d entries) formed densely; beyond, LSQR.
DENSE_MAX = 20_000_000


def in_support(P: Array) -> list[NDArray[np.int64]]:
    """The in-support words of every context, read from the columns of ``P``."""
    return [np.flatnonzero(np.asarray(P)[:, j] > 0.0) for j in range(np.shape(P)[1])]


def lecun_init(V: int, d: int, init: str, init_seed: int) -> Array:
    """:math:`W_0`: zero, or entries N(0, 1/d) drawn from ``default_rng(init_seed)``."""
    if init == "zero":
        return np.zeros((V, d))
    return np.random.default_rng(init_seed).normal(0.0, 1.0 / np.sqrt(d), size=(V, d))


# ----------------------------------------------------------------------------- F and W*
@dataclass(frozen=True, eq=False)
class PairwiseF:
    r"""F = span{(e_a - e_b) h_j^T : a < b in S_j} and the log-odds of every such pair.

    ``basis`` is an orthonormal basis (r, V d) of F when the generators fit in memory
    (``None`` otherwise: projections then go through LSQR on the generator operator).
    """

    H: Array
    V: int
    ctx: NDArray[np.int64]
    a: NDArray[np.int64]
    b: NDArray[np.int64]
    log_odds: Array
    basis: Array | None

    @classmethod
    def build(cls, H: Array, P: Array) -> PairwiseF:
        H, P = np.asarray(H, float), np.asarray(P, float)
        V, d = P.shape[0], H.shape[0]
        ctx, a, b = [], [], []
        for j, sup in enumerate(in_support(P)):
            for i, za in enumerate(sup):
                for zb in sup[i + 1 :]:
                    ctx.append(j)
                    a.append(za)
                    b.append(zb)
        ctx, a, b = (np.asarray(x, dtype=np.int64) for x in (ctx, a, b))
        log_odds = np.log(P[a, ctx]) - np.log(P[b, ctx])
        basis = None
        if ctx.size and ctx.size * V * d <= DENSE_MAX:
            G = np.zeros((ctx.size, V, d))
            k = np.arange(ctx.size)
            G[k, a, :] += H[:, ctx].T
            G[k, b, :] -= H[:, ctx].T
            U, s, Vt = np.linalg.svd(G.reshape(ctx.size, V * d), full_matrices=False)
            basis = Vt[s > 1e-10 * s[0]]
        elif not ctx.size:
            basis = np.zeros((0, V * d))
        return cls(H, V, ctx, a, b, log_odds, basis)

    @property
    def dim(self) -> int:
        """dim F (dense backend only)."""
        if self.basis is None:
            raise ValueError("dim F is computed only with the dense basis")
        return int(self.basis.shape[0])

    def _operator(self) -> LinearOperator:
        """The map W -> (<A_k, W>)_k, from R^{V d} to R^{pairs}."""
        V, d = self.V, self.H.shape[0]
        H, ctx, a, b = self.H, self.ctx, self.a, self.b

        def mv(w):
            L = w.reshape(V, d) @ H
            return L[a, ctx] - L[b, ctx]

        def rmv(y):
            C = np.zeros((V, H.shape[1]))
            np.add.at(C, (a, ctx), y)
            np.add.at(C, (b, ctx), -y)
            return (C @ H.T).ravel()

        return LinearOperator((ctx.size, V * d), matvec=mv, rmatvec=rmv, dtype=float)

    def project(self, W: Array) -> Array:
        """:math:`P_F(W)`."""
        W = np.asarray(W, float)
        if self.basis is not None:
            return (self.basis.T @ (self.basis @ W.ravel())).reshape(W.shape)
        op = self._operator()
        # P_F W = A^T y with y = argmin ||A^T y - W||: LSQR on the adjoint operator
        adj = LinearOperator(
            (op.shape[1], op.shape[0]), matvec=op.rmatvec, rmatvec=op.matvec, dtype=float
        )
        y = lsqr(adj, W.ravel(), atol=1e-15, btol=1e-15, iter_lim=20_000)[0]
        return op.rmatvec(y).reshape(W.shape)

    def w_star(self) -> Array:
        r""":math:`W^\star`: the minimum-norm solution of (4) over every in-support pair."""
        V, d = self.V, self.H.shape[0]
        if self.basis is not None:
            if not self.basis.shape[0]:
                return np.zeros((V, d))
            # W* = B^T x with (A B^T) x = b: A B^T is (pairs, r) of full column rank
            AB = self._operator().matmat(self.basis.T)
            x = np.linalg.lstsq(AB, self.log_odds, rcond=None)[0]
            return (self.basis.T @ x).reshape(V, d)
        w = lsqr(self._operator(), self.log_odds, atol=1e-15, btol=1e-15, iter_lim=20_000)[0]
        return w.reshape(V, d)


# ----------------------------------------------------------------------------- W^mm
def _margin_rows(H: Array, P: Array) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Sparse rows of (6a) and (6b) on vec(W) (row-major), anchored at each context's most
    probable token: ``A_eq vec(W) = 0`` and ``A_in vec(W) >= 1``."""
    V, d = P.shape[0], H.shape[0]
    eq, ineq = [], []
    for j in range(P.shape[1]):
        col = P[:, j]
        top = int(np.argmax(col))
        for v in range(V):
            if v != top:
                (eq if col[v] > 0 else ineq).append((top, v, j))

    def rows(triples):
        if not triples:
            return sp.csr_matrix((0, V * d))
        t = np.asarray(triples)
        n = len(t)
        r = np.repeat(np.arange(n), 2 * d)
        cols = np.concatenate(
            [t[:, :1] * d + np.arange(d)[None, :], t[:, 1:2] * d + np.arange(d)[None, :]], axis=1
        ).ravel()
        hv = H[:, t[:, 2]].T  # (n, d)
        vals = np.concatenate([hv, -hv], axis=1).ravel()
        return sp.csr_matrix((vals, (r, cols)), shape=(n, V * d))

    return rows(eq), rows(ineq)


def max_margin(H: Array, P: Array) -> Array:
    r""":math:`W^{\mathrm{mm}}` of Def. 3 solved by cvxpy (Clarabel, tight tolerances)."""
    import cvxpy as cp

    H, P = np.asarray(H, float), np.asarray(P, float)
    V, d = P.shape[0], H.shape[0]
    A_eq, A_in = _margin_rows(H, P)
    w = cp.Variable(V * d)
    cons = [A_in @ w >= 1]
    if A_eq.shape[0]:
        cons.append(A_eq @ w == 0)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w)), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    if prob.status != cp.OPTIMAL:
        raise RuntimeError(f"reference NTP-SVM: cvxpy status {prob.status}")
    return np.asarray(w.value).reshape(V, d)


def separable(H: Array, S: NDArray[np.bool_]) -> bool:
    """Def. 2 decided by solving the NTP-SVM with cvxpy (Clarabel), anchored at the largest
    in-support word: feasible iff the data are NTP-separable."""
    import cvxpy as cp

    H, S = np.asarray(H, float), np.asarray(S, bool)
    V, d = S.shape[0], H.shape[0]
    weights = np.where(S, np.arange(1, V + 1)[:, None], 0.0)  # the largest word is the anchor
    A_eq, A_in = _margin_rows(H, weights / weights.sum(axis=0))
    w = cp.Variable(V * d)
    cons = [A_in @ w >= 1]
    if A_eq.shape[0]:
        cons.append(A_eq @ w == 0)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w)), cons)
    prob.solve(solver="CLARABEL")
    status = str(prob.status).replace("_inaccurate", "")
    if status not in (cp.OPTIMAL, cp.INFEASIBLE):
        raise RuntimeError(f"reference separability: cvxpy status {prob.status}")
    return status == cp.OPTIMAL


def margins(W: Array, H: Array, P: Array) -> dict[str, float]:
    """Smallest off-support margin and largest in-support spread, from the raw supports."""
    L = np.asarray(W, float) @ np.asarray(H, float)
    low, spread = np.inf, 0.0
    for j, sup in enumerate(in_support(P)):
        on = L[sup, j]
        off = np.delete(L[:, j], sup)
        spread = max(spread, float(on.max() - on.min()))
        if off.size:
            low = min(low, float(on.min() - off.max()))
    return {"min_margin": low, "max_spread": spread}


def kkt_certificate(W: Array, C: Array, H: Array, P: Array) -> dict[str, float]:
    r"""Certify :math:`W` as the solution of Def. 3 with dual coefficients ``C`` (V, m).

    For the program :math:`\min\frac12\|W\|^2` under (6a)-(6b), a feasible W is optimal iff
    :math:`W = C\bar H^\top` with zero-sum columns :math:`c_j`, :math:`\lambda_{v,j} =
    -C_{v,j}\ge 0` off the support and :math:`\sum\lambda_{v,j}(\text{margin}_{v,j} - 1) = 0`
    (equivalently, zero duality gap :math:`\|W\|^2 = \sum\lambda`).  Returns the feasibility
    of W (``min_margin``, ``max_spread``) and the relative residuals of the three dual
    conditions, the largest as ``dual_residual``.
    """
    W, C, H, P = (np.asarray(x, float) for x in (W, C, H, P))
    n2 = float(np.sum(W * W))
    L = W @ H
    off = P <= 0.0
    lam = np.where(off, -C, 0.0)
    level = np.array([L[sup, j].mean() for j, sup in enumerate(in_support(P))])
    marg = level[None, :] - L  # margins against every off-support word
    stat = float(np.linalg.norm(W - C @ H.T)) / np.sqrt(n2)
    colsum = float(np.abs(C.sum(axis=0)).max()) / float(np.abs(C).max())
    dual_inf = float(max(0.0, -lam.min())) / float(lam.max())
    gap = abs(n2 - float(np.sum(lam[off] * marg[off]))) / n2
    slack = float(np.sum(lam[off] * (marg[off] - 1.0))) / n2
    return {
        **margins(W, H, P),
        "stationarity": stat,
        "column_sums": colsum,
        "dual_infeasibility": dual_inf,
        "duality_gap": max(gap, abs(slack)),
        "dual_residual": max(stat, colsum, dual_inf, gap, abs(slack)),
    }


# ----------------------------------------------------------------------------- training
def _torch():
    import torch

    return torch


def _ce(torch, W, H, P, pi):
    """CE of eq. (2) in torch: -sum_j pi_j sum_z p_jz log softmax(W h_j)_z."""
    logq = torch.log_softmax(W @ H, dim=0)
    return -(pi * (P * logq).sum(dim=0)).sum()


def descend(
    H: Array,
    P: Array,
    pi: Array,
    W0: Array,
    *,
    optimizer: str,
    lr: float,
    n_steps: int,
    at: Sequence[int],
    betas: tuple[float, float] = (0.9, 0.99),
    eps: float = 1e-8,
) -> dict[int, Array]:
    """Run ``n_steps`` of GD / NGD / Adam on CE from W0 in torch (float64); return
    ``{k: W_k}`` for the steps in ``at`` (W_k is the iterate after k updates)."""
    torch = _torch()
    Ht, Pt, pit = (torch.tensor(np.asarray(x, float), dtype=torch.float64) for x in (H, P, pi))
    W = torch.tensor(np.asarray(W0, float), dtype=torch.float64, requires_grad=True)
    if optimizer == "gd":
        opt = torch.optim.SGD([W], lr=lr)
    elif optimizer == "adam":
        opt = torch.optim.Adam([W], lr=lr, betas=betas, eps=eps, foreach=False)
    elif optimizer != "ngd":
        raise ValueError(f"optimizer {optimizer!r}")
    want = {int(k) for k in at}
    out: dict[int, Array] = {}
    for k in range(n_steps + 1):
        if k in want:
            out[k] = W.detach().numpy().copy()
        if k == n_steps:
            break
        if W.grad is not None:
            W.grad = None
        _ce(torch, W, Ht, Pt, pit).backward()
        if optimizer == "ngd":
            with torch.no_grad():
                g = W.grad
                gn = torch.linalg.norm(g)
                if gn > 0:
                    W -= lr * g / gn
        else:
            opt.step()
    return out


def excess_loss(W: Array, H: Array, P: Array, pi: Array) -> float:
    r""":math:`\mathrm{CE}(W) - \mathcal H = \sum_j\hat\pi_j\mathrm{KL}(\hat p_j\,\|\,
    \mathbb S(W\bar h_j))`, summed term by term (torch, float64)."""
    torch = _torch()
    Wt, Ht, Pt, pit = (
        torch.tensor(np.asarray(x, float), dtype=torch.float64) for x in (W, H, P, pi)
    )
    logq = torch.log_softmax(Wt @ Ht, dim=0)
    on = Pt > 0
    logp = torch.where(on, torch.log(torch.where(on, Pt, torch.ones_like(Pt))), 0.0)
    kl = torch.where(on, Pt * (logp - logq), 0.0).sum(dim=0)
    return float((pit * kl).sum())


def loss_gradient(W: Array, H: Array, P: Array, pi: Array) -> Array:
    """The gradient of CE (eq. 2) at W, by torch autograd."""
    torch = _torch()
    Ht, Pt, pit = (torch.tensor(np.asarray(x, float), dtype=torch.float64) for x in (H, P, pi))
    Wt = torch.tensor(np.asarray(W, float), dtype=torch.float64, requires_grad=True)
    _ce(torch, Wt, Ht, Pt, pit).backward()
    return Wt.grad.numpy().copy()


def cosine(A: Array, B: Array) -> float:
    """Frobenius cosine (the paper's "correlation")."""
    A, B = np.asarray(A, float).ravel(), np.asarray(B, float).ravel()
    return float(A @ B / np.sqrt((A @ A) * (B @ B)))


def run_metrics(
    W: Array, H: Array, P: Array, pi: Array, F: PairwiseF, W_star: Array, W_mm: Array | None
) -> dict[str, float]:
    """The quantities of Figs. 1, 4, 5 at an iterate, from the references."""
    WF = F.project(W)
    ns = float(np.linalg.norm(W_star))
    dist = float(np.linalg.norm(WF - W_star))
    out = {
        "gap": excess_loss(W, H, P, pi),
        "norm": float(np.linalg.norm(W)),
        "rel_dist_F": dist / ns if ns > 0 else dist,
        "norm_perp": float(np.linalg.norm(W - WF)),
    }
    if W_mm is not None:
        out["cos"] = cosine(W, W_mm)
        out["cos_corr"] = cosine(W - W_star, W_mm)
    return out
