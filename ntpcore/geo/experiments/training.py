r"""Cached training experiments of the geometry paper [geo, Sec. 3, Figs. 1-3].

Models trained on the :math:`m` distinct contexts (:mod:`ntpcore.geo.train`) give logits
:math:`L_k=W_kH_k`; the paper predicts that, as training goes on, :math:`\mathrm{CE}(L_k)
\to\mathcal H`, :math:`P_F(L_k)\to L^{in}` and the diverging part of :math:`L_k` aligns
with :math:`L^{mm}`, so that the embeddings take the geometry of the balanced factors
:math:`W^{mm}`, :math:`H^{mm}` of :math:`L^{mm}` (book: ``geo-thm-path``,
``geo-def-collapse``).

The notebooks build a :class:`ModelsConfig` (several models) or a :class:`ModelConfig` (one
model, with a few figure-specific fields) from their parameters: each is composed of a
dataset (:class:`~ntpcore.geo.experiments.datasets.DataConfig`) and the training protocol
(:class:`ntpcore.geo.train.protocol.AdamWProtocol`, declared once), whose field names are
the notebook's parameter names, and gives the :class:`RunConfig` of each model -- its
dataset and its trainer -- without copying a field.  Everything expensive goes through
:func:`ntpcore.core.cache.cached`:

* :func:`train_run` -- one model trained on one dataset (:class:`RunConfig`); interrupted
  runs resume from a checkpoint under ``<cache>/geo_train_checkpoints/``;
* :func:`convex_solution` -- :math:`L^{in}`, :math:`L^{mm}`, :math:`\tilde S` and the
  predicted embeddings of a dataset (:class:`~ntpcore.geo.experiments.datasets.DataConfig`);
* :func:`run_metrics` -- the geometry metrics of [geo, Fig. 2] at every recorded epoch.

Cache keys hold the configuration and a fingerprint of the dataset
(:func:`~ntpcore.geo.experiments.datasets.data_fingerprint`), so a change of the data
generators never serves stale runs.  A training run loads its dataset once: the same load
gives the key's fingerprint and the data the training (and the convex solution, and the
metrics) read, handed to the cached computations with their key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcore.core import paths
from ntpcore.core.cache import cache_key, cached, free_first
from ntpcore.errors import DataError
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.embeddings import (
    balanced_factors,
    cosine_matrix,
    direction_distance,
    mm_embeddings,
    offdiag_correlation,
    same_support_pairs,
    structural_correlation,
    subspace_collapse,
)
from ntpcore.geo.experiments.datasets import DataConfig, data_fingerprint, load_dataset
from ntpcore.geo.logits import centered_support, finite_logits, nuclear_norm
from ntpcore.geo.svm import nuclear_svm
from ntpcore.geo.train import train_model
from ntpcore.geo.train.protocol import MODELS, AdamWProtocol, TrainerConfig

DATASET_LABELS = {
    "synthetic": "synthetic set",
    "text": "real text (Lee corpus, in place of TinyStories)",
}
MODEL_LABELS = {"ufm": "UFM", "transformer": "Transformer", "lstm": "LSTM"}


# ------------------------------------------------------------------------------------------
# Configurations: composed of a dataset (DataConfig) and the protocol (AdamWProtocol)
# ------------------------------------------------------------------------------------------


def _check_models(models: tuple[str, ...]) -> None:
    bad = [m for m in models if m not in MODELS]
    if bad:
        raise DataError(f"models must be among {MODELS}, got {bad[0]!r}")


@dataclass(frozen=True)
class RunConfig:
    """One training run -- the key of the cached training: a dataset and a trainer (the
    protocol, the model, the default architecture)."""

    data: DataConfig = DataConfig()
    trainer: TrainerConfig = TrainerConfig()


@dataclass(frozen=True)
class ModelsConfig:
    """Parameters shared by the training notebooks: a dataset, the protocol, the models."""

    data: DataConfig = DataConfig()
    protocol: AdamWProtocol = AdamWProtocol()
    models: tuple[str, ...] = MODELS  # models to train

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(self.models))
        _check_models(self.models)

    def run(self, model: str) -> RunConfig:
        """The :class:`RunConfig` of ``model`` under this setup."""
        return RunConfig(self.data, TrainerConfig(self.protocol, model))


@dataclass(frozen=True)
class ModelConfig:
    """One model trained on a dataset under the protocol (the appendix figures)."""

    data: DataConfig = DataConfig()
    protocol: AdamWProtocol = AdamWProtocol()
    model: str = "ufm"  # ufm | transformer | lstm

    def __post_init__(self) -> None:
        _check_models((self.model,))

    def run(self) -> RunConfig:
        """The :class:`RunConfig` of the model."""
        return RunConfig(self.data, TrainerConfig(self.protocol, self.model))


@dataclass(frozen=True)
class EvolutionConfig(ModelConfig):
    """Snapshots of one model's geometry during training (appendix figure)."""

    snapshot_steps: tuple[int, ...] = (0, 10, 100, 26000)  # shown steps (epochs; nearest record)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "snapshot_steps", tuple(int(k) for k in self.snapshot_steps))


