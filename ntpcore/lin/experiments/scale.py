r"""Theorem 2 of [lin] at a real-vocabulary size (the *Performance* chapter, key ``perf``).

On NTP_H-compatible (Def. 1) and NTP-separable (Def. 2) data, GD and NGD from zero satisfy
:math:`\cos(W_k, W^{\mathrm{mm}})\to 1` and :math:`P_F(W_k)\to W^\star` [lin, Thm. 2].
:func:`run_lin_scale` (figure ``perf-lin-scale``) checks this at a size that a generic conic
solver cannot reach.  The NTP-SVM is solved by
the specialised dual solver (:func:`ntpcore.lin.svm.solve_ntp_svm`, dual coordinate
descent when d < m), the finite component by :func:`ntpcore.lin.finite_component_info`,
and (normalised) GD runs from zero through :func:`ntpcore.lin.train_ntp`, which records
the metrics of the paper's Fig. 4 (:func:`ntpcore.lin.train_metrics`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ntpcore.core.cache import cached
from ntpcore.core.optim import log_steps
from ntpcore.lin.experiments.synthetic import SupportConfig, synthetic_data
from ntpcore.lin.subspace import finite_component_info, require_compatible
from ntpcore.lin.svm import solve_ntp_svm
from ntpcore.lin.training import train_ntp

__all__ = ["ScaleConfig", "run_lin_scale", "scale_run"]


@dataclass(frozen=True)
class ScaleConfig(SupportConfig):
    """Synthetic data of App. A.2's kind at a real-vocabulary size, sparse supports."""

    n_contexts: int = 1000
    dim: int = 512
    vocab_size: int = 1000
    support_size: int = 3
    optimizer: str = "gd"  # "gd" (Theorem 2) | "ngd", from W_0 = 0
    lr: float = 0.5  # eta
    n_steps: int = 3000  # optimizer steps
    n_records: int = 40  # recorded iterates, log-spaced


def run_lin_scale(cfg: ScaleConfig) -> dict:
    """Solve W^mm and W* at scale, train from zero, return the Fig. 4 metrics along k, and
    the two solutions with the dual coefficients that certify W^mm (:func:`scale_run`)."""
    return scale_run(cfg)


@cached
def scale_run(cfg: ScaleConfig) -> dict:
    """The computation of :func:`run_lin_scale` (cached)."""
    t0 = time.perf_counter()
    data = synthetic_data(cfg)
    t = time.perf_counter()
    svm = solve_ntp_svm(data.H, data.S)
    t_svm = time.perf_counter() - t
    t = time.perf_counter()
    fc = require_compatible(finite_component_info(data.H, data.P))
    t_fin = time.perf_counter() - t
    pair = {"W_star": fc["W_star"], "W_mm": svm.W_mm, "F": fc["F"], "svm": svm}
    t = time.perf_counter()
    tr = train_ntp(
        data,
        optimizer=cfg.optimizer,
        eta=cfg.lr,
        n_steps=cfg.n_steps,
        init="zero",
        record_steps=log_steps(cfg.n_steps, cfg.n_records),
        pair=pair,
        progress=True,
    )
    t_train = time.perf_counter() - t
    keys = ("loss", "norm", "gap", "cos", "cos_corr", "rel_dist_F", "norm_perp")
    out = {"steps": tr.steps.astype(np.int64), **{k: tr.metrics[k] for k in keys}}
    out.update(
        {
            "entropy": data.entropy,
            "W_mm": svm.W_mm,
            "C": svm.C if svm.C is not None else np.full(data.P.shape, np.nan),
            "W_star": fc["W_star"],
            "norm_mm": svm.norm,
            "norm_star": float(np.linalg.norm(fc["W_star"])),
            "dim_F": fc["F"].dim,
            "svm_solver": svm.solver,
            "svm_min_margin": svm.min_margin,
            "svm_max_spread": svm.max_spread,
            "svm_n_active": svm.n_active,
            "svm_seconds": t_svm,
            "finite_seconds": t_fin,
            "train_seconds": t_train,
            "compute_seconds": time.perf_counter() - t0,
        }
    )
    return out
