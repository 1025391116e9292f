r"""The numpy step kernel of the attention descent (:func:`ntpcore.att.descent.descend`):
one (normalized) gradient step of every problem of a batch, with the products that do not
change across steps computed once (:class:`Kernel`), and the loop that takes the steps in
the compiled extension instead (:func:`loop_compiled`, :mod:`ntpcore.att.compiled`), whose
arithmetic is the kernel's.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

import ntpcore.att.compiled as compiled
from ntpcore.att.dynamics import AttentionProblem

__all__ = ["CHUNK", "NO_SHIFT_BOUND", "Kernel", "data_period", "freeze_stationary", "loop_compiled"]


#: Scores (and general-head logits) of absolute value at most this are exponentiated without
#: a shift: ``e^{+-100}`` and every product the gradient forms from them stay far inside the
#: float64 range.  Beyond it the loop shifts by the maximum, as
#: :func:`ntpcore.att.dynamics.loss_grad` does.
NO_SHIFT_BOUND = 100.0
CHUNK = 64  # steps between two checks of that bound (from ||W|| and the largest step)
_TINY = 1e-290  # floor of the label mass when shifted (a loss above ~667 nats per sample)


def data_period(P: AttentionProblem) -> int:
    """The smallest ``G`` dividing the batch such that problem ``b`` has the data of problem
    ``b mod G`` (embeddings, tokens, labels; masks and weights may differ): the products of
    :class:`Kernel` are then computed once per ``G`` distinct datasets."""
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


class Kernel:
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
    growth in ``CHUNK`` steps, exceeds :data:`NO_SHIFT_BOUND`; general-head logits likewise
    (their bound, :math:`\max_k\|e_k\|\max_t\|x_t\|`, is fixed).  Without a shift ``exp``
    differs from the shifted one by rounding only.
    """

    def __init__(self, P: AttentionProblem, eta, normalized: bool, eps: float):
        B, n, T, d = P.X.shape
        N, p = n * T, d * d
        G = data_period(P)
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
        """Whether the scores may leave [-NO_SHIFT_BOUND, NO_SHIFT_BOUND] within CHUNK steps
        from ``Wrows`` (G, R, d^2)."""
        norm = np.sqrt(np.einsum("grp,grp->gr", Wrows, Wrows))
        step = self.eta[..., 0] * (1.0 if self.normalized else self.grad_bound)
        return bool(np.any(self.cx * (norm + CHUNK * step) > NO_SHIFT_BOUND))

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


#: A gradient below this times its bound (:attr:`Kernel.grad_bound`) is rounding noise.
_STATIONARY = 1e-13


def freeze_stationary(eta, W0rows, gnorm, bound) -> None:
    """Normalized GD from an exact stationary point: a run that starts at ``W = 0`` with a
    gradient of rounding size (e.g. the reduced run of a symmetric cycle, whose ``W^fin`` is
    0) stays there, as in exact arithmetic -- normalizing would turn the rounding noise into
    a step of ~1e-5 eta and the next, genuine, gradient into steps of size eta.  Sets those
    rows' step sizes to 0 in ``eta`` (G, R, 1)."""
    at_zero = ~np.any(W0rows, axis=-1)  # (G, R)
    noise = gnorm[..., 0] <= _STATIONARY * bound
    eta[at_zero & noise] = 0.0


def loop_compiled(W0, ker, P, eta, steps, n_steps, traj, traj_rows, erec, e_rows, C, flush):
    """The loop of :func:`ntpcore.att.descent.descend` on the compiled steps
    (:mod:`ntpcore.att.compiled`), for the identity log-loss and the general head: the steps
    between two events (a recorded step when not every step is recorded, a full chunk, a
    check of the shift bound every
    ``CHUNK`` steps) in one call, the records written in place.

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
        freeze_stationary(eta, rows, gnorm, ker.grad_bound)
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
            next_check += CHUNK
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
