r"""First-order trainers shared by the papers: GD, normalized GD and Adam, in float64.

Each trainer minimises any smooth loss given as a callable ``loss_grad(W) -> (loss, grad)``
(``grad`` has the shape of ``W``) and records metrics at chosen (usually log-spaced) steps:

* GD   :math:`W_{k+1} = W_k - \eta\nabla\mathcal L(W_k)`
* NGD  :math:`W_{k+1} = W_k - \eta\nabla\mathcal L(W_k)/\|\nabla\mathcal L(W_k)\|_F`
  (Nacson et al. 2019), so :math:`\|W_{k+1}-W_k\| = \eta` exactly
* Adam bias-corrected, elementwise (Kingma & Ba 2015):
  :math:`m_k = \beta_1 m_{k-1} + (1-\beta_1)g_k`, :math:`v_k = \beta_2 v_{k-1} + (1-\beta_2)g_k^2`,
  :math:`W_{k+1} = W_k - \eta\,\hat m_k/(\sqrt{\hat v_k}+\epsilon)` with
  :math:`\hat m_k = m_k/(1-\beta_1^{k})`, :math:`\hat v_k = v_k/(1-\beta_2^{k})`.

The loss is stored at *every* step (so monotonicity can be checked); other metrics only at
``record_steps``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.progress import progress_bar, progress_enabled
from ntpcore.core.validate import (
    as_float_array,
    check_choice,
    check_number,
    check_numbers,
    check_seed,
)
from ntpcore.errors import ParameterError, SolverError

__all__ = ["INITS", "OPTIMIZERS", "Trajectory", "check_hyper", "init_weights", "log_steps", "train"]

Array = NDArray[np.float64]
LossGrad = Callable[[Array], tuple[float, Array]]
Metrics = Callable[[Array], dict[str, float]]

OPTIMIZERS = ("gd", "ngd", "adam")


def log_steps(T: int, n: int = 60) -> np.ndarray:
    """The recording schedule: unique, sorted, roughly log-spaced integers in [0, T],
    including 0 and T."""
    if T < 0:
        raise ValueError(f"T must be >= 0, got {T}")
    if T == 0:
        return np.array([0])
    pts = np.unique(np.round(np.logspace(0, np.log10(T), n)).astype(int))
    return np.unique(np.concatenate([[0], pts, [T]]))


@dataclass(frozen=True, eq=False)
class Trajectory:
    """What a training run leaves behind.

    Attributes
    ----------
    optimizer : "gd" | "ngd" | "adam"
    steps : (n_rec,) int      the recorded iteration counts k (W_k after k updates)
    metrics : name -> (n_rec,) float array, always including "loss" and "norm"
    loss : (n_steps + 1,)     loss(W_k) for every k = 0..n_steps
    W_final : the last iterate W_{n_steps}
    iterates : (n_rec, *W.shape) recorded iterates, if requested
    hyper : the hyper-parameters of the run
    """

    optimizer: str
    steps: NDArray[np.int64]
    metrics: dict[str, Array]
    loss: Array
    W_final: Array
    iterates: Array | None = None
    hyper: dict = field(default_factory=dict)

    def __getitem__(self, key: str) -> Array:
        return self.metrics[key]

    def at(self, step: int) -> dict[str, float]:
        """Metrics at a recorded step."""
        idx = np.flatnonzero(self.steps == step)
        if idx.size == 0:
            raise KeyError(f"step {step} was not recorded")
        return {k: float(v[idx[0]]) for k, v in self.metrics.items()}

    def as_dict(self, prefix: str = "") -> dict[str, Array]:
        """Flat dict of arrays (for the cache): steps, loss, every metric."""
        out = {
            f"{prefix}steps": self.steps,
            f"{prefix}loss_all": self.loss,
            f"{prefix}W_final": self.W_final,
        }
        out.update({f"{prefix}{k}": v for k, v in self.metrics.items()})
        return out


def init_weights(
    shape: tuple[int, int], kind: str = "lecun", rng: np.random.Generator | int | None = 0
) -> Array:
    """Initial decoder: ``"lecun"`` entries N(0, 1/fan_in) with fan_in = shape[1], or ``"zero"``.

    ``rng`` is a generator, a seed (a non-negative integer) or ``None`` (fresh entropy)."""
    check_choice(kind, "init", INITS)
    dims = check_numbers(shape, "shape", lo=1, integer=True)
    if dims.size != 2:
        raise ParameterError(f"shape must be (rows, columns), got {shape!r}")
    shape = (int(dims[0]), int(dims[1]))
    if kind == "zero":
        return np.zeros(shape)
    if rng is not None and not isinstance(rng, np.random.Generator):
        rng = check_seed(rng, "rng")
    rng = np.random.default_rng(rng)
    return rng.standard_normal(shape) / np.sqrt(shape[1])


#: initial decoders of :func:`init_weights`
INITS = ("lecun", "zero")


def check_hyper(
    optimizer: str,
    eta: float,
    n_steps: int,
    record_steps: Sequence[int] | NDArray | None,
    betas: tuple[float, float],
    eps: float,
) -> tuple[str, float, int, NDArray[np.int64], tuple[float, float], float]:
    """The hyper-parameters of :func:`train`, checked (a
    :class:`~ntpcore.errors.ParameterError` naming the first bad one) and normalised:
    the recorded steps sorted and unique, those beyond ``n_steps`` dropped (default: every
    step)."""
    check_choice(optimizer, "optimizer", OPTIMIZERS)
    eta = check_number(eta, "eta", lo=0, lo_open=True)
    n_steps = check_number(n_steps, "n_steps", lo=0, integer=True)
    b1, b2 = _pair(check_numbers(betas, "betas", lo=0, hi=1, hi_open=True), "betas")
    eps = check_number(eps, "eps", lo=0)
    if record_steps is None:
        rec = np.arange(n_steps + 1)
    else:
        rec = np.unique(check_numbers(record_steps, "record_steps", lo=0, integer=True))
        rec = rec[rec <= n_steps]  # a schedule longer than the run is cut at n_steps
    return optimizer, eta, n_steps, rec, (b1, b2), eps


def _pair(values: NDArray, name: str) -> tuple[float, float]:
    if values.size != 2:
        raise ParameterError(f"{name} must be two numbers, got {values.tolist()}")
    return float(values[0]), float(values[1])


def train(
    loss_grad: LossGrad,
    W0: ArrayLike,
    *,
    optimizer: str = "gd",
    eta: float = 0.5,
    n_steps: int = 10_000,
    record_steps: Sequence[int] | NDArray | None = None,
    metrics: Metrics | None = None,
    betas: tuple[float, float] = (0.9, 0.99),
    eps: float = 1e-8,
    store_iterates: bool = False,
    progress: bool = False,
) -> Trajectory:
    """Run ``n_steps`` updates of ``optimizer`` from ``W0``; see the module docstring.

    ``record_steps`` defaults to every step (only sensible for short runs; steps beyond
    ``n_steps`` are dropped); ``metrics(W)`` adds named scalars at those steps.  Raises
    ParameterError for a bad hyper-parameter (:func:`check_hyper`) and SolverError if the
    loss becomes non-finite.
    """
    optimizer, eta, n_steps, rec, (b1, b2), eps = check_hyper(
        optimizer, eta, n_steps, record_steps, betas, eps
    )
    W = as_float_array(W0, "W0").copy()
    rec_set = {int(k): i for i, k in enumerate(rec)}
    losses = np.empty(n_steps + 1)
    recorded: dict[str, list[float]] = {"loss": [], "norm": []}
    its = np.empty((rec.size, *W.shape)) if store_iterates else None
    m1 = np.zeros_like(W)
    m2 = np.zeros_like(W)
    bar = None
    if progress_enabled(progress):
        bar = progress_bar(total=n_steps, desc=optimizer, mininterval=0.5, leave=False)
    for k in range(n_steps + 1):
        loss, g = loss_grad(W)
        if not np.isfinite(loss):
            raise SolverError(f"{optimizer} diverged at step {k} (loss {loss}); reduce eta")
        losses[k] = loss
        i = rec_set.get(k)
        if i is not None:
            recorded["loss"].append(loss)
            recorded["norm"].append(float(np.linalg.norm(W)))
            if metrics is not None:
                for key, val in metrics(W).items():
                    recorded.setdefault(key, []).append(float(val))
            if its is not None:
                its[i] = W
        if k == n_steps:
            break
        if optimizer == "gd":
            W -= eta * g
        elif optimizer == "ngd":
            gn = np.linalg.norm(g)
            if gn > 0:
                W -= (eta / gn) * g
        else:
            t = k + 1
            m1 = b1 * m1 + (1 - b1) * g
            m2 = b2 * m2 + (1 - b2) * g * g
            mhat = m1 / (1 - b1**t)
            vhat = m2 / (1 - b2**t)
            W -= eta * mhat / (np.sqrt(vhat) + eps)
        if bar is not None and (k + 1) % 1000 == 0:
            bar.update(1000)
    if bar is not None:
        bar.close()
    hyper = {"eta": eta, "n_steps": n_steps}
    if optimizer == "adam":
        hyper.update({"beta1": b1, "beta2": b2, "eps": eps})
    return Trajectory(
        optimizer=optimizer,
        steps=rec.astype(np.int64),
        metrics={k: np.asarray(v) for k, v in recorded.items()},
        loss=losses,
        W_final=W,
        iterates=its,
        hyper=hyper,
    )
