r"""Cached experiments of the geometry paper (key ``geo``), the functions the ``geo_*``
notebooks call, one module per figure family:

* :mod:`~ntpcore.geo.experiments.datasets` -- the two datasets by name
  (:class:`DataConfig`, one loader);
* :mod:`~ntpcore.geo.experiments.convex` -- the convex side in logit space: :math:`L^{in}`,
  the nuclear-norm NTP-SVM :math:`L^{mm}` and its proxy :math:`\tilde S`, the
  regularization path of :math:`\mathrm{CE}(L)+\lambda\|L\|_*` [geo, Sec. 2, Fig. 1]
  (book: ``geo-def-lin``, ``geo-eq-svm``, ``geo-thm-path``, ``geo-prop-proxy``);
* :mod:`~ntpcore.geo.experiments.hand` -- the worked example of three words and three
  contexts, whose :math:`L^{mm}`, :math:`L^{in}` and embeddings have closed forms, and its
  regularization path in two dimensions;
* :mod:`~ntpcore.geo.experiments.training` -- trained UFM, transformer and LSTM, whose
  logits and embeddings approach the :math:`L^{mm}` geometry [geo, Sec. 3, Figs. 1-3];
* :mod:`~ntpcore.geo.experiments.scale` -- the same objects at corpus scale, on the
  Wikipedia sample or a reader's text.

This module is the face the notebooks import (``from ntpcore.geo import experiments``).
"""

from __future__ import annotations

from ntpcore.geo.experiments.convex import (
    DatasetStatsConfig,
    ProxyConfig,
    ProxyDatasetsConfig,
    ProxyTrialConfig,
    RegPathConfig,
    SupportLmmConfig,
    dataset_sets,
    proxy_datasets,
    proxy_trial,
    run_dataset_stats,
    run_proxy,
    run_reg_path,
    run_support_lmm,
)
from ntpcore.geo.experiments.datasets import (
    DATASETS,
    DataConfig,
    data_fingerprint,
    load_dataset,
)
from ntpcore.geo.experiments.hand import HandExampleConfig, hand_data, run_hand_example
from ntpcore.geo.experiments.scale import (
    CorpusConfig,
    LadderPoint,
    ScaleConfig,
    check_corpus,
    cosine_correlation,
    full_dataset,
    ladder_point,
    run_scale,
    scale_dataset,
    svm_point,
    ufm_point,
)
from ntpcore.geo.experiments.training import (
    DATASET_LABELS,
    MODEL_LABELS,
    EvolutionConfig,
    LabelledConfig,
    ModelConfig,
    ModelsConfig,
    RunConfig,
    checkpoint_path,
    convex_solution,
    final_geometry,
    final_logits,
    nearest_records,
    run_metrics,
    snapshot,
    train_run,
    train_runs,
    training_curves,
)

__all__ = [
    "CorpusConfig",
    "DATASETS",
    "DATASET_LABELS",
    "DataConfig",
    "DatasetStatsConfig",
    "EvolutionConfig",
    "HandExampleConfig",
    "LabelledConfig",
    "LadderPoint",
    "MODEL_LABELS",
    "ModelConfig",
    "ModelsConfig",
    "ProxyConfig",
    "ProxyDatasetsConfig",
    "ProxyTrialConfig",
    "RegPathConfig",
    "RunConfig",
    "ScaleConfig",
    "SupportLmmConfig",
    "check_corpus",
    "checkpoint_path",
    "convex_solution",
    "cosine_correlation",
    "data_fingerprint",
    "dataset_sets",
    "final_geometry",
    "final_logits",
    "full_dataset",
    "hand_data",
    "ladder_point",
    "load_dataset",
    "nearest_records",
    "proxy_datasets",
    "proxy_trial",
    "run_dataset_stats",
    "run_hand_example",
    "run_metrics",
    "run_proxy",
    "run_reg_path",
    "run_scale",
    "run_support_lmm",
    "scale_dataset",
    "snapshot",
    "svm_point",
    "train_run",
    "train_runs",
    "training_curves",
    "ufm_point",
]
