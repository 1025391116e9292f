r"""The support-size sweep of the linear paper (key ``lin``): GD from one-hot supports
[lin, Remark 1] to full supports (beyond the paper), each size an independent cached run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ntpcore.core.cache import cached
from ntpcore.core.optim import init_weights, log_steps, train
from ntpcore.core.sweep import map_runs
from ntpcore.lin.experiments.synthetic import (
    DataConfig,
    InitAndRecording,
    RunConfig,
    run_config,
    synthetic_data,
    train_run,
)
from ntpcore.lin.loss import ce_excess_W, make_loss_grad
from ntpcore.lin.subspace import finite_component_info

__all__ = ["SparsityConfig", "run_full_support", "run_sparsity", "sparsity_point"]


@dataclass(frozen=True)
class SparsityConfig(InitAndRecording, DataConfig):
    """Support-size sweep from one-hot [lin, Remark 1] to full support (beyond the paper)."""

    support_sizes: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 9, 10)
    lr: float = 0.5
    n_steps: int = 100_000


def sparsity_point(run: RunConfig) -> dict:
    r"""GD at one support size (an independent run of the sweep): :func:`train_run`, or
    :func:`run_full_support` when the supports are full (no :math:`W^{\mathrm{mm}}`); both
    cached, so an interrupted sweep resumes."""
    return train_run(run) if run.support_size < run.vocab_size else run_full_support(run)


def run_sparsity(
    cfg: SparsityConfig,
    progress: bool = True,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
) -> dict:
    """GD for every support size S (each run cached); W^mm norm, dim F, frozen P_perp.

    The support sizes are independent runs (:func:`sparsity_point`): they go through
    :func:`ntpcore.core.sweep.map_runs`, in-process by default, on ``n_workers`` local
    processes or on a ``dask.distributed`` scheduler.  How they run does not change what
    they compute, so neither is part of ``cfg`` or of any cache key.
    """

    t0 = time.perf_counter()
    runs = [run_config(cfg, support_size=int(S), optimizer="gd") for S in cfg.support_sizes]
    results = map_runs(
        sparsity_point,
        runs,
        n_workers=n_workers,
        scheduler=scheduler,
        desc="support sizes",
        progress=progress,
    )
    out: dict = {"support_sizes": np.asarray(cfg.support_sizes), "steps": results[-1]["steps"]}
    for k in ("norm", "gap", "norm_perp", "rel_dist_F", "cos"):
        out[k] = np.stack([r[k] for r in results])
    out.update(
        {
            "norm_mm": np.array(
                [
                    r["norm_mm"] if run.support_size < cfg.vocab_size else np.nan
                    for run, r in zip(runs, results, strict=True)
                ]
            ),
            "dim_F": np.asarray([r["dim_F"] for r in results]),
            "norm_star": np.asarray([r["norm_star"] for r in results]),
            "compute_seconds": time.perf_counter() - t0,
        }
    )
    return out


@cached
def run_full_support(cfg: RunConfig) -> dict:
    """GD with full supports: no W^mm; metrics relative to W* only."""
    data = synthetic_data(cfg)
    fc = finite_component_info(data.H, data.P)
    F, Ws = fc["F"], fc["W_star"]
    ns = float(np.linalg.norm(Ws))
    W0 = init_weights((data.V, data.d), cfg.init, cfg.init_seed)
    perp0 = F.project_perp(W0)

    def metrics(W):
        WF = F.project(W)
        return {
            "gap": ce_excess_W(W, data.H, data.P, data.pi),
            "rel_dist_F": float(np.linalg.norm(WF - Ws)) / ns,
            "norm_perp": float(np.linalg.norm(W - WF)),
            "perp_drift": float(np.linalg.norm(W - WF - perp0)),
            "cos": np.nan,
        }

    tr = train(
        make_loss_grad(data.H, data.P, data.pi),
        W0,
        optimizer="gd",
        eta=cfg.lr,
        n_steps=cfg.n_steps,
        record_steps=log_steps(cfg.n_steps, cfg.n_records),
        metrics=metrics,
    )
    out = {"steps": tr.steps}
    out.update(tr.metrics)
    out.update({"dim_F": F.dim, "norm_star": ns})
    return out
