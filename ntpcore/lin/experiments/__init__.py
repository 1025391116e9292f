r"""Cached experiments of the linear paper (key ``lin``), one module per figure family.

Each checks a statement of [lin] numerically:

* :mod:`~ntpcore.lin.experiments.toy`        the toy of Figs. 1-2: W* of Def. 1, W^mm of
  Def. 3 (:func:`run_toy`), GD from zero (:func:`run_toy_gd`: Lemma 2, Theorem 2);
* :mod:`~ntpcore.lin.experiments.synthetic`  GD, NGD and Adam on the synthetic data of
  App. A.2 (Figs. 3-5: :math:`\mathrm{CE}(W_k)\to\mathcal H`,
  :math:`W_k/\|W_k\|\to W^{\mathrm{mm}}/\|W^{\mathrm{mm}}\|`, :math:`P_F(W_k)\to W^\star`);
* :mod:`~ntpcore.lin.experiments.regpath`    the regularization path of eq. (8) against
  Theorem 1 (:func:`run_reg_path`);
* :mod:`~ntpcore.lin.experiments.phase`      beyond the paper: the NTP-separability
  threshold in d/m left open by Remark 1 / Sec. 7 (:func:`run_phase`, predicted by
  :func:`cone_threshold`);
* :mod:`~ntpcore.lin.experiments.sparsity`   beyond the paper: the support-size sweep
  (:func:`run_sparsity`);
* :mod:`~ntpcore.lin.experiments.scale`      Theorem 2 at a real-vocabulary size (the
  *Performance* chapter, :func:`run_lin_scale`);
* :mod:`~ntpcore.lin.experiments.measures`   what the claims read (:func:`solution_facts`,
  :func:`log_slope`, :func:`decade_change`, :func:`median_seed`), and
  :mod:`~ntpcore.lin.experiments.runs` what every training figure records.

Every public ``run_*`` takes one frozen ``*Config`` whose fields are the notebook's parameter
names and returns a dict of arrays and scalars, cached by :func:`ntpcore.core.cache.cached`.
Per-run / per-point helpers are cached too, so an interrupted sweep resumes.  This module is
the face the notebooks import (``from ntpcore.lin import experiments``).
"""

from __future__ import annotations

from ntpcore.lin.experiments.measures import decade_change, log_slope, median_seed, solution_facts
from ntpcore.lin.experiments.phase import (
    PhaseConfig,
    PhasePointConfig,
    cone_threshold,
    crossing,
    run_phase,
    run_phase_point,
)
from ntpcore.lin.experiments.regpath import RegPathConfig, genie_gaps, run_reg_path
from ntpcore.lin.experiments.scale import ScaleConfig, run_lin_scale
from ntpcore.lin.experiments.sparsity import SparsityConfig, run_sparsity, sparsity_point
from ntpcore.lin.experiments.synthetic import (
    DataConfig,
    DistsConfig,
    GDConfig,
    InitAndRecording,
    OptimizersConfig,
    RunConfig,
    SupportConfig,
    run_config,
    run_dists,
    run_gd,
    run_gd_seeds,
    run_optimizers,
    run_optimizers_seeds,
    synthetic_data,
    synthetic_facts,
    train_run,
)
from ntpcore.lin.experiments.toy import (
    ToyConfig,
    ToyGDConfig,
    run_toy,
    run_toy_gd,
    run_toy_seeds,
    toy_data,
)

__all__ = [
    "DataConfig",
    "DistsConfig",
    "GDConfig",
    "OptimizersConfig",
    "PhaseConfig",
    "PhasePointConfig",
    "RegPathConfig",
    "RunConfig",
    "ScaleConfig",
    "SparsityConfig",
    "SupportConfig",
    "ToyConfig",
    "ToyGDConfig",
    "InitAndRecording",
    "cone_threshold",
    "crossing",
    "decade_change",
    "genie_gaps",
    "log_slope",
    "median_seed",
    "run_config",
    "run_dists",
    "run_gd",
    "run_gd_seeds",
    "run_lin_scale",
    "run_optimizers",
    "run_optimizers_seeds",
    "run_phase",
    "run_phase_point",
    "run_reg_path",
    "run_sparsity",
    "run_toy",
    "run_toy_gd",
    "run_toy_seeds",
    "sparsity_point",
    "solution_facts",
    "synthetic_data",
    "synthetic_facts",
    "toy_data",
    "train_run",
]
