r"""(Normalized) gradient descent for one self-attention layer, batched over independent
problems (trials): the hot path of the ``att`` experiments.

GD:  :math:`W \leftarrow W - \eta \nabla L(W)`; NGD: :math:`W \leftarrow W - \eta \nabla L(W) /
(\|\nabla L(W)\|_F + \varepsilon)` (the paper's experiments), with the closed-form gradients
of :mod:`ntpcore.att.dynamics`.  :func:`descend` is the fast loop (precomputed products, one
batch, chunked metrics), its steps taken by the compiled extension
(:mod:`ntpcore.att.compiled`) where it was built, else by the numpy kernel below (the same
steps, equal to rounding); :func:`run_descent` is its interface for the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ntpcore.att import compiled
from ntpcore.att.dynamics import AttentionProblem, _attention_weights, _loss_grad, check_weights
from ntpcore.core.validate import check_number, check_numbers
from ntpcore.errors import DataError

__all__ = ["Descent", "NO_SHIFT_BOUND", "descend", "run_descent"]


#: Scores (and general-head logits) of absolute value at most this are exponentiated without
#: a shift: ``e^{+-100}`` and every product the gradient forms from them stay far inside the
#: float64 range.  Beyond it the loop shifts by the maximum, as :func:`loss_grad` does.
NO_SHIFT_BOUND = 100.0
_CHUNK = 64  # steps between two checks of that bound (from ||W|| and the largest step)
_TINY = 1e-290  # floor of the label mass when shifted (a loss above ~667 nats per sample)


@dataclass(frozen=True)
class Descent:
    """What :func:`descend` records.

    Attributes
    ----------
    steps : (S,)                recorded steps
    W : (S, B, d, d)            ``W(tau)`` after that many updates (None when handed over in
                                chunks, see :func:`descend`)
    loss : (S, B) or None       ``L(W(tau))``
    attention : (S, B, n, T) or None   ``s(W(tau))``, the attention of the forward pass of
                                step ``tau`` (before its update)
    """

    steps: NDArray[np.int64]
    W: NDArray[np.float64] | None
    loss: NDArray[np.float64] | None = None
    attention: NDArray[np.float64] | None = None


def _data_period(P: AttentionProblem) -> int:
    """The smallest ``G`` dividing the batch such that problem ``b`` has the data of problem
    ``b mod G`` (embeddings, tokens, labels; masks and weights may differ): the products of
    :class:`_Kernel` are then computed once per ``G`` distinct datasets."""
    B = P.batch
    for G in range(1, B + 1):
        if B % G:
            continue
        R = B // G
        if all(
            np.array_equal(
                a.reshape(R, G, *a.shape[1:]), np.broadcast_to(a[:G], (R, G, *a.shape[1:]))
            )
            for a in (P.X, P.E, P.labels)
        ):
            return G
    return B


class _Kernel:
    r"""One descent step of an :class:`AttentionProblem`, with the products that do not change
    across steps computed once and every intermediate in a preallocated buffer.

    The batch is viewed as ``G`` datasets times ``R`` rows (problem ``r G + g`` is row ``r`` of
    dataset ``g``: e.g. the W run and the reduced run of one trial, or the initialisations of
    one dataset), positions are flattened (``N = n T``) and every ``W`` is the row
    :math:`\operatorname{vec}(W)`.  Per dataset:

    * ``F`` (G, N, d^2) holds :math:`\operatorname{vec}(x_{it}\bar x_i^\top)`: the scores are
      ``z = vec(W) F^T`` and ``vec(grad L) = (dl/dz) F`` (book ``att-eq-grad``);
    * identity head, log-loss: ``SS`` (G, N, 2n) sums each sequence's exponentials on and off
      the label, :math:`[Z_l \mid Z_n]`; then :math:`\partial l/\partial z_t = w_i e_t / Z` off
      the label and :math:`-w_i e_t Z_n / (Z_l Z)` on it (the cancellation-free form of
      :func:`loss_grad`), spread back to the positions by ``EX`` (G, 2n, N);
    * general head: ``A`` (G, N, nK), block-diagonal over the sequences, holds the
      token-vocabulary products :math:`x_{it}^\top e_k`, so the logits are ``u = s A`` and
      ``g = A du``; :math:`\partial l/\partial z_t = s_t \sum_u s_u (g_t - g_u)`
      (the softmax Jacobian of :func:`ntpcore.att.dynamics.loss_grad`) is written
      :math:`s_t (g_t m_t - \sum_{u \ne t} s_u g_u)` with
      :math:`m_t = \sum_{u \ne t} s_u`: sums over the *other* positions (one product with a
      block-diagonal :math:`1 - I`), so nothing of the size of :math:`g` cancels when the
      attention is one-hot.

    Sample weights (times the step size for plain GD) enter per row.  Scores are shifted by
    their maximum before ``exp`` only while a bound on them,
    :math:`\max_{it}\|x_{it}\|\|\bar x_i\|` times :math:`\|W\|_F` plus the largest possible
    growth in ``_CHUNK`` steps, exceeds :data:`NO_SHIFT_BOUND`; general-head logits likewise
    (their bound, :math:`\max_k\|e_k\|\max_t\|x_t\|`, is fixed).  Without a shift ``exp``
    differs from the shifted one by rounding only.
    """

    def __init__(self, P: AttentionProblem, eta, normalized: bool, eps: float):
        B, n, T, d = P.X.shape
        N, p = n * T, d * d
        G = _data_period(P)
        R = B // G
        self.shape = (G, R, n, T, d)
        self.head_loss = (P.head, P.loss)  # loss "per-problem": the general head's rows differ
        self.normalized, self.eps = normalized, eps

        def rows(a):  # (B, ...) -> (G, R, ...), row r of dataset g = problem r G + g
            a = np.asarray(a, dtype=float)
            return np.ascontiguousarray(a.reshape(R, G, *a.shape[1:]).swapaxes(0, 1))

        eta_b = np.broadcast_to(np.asarray(eta, dtype=float), (B,))
        self.eta = rows(eta_b)[..., None]  # (G, R, 1)
        X, xbar = P.X[:G], P.xbar[:G]
        F = (X[..., :, None] * xbar[:, :, None, None, :]).reshape(G, N, p)
        self.F = np.ascontiguousarray(F)
        self.FT = np.ascontiguousarray(F.transpose(0, 2, 1))
        self.bias = rows(P.bias.reshape(B, N)) if np.isinf(P.bias).any() else None
        attended = np.isfinite(P.bias)  # (B, n, T)
        xn = np.linalg.norm(P.X, axis=-1)
        cxi = np.max(np.where(attended, xn, 0.0), axis=-1) * np.linalg.norm(P.xbar, axis=-1)
        self.cx = rows(cxi.max(axis=-1))  # (G, R): |z_it| <= cx ||W||_F
        self.w = rows(P.weight) * (1.0 if normalized else self.eta)  # GD: eta folded in
        seq = np.repeat(np.eye(n), T, axis=0)  # (N, n): position -> its sequence
        if (P.head, P.loss) == ("identity", "log"):
            lab = P.label_pos[:G].reshape(G, N, 1).astype(float)
            self.SS = np.concatenate([seq * lab, seq * (1.0 - lab)], axis=-1)  # [label | off]
            self.EX = np.ascontiguousarray(
                np.concatenate([seq * (1.0 - lab), -seq * lab], -1).transpose(0, 2, 1)
            )  # (G, 2n, N)
            # ||grad|| <= sum_i w_i (sum_t |dl/dz_t|) max_t ||x_t|| ||xbar_i||, sum_t |.| <= 2
            self.grad_bound = rows(2.0 * np.sum(P.weight * cxi, axis=-1))
        elif P.head == "general":
            A = np.matmul(X, np.swapaxes(P.E[:G], -1, -2)[:, None])  # (G, n, T, K)
            K = A.shape[-1]
            self.A_seq = A.reshape(G, N, K)  # per position: the compiled steps' layout
            eye = np.eye(n)
            # block-diagonal over sequences: (G, n T, n K) and (G, n K, n T T)
            self.A = np.ascontiguousarray(
                (A[:, :, :, None, :] * eye[:, None, :, None]).reshape(G, N, n * K)
            )
            D = A[:, :, :, None, :] - A[:, :, None, :, :]  # (G, n, T, T, K): A_t - A_u
            self.AT = np.ascontiguousarray(self.A.transpose(0, 2, 1))  # (G, n K, n T)
            onehot = np.zeros((G, 1, n, K))
            np.put_along_axis(onehot, P.labels[:G, None, :, None], 1.0, axis=-1)
            self.onehot = onehot
            self.onehot_w = np.ascontiguousarray(onehot * self.w[..., None])  # (G, R, n, K)
            losses = P.losses or (P.loss,) * B
            self.ce = rows(np.array([lo == "ce" for lo in losses], dtype=float))  # (G, R)
            en = np.linalg.norm(P.E, axis=-1).max(axis=-1)  # (B,)
            reach = en * np.max(np.where(attended, xn, 0.0), axis=(1, 2))
            self.shift_u = bool(np.any(reach > NO_SHIFT_BOUND))
            # sum_t |dl/dz_t| <= max_{t,u} ||A_t - A_u|| ||dl/du||, ||dl/du|| <= sqrt(2)
            spread = np.max(np.linalg.norm(D, axis=-1), axis=(2, 3))  # (G, n)
            spread = np.broadcast_to(spread, (R, G, n)).reshape(B, n)
            self.grad_bound = rows(np.sqrt(2.0) * np.sum(P.weight * spread * cxi, axis=-1))
        else:
            raise NotImplementedError(f"no fast kernel for {(P.head, P.loss)}")

    def needs_shift(self, Wrows) -> bool:
        """Whether the scores may leave [-NO_SHIFT_BOUND, NO_SHIFT_BOUND] within _CHUNK steps
        from ``Wrows`` (G, R, d^2)."""
        norm = np.sqrt(np.einsum("grp,grp->gr", Wrows, Wrows))
        step = self.eta[..., 0] * (1.0 if self.normalized else self.grad_bound)
        return bool(np.any(self.cx * (norm + _CHUNK * step) > NO_SHIFT_BOUND))

    def closures(self):
        """``(forward, grad)``: ``forward(Wrows, e, shift)`` writes the exponentiated scores
        into ``e`` (G, R, N); ``grad(Wrows, e, shift)`` returns the gradient rows (G, R, d^2)
        (times eta for plain GD) in a buffer the next call overwrites, and writes the
        exponentiated scores into ``e`` unless it is None."""
        G, R, n, T, d = self.shape
        N, p = n * T, d * d
        mm, ex, add, sub, mul, div = np.matmul, np.exp, np.add, np.subtract, np.multiply, np.divide
        maxred = np.maximum.reduce
        F, FT, bias, w = self.F, self.FT, self.bias, self.w
        z = np.empty((G, R, N))
        z4 = z.reshape(G, R, n, T)
        zmax = np.empty((G, R, n, 1))
        dz = np.empty((G, R, N))
        g = np.empty((G, R, p))

        def forward(Wrows, e, shift):
            mm(Wrows, FT, out=z)
            if bias is not None:
                add(z, bias, out=z)
            if shift:
                maxred(z4, axis=-1, keepdims=True, out=zmax)
                sub(z4, zmax, out=z4)
            ex(z, out=e)

        if self.head_loss == ("identity", "log"):
            SS, EX = self.SS, self.EX
            sums = np.empty((G, R, 2 * n))
            sl, sn = sums[..., :n], sums[..., n:]
            Z = np.empty((G, R, n))
            coef = np.empty((G, R, 2 * n))
            cnl, cl = coef[..., :n], coef[..., n:]
            spread = np.empty((G, R, N))

            e_own = np.empty((G, R, N))

            def grad(Wrows, e, shift):
                if e is None:
                    e = e_own
                mm(Wrows, FT, out=z)  # the forward pass, inline
                if bias is not None:
                    add(z, bias, out=z)
                if shift:
                    maxred(z4, axis=-1, keepdims=True, out=zmax)
                    sub(z4, zmax, out=z4)
                ex(z, out=e)
                mm(e, SS, out=sums)  # [Z_l | Z_n]
                add(sl, sn, out=Z)
                div(w, Z, out=cnl)  # off the label: w_i e_t / Z
                if shift:
                    np.maximum(sl, _TINY, out=sl)
                div(sn, sl, out=cl)
                mul(cl, cnl, out=cl)  # on the label: -w_i e_t Z_n / (Z_l Z) (sign in EX)
                mm(coef, EX, out=spread)
                mul(e, spread, out=dz)
                mm(dz, F, out=g)
                return g

            return forward, grad

        A, AT, onehot, onehot_w = self.A, self.AT, self.onehot, self.onehot_w
        K = onehot.shape[-1]
        ce, shift_u = bool(self.ce.all()), self.shift_u
        w4 = w[..., None]  # (G, R, n, 1)
        # dl/du = c (p - 1_y): c = w_i (cross-entropy), c = 2 w_i (1 - p_y) p_y (squared loss)
        w_ce = w4 * self.ce[..., None, None]
        w_sq = 2.0 * w4 * (1.0 - self.ce[..., None, None])
        # sums over a sequence's positions, its vocabulary, and its *other* positions (the
        # block-diagonal 1 - I of ``others``): products with 0/1 matrices on 2-d views
        eye_n = np.eye(n)
        sum_T = np.repeat(eye_n, T, axis=0)  # (N, n)
        sum_K = np.repeat(eye_n, K, axis=0)  # (nK, n)
        others = np.kron(eye_n, 1.0 - np.eye(T))  # (N, N)
        GR = G * R
        ee = np.empty((G, R, N))
        ee2 = ee.reshape(GR, N)
        Zs = np.empty((G, R, n, 1))
        Zs2 = Zs.reshape(GR, n)
        s = np.empty((G, R, N))
        s2, s4 = s.reshape(GR, N), s.reshape(G, R, n, T)
        u = np.empty((G, R, n * K))
        u2, u4 = u.reshape(GR, n * K), u.reshape(G, R, n, K)
        um, Zu, py, omp = (np.empty((G, R, n, 1)) for _ in range(4))
        Zu2, py2 = Zu.reshape(GR, n), py.reshape(GR, n)
        pk = np.empty((G, R, n, K))
        du = np.empty((G, R, n * K))
        du2, du4 = du.reshape(GR, n * K), du.reshape(G, R, n, K)
        gg, sg, m, q, v = (np.empty((G, R, N)) for _ in range(5))
        sg2, m2, q2 = sg.reshape(GR, N), m.reshape(GR, N), q.reshape(GR, N)

        def grad(Wrows, e, shift):
            forward(Wrows, ee, shift)
            if e is not None:
                np.copyto(e, ee)
            mm(ee2, sum_T, out=Zs2)
            div(ee.reshape(G, R, n, T), Zs, out=s4)  # attention s
            mm(s, A, out=u)  # logits u = A^T s, per sequence
            if shift_u:
                maxred(u4, axis=-1, keepdims=True, out=um)
                sub(u4, um, out=u4)
            ex(u, out=u)
            mm(u2, sum_K, out=Zu2)
            div(u4, Zu, out=pk)  # softmax over the vocabulary
            if ce:  # w_i (p - 1_y)
                mul(pk, w4, out=du4)
                sub(du4, onehot_w, out=du4)
            else:  # per row: w_i (p - 1_y) or 2 w_i (1 - p_y) p_y (p - 1_y)
                mul(pk, onehot, out=du4)
                mm(du2, sum_K, out=py2)
                sub(1.0, py, out=omp)
                mul(omp, py, out=omp)
                mul(omp, w_sq, out=omp)
                add(omp, w_ce, out=omp)
                sub(pk, onehot, out=du4)
                mul(du4, omp, out=du4)
            # sum_u s_u (g_t - g_u) = g_t m_t - sum_{u != t} s_u g_u, m_t = sum_{u != t} s_u:
            # no term of size |g| cancels (m_t is a sum of the others, not 1 - s_t)
            mm(du, AT, out=gg)  # g_t = sum_k A_tk du_k
            mm(s2, others, out=m2)
            mul(s, gg, out=sg)
            mm(sg2, others, out=q2)
            mul(gg, m, out=v)
            sub(v, q, out=v)
            mul(s, v, out=dz)
            mm(dz, F, out=g)
            return g

        return forward, grad

    def to_rows(self, W) -> NDArray[np.float64]:
        """(B, d, d) -> rows (G, R, d^2), a new contiguous array (the loop updates it)."""
        G, R, n, T, d = self.shape
        W = np.asarray(W, dtype=float).reshape(R, G, d * d)
        return W.swapaxes(0, 1).copy()

    def gradient(self, W) -> NDArray[np.float64]:
        """``grad L(W)`` (B, d, d) through the kernel (tests)."""
        G, R, n, T, d = self.shape
        Wrows = self.to_rows(W)
        _, grad = self.closures()
        g = grad(Wrows, None, self.needs_shift(Wrows))
        g = g.swapaxes(0, 1).reshape(G * R, d, d)
        return g.copy() if self.normalized else g / self.eta.swapaxes(0, 1).reshape(-1, 1, 1)


#: A gradient below this times its bound (:attr:`_Kernel.grad_bound`) is rounding noise.
_STATIONARY = 1e-13


def _freeze_stationary(eta, W0rows, gnorm, bound) -> None:
    """Normalized GD from an exact stationary point: a run that starts at ``W = 0`` with a
    gradient of rounding size (e.g. the reduced run of a symmetric cycle, whose ``W^fin`` is
    0) stays there, as in exact arithmetic -- normalizing would turn the rounding noise into
    a step of ~1e-5 eta and the next, genuine, gradient into steps of size eta.  Sets those
    rows' step sizes to 0 in ``eta`` (G, R, 1)."""
    at_zero = ~np.any(W0rows, axis=-1)  # (G, R)
    noise = gnorm[..., 0] <= _STATIONARY * bound
    eta[at_zero & noise] = 0.0


