r"""The 2-D toy of Figs. 1-2 of the linear paper (key ``lin``): W* of Def. 1 and W^mm of
Def. 3 (:func:`run_toy`), GD from zero (:func:`run_toy_gd`, Lemma 2 and Theorem 2) and the
spread over probability draws (:func:`run_toy_seeds`).  The embeddings and probabilities are
our choices (the paper gives the picture, not the numbers).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ntpcore.core.cache import cached
from ntpcore.core.optim import log_steps
from ntpcore.lin.data import NTPData, make_toy
from ntpcore.lin.experiments.runs import run_draws, trained_result
from ntpcore.lin.training import solution_pair, train_ntp

__all__ = ["ToyConfig", "ToyGDConfig", "run_toy", "run_toy_gd", "run_toy_seeds", "toy_data"]


@dataclass(frozen=True)
class ToyConfig:
    """The 2-D toy of Figs. 1-2 (embeddings and probabilities are our choices)."""

    data_seed: int = 0  # seed of the Dirichlet(1) probability draws
    angle_a: float = 10.0  # angle (degrees) of the embedding of context A
    angle_b: float = 100.0  # angle of context B
    angle_c: float = 260.0  # angle of context C
    target_entropy: float = 0.8811  # redraw probabilities until |H - target| < 5e-3


def toy_data(cfg) -> NTPData:
    return make_toy(
        cfg.data_seed,
        angles_deg=(cfg.angle_a, cfg.angle_b, cfg.angle_c),
        target_entropy=cfg.target_entropy,
    )


@cached
def run_toy(cfg: ToyConfig) -> dict:
    """Toy data, W^mm (NTP-SVM) and W* (finite component)."""
    data = toy_data(cfg)
    pair = solution_pair(data.H, data.P)
    return {
        "H": data.H,
        "P": data.P,
        "entropy": data.entropy,
        "n_draws": data.info["n_draws"],
        "W_mm": pair["W_mm"],
        "W_star": pair["W_star"],
        "norm_mm": pair["svm"].norm,
        "norm_star": float(np.linalg.norm(pair["W_star"])),
        "inner_star_mm": float(np.vdot(pair["W_star"], pair["W_mm"])),
        "dim_F": pair["F"].dim,
        "svm_solver": pair["svm"].solver,
    }


@dataclass(frozen=True)
class ToyGDConfig(ToyConfig):
    """GD on the toy (Fig. 1, right)."""

    init: str = "zero"  # the paper's checklist: "starting from zero initialization"
    lr: float = 0.5
    n_steps: int = 10_000
    n_records: int = 60


@cached
def run_toy_gd(cfg: ToyGDConfig) -> dict:
    data = toy_data(cfg)
    pair = solution_pair(data.H, data.P)
    tr = train_ntp(
        data,
        optimizer="gd",
        eta=cfg.lr,
        n_steps=cfg.n_steps,
        init=cfg.init,
        init_seed=cfg.data_seed,
        record_steps=log_steps(cfg.n_steps, cfg.n_records),
        pair=pair,
    )
    return trained_result(tr, data, pair)


def run_toy_seeds(
    cfg: ToyGDConfig,
    seeds,
    progress: bool = True,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
) -> dict:
    r"""GD on the toy for several probability draws: the spread of the key quantities.

    One cached :func:`run_toy_gd` per seed (``cfg`` with its ``data_seed`` replaced), run through
    :func:`ntpcore.core.sweep.map_runs` (in-process, ``n_workers`` local processes or a
    ``dask.distributed`` scheduler; none of them changes what is computed).  Returns, per
    draw, the recorded curves ``<key>_curves`` (draws x records, at ``steps``) and their last
    values ``<key>_end`` for CE, CE - H, the norm, :math:`\cos(W_k, W^{\mathrm{mm}})`,
    :math:`\cos(W_k - W^\star, W^{\mathrm{mm}})` and
    :math:`\|P_F W_k - W^\star\|/\|W^\star\|`; :math:`\|W^\star\|`,
    :math:`\|W^{\mathrm{mm}}\|`, whether CE and :math:`\cos(W_k, W^{\mathrm{mm}})` are
    monotone over the record, and ``median_seed``: the draw whose final cosine is the median.
    """
    seeds = [int(s) for s in seeds]
    cfgs = [replace(cfg, data_seed=s) for s in seeds]
    return run_draws(run_toy_gd, cfgs, seeds, "toy draws", progress, n_workers, scheduler)
