r"""What every training figure of the linear paper records (key ``lin``): the metrics of a
trajectory (:func:`trajectory_metrics`), with the limits of Theorem 2 they are measured
against (:func:`trained_result`), and the spread over independent draws (:func:`run_draws`,
through :func:`ntpcore.core.sweep.map_runs`).
"""

from __future__ import annotations

import numpy as np

from ntpcore.core.optim import Trajectory
from ntpcore.core.sweep import map_runs
from ntpcore.lin.data import NTPData
from ntpcore.lin.experiments.measures import median_seed

__all__ = ["run_draws", "trained_result", "trajectory_metrics"]


def trajectory_metrics(
    tr: Trajectory,
    keys=(
        "loss",
        "norm",
        "gap",
        "cos",
        "cos_corr",
        "cos_perp",
        "rel_dist_F",
        "dist_F",
        "norm_perp",
    ),
) -> dict:
    out = {"steps": tr.steps.astype(np.int64)}
    out.update({k: tr.metrics[k] for k in keys})
    return out


def trained_result(tr: Trajectory, data: NTPData, pair: dict) -> dict:
    """The recorded metrics of a run and the limits of Theorem 2 they are measured against."""
    out = trajectory_metrics(tr)
    out.update(
        {
            "entropy": data.entropy,
            "norm_mm": pair["svm"].norm,
            "norm_star": float(np.linalg.norm(pair["W_star"])),
            "dim_F": pair["F"].dim,
            "monotone": bool(np.all(np.diff(tr.loss) <= 1e-12)),
        }
    )
    return out


def run_draws(
    run, cfgs: list, seeds: list[int], desc: str, progress: bool, n_workers: int, scheduler
) -> dict:
    """Run ``run`` on one config per draw through :func:`ntpcore.core.sweep.map_runs` and
    stack what the seed spreads of Figs. 1 and 4 report (see :func:`run_toy_seeds`)."""

    runs = map_runs(
        run, cfgs, n_workers=n_workers, scheduler=scheduler, desc=desc, progress=progress
    )
    curves = ("loss", "gap", "norm", "cos", "cos_corr", "rel_dist_F", "norm_perp")
    out: dict = {"seeds": np.asarray(seeds, dtype=np.int64), "steps": runs[0]["steps"]}
    out.update({f"{key}_curves": np.stack([r[key] for r in runs]) for key in curves})
    out.update({f"{key}_end": out[f"{key}_curves"][:, -1] for key in curves})
    out["norm_star"] = np.array([r["norm_star"] for r in runs])
    out["norm_mm"] = np.array([r["norm_mm"] for r in runs])
    out["loss_monotone"] = np.array([r["monotone"] for r in runs])
    out["cos_monotone"] = np.array([bool(np.all(np.diff(r["cos"]) >= -1e-12)) for r in runs])
    out["median_seed"] = median_seed(seeds, out["cos_end"])
    return out
