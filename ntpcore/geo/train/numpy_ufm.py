r"""The UFM trained in float64 with numpy [geo, Sec. 3]: the closed-form gradient
:math:`\nabla_W = G H^\top`, :math:`\nabla_H = W^\top G`, :math:`G = (Q(L) - P)\,\mathrm{diag}(n_j)`
and an AdamW step with the arithmetic of ``torch.optim.AdamW`` (no autograd, no tensor
overhead): compiled where the extension was built (:func:`adamw_kernel`), else torch's fused
kernel, else numpy.
"""

from __future__ import annotations

import ctypes
import functools
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from ntpcore.core import native
from ntpcore.core.io import atomic_path
from ntpcore.errors import DataError
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.train.protocol import Recorder, TrainerConfig, epoch_bar, lr_at, record_epochs

__all__ = ["adamw_kernel", "init_ufm_state", "train_ufm_numpy"]


def init_ufm_state(ds: ContextDataset, cfg: TrainerConfig) -> NDArray[np.float64]:
    """Flat float64 parameter vector ``[vec(W), vec(H)]`` of the UFM at initialisation."""
    from ntpcore.geo.models.ufm import init_ufm

    W, H = init_ufm(ds.m, ds.V, cfg.protocol.dim, np.random.default_rng(cfg.protocol.init_seed))
    return np.concatenate([W.ravel(), H.ravel()])


_UFM_NO_SHIFT = 600.0  # logits within +-600: exp needs no shift (no product of exponentials)
_UFM_CHECK = 64  # epochs between two checks of that bound


_ADAMW_LIB, _ADAMW_REASON = native.load(
    "ntpcore.geo.train._adamw",
    {"ntp_adamw": (None, [ctypes.c_int64] + [ctypes.c_void_p] * 4 + [ctypes.c_double] * 7)},
)


def adamw_kernel() -> str:
    """Which AdamW step :func:`train_ufm_numpy` takes: ``"compiled"`` (the extension
    ``ntpcore/geo/train/_adamw.c``), ``"torch"`` (torch's fused kernel) or ``"numpy"``."""
    if _ADAMW_LIB is not None and native.enabled():
        return "compiled"
    return "torch" if getattr(torch, "_fused_adamw_", None) is not None else "numpy"


def _adamw(theta, grad, mom, vel, t: int, wd: float, b1: float, b2: float, eps: float):
    """In-place AdamW on a flat float64 parameter vector, with the arithmetic of
    ``torch.optim.AdamW`` (amsgrad=False): returns ``step(lr)``, which takes step ``t + 1``
    from the gradient in ``grad`` -- one pass of the compiled extension over the arrays
    (:func:`adamw_kernel`; the fused multiply-adds of torch's fused kernel), else one fused
    pass of torch's AdamW kernel (arrays shared with numpy, no copies), else the same update
    in numpy."""
    kind = adamw_kernel()
    if kind == "compiled":
        fn, n, arrays = _ADAMW_LIB.ntp_adamw, theta.size, (theta, grad, mom, vel)
        for a in arrays:
            if a.dtype != np.float64 or not a.flags.c_contiguous or a.size != n:
                raise DataError("AdamW state must be contiguous float64 vectors of one size")
        ptrs = [a.ctypes.data for a in arrays]
        state = [t]

        def compiled_step(lr: float, _arrays=arrays) -> None:  # _arrays: kept alive
            state[0] += 1
            k = state[0]
            fn(
                n, *ptrs, 1.0 - lr * wd, b2, 1.0 - b1, 1.0 - b2, eps,
                lr / (1.0 - b1**k), math.sqrt(1.0 - b2**k),
            )  # fmt: skip

        return compiled_step
    if kind == "torch":
        fused = torch._fused_adamw_
        count = np.array([float(t)])  # the step count, shared with the kernel
        kernel = functools.partial(
            fused,
            *([torch.from_numpy(a)] for a in (theta, grad, mom, vel)),
            [],
            [torch.from_numpy(count).view(())],
            beta1=b1,
            beta2=b2,
            weight_decay=wd,
            eps=eps,
            amsgrad=False,
            maximize=False,
        )

        def fused_step(lr: float) -> None:
            count[0] += 1.0  # the kernel reads step t + 1 (torch.optim increments it first)
            kernel(lr=lr)

        return fused_step
    tmp = np.empty_like(theta)
    state = [t]

    def step(lr: float) -> None:
        state[0] += 1
        k = state[0]
        mul, add = np.multiply, np.add
        mul(theta, 1.0 - lr * wd, out=theta)
        mul(mom, b1, out=mom)
        mul(grad, 1.0 - b1, out=tmp)
        add(mom, tmp, out=mom)
        mul(vel, b2, out=vel)
        mul(grad, grad, out=tmp)
        mul(tmp, 1.0 - b2, out=tmp)
        add(vel, tmp, out=vel)
        np.sqrt(vel, out=tmp)
        mul(tmp, 1.0 / math.sqrt(1.0 - b2**k), out=tmp)
        add(tmp, eps, out=tmp)
        np.divide(mom, tmp, out=tmp)
        mul(tmp, lr / (1.0 - b1**k), out=tmp)
        np.subtract(theta, tmp, out=theta)

    return step