@dataclass(frozen=True)
class LabelledConfig(ModelConfig):
    """Labelled similarity map of one model's final embeddings (appendix figures)."""

    which: str = "words"  # words | contexts

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.which not in ("words", "contexts"):
            raise DataError(f"which must be 'words' or 'contexts', got {self.which!r}")


# ------------------------------------------------------------------------------------------
# Cache keys: configuration + data fingerprint, each built once from one load of the data
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _DataKey:
    data: DataConfig
    fingerprint: str


@dataclass(frozen=True)
class _RunKey:
    run: RunConfig
    fingerprint: str


@dataclass(frozen=True)
class _Prepared:
    """A training run ready to go: its key and its dataset, loaded once."""

    key: _RunKey
    ds: ContextDataset

    @classmethod
    def of(cls, run: RunConfig) -> _Prepared:
        ds = load_dataset(run.data)
        return cls(_RunKey(run, data_fingerprint(ds)), ds)

    @property
    def data_key(self) -> _DataKey:
        return _DataKey(self.key.run.data, self.key.fingerprint)


def convex_solution(data: DataConfig) -> dict[str, Any]:
    r"""Convex-side objects of a dataset: :math:`L^{in}`, :math:`L^{mm}`, :math:`\tilde S`,
    predicted embeddings :math:`W^{mm}` (V, r), :math:`H^{mm}` (r, m), and sizes (cached)."""
    ds = load_dataset(data)
    return _convex_solution(_DataKey(data, data_fingerprint(ds)), ds)


@cached
def _convex_solution(key: _DataKey, ds: ContextDataset) -> dict[str, Any]:
    L_mm = nuclear_svm(ds.S)
    W_mm, H_mm = mm_embeddings(L_mm)
    S_tilde = centered_support(ds.S)
    return {
        "S": ds.S.astype(np.int8),
        "P": ds.P,
        "pi": ds.pi,
        "L_in": finite_logits(ds.P),
        "L_mm": L_mm,
        "S_tilde": S_tilde,
        "W_mm": W_mm,
        "H_mm": H_mm,
        "rank_mm": int(W_mm.shape[1]),
        "nuc_mm": nuclear_norm(L_mm),
        "nuc_S_tilde": nuclear_norm(S_tilde),
        "entropy": ds.entropy,
        "m": ds.m,
        "V": ds.V,
        "n": ds.n,
        "n_groups": len(ds.support_groups),
    }


# ------------------------------------------------------------------------------------------
# Training
# ------------------------------------------------------------------------------------------

CHECKPOINT_DIR = "geo_train_checkpoints"


def checkpoint_path(cfg: RunConfig) -> Any:
    """Where an interrupted :func:`train_run` keeps its state (deleted when it completes)."""
    return _checkpoint(_Prepared.of(cfg).key)


def _checkpoint(key: _RunKey) -> Any:
    digest = cache_key(_train_run.cache_qualname, key)  # type: ignore[attr-defined]
    suffix = ".npz" if key.run.trainer.model == "ufm" else ".pt"
    return paths.cache_dir() / CHECKPOINT_DIR / f"{digest}{suffix}"


def train_run(cfg: RunConfig) -> dict[str, Any]:
    """Train ``cfg.trainer.model`` on ``cfg.data`` (see :mod:`ntpcore.geo.train`).

    Returns per-record ``epoch``, ``ce_minus_H``, ``W_norm``, ``H_norm``, ``L_norm``,
    ``pf_dist``, float32 snapshots ``W`` (R, V, d), ``H`` (R, d, m), ``b`` (R, V), the final
    float64 ``W_final``, ``H_final``, ``b_final``, and ``seconds``, ``sec_per_epoch``,
    ``device``, ``n_params``.  Cached under the :class:`RunConfig` (every figure that trains
    the same model on the same data under the same protocol shares the run) and the data
    fingerprint; the dataset is loaded once, for both.
    """
    run = _Prepared.of(cfg)
    return _train_run(run.key, run.ds)


