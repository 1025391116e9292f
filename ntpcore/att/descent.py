r"""(Normalized) gradient descent for one self-attention layer, batched over independent
problems (trials): the hot path of the ``att`` experiments.

GD:  :math:`W \leftarrow W - \eta \nabla L(W)`; NGD: :math:`W \leftarrow W - \eta \nabla L(W) /
(\|\nabla L(W)\|_F + \varepsilon)` (the paper's experiments), with the closed-form gradients
of :mod:`ntpcore.att.dynamics`.  :func:`descend` is the fast loop (precomputed products, one
batch, chunked metrics), its steps taken by the compiled extension
(:mod:`ntpcore.att.compiled`) where it was built, else by the numpy kernel
(:mod:`ntpcore.att.kernel`; the same steps, equal to rounding); :func:`run_descent` is its
interface for the figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

import ntpcore.att.compiled as compiled
from ntpcore.att.dynamics import AttentionProblem, _attention_weights, _loss_grad, check_weights
from ntpcore.att.kernel import CHUNK, Kernel, freeze_stationary, loop_compiled
from ntpcore.core.validate import check_number, check_numbers
from ntpcore.errors import DataError

__all__ = ["Descent", "descend", "run_descent"]


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
    :class:`ntpcore.att.kernel.Kernel`, one step per call; the identity squared loss runs
    :func:`loss_grad` itself.  Only the recorded quantities are stored: the
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
    ker = Kernel(P, eta, normalized, eps)
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
        loop_compiled(W0, ker, P, eta, steps, n_steps, traj, traj_rows, erec, e_rows, C, flush)
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
            next_check += CHUNK
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
                freeze_stationary(eta, Wcur, n2, ker.grad_bound)
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