def train_ufm_numpy(
    ds: ContextDataset,
    cfg: TrainerConfig,
    *,
    checkpoint: Path | None = None,
    checkpoint_seconds: float = 120.0,
    progress: bool = True,
) -> dict[str, Any]:
    """Train the NTP-UFM with full-batch AdamW in float64 (closed-form gradient).

    Returns the recorded metrics (see :class:`Recorder`) plus ``W_final`` (V, d),
    ``H_final`` (d, m) in float64, ``seconds`` and ``sec_per_epoch`` (training only).
    """
    if cfg.model != "ufm":
        raise DataError(f"train_ufm_numpy trains the UFM, got model={cfg.model!r}")
    V, m, d = ds.V, ds.m, cfg.protocol.dim
    nW = V * d
    N = ds.counts.astype(np.float64)  # (V, m) joint counts
    Nj = N.sum(axis=0)  # (m,)
    b1, b2, eps = 0.9, 0.999, 1e-8

    theta = init_ufm_state(ds, cfg)
    mom, vel = np.zeros_like(theta), np.zeros_like(theta)
    start = 0
    rec = Recorder(ds, record_epochs(cfg.protocol.n_steps, cfg.protocol.n_records))
    if checkpoint is not None and checkpoint.exists():
        with np.load(checkpoint, allow_pickle=False) as z:
            state = dict(z)
        theta, mom, vel, start = state["theta"], state["mom"], state["vel"], int(state["epoch"])
        rec.load(state)

    W, H = theta[:nW].reshape(V, d), theta[nW:].reshape(d, m)  # views into theta
    grad = np.empty_like(theta)
    gW, gH = grad[:nW].reshape(V, d), grad[nW:].reshape(d, m)
    L, Q = np.empty((V, m)), np.empty((V, m))
    cvec = np.empty(m)
    adamw_step = _adamw(theta, grad, mom, vel, start, cfg.protocol.weight_decay, b1, b2, eps)
    # |l_zj| <= ||W|| ||H||; an AdamW step moves each entry by at most lr * (rho + wd |theta|)
    rho = (1.0 - b1) / math.sqrt((1.0 - b2) * (1.0 - b1 * b1 / b2))
    nW_sqrt, nH_sqrt = math.sqrt(nW), math.sqrt(H.size)

    def save(epoch: int) -> None:
        with atomic_path(checkpoint) as tmp_path:
            np.savez(tmp_path, theta=theta, mom=mom, vel=vel, epoch=epoch, **rec.state())

    t0 = last_save = time.perf_counter()
    bar = epoch_bar(cfg, start, "UFM", progress)
    nxt = rec.next_epoch()
    shift, next_check = True, start
    mm, exp, sub, mul, div, colsum = (
        np.matmul,
        np.exp,
        np.subtract,
        np.multiply,
        np.divide,
        np.add.reduce,
    )
    HT, WT = H.T, W.T
    for k in range(start, cfg.protocol.n_steps + 1):
        if k == nxt:
            rec.add(k, W, H, None)
            nxt = rec.next_epoch()
        if k == cfg.protocol.n_steps:
            break
        lr = lr_at(cfg.protocol, k)
        if k == next_check:  # shift the logits only if they may leave [-600, 600]
            reach = _UFM_CHECK * lr * (rho + cfg.protocol.weight_decay * float(np.abs(theta).max()))
            bound = (math.sqrt(W.ravel() @ W.ravel()) + reach * nW_sqrt) * (
                math.sqrt(H.ravel() @ H.ravel()) + reach * nH_sqrt
            )
            shift, next_check = bound > _UFM_NO_SHIFT, k + _UFM_CHECK
        # gradient of the summed loss: G = (softmax(L) - P) diag(n_j) = softmax(L) diag(n_j) - N
        mm(W, H, out=L)
        if shift:
            np.max(L, axis=0, out=cvec)
            sub(L, cvec, out=L)
        exp(L, out=Q)
        colsum(Q, axis=0, out=cvec)
        div(Nj, cvec, out=cvec)
        mul(Q, cvec, out=Q)
        sub(Q, N, out=Q)
        mm(Q, HT, out=gW)
        mm(WT, Q, out=gH)
        adamw_step(lr)  # AdamW step k+1, as torch.optim.AdamW (amsgrad=False)
        if (k + 1) % 256 == 0:
            bar.update(256)
            if checkpoint is not None and time.perf_counter() - last_save > checkpoint_seconds:
                save(k + 1)
                last_save = time.perf_counter()
    bar.close()
    seconds = time.perf_counter() - t0
    return rec.finish(
        cfg,
        start,
        seconds,
        checkpoint,
        W_final=W.copy(),
        H_final=H.copy(),
        b_final=np.zeros(V),
        device="cpu (numpy)",
        n_params=int(theta.size),
    )