@cached
def _train_run(key: _RunKey, ds: ContextDataset) -> dict[str, Any]:
    ckpt = _checkpoint(key)
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    return train_model(ds, key.run.trainer, checkpoint=ckpt)


#: Work a notebook can do while another process trains a run it needs, by name: each is
#: called once with the notebook's runs, after its free runs are trained and before it waits
#: for the others.  The checks' independent reference runs register here
#: (:func:`ntpcore.geo.checks.training_reference.prefetch_references`), so that such a
#: notebook computes the references its checks will read instead of idling, and the notebook
#: that trains the shared run finds them stored.
WHILE_WAITING: dict[str, Callable[[list[RunConfig]], None]] = {}


def _train_prepared(runs: list[_Prepared]) -> list[dict[str, Any]]:
    """The training of each of ``runs``, in their order; a run that another process is
    training at this moment (another notebook of a ``--jobs 2`` run) is left for last
    (:func:`ntpcore.core.cache.free_first`): this notebook trains its other models meanwhile,
    then does the work of :data:`WHILE_WAITING`, then reads the shared run from the cache."""

    def meanwhile() -> None:
        for task in WHILE_WAITING.values():
            task([r.key.run for r in runs])

    return free_first(
        runs,
        lambda r: _train_run(r.key, r.ds),
        lambda r: _train_run.in_flight(r.key),
        meanwhile,
    )


def _prepare(cfg: ModelsConfig) -> list[_Prepared]:
    """The runs of every model of ``cfg``, on one load of their common dataset."""
    ds = load_dataset(cfg.data)
    fingerprint = data_fingerprint(ds)
    return [_Prepared(_RunKey(cfg.run(m), fingerprint), ds) for m in cfg.models]


def train_runs(runs: list[RunConfig]) -> list[dict[str, Any]]:
    """:func:`train_run` of each of ``runs``, in their order (the free ones first)."""
    return _train_prepared([_Prepared.of(r) for r in runs])


def nearest_records(res: dict[str, Any], epochs: tuple[int, ...]) -> list[int]:
    """Indices of the recorded epochs nearest to ``epochs`` (log scale, ties to the later)."""
    rec = np.asarray(res["epoch"])
    return [int(np.argmin(np.abs(np.log1p(rec) - np.log1p(e)))) for e in epochs]


def snapshot(res: dict[str, Any], i: int) -> dict[str, np.ndarray]:
    """``cos_H`` (m, m), ``cos_W`` (V, V) and logits ``L`` (V, m) at record ``i``."""
    W, H = np.asarray(res["W"][i], np.float64), np.asarray(res["H"][i], np.float64)
    return {
        "cos_H": cosine_matrix(H.T),
        "cos_W": cosine_matrix(W),
        "L": _snapshot_logits(res, i),
    }


def final_logits(res: dict[str, Any]) -> np.ndarray:
    """(V, m) logits ``W H + b 1^T`` of a run at its last epoch (float64)."""
    return res["W_final"] @ res["H_final"] + np.asarray(res["b_final"])[:, None]


def _snapshot_logits(res: dict[str, Any], i: int) -> np.ndarray:
    W, H, b = (np.asarray(res[k][i], np.float64) for k in ("W", "H", "b"))
    return W @ H + b[:, None]


def run_metrics(cfg: RunConfig) -> dict[str, Any]:
    r"""Geometry metrics of [geo, Figs. 2-3] at each recorded epoch of :func:`train_run`.

    * ``sc_H``, ``sc_W``: structural correlation of :math:`\cos(H^\top)` with
      :math:`\cos(H^{mm\top})` and of :math:`\cos(W)` with :math:`\cos(W^{mm})` (the paper's
      metric, diagonal included); ``sc_W_centered`` with the mean word embedding removed
      (Adam does not keep it at zero; book: *Trained models*, deviations, item 4);
      ``od_H``, ``od_W``: off-diagonal Pearson correlations;
    * ``dir_Lmm``: :math:`\|(L-L^{in})/\|\cdot\| - L^{mm}/\|L^{mm}\|\|_F`; ``dir_Lmm_centered``
      the same with the columns of ``L`` centred (the CE is blind to column shifts);
      ``dir_S_tilde``: the same against the proxy :math:`\tilde S`;
    * ``collapse_raw``, ``collapse_proj``: mean raw and projected cosine of same-support
      context pairs (book: ``geo-def-collapse``; NaN when there are no such pairs).
    """
    return _metrics(_Prepared.of(cfg))


