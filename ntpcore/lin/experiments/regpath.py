r"""The regularization path of eq. (8) of the linear paper against Theorem 1 (key ``lin``),
with the GD path overlaid against the norm (:func:`run_reg_path`), and the "genie" points of
the theorem's proof (:func:`genie_gaps`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ntpcore.core.cache import cached
from ntpcore.core.metrics import cos
from ntpcore.lin.experiments.synthetic import (
    InitAndRecording,
    SupportConfig,
    run_config,
    synthetic_data,
    train_run,
)
from ntpcore.lin.loss import ce_excess_W
from ntpcore.lin.regpath import regularization_path
from ntpcore.lin.training import solution_pair

__all__ = ["RegPathConfig", "genie_gaps", "reg_path", "run_reg_path"]


@dataclass(frozen=True)
class RegPathConfig(InitAndRecording, SupportConfig):
    """Regularization path (Theorem 1) with the GD path overlaid against the norm."""

    radii: tuple[float, ...] = (
        1.0,
        2.0,
        3.0,
        5.0,
        7.0,
        10.0,
        15.0,
        20.0,
        30.0,
        40.0,
        50.0,
        60.0,
        70.0,
        80.0,
    )
    init: str = "zero"
    lr: float = 0.5
    n_steps: int = 300_000
    n_records: int = 80


@cached
def reg_path(cfg: RegPathConfig) -> dict:
    r"""The minimisers :math:`\widehat W_B` of eq. (8) at the radii (``path_W``, B x V x d)
    and what Theorem 1 measures of them."""
    t0 = time.perf_counter()
    data = synthetic_data(cfg)
    pair = solution_pair(data.H, data.P)
    Wmm, Ws, F = pair["W_mm"], pair["W_star"], pair["F"]
    path = regularization_path(data.H, data.P, data.pi, cfg.radii, on_fail="stop")
    ns = float(np.linalg.norm(Ws))
    W = path["W"]
    return {
        "radii": path["B"],
        "path_W": np.asarray(W),
        "path_norm": path["norm"],
        "mu": path["mu"],
        "n_failed": path["n_failed"],
        "path_cos": np.array([cos(w, Wmm) for w in W]),
        "path_cos_corr": np.array([cos(w - Ws, Wmm) for w in W]),
        "path_rel_dist_F": np.array([np.linalg.norm(F.project(w) - Ws) / ns for w in W]),
        "path_gap": np.array([ce_excess_W(w, data.H, data.P, data.pi) for w in W]),
        "norm_mm": pair["svm"].norm,
        "norm_star": ns,
        "compute_seconds": time.perf_counter() - t0,
    }


def run_reg_path(cfg: RegPathConfig) -> dict:
    """The regularization path (:func:`reg_path`) and the GD run overlaid on it (its
    recorded curves prefixed ``gd_``; :func:`~ntpcore.lin.experiments.synthetic.train_run`),
    each cached."""
    out = dict(reg_path(cfg))
    gd = train_run(run_config(cfg, optimizer="gd"))
    out.update({f"gd_{k}": v for k, v in gd.items() if isinstance(v, np.ndarray)})
    out["compute_seconds"] += gd["compute_seconds"]
    return out


def genie_gaps(cfg: SupportConfig, radii) -> np.ndarray:
    r"""CE - H at the "genie" points :math:`W^\star + R(B)\,W^{\mathrm{mm}}` of radius B.

    :math:`R(B) = \sqrt{B^2 - \|W^\star\|^2}/\|W^{\mathrm{mm}}\|` puts the point on the
    sphere :math:`\|W\| = B` (:math:`W^\star\perp W^{\mathrm{mm}}`), so the minimiser
    :math:`\widehat W_B` of eq. (8) can do no worse (proof of Theorem 1).  NaN for
    :math:`B \le \|W^\star\|`.
    """
    data = synthetic_data(cfg)
    pair = solution_pair(data.H, data.P)
    Ws, Wmm = pair["W_star"], pair["W_mm"]
    ns, nm = float(np.linalg.norm(Ws)), pair["svm"].norm
    out = []
    for B in radii:
        if B <= ns:
            out.append(np.nan)
            continue
        R = np.sqrt(B**2 - ns**2) / nm
        out.append(ce_excess_W(Ws + R * Wmm, data.H, data.P, data.pi))
    return np.asarray(out)