def _identity_log_loss(e, P: AttentionProblem, SS, sel) -> NDArray[np.float64]:
    """Identity log-loss (len(sel), S) of the problems ``sel`` from their recorded
    exponentiated scores ``e`` (len(sel), S, N); ``SS`` (G, N, 2n) of the G distinct datasets
    (problem b has dataset b mod G)."""
    sums = np.matmul(e, SS[sel % SS.shape[0]])  # (len(sel), S, 2n): [Z_l | Z_n]
    n = P.weight.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.log1p(sums[..., n:] / sums[..., :n])  # log(1 + Z_n / Z_l)
    w = P.weight[sel][:, :, None]  # (len(sel), n, 1)
    per[:] = np.where(w.transpose(0, 2, 1) != 0, per, 0.0)  # dropped samples count 0
    return np.matmul(per, w)[..., 0]


def _check_eta(eta, batch: int):
    """The step size(s): one positive finite number, or one per problem of the batch (B,).
    (A negative step ascends, a NaN one returns NaN trajectories.)"""
    if np.ndim(eta) == 0:
        return check_number(eta, "eta", lo=0, lo_open=True)
    values = check_numbers(eta, "eta", lo=0, lo_open=True)
    if values.size != batch:
        raise DataError(f"eta must be a number or one per problem ({batch}), got {values.size}")
    return values