def _metrics(run: _Prepared, res: dict[str, Any] | None = None) -> dict[str, Any]:
    """:func:`run_metrics` of a prepared run (``res``: its training, when at hand)."""
    res = _train_run(run.key, run.ds) if res is None else res
    return _run_metrics(run.key, res, _convex_solution(run.data_key, run.ds))


@cached
def _run_metrics(key: _RunKey, res: dict[str, Any], cvx: dict[str, Any]) -> dict[str, Any]:
    L_in, L_mm, S_t = cvx["L_in"], cvx["L_mm"], cvx["S_tilde"]
    cos_Hmm = cosine_matrix(cvx["H_mm"].T)
    cos_Wmm = cosine_matrix(cvx["W_mm"])
    pairs = same_support_pairs(cvx["S"].astype(bool))
    keys = (
        "sc_H",
        "sc_W",
        "sc_W_centered",
        "od_H",
        "od_W",
        "dir_Lmm",
        "dir_Lmm_centered",
        "dir_S_tilde",
        "collapse_raw",
        "collapse_proj",
    )
    out: dict[str, list[float]] = {k: [] for k in keys}
    for i in range(len(res["epoch"])):
        W = np.asarray(res["W"][i], np.float64)
        H = np.asarray(res["H"][i], np.float64)
        L = _snapshot_logits(res, i)
        cos_H, cos_W = cosine_matrix(H.T), cosine_matrix(W)
        out["sc_H"].append(structural_correlation(cos_H, cos_Hmm))
        out["sc_W"].append(structural_correlation(cos_W, cos_Wmm))
        out["sc_W_centered"].append(
            structural_correlation(cosine_matrix(W - W.mean(axis=0)), cos_Wmm)
        )
        out["od_H"].append(offdiag_correlation(cos_H, cos_Hmm) if cvx["m"] >= 3 else np.nan)
        out["od_W"].append(offdiag_correlation(cos_W, cos_Wmm))
        out["dir_Lmm"].append(direction_distance(L - L_in, L_mm))
        Lc = L - L.mean(axis=0)
        out["dir_Lmm_centered"].append(direction_distance(Lc - L_in, L_mm))
        out["dir_S_tilde"].append(direction_distance(Lc - L_in, S_t))
        if len(pairs):
            col = subspace_collapse(W, H, pairs, cvx["rank_mm"])
            out["collapse_raw"].append(float(col["raw_cos"].mean()))
            out["collapse_proj"].append(float(col["proj_cos"].mean()))
        else:
            out["collapse_raw"].append(np.nan)
            out["collapse_proj"].append(np.nan)
    result: dict[str, Any] = {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}
    result["epoch"] = np.asarray(res["epoch"])
    return result


def training_curves(cfg: ModelsConfig) -> dict[str, dict[str, Any]]:
    """Recorded training metrics and geometry metrics of every model of ``cfg``."""
    runs = _prepare(cfg)
    results = _train_prepared(runs)
    return {
        model: {**res, **_metrics(run, res)}
        for model, run, res in zip(cfg.models, runs, results, strict=True)
    }


def final_geometry(cfg: ModelsConfig) -> dict[str, dict[str, np.ndarray]]:
    """Final cosine matrices and logits of each model, and of ``L^mm`` and ``S~``.

    Keys: the model names, ``"mm"`` and ``"S_tilde"``; values hold ``cos_H`` (m, m),
    ``cos_W`` (V, V) and ``L`` (V, m) (``L^mm`` and ``S~`` Frobenius-normalised).
    """
    runs = _prepare(cfg)
    cvx = _convex_solution(runs[0].data_key, runs[0].ds) if runs else convex_solution(cfg.data)
    out: dict[str, dict[str, np.ndarray]] = {}
    results = _train_prepared(runs)
    for model, res in zip(cfg.models, results, strict=True):
        out[model] = {
            "cos_H": cosine_matrix(res["H_final"].T),
            "cos_W": cosine_matrix(res["W_final"]),
            "L": final_logits(res),
        }
    W_t, H_t = balanced_factors(cvx["S_tilde"])
    for name, L, W, H in (
        ("mm", cvx["L_mm"], cvx["W_mm"], cvx["H_mm"]),
        ("S_tilde", cvx["S_tilde"], W_t, H_t),
    ):
        out[name] = {
            "cos_H": cosine_matrix(H.T),
            "cos_W": cosine_matrix(W),
            "L": L / np.linalg.norm(L),
        }
    return out
