r"""Cached experiments of the self-attention paper (key ``att``), one module per figure family:

* :mod:`~ntpcore.att.experiments.trials` -- the trials: seeded draws (:class:`DataConfig`), the
  descent's learning rate and length (:class:`DescentSteps`) and the sweep of one cached run
  per trial;
* :mod:`~ntpcore.att.experiments.cyclic` -- the global-convergence experiments: the acyclic and
  cyclic TPG figures and plain GD (book ``att-thm-gd``);
* :mod:`~ntpcore.att.experiments.local` -- local convergence with the general head
  (book ``att-conj-local``);
* :mod:`~ntpcore.att.experiments.regpath` -- the regularization path (book ``att-thm-regpath``);
* :mod:`~ntpcore.att.experiments.scc_stats` -- SCC statistics of random TPGs (beyond the paper);
* :mod:`~ntpcore.att.experiments.conceptual` -- the exact toy of the conceptual figure;
* :mod:`~ntpcore.att.experiments.playground` -- the automaton playground;
* :mod:`~ntpcore.att.experiments.measures` -- array helpers of the metrics.

Every ``run_*`` takes one frozen ``*Config`` whose fields are the notebook's parameter names and
returns a dict of arrays and scalars (cached by :func:`ntpcore.core.cache.cached`;
``*.__wrapped__(cfg)`` runs uncached, for the benchmarks).  Trials that are separate solves (the
regularization path, the cvxpy checks of :func:`global_theory`, the SCC statistics) go through
:func:`ntpcore.core.sweep.map_runs`, which takes ``n_workers`` / ``scheduler`` and returns
the same numbers however they run.  This module is the face the notebooks import
(``from ntpcore.att import experiments``).
"""

from __future__ import annotations

from ntpcore.att.experiments.conceptual import (
    ConceptualConfig,
    run_conceptual,
)
from ntpcore.att.experiments.cyclic import (
    GlobalConfig,
    GlobalTrial,
    descend_global,
    draw_global_trial,
    global_theory,
    global_theory_trial,
    measure_global,
    run_global,
)
from ntpcore.att.experiments.local import (
    LocalConfig,
    run_local,
)
from ntpcore.att.experiments.measures import (
    cos_rows,
    padded_bases,
    trial_rows,
)
from ntpcore.att.experiments.playground import (
    PLAYGROUND_DATASETS,
    PlaygroundConfig,
    automaton_state,
    describe_playground,
    model_output_batch,
    parse_sequence,
    playground_answer,
    playground_state,
)
from ntpcore.att.experiments.regpath import (
    RegPathConfig,
    reg_path_trial,
    run_reg_path,
)
from ntpcore.att.experiments.scc_stats import (
    SCCCellConfig,
    SCCStatsConfig,
    run_scc_stats,
    scc_cell,
)
from ntpcore.att.experiments.trials import (
    DataConfig,
    DescentSteps,
    FeasibleTrial,
    Trial,
    sample_feasible_trial,
    scc_onehot,
    trial_rng,
    trial_rngs,
    trial_sweep,
)

__all__ = [
    "ConceptualConfig",
    "DataConfig",
    "FeasibleTrial",
    "GlobalConfig",
    "GlobalTrial",
    "LocalConfig",
    "PLAYGROUND_DATASETS",
    "PlaygroundConfig",
    "RegPathConfig",
    "SCCCellConfig",
    "SCCStatsConfig",
    "DescentSteps",
    "Trial",
    "automaton_state",
    "cos_rows",
    "descend_global",
    "describe_playground",
    "draw_global_trial",
    "global_theory",
    "global_theory_trial",
    "measure_global",
    "model_output_batch",
    "padded_bases",
    "parse_sequence",
    "playground_answer",
    "playground_state",
    "reg_path_trial",
    "run_conceptual",
    "run_global",
    "run_local",
    "run_reg_path",
    "run_scc_stats",
    "sample_feasible_trial",
    "scc_cell",
    "scc_onehot",
    "trial_rng",
    "trial_rngs",
    "trial_rows",
    "trial_sweep",
]