def descend(
    W0,
    P: AttentionProblem,
    *,
    eta,
    n_steps: int,
    normalized: bool = True,
    record=None,
    eps: float = 1e-12,
    loss: bool = False,
    attention: bool = False,
    rows=None,
    on_chunk=None,
    chunk: int = 512,
) -> Descent:
    r"""(Normalized) gradient descent on every problem of the batch at once.

    GD:  :math:`W \leftarrow W - \eta \nabla L(W)`;
    NGD: :math:`W \leftarrow W - \eta \nabla L(W) / (\|\nabla L(W)\|_F + \varepsilon)`
    (the paper's experiments; :math:`\|W\|` grows at most :math:`\eta` per step).

    The gradient is that of :func:`loss_grad` (equal to rounding), computed for the identity
    log-loss and the general head by the compiled steps (:mod:`ntpcore.att.compiled`, many
    steps per call) or, where they are not built or ``NTP_COMPILED=0``, by
    :class:`_Kernel`, one step per call; the identity squared loss runs :func:`loss_grad`
    itself.  Only the recorded quantities are stored: the
    exponentiated scores of a recorded step are written where the attention and the loss are
    read from, and both are formed after the loop (or after each chunk).

    Parameters
    ----------
    W0 : (B, d, d)           initial weights
    eta : float or (B,)      step size(s)
    record : int array       steps at which W is recorded (default: every step 0..n_steps)
    loss, attention : bool   also record ``L(W(tau))`` and ``s(W(tau))`` at those steps
    rows : slice or None     the problems whose loss and attention are returned (default all)
    on_chunk : callable      if given, called with a :class:`Descent` of every ``chunk``
                             consecutive recorded steps (the last one shorter) instead of
                             keeping them: its arrays are reused afterwards, so it copies
                             what it keeps.  The returned :class:`Descent` then holds the
                             steps only.  (Long runs are measured in buffers that stay in
                             cache, and nothing of the size of the trajectory is allocated.)
    """
    W0 = check_weights(W0, P)
    if W0.shape != (P.batch, P.d, P.d):
        raise DataError(f"W0 must have shape {(P.batch, P.d, P.d)}, got {W0.shape}")
    eta = _check_eta(eta, P.batch)
    n_steps = check_number(n_steps, "n_steps", lo=0, integer=True)
    eps = check_number(eps, "eps", lo=0)
    if record is None:
        steps = np.arange(n_steps + 1)
    else:
        steps = np.unique(check_numbers(record, "record", lo=0, hi=n_steps, integer=True))
    if (P.head, P.loss) == ("identity", "squared"):
        res = _descend_loss_grad(W0, P, eta, n_steps, normalized, steps, eps, loss, attention)
        if on_chunk is None:
            return res
        on_chunk(res)
        return Descent(steps, None)
    B, n, T, d = P.X.shape
    N, p, S = n * T, d * d, len(steps)
    ker = _Kernel(P, eta, normalized, eps)
    G, R = ker.shape[:2]
    forward, grad = ker.closures()
    identity = P.head == "identity"
    keep_e = attention or (loss and identity)
    C = S if on_chunk is None else max(1, min(int(chunk), S))
    # trial-major records (B, C + 1, .) = (R, G, C + 1, .), read by the loop as (G, R, .)
    traj = np.empty((B, C + 1, p))
    traj_rows = traj.reshape(R, G, C + 1, p).transpose(1, 0, 2, 3)
    erec = np.empty((B, C, N)) if keep_e else None
    e_rows = erec.reshape(R, G, C, N).transpose(1, 0, 2, 3) if keep_e else None
    every = S == n_steps + 1  # every step recorded: iterate in place in the records
    Wk = ker.to_rows(W0)
    if every:
        traj_rows[:, :, 0] = Wk
    g2 = np.empty((G, R, p))
    g2_2d = g2.reshape(G * R, p)
    ones_p = np.ones(p)
    n2 = np.empty((G, R, 1))
    n2_1d = n2.reshape(G * R)
    eta = ker.eta
    mm, sub, mul, add, div, sqrt = np.matmul, np.subtract, np.multiply, np.add, np.divide, np.sqrt
    if normalized:  # a copy: rows that start at a stationary point get step size 0
        eta = eta.copy()
    rows = slice(None) if rows is None else rows
    sel = np.arange(B)[rows]
    sum_T = np.repeat(np.eye(n), T, axis=0)  # (N, n): sums over a sequence's positions
    chunks = []

    def flush(base: int, c: int) -> None:
        """The records of steps[base : base + c], slots 0..c-1, as a Descent."""
        W = traj[:, :c].reshape(B, c, d, d).transpose(1, 0, 2, 3)
        att = losses = None
        if attention:
            e3 = erec[rows, :c]  # a view for a slice: normalised in place
            Zs = np.matmul(e3, sum_T)[..., None]  # (., c, n, 1): sums over the positions
            e4 = e3.reshape(*e3.shape[:2], n, T)
            att = np.divide(e4, Zs, out=e4).transpose(1, 0, 2, 3)
        if loss:
            if identity:
                losses = _identity_log_loss(erec[rows, :c], P, ker.SS, sel).T
            else:
                Psel = _select(P, sel)
                losses = np.array([_loss_grad(Wr[sel], Psel, need_grad=False)[0] for Wr in W])
        res = Descent(steps[base : base + c], W, losses, att)
        if on_chunk is None:
            chunks.append(res)
        else:
            on_chunk(res)

    if (P.head, P.loss) != ("identity", "squared") and compiled.available():
        _loop_compiled(W0, ker, P, eta, steps, n_steps, traj, traj_rows, erec, e_rows, C, flush)
        if on_chunk is not None:
            return Descent(steps, None)
        return chunks[0]
    # the slots' views, made once (the buffers are reused chunk after chunk)
    W_slots = [traj_rows[:, :, k] for k in range(C + 1)] if every else None
    e_slots = [e_rows[:, :, k] for k in range(C)] if keep_e else None
    rec_steps = steps.tolist()
    r, base, next_check, shift = 0, 0, 0, True
    for tau in range(n_steps + 1):
        slot = r - base
        Wcur = W_slots[slot] if every else Wk
        if tau == next_check:
            shift = ker.needs_shift(Wcur)
            next_check += _CHUNK
        rec = r < S and rec_steps[r] == tau
        e = e_slots[slot] if (rec and keep_e) else None
        if rec:
            if not every:
                traj_rows[:, :, slot] = Wk
            r += 1
        if tau == n_steps:
            if keep_e and rec:
                forward(Wcur, e, shift)
            break
        g = grad(Wcur, e, shift)
        if normalized:  # g eta / (||g|| + eps)
            mul(g, g, out=g2)
            mm(g2_2d, ones_p, out=n2_1d)
            sqrt(n2, out=n2)
            if tau == 0:
                _freeze_stationary(eta, Wcur, n2, ker.grad_bound)
            add(n2, eps, out=n2)
            div(eta, n2, out=n2)
            mul(g, n2, out=g)
        sub(Wcur, g, out=W_slots[slot + 1] if every else Wk)
        if r - base == C:  # the chunk is full: hand it over, W(tau + 1) moves to slot 0
            flush(base, C)
            base = r
            if every:
                traj[:, 0] = traj[:, C]
    if r > base:
        flush(base, r - base)
    if on_chunk is not None:
        return Descent(steps, None)
    return chunks[0]


