r"""Training the geometry paper's models on distinct contexts [geo, Sec. 3, Fig. 2].

Every model maps the ``m`` distinct contexts of a :class:`~ntpcore.geo.data.ContextDataset`
to logits :math:`L = W H (+ b 1^\top) \in \R^{V\times m}` (``W``: output-layer weight, the
word embeddings; ``H``: the context embeddings, one column per context).  The loss is the
authors' **sum** over the ``n`` training pairs (book: ``geo-eq-summed-loss``), computed
from the distinct contexts and their counts :math:`n_{z,j}` -- the same number at a
fraction of the cost:

.. math::
    \sum_{i=1}^n -\log \mathbb S_{z_i}(L e_{j(i)})
    = \sum_j \Big(n_j\,\mathrm{LSE}(\ell_j) - \sum_z n_{z,j}\,\ell_{z,j}\Big)
    = n\,\CE(L),\qquad n_j = \textstyle\sum_z n_{z,j}.

The protocol (:class:`TrainProtocol`, declared once; the authors' code): full batch (one
step per epoch), AdamW (lr ``1e-4``, decoupled weight decay ``1e-6`` on every parameter,
betas (0.9, 0.999), eps ``1e-8``), step-wise learning rate
:math:`\mathrm{lr}\cdot\gamma^{\#\{\text{milestones} \le k\}}` at step ``k`` (PyTorch's
``MultiStepLR`` stepped once per epoch; milestones 5k, 10k, ..., 25k, gamma 0.4), 30k epochs.

Two training paths:

* :func:`train_ufm_numpy` -- the UFM in float64 with its closed-form gradient
  :math:`\nabla_W = G H^\top`, :math:`\nabla_H = W^\top G`,
  :math:`G = (Q(L) - P)\,\mathrm{diag}(n_j)` and an
  in-place AdamW identical to ``torch.optim.AdamW`` (no autograd, no tensor overhead);
* :func:`train_torch` -- any :mod:`ntpcore.geo.models` module (transformer, LSTM, or the torch UFM
  used as an oracle), on the GPU when one is present.

Both record, at log-spaced epochs (:func:`record_epochs`), :math:`\CE - \mathcal H`,
:math:`\|W\|_F`, :math:`\|H\|_F`, :math:`\|L\|_F` and :math:`\|P_\F(L) - L^{\rm in}\|_F`
in float64, plus float32 snapshots of ``W``, ``H`` and ``b`` from which the geometry
metrics are computed afterwards.  With a ``checkpoint`` path they save their full state
(atomically) every ``checkpoint_seconds`` and resume from it; training is deterministic
given the seed, so a resumed run equals an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from tqdm.auto import tqdm

from ntpcore.core.io import atomic_path
from ntpcore.core.logits import ce_excess, ce_grad_unchecked, project_F
from ntpcore.core.optim import log_steps
from ntpcore.errors import DataError, SolverError
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.logits import finite_logits

MODELS = ("ufm", "transformer", "lstm")

#: Paper milestones of the step-wise learning rate (epochs), from the authors' code.
PAPER_MILESTONES = (5000, 10000, 15000, 20000, 25000)


@dataclass(frozen=True)
class TrainProtocol:
    """The training protocol, declared once: defaults are the paper's [geo, Sec. 3].

    Every training configuration extends it (:class:`TrainConfig` here, the experiment and
    figure configurations of :mod:`ntpcore.geo.experiments.training`), so its fields stay
    flat and keep the notebooks' parameter names.
    """

    d: int = 128  # embedding dimension (UFM d, transformer/LSTM width)
    n_epochs: int = 30000  # full-batch AdamW steps
    lr: float = 1e-4  # initial learning rate
    weight_decay: float = 1e-6  # AdamW decoupled weight decay (all parameters)
    lr_milestones: tuple[int, ...] = PAPER_MILESTONES  # epochs where lr *= lr_gamma
    lr_gamma: float = 0.4  # step-wise decay factor
    seed: int = 0  # initialisation seed (numpy for the UFM, torch.Generator otherwise)
    n_records: int = 60  # number of log-spaced record epochs (plus 1, 10, 100, ...)

    def __post_init__(self) -> None:
        if self.n_epochs < 0 or self.d < 1 or self.lr <= 0 or self.weight_decay < 0:
            raise DataError("need n_epochs >= 0, d >= 1, lr > 0 and weight_decay >= 0")
        object.__setattr__(self, "lr_milestones", tuple(int(k) for k in self.lr_milestones))
        post = getattr(super(), "__post_init__", None)  # next base of a combined config
        if post is not None:
            post()


@dataclass(frozen=True)
class TrainConfig(TrainProtocol):
    """One training run: the protocol, the model and its architecture."""

    model: str = "ufm"  # ufm | transformer | lstm
    tf_layers: int = 4  # transformer blocks
    tf_heads: int = 6  # transformer attention heads
    lstm_layers: int = 2  # stacked LSTM layers
    lstm_bias: bool = True  # LSTM output-layer bias (the authors' code)
    dtype: str = "auto"  # auto (float64 UFM, float32 networks) | float32 | float64

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model not in MODELS:
            raise DataError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.dtype not in ("auto", "float32", "float64"):
            raise DataError(f"dtype must be auto, float32 or float64, got {self.dtype!r}")

    @property
    def torch_dtype(self) -> torch.dtype:
        if self.dtype == "auto":
            return torch.float64 if self.model == "ufm" else torch.float32
        return getattr(torch, self.dtype)


def record_epochs(n_epochs: int, n_records: int = 60) -> NDArray[np.int64]:
    """Log-spaced record epochs in [0, n_epochs], plus 1, 10, 100, ... (sorted, unique)."""
    decades = [10**k for k in range(int(math.log10(max(n_epochs, 1))) + 1)]
    pts = np.concatenate([log_steps(n_epochs, n_records), decades])
    return np.unique(pts[pts <= n_epochs]).astype(np.int64)


def lr_at(cfg: TrainConfig, step: int) -> float:
    """Learning rate of optimiser step ``step`` (0-based), as ``MultiStepLR`` gives it."""
    return cfg.lr * cfg.lr_gamma ** sum(step >= k for k in cfg.lr_milestones)


# ------------------------------------------------------------------------------------------
# Recorded metrics (float64, in the paper's (V, m) orientation)
# ------------------------------------------------------------------------------------------


class _Recorder:
    """Collects metrics and snapshots at the record epochs."""

    def __init__(self, ds: ContextDataset, epochs: NDArray[np.int64]) -> None:
        self.ds, self.epochs = ds, epochs
        self.S, self.P, self.pi = ds.S, ds.P, ds.pi
        self.L_in = finite_logits(ds.P)  # (V, m)
        self.H_ent = ds.entropy
        self.rows: dict[str, list[Any]] = {k: [] for k in _SCALARS + _SNAPSHOTS}

    def __len__(self) -> int:
        return len(self.rows["epoch"])

    def next_epoch(self) -> int:
        n = len(self)
        return int(self.epochs[n]) if n < len(self.epochs) else -1

    def add(self, epoch: int, W: np.ndarray, H: np.ndarray, b: np.ndarray | None) -> None:
        W64, H64 = np.asarray(W, np.float64), np.asarray(H, np.float64)  # (V, d), (d, m)
        L = W64 @ H64  # (V, m)
        if b is not None:
            L = L + np.asarray(b, np.float64)[:, None]
        r = self.rows
        r["epoch"].append(epoch)
        r["ce_minus_H"].append(ce_excess(L, self.P, self.pi))  # KL form: accurate near 0
        r["W_norm"].append(float(np.linalg.norm(W64)))
        r["H_norm"].append(float(np.linalg.norm(H64)))
        r["L_norm"].append(float(np.linalg.norm(L)))
        r["pf_dist"].append(float(np.linalg.norm(project_F(L, self.S) - self.L_in)))
        # copies: W, H, b may be views of live parameters
        r["W"].append(np.array(W, np.float32))
        r["H"].append(np.array(H, np.float32))
        r["b"].append(np.zeros(W.shape[0], np.float32) if b is None else np.array(b, np.float32))

    def state(self) -> dict[str, np.ndarray]:
        return {f"rec_{k}": np.asarray(v) for k, v in self.rows.items() if len(v)}

    def load(self, state: dict[str, Any]) -> None:
        for k in self.rows:
            if f"rec_{k}" in state:
                self.rows[k] = list(np.asarray(state[f"rec_{k}"]))

    def finish(
        self,
        cfg: TrainConfig,
        start: int,
        seconds: float,
        checkpoint: Path | None,
        **final: Any,
    ) -> dict[str, Any]:
        """The recorded metrics plus ``final`` (final weights, device, ...) and the timing of
        the epochs trained since ``start``; removes the checkpoint of the finished run."""
        out: dict[str, Any] = {k: np.asarray(v) for k, v in self.rows.items()}
        out["epoch"] = out["epoch"].astype(np.int64)
        out["ce"] = out["ce_minus_H"] + self.H_ent
        out["entropy"] = self.H_ent
        out.update(final, seconds=seconds, sec_per_epoch=seconds / max(cfg.n_epochs - start, 1))
        if checkpoint is not None and checkpoint.exists():
            checkpoint.unlink()
        return out


def _progress_bar(cfg: TrainConfig, start: int, desc: str, progress: bool) -> tqdm:
    return tqdm(
        total=cfg.n_epochs,
        initial=start,
        desc=desc,
        disable=not progress,
        mininterval=0.5,
        leave=False,
    )


_SCALARS = ["epoch", "ce_minus_H", "W_norm", "H_norm", "L_norm", "pf_dist"]
_SNAPSHOTS = ["W", "H", "b"]


# ------------------------------------------------------------------------------------------
# UFM: closed-form gradient, in-place AdamW, float64
# ------------------------------------------------------------------------------------------


def init_ufm_state(ds: ContextDataset, cfg: TrainConfig) -> NDArray[np.float64]:
    """Flat float64 parameter vector ``[vec(W), vec(H)]`` of the UFM at initialisation."""
    from ntpcore.geo.models.ufm import init_ufm

    W, H = init_ufm(ds.m, ds.V, cfg.d, np.random.default_rng(cfg.seed))
    return np.concatenate([W.ravel(), H.ravel()])


_UFM_NO_SHIFT = 600.0  # logits within +-600: exp needs no shift (no product of exponentials)
_UFM_CHECK = 64  # epochs between two checks of that bound


def _adamw(theta, grad, mom, vel, t: int, wd: float, b1: float, b2: float, eps: float):
    """In-place AdamW on a flat float64 parameter vector, with the arithmetic of
    ``torch.optim.AdamW`` (amsgrad=False): returns ``step(lr)``, which takes step ``t + 1``
    from the gradient in ``grad`` -- one fused pass of torch's AdamW kernel over the arrays
    (shared with numpy, no copies), or the same update in numpy where that kernel is
    missing."""
    fused = getattr(torch, "_fused_adamw_", None)
    if fused is not None:
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
    cfg: TrainConfig,
    *,
    checkpoint: Path | None = None,
    checkpoint_seconds: float = 120.0,
    progress: bool = True,
) -> dict[str, Any]:
    """Train the NTP-UFM with full-batch AdamW in float64 (closed-form gradient).

    Returns the recorded metrics (see :class:`_Recorder`) plus ``W_final`` (V, d),
    ``H_final`` (d, m) in float64, ``seconds`` and ``sec_per_epoch`` (training only).
    """
    if cfg.model != "ufm":
        raise DataError(f"train_ufm_numpy trains the UFM, got model={cfg.model!r}")
    V, m, d = ds.V, ds.m, cfg.d
    nW = V * d
    N = ds.counts.astype(np.float64)  # (V, m) joint counts
    Nj = N.sum(axis=0)  # (m,)
    b1, b2, eps = 0.9, 0.999, 1e-8

    theta = init_ufm_state(ds, cfg)
    mom, vel = np.zeros_like(theta), np.zeros_like(theta)
    start = 0
    rec = _Recorder(ds, record_epochs(cfg.n_epochs, cfg.n_records))
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
    adamw_step = _adamw(theta, grad, mom, vel, start, cfg.weight_decay, b1, b2, eps)
    # |l_zj| <= ||W|| ||H||; an AdamW step moves each entry by at most lr * (rho + wd |theta|)
    rho = (1.0 - b1) / math.sqrt((1.0 - b2) * (1.0 - b1 * b1 / b2))
    nW_sqrt, nH_sqrt = math.sqrt(nW), math.sqrt(H.size)

    def save(epoch: int) -> None:
        with atomic_path(checkpoint) as tmp_path:
            np.savez(tmp_path, theta=theta, mom=mom, vel=vel, epoch=epoch, **rec.state())

    t0 = last_save = time.perf_counter()
    bar = _progress_bar(cfg, start, "UFM", progress)
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
    for k in range(start, cfg.n_epochs + 1):
        if k == nxt:
            rec.add(k, W, H, None)
            nxt = rec.next_epoch()
        if k == cfg.n_epochs:
            break
        lr = lr_at(cfg, k)
        if k == next_check:  # shift the logits only if they may leave [-600, 600]
            reach = _UFM_CHECK * lr * (rho + cfg.weight_decay * float(np.abs(theta).max()))
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


def fit_ufm_ridge(
    ds: ContextDataset,
    d: int,
    lam: float,
    *,
    seed: int = 0,
    gtol: float = 1e-10,
    maxiter: int = 20000,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""A stationary point of the ridge-regularised NTP-UFM by L-BFGS (float64).

    .. math:: \min_{W,H}\ \CE(WH) + \tfrac{\lambda}{2}(\|W\|_F^2 + \|H\|_F^2)

    (book: ``geo-def-ufm``; mean loss: ``CE`` weighted by :math:`\hat\pi`).  For
    ``d >= min(V, m)`` every local minimum is global and :math:`L = WH` solves the convex
    problem :math:`\min_L \CE(L) + \lambda\|L\|_*` (book: ``geo-lem-nuclear``); the tests
    certify this with the subgradient condition
    :math:`-\nabla\CE(L)/\lambda \in \partial\|L\|_*`.

    Returns ``W`` (V, d) and ``H`` (d, m).
    """
    from scipy.optimize import minimize

    V, m = ds.V, ds.m
    P, pi = ds.P, ds.pi
    nW = V * d
    W0, H0 = _ufm_init_arrays(ds, TrainConfig(d=d, seed=seed))

    def fun(theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        W, H = theta[:nW].reshape(V, d), theta[nW:].reshape(d, m)
        ce, G = ce_grad_unchecked(W @ H, P, pi)  # G: (V, m) gradient of CE in L
        f = ce + 0.5 * lam * float(theta @ theta)
        g = np.concatenate([(G @ H.T + lam * W).ravel(), (W.T @ G + lam * H).ravel()])
        return f, g

    res = minimize(
        fun,
        np.concatenate([W0.ravel(), H0.ravel()]),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": maxiter, "gtol": gtol, "ftol": 0.0, "maxcor": 30},
    )
    # L-BFGS may stop with a line-search message at a point that is already stationary to
    # machine precision; the certificate is the gradient, not the message.
    grad = float(np.abs(res.jac).max())
    if not res.success and grad > 1e3 * gtol:
        raise SolverError(
            f"fit_ufm_ridge: L-BFGS stopped without a stationary point ({res.message}; "
            f"largest gradient entry {grad:.1e} > {1e3 * gtol:g}); raise maxiter"
        )
    theta = res.x
    return theta[:nW].reshape(V, d).copy(), theta[nW:].reshape(d, m).copy()


# ------------------------------------------------------------------------------------------
# torch models
# ------------------------------------------------------------------------------------------


def default_device() -> torch.device:
    """The GPU when one is present, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build_model(ds: ContextDataset, cfg: TrainConfig) -> torch.nn.Module:
    """The model of ``cfg`` for ``ds``, initialised from ``cfg.seed`` (CPU, cfg dtype)."""
    from ntpcore.geo.models.lstm import LSTMConfig, LSTMModel
    from ntpcore.geo.models.transformer import Transformer, TransformerConfig
    from ntpcore.geo.models.ufm import UFM

    if cfg.model == "ufm":  # the same initial values as train_ufm_numpy
        return UFM.from_arrays(*_ufm_init_arrays(ds, cfg), dtype=cfg.torch_dtype)
    gen = torch.Generator().manual_seed(cfg.seed)
    sizes = {"vocab_in": len(ds.input_vocab), "vocab_out": ds.V, "dim": cfg.d}
    if cfg.model == "transformer":
        tcfg = TransformerConfig(**sizes, n_layers=cfg.tf_layers, n_heads=cfg.tf_heads)
        net: torch.nn.Module = Transformer(tcfg, generator=gen)
    else:
        lcfg = LSTMConfig(**sizes, n_layers=cfg.lstm_layers, output_bias=cfg.lstm_bias)
        net = LSTMModel(lcfg, generator=gen)
    return net.to(cfg.torch_dtype)


def _ufm_init_arrays(ds: ContextDataset, cfg: TrainConfig) -> tuple[np.ndarray, np.ndarray]:
    theta = init_ufm_state(ds, cfg)
    nW = ds.V * cfg.d
    return theta[:nW].reshape(ds.V, cfg.d), theta[nW:].reshape(cfg.d, ds.m)


def model_inputs(ds: ContextDataset, cfg: TrainConfig) -> Any:
    """What the model reads: context indices (m,) for the UFM, the contexts' prefix trie for
    the transformer (same function, each distinct prefix computed once), token ids (m, T)
    for the LSTM."""
    from ntpcore.geo.models.transformer import PrefixTrie

    if cfg.model == "ufm":
        return torch.arange(ds.m)
    tokens = torch.from_numpy(np.array(ds.contexts, dtype=np.int64))
    return PrefixTrie(tokens) if cfg.model == "transformer" else tokens


def summed_loss(logits: torch.Tensor, counts_t: torch.Tensor) -> torch.Tensor:
    r"""Sum over the n samples of the CE loss, from distinct-context ``logits`` (m, V).

    ``counts_t`` (m, V) holds :math:`n_{z,j}` transposed: :math:`\sum_j n_j \mathrm{LSE}(\ell_j)
    - \sum_{j,z} n_{z,j} \ell_{z,j}`.
    """
    return (counts_t.sum(dim=1) * torch.logsumexp(logits, dim=1)).sum() - (counts_t * logits).sum()


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW on every parameter (the authors' single parameter group)."""
    dev = next(model.parameters()).device
    fused = dev.type in ("cpu", "cuda")
    return torch.optim.AdamW(
        model.parameters(),
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
        betas=(0.9, 0.999),
        eps=1e-8,
        fused=fused,
    )


def train_torch(
    ds: ContextDataset,
    cfg: TrainConfig,
    *,
    checkpoint: Path | None = None,
    checkpoint_seconds: float = 120.0,
    progress: bool = True,
    device: torch.device | str | None = None,
) -> dict[str, Any]:
    """Train ``build_model(ds, cfg)`` full-batch on the distinct contexts with counts.

    Returns the recorded metrics plus ``W_final``, ``H_final``, ``b_final`` (float64),
    ``seconds``, ``sec_per_epoch``, ``device`` and ``n_params``.
    """
    dev = torch.device(device) if device is not None else default_device()
    model = build_model(ds, cfg).to(dev)
    opt = make_optimizer(model, cfg)
    x = model_inputs(ds, cfg).to(dev)
    counts_t = torch.from_numpy(ds.counts.T.astype(np.float64)).to(dev, cfg.torch_dtype)
    rec = _Recorder(ds, record_epochs(cfg.n_epochs, cfg.n_records))
    start = 0
    if checkpoint is not None and checkpoint.exists():
        state = torch.load(checkpoint, map_location=dev, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = int(state["epoch"])
        rec.load({k: v.numpy() for k, v in state["rec"].items()})

    def save(epoch: int) -> None:
        rec_t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in rec.state().items()}
        with atomic_path(checkpoint) as tmp_path:
            torch.save(
                {
                    "model": model.state_dict(),
                    "opt": opt.state_dict(),
                    "epoch": epoch,
                    "rec": rec_t,
                },
                tmp_path,
            )

    def snapshot(k: int, feats: torch.Tensor) -> None:
        b = model.output_bias
        rec.add(
            k,
            model.output_weight.detach().cpu().numpy(),
            feats.detach().t().cpu().numpy(),
            None if b is None else b.detach().cpu().numpy(),
        )

    model.train()
    t0 = last_save = time.perf_counter()
    bar = _progress_bar(cfg, start, cfg.model, progress)
    nxt = rec.next_epoch()
    for k in range(start, cfg.n_epochs):
        feats = model.features(x)  # (m, d)
        if k == nxt:
            snapshot(k, feats)
            nxt = rec.next_epoch()
        loss = summed_loss(model.output(feats), counts_t)
        for group in opt.param_groups:
            group["lr"] = lr_at(cfg, k)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        bar.update(1)
        if checkpoint is not None and time.perf_counter() - last_save > checkpoint_seconds:
            save(k + 1)
            last_save = time.perf_counter()
    bar.close()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        feats = model.features(x)
    if nxt == cfg.n_epochs:
        snapshot(cfg.n_epochs, feats)
    b = model.output_bias
    return rec.finish(
        cfg,
        start,
        seconds,
        checkpoint,
        W_final=model.output_weight.detach().cpu().double().numpy(),
        H_final=feats.detach().t().cpu().double().numpy(),
        b_final=np.zeros(ds.V) if b is None else b.detach().cpu().double().numpy(),
        device=str(dev),
        n_params=int(sum(p.numel() for p in model.parameters())),
    )


def train(ds: ContextDataset, cfg: TrainConfig, **kwargs: Any) -> dict[str, Any]:
    """Train ``cfg.model`` on ``ds``: the UFM in closed form (numpy), networks with torch."""
    if cfg.model == "ufm":
        kwargs.pop("device", None)
        return train_ufm_numpy(ds, cfg, **kwargs)
    return train_torch(ds, cfg, **kwargs)


def replace(cfg: TrainConfig, **changes: Any) -> TrainConfig:
    """``dataclasses.replace`` for :class:`TrainConfig` (re-validates)."""
    return dataclasses.replace(cfg, **changes)
