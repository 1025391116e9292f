r"""The regularization path of the self-attention paper (key ``att``, book
``att-thm-regpath``): :math:`W_R = \arg\min_{\|W\|\le R} L(W)` on cyclic data, one cached
solve per trial.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ntpcore.att.experiments.trials import (
    DataConfig,
    Trial,
    sample_feasible_trial,
    trial_rng,
    trial_sweep,
)
from ntpcore.att.finite import finite_component, subspaces
from ntpcore.att.linalg import project_onto_spans
from ntpcore.att.regpath import regularization_path
from ntpcore.core.cache import cached
from ntpcore.core.metrics import cos

__all__ = ["RegPathConfig", "reg_path_trial", "run_reg_path"]


# ============================================================================================
# regularization path (book att-thm-regpath)
# ============================================================================================
@dataclass(frozen=True)
class RegPathConfig(DataConfig):
    """Regularization path W_R = argmin_{||W|| <= R} L(W) on cyclic data (book
    ``att-thm-regpath``)."""

    radii: tuple = (
        0.5,
        1.0,
        2.0,
        3.0,
        5.0,
        10.0,
        20.0,
        30.0,
    )  # R grid (<= 30: beyond, the solver stalls)


@cached
def reg_path_trial(trial: Trial) -> dict:
    """The path of one cyclic dataset (an independent run): cos(W_R, W^svm),
    ||Π_Sfin W_R - W^fin|| and ||W_R|| along the radii, and the rejected / infeasible draws."""
    cfg = trial.cfg
    ft = sample_feasible_trial(
        trial_rng(cfg.trial_seed, trial.index),
        cfg.n_samples,
        cfg.seq_len,
        cfg.vocab_size,
        cfg.dim,
        "cyclic",
    )
    data, graphs, W_svm = ft.data, ft.graphs, ft.W_svm
    W_fin = finite_component(data.E, data.tokens, data.labels, graphs=graphs)
    B_fin = subspaces(data.E, data.tokens, data.labels, graphs=graphs).S_fin
    WR = regularization_path(data.E, data.tokens, data.labels, np.asarray(cfg.radii, float))["W"]
    return {
        "corr_svm": cos(WR, W_svm),
        "fin_err": np.linalg.norm(
            project_onto_spans(WR[:, None], [B_fin])[:, 0] - W_fin, axis=(-2, -1)
        ),
        "W_norm": np.linalg.norm(WR, axis=(-2, -1)),
        # the data and the objects of the path, for the checks (ntpcore.att.checks)
        "E": data.E,
        "tokens": data.tokens,
        "labels": data.labels,
        "W_R": WR,
        "W_svm": W_svm,
        "W_fin": W_fin,
        "n_rejected": int(data.n_rejected),
        "n_infeasible": int(ft.n_infeasible),
    }


def run_reg_path(
    cfg: RegPathConfig,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
    progress: bool = True,
) -> dict:
    """cos(W_R, W^svm), ||Π_Sfin W_R - W^fin|| and ||W_R|| along R (cvxpy + Clarabel); per
    trial also its data, the path ``W_R`` (n_radii, d, d), ``W_svm`` and ``W_fin``.

    The trials are independent runs (per-trial cached by :func:`reg_path_trial`; each path is
    a sequence of conic solves, not one batch): they go through
    :func:`ntpcore.core.sweep.map_runs`, in-process by default, on ``n_workers`` local
    processes or on a ``dask.distributed`` scheduler.  How they run does not change what
    they compute, so neither is part of ``cfg`` or of any cache key.
    """
    t0 = time.perf_counter()
    results = trial_sweep(
        reg_path_trial, cfg, "regularization paths", n_workers, scheduler, progress
    )
    return {
        "radii": np.asarray(cfg.radii, float),
        **{
            k: np.stack([r[k] for r in results])
            for k in ("corr_svm", "fin_err", "W_norm", "E", "tokens", "labels", "W_R", "W_svm")
            + ("W_fin",)
        },
        "n_rejected": int(sum(r["n_rejected"] for r in results)),
        "n_infeasible": int(sum(r["n_infeasible"] for r in results)),
        "compute_seconds": float(time.perf_counter() - t0),
    }