def _loop_compiled(W0, ker, P, eta, steps, n_steps, traj, traj_rows, erec, e_rows, C, flush):
    """The loop of :func:`descend` on the compiled steps (:mod:`ntpcore.att.compiled`), for
    the identity log-loss and the general head: the steps between two events (a recorded
    step when not every step is recorded, a full chunk, a check of the shift bound every
    ``_CHUNK`` steps) in one call, the records written in place.

    Same records, chunks and shift rule as the numpy loop; the gradient at step 0, which
    gives the runs that start at a stationary point step size 0, comes from the numpy
    kernel.  ``eta`` (G, R, 1) is the loop's copy of the step sizes."""
    B, p = P.batch, P.d * P.d
    G, R = ker.shape[:2]
    N = ker.F.shape[1]
    normalized = ker.normalized
    Wk = np.array(W0.reshape(B, p), dtype=np.float64, order="C", copy=True)
    rows = Wk.reshape(R, G, p).swapaxes(0, 1)  # (G, R, p): the numpy kernel's layout
    forward, grad = ker.closures()
    if normalized:
        g = grad(rows, None, ker.needs_shift(rows))
        gnorm = np.sqrt(np.matmul(g * g, np.ones(p)))[..., None]
        _freeze_stationary(eta, rows, gnorm, ker.grad_bound)
    eta_b = eta.swapaxes(0, 1).reshape(B)  # problem r G + g
    common = (
        ker.F,
        P.bias.reshape(B, N),
        P.weight if normalized else P.weight * eta_b[:, None],  # GD: eta folded in
        eta_b if normalized else np.zeros(B),
    )
    if P.head == "identity":
        label = P.label_pos[:G].reshape(G, N)
        data = compiled.StepData(
            *common, eps=ker.eps, normalized=normalized, label=label, tiny=_TINY
        )
    else:
        data = compiled.StepData(
            *common,
            eps=ker.eps,
            normalized=normalized,
            A=ker.A_seq,
            onehot=ker.onehot[:, 0],
            ce=ker.ce.swapaxes(0, 1).reshape(B) != 0,
            shift_u=ker.shift_u,
        )
    every = len(steps) == n_steps + 1
    rec_steps, S = steps.tolist(), len(steps)
    keep_e = erec is not None
    r = base = tau = next_check = 0
    shift = True
    while True:
        if tau == next_check:
            shift = ker.needs_shift(rows)
            next_check += _CHUNK
        slot = r - base
        rec = r < S and rec_steps[r] == tau
        if rec:
            traj[:, slot] = Wk
            r += 1
        if tau == n_steps:
            if keep_e and rec:
                forward(rows, e_rows[:, :, slot], shift)
            break
        k = min(next_check, n_steps) - tau  # steps tau .. tau + k - 1 in one call
        if every:  # each step recorded: W after it in the next slot, its scores in this one
            k = min(k, C - slot)
            W_out = traj[:, slot + 1 : slot + 1 + k]
            e_out = erec[:, slot : slot + k] if keep_e else None
            r += k - 1
        else:  # up to the next recorded step; the scores of this one if it is recorded
            if r < S:
                k = min(k, rec_steps[r] - tau)
            W_out = None
            e_out = erec[:, slot : slot + 1] if (rec and keep_e) else None
        compiled.steps(data, Wk, k, W_out, e_out, shift)
        tau += k
        if r - base == C:  # the chunk is full: hand it over
            flush(base, C)
            base = r
    if r > base:
        flush(base, r - base)


