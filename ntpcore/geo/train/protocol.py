r"""The training protocol of the geometry paper [geo, Sec. 3] and what every trainer records.

:class:`AdamWProtocol` (the paper's defaults, declared once) and :class:`TrainerConfig` (the
protocol, the model and its architecture), the record epochs (:func:`record_epochs`), the
learning rate at a step (:func:`lr_at`) and the recorder of the metrics and snapshots
(:class:`Recorder`) shared by the numpy and torch trainers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from tqdm.auto import tqdm

from ntpcore.core.logits import ce_excess, project_F
from ntpcore.core.optim import log_steps
from ntpcore.core.progress import progress_bar
from ntpcore.errors import DataError
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.logits import finite_logits

__all__ = [
    "MODELS",
    "PAPER_MILESTONES",
    "Recorder",
    "AdamWProtocol",
    "TrainerConfig",
    "lr_at",
    "epoch_bar",
    "record_epochs",
]


MODELS = ("ufm", "transformer", "lstm")
#: Paper milestones of the step-wise learning rate (epochs), from the authors' code.
PAPER_MILESTONES = (5000, 10000, 15000, 20000, 25000)


@dataclass(frozen=True)
class AdamWProtocol:
    """The paper's full-batch AdamW protocol, declared once: defaults are the paper's
    [geo, Sec. 3].  A full-batch epoch is one optimizer step, so the paper's epochs are
    counted here in ``n_steps`` (and the milestones in steps); the records keep the paper's
    word (``epoch``).

    A part of every training configuration (:class:`TrainerConfig` here, the experiment and
    figure configurations of :mod:`ntpcore.geo.experiments.training`): its field names are
    the notebooks' parameter names.
    """

    dim: int = 128  # d: embedding dimension (UFM d, transformer/LSTM width)
    n_steps: int = 30000  # full-batch AdamW steps (the paper's epochs)
    lr: float = 1e-4  # initial learning rate
    weight_decay: float = 1e-6  # AdamW decoupled weight decay (all parameters)
    lr_milestones: tuple[int, ...] = PAPER_MILESTONES  # steps (epochs) where lr *= lr_gamma
    lr_gamma: float = 0.4  # step-wise decay factor
    init_seed: int = 0  # initialisation seed (numpy for the UFM, torch.Generator otherwise)
    n_records: int = 60  # number of log-spaced record epochs (plus 1, 10, 100, ...)

    def __post_init__(self) -> None:
        if self.n_steps < 0 or self.dim < 1 or self.lr <= 0 or self.weight_decay < 0:
            raise DataError("need n_steps >= 0, dim >= 1, lr > 0 and weight_decay >= 0")
        object.__setattr__(self, "lr_milestones", tuple(int(k) for k in self.lr_milestones))
        _check_schedule(self)


def _check_schedule(cfg: AdamWProtocol) -> None:
    """The learning-rate schedule: a finite rate and decay, a decay factor in (0, 1] (one
    below 0 makes every other phase ascend the loss), increasing non-negative milestones."""
    if not (math.isfinite(cfg.lr) and math.isfinite(cfg.weight_decay)):
        raise DataError(f"lr and weight_decay must be finite, got {cfg.lr}, {cfg.weight_decay}")
    if not 0 < cfg.lr_gamma <= 1:
        raise DataError(f"lr_gamma must lie in (0, 1], got {cfg.lr_gamma}")
    m = cfg.lr_milestones
    if any(k < 0 for k in m) or any(b <= a for a, b in zip(m, m[1:], strict=False)):
        raise DataError(f"lr_milestones must be increasing and >= 0, got {list(m)}")


@dataclass(frozen=True)
class TrainerConfig:
    """What a trainer needs: the protocol, the model and its architecture."""

    protocol: AdamWProtocol = AdamWProtocol()  # the paper's by default
    model: str = "ufm"  # ufm | transformer | lstm
    tf_layers: int = 4  # transformer blocks
    tf_heads: int = 6  # transformer attention heads
    lstm_layers: int = 2  # stacked LSTM layers
    lstm_bias: bool = True  # LSTM output-layer bias (the authors' code)
    dtype: str = "auto"  # auto (float64 UFM, float32 networks) | float32 | float64

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise DataError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.dtype not in ("auto", "float32", "float64"):
            raise DataError(f"dtype must be auto, float32 or float64, got {self.dtype!r}")

    @property
    def torch_dtype(self) -> torch.dtype:
        if self.dtype == "auto":
            return torch.float64 if self.model == "ufm" else torch.float32
        return getattr(torch, self.dtype)


def record_epochs(n_steps: int, n_records: int = 60) -> NDArray[np.int64]:
    """Log-spaced record epochs in [0, n_steps], plus 1, 10, 100, ... (sorted, unique)."""
    decades = [10**k for k in range(int(math.log10(max(n_steps, 1))) + 1)]
    pts = np.concatenate([log_steps(n_steps, n_records), decades])
    return np.unique(pts[pts <= n_steps]).astype(np.int64)


def lr_at(protocol: AdamWProtocol, step: int) -> float:
    """Learning rate of optimiser step ``step`` (0-based), as ``MultiStepLR`` gives it."""
    lr, gamma, milestones = protocol.lr, protocol.lr_gamma, protocol.lr_milestones
    return lr * gamma ** sum(step >= k for k in milestones)


class Recorder:
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
        cfg: TrainerConfig,
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
        out.update(
            final, seconds=seconds, sec_per_epoch=seconds / max(cfg.protocol.n_steps - start, 1)
        )
        if checkpoint is not None and checkpoint.exists():
            checkpoint.unlink()
        return out


def epoch_bar(cfg: TrainerConfig, start: int, desc: str, progress: bool) -> tqdm:
    """The bar of a training's epochs (off with ``progress=False`` or ``NTP_PROGRESS=0``)."""
    return progress_bar(
        total=cfg.protocol.n_steps,
        initial=start,
        desc=desc,
        enabled=progress,
        mininterval=0.5,
        leave=False,
    )


_SCALARS = ["epoch", "ce_minus_H", "W_norm", "H_norm", "L_norm", "pf_dist"]
_SNAPSHOTS = ["W", "H", "b"]