def _select(P: AttentionProblem, sel) -> AttentionProblem:
    """The problems ``sel`` of the batch."""
    return AttentionProblem(
        X=P.X[sel],
        xbar=P.xbar[sel],
        label_pos=P.label_pos[sel],
        bias=P.bias[sel],
        weight=P.weight[sel],
        E=P.E[sel],
        labels=P.labels[sel],
        head=P.head,
        loss=P.loss,
        losses=None if P.losses is None else tuple(np.asarray(P.losses)[sel]),
    )


def _descend_loss_grad(W0, P, eta, n_steps, normalized, steps, eps, loss, attention) -> Descent:
    """The descent loop on :func:`loss_grad` (identity squared loss, and the reference of the
    tests)."""
    W = np.array(W0, dtype=float, copy=True)
    eta_b = np.broadcast_to(np.asarray(eta, dtype=float), (P.batch,))[:, None, None]
    traj = np.empty((len(steps), *W.shape))
    losses = np.empty((len(steps), P.batch))
    r = 0
    for tau in range(n_steps + 1):
        rec = r < len(steps) and steps[r] == tau
        if rec:
            traj[r] = W
        if tau == n_steps:
            if rec:
                losses[r] = _loss_grad(W, P, need_grad=False)[0]
            break
        L, G = _loss_grad(W, P)
        if rec:
            losses[r] = L
            r += 1
        if normalized:
            G = G / (np.sqrt(np.sum(G * G, axis=(-2, -1), keepdims=True)) + eps)
        W -= eta_b * G
    att = _attention_weights(traj, P) if attention else None
    return Descent(steps, traj, losses if loss else None, att)


def run_descent(
    W0,
    P: AttentionProblem,
    *,
    eta,
    n_steps: int,
    normalized: bool = True,
    record=None,
    eps: float = 1e-12,
    return_loss: bool = False,
):
    r"""(Normalized) gradient descent on every problem of the batch at once (:func:`descend`).

    Parameters
    ----------
    W0 : (B, d, d)           initial weights
    eta : float or (B,)      step size(s)
    record : int array       steps at which W is recorded (default: every step 0..n_steps)
    return_loss : bool       also return the loss at the recorded steps

    Returns
    -------
    steps : (S,) recorded steps;  traj : (S, B, d, d) ``W`` after that many updates;
    losses : (S, B) ``L(W(tau))`` (only with ``return_loss``).
    """
    res = descend(
        W0,
        P,
        eta=eta,
        n_steps=n_steps,
        normalized=normalized,
        record=record,
        eps=eps,
        loss=return_loss,
    )
    return (res.steps, res.W, res.loss) if return_loss else (res.steps, res.W)
