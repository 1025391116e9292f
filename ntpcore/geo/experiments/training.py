r"""Cached training experiments of the geometry paper [geo, Sec. 3, Figs. 1-3].

Models trained on the :math:`m` distinct contexts (:mod:`ntpcore.geo.train`) give logits
:math:`L_k=W_kH_k`; the paper predicts that, as training goes on, :math:`\mathrm{CE}(L_k)
\to\mathcal H`, :math:`P_F(L_k)\to L^{in}` and the diverging part of :math:`L_k` aligns
with :math:`L^{mm}`, so that the embeddings take the geometry of the balanced factors
:math:`W^{mm}`, :math:`H^{mm}` of :math:`L^{mm}` (book: ``geo-thm-path``,
``geo-def-collapse``).

The notebooks build a :class:`ModelsConfig` (or a subclass adding a few figure-specific
fields) from their parameters -- the field names are the notebook's parameter names; the
training protocol is declared once in :class:`ntpcore.geo.train.protocol.AdamWProtocol` -- and
call the functions below.  Everything expensive goes through
:func:`ntpcore.core.cache.cached`:

* :func:`train_run` -- one model trained on one dataset (:class:`RunConfig`); interrupted
  runs resume from a checkpoint under ``<cache>/geo_train_checkpoints/``;
* :func:`convex_solution` -- :math:`L^{in}`, :math:`L^{mm}`, :math:`\tilde S` and the
  predicted embeddings of a dataset (:class:`~ntpcore.geo.experiments.datasets.DataConfig`);
* :func:`run_metrics` -- the geometry metrics of [geo, Fig. 2] at every recorded epoch.

Cache keys hold the configuration and a fingerprint of the dataset
(:func:`~ntpcore.geo.experiments.datasets.data_fingerprint`), so a change of the data
generators never serves stale runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcore.core import paths
from ntpcore.core.cache import cache_key, cached, free_first
from ntpcore.errors import DataError
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
from ntpcore.geo.experiments.datasets import DataConfig, data_fingerprint, load_dataset, narrow
from ntpcore.geo.logits import centered_support, finite_logits, nuclear_norm
from ntpcore.geo.svm import nuclear_svm
from ntpcore.geo.train import train_model
from ntpcore.geo.train.protocol import AdamWProtocol, TrainerConfig

DATASET_LABELS = {
    "synthetic": "synthetic set",
    "text": "real text (Lee corpus, in place of TinyStories)",
}
MODEL_LABELS = {"ufm": "UFM", "transformer": "Transformer", "lstm": "LSTM"}


# ------------------------------------------------------------------------------------------
# Configurations: a dataset (DataConfig) + the training protocol (AdamWProtocol) + own
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunConfig(AdamWProtocol, DataConfig):
    """One training run: a dataset, the protocol (defaults = paper) and a model."""

    model: str = "ufm"  # ufm | transformer | lstm

    def __post_init__(self) -> None:
        super().__post_init__()
        self.train_config()  # validate

    @property
    def data(self) -> DataConfig:
        return narrow(self, DataConfig)

    def train_config(self) -> TrainerConfig:
        """The :class:`~ntpcore.geo.train.protocol.TrainerConfig` of this run (default
        architecture)."""
        return narrow(self, TrainerConfig)


@dataclass(frozen=True)
class ModelsConfig(AdamWProtocol, DataConfig):
    """Parameters shared by the training notebooks: a dataset, the protocol, the models."""

    models: tuple[str, ...] = ("ufm", "transformer", "lstm")  # models to train

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "models", tuple(self.models))
        for m in self.models:
            self.run(m)  # validate

    def run(self, model: str) -> RunConfig:
        """The :class:`RunConfig` of ``model`` under this setup."""
        return dataclasses.replace(narrow(self, RunConfig), model=model)


@dataclass(frozen=True)
class EvolutionConfig(RunConfig):
    """Snapshots of one model's geometry during training (appendix figure)."""

    snapshot_steps: tuple[int, ...] = (0, 10, 100, 26000)  # shown steps (epochs; nearest record)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "snapshot_steps", tuple(int(k) for k in self.snapshot_steps))


@dataclass(frozen=True)
class LabelledConfig(RunConfig):
    """Labelled similarity map of one model's final embeddings (appendix figures)."""

    which: str = "words"  # words | contexts

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.which not in ("words", "contexts"):
            raise DataError(f"which must be 'words' or 'contexts', got {self.which!r}")


def as_run(cfg: RunConfig) -> RunConfig:
    """The plain :class:`RunConfig` of a figure configuration (the training cache key)."""
    return narrow(cfg, RunConfig)


# ------------------------------------------------------------------------------------------
# Cache keys: configuration + data fingerprint
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _DataKey:
    data: DataConfig
    fingerprint: str


@dataclass(frozen=True)
class _RunKey:
    run: RunConfig
    fingerprint: str


def _data_key(cfg: DataConfig) -> _DataKey:
    return _DataKey(narrow(cfg, DataConfig), data_fingerprint(load_dataset(cfg)))


def _run_key(cfg: RunConfig) -> _RunKey:
    return _RunKey(as_run(cfg), data_fingerprint(load_dataset(cfg)))


def convex_solution(cfg: DataConfig) -> dict[str, Any]:
    r"""Convex-side objects of a dataset: :math:`L^{in}`, :math:`L^{mm}`, :math:`\tilde S`,
    predicted embeddings :math:`W^{mm}` (V, r), :math:`H^{mm}` (r, m), and sizes (cached)."""
    return _convex_solution(_data_key(cfg))


@cached
def _convex_solution(key: _DataKey) -> dict[str, Any]:
    ds = load_dataset(key.data)
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
    key = cache_key(_train_run.cache_qualname, _run_key(cfg))  # type: ignore[attr-defined]
    suffix = ".npz" if cfg.model == "ufm" else ".pt"
    return paths.cache_dir() / CHECKPOINT_DIR / f"{key}{suffix}"


def train_run(cfg: RunConfig) -> dict[str, Any]:
    """Train ``cfg.model`` on ``cfg``'s dataset (see :mod:`ntpcore.geo.train`).

    Returns per-record ``epoch``, ``ce_minus_H``, ``W_norm``, ``H_norm``, ``L_norm``,
    ``pf_dist``, float32 snapshots ``W`` (R, V, d), ``H`` (R, d, m), ``b`` (R, V), the final
    float64 ``W_final``, ``H_final``, ``b_final``, and ``seconds``, ``sec_per_epoch``,
    ``device``, ``n_params``.  Cached under its :class:`RunConfig` fields (a figure
    configuration that extends :class:`RunConfig` shares the run) and the data fingerprint.
    """
    return _train_run(_run_key(cfg))


@cached
def _train_run(key: _RunKey) -> dict[str, Any]:
    cfg = key.run
    ds = load_dataset(cfg)
    ckpt = checkpoint_path(cfg)
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    return train_model(ds, cfg.train_config(), checkpoint=ckpt)


def train_runs(runs: list[RunConfig]) -> list[dict[str, Any]]:
    """:func:`train_run` of each of ``runs``, in their order.

    A run that another process is training at this moment (another notebook of a
    ``--jobs 2`` run) is left for last (:func:`ntpcore.core.cache.free_first`): this
    notebook trains its other models meanwhile and then reads the shared one from the cache.
    """
    return free_first(runs, train_run, lambda r: _train_run.in_flight(_run_key(r)))


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
    return _run_metrics(_run_key(cfg))


@cached
def _run_metrics(key: _RunKey) -> dict[str, Any]:
    cfg = key.run
    res = train_run(cfg)
    cvx = convex_solution(cfg.data)
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
    runs = [cfg.run(model) for model in cfg.models]
    results = train_runs(runs)
    return {
        model: {**res, **run_metrics(run)}
        for model, run, res in zip(cfg.models, runs, results, strict=True)
    }


def final_geometry(cfg: ModelsConfig) -> dict[str, dict[str, np.ndarray]]:
    """Final cosine matrices and logits of each model, and of ``L^mm`` and ``S~``.

    Keys: the model names, ``"mm"`` and ``"S_tilde"``; values hold ``cos_H`` (m, m),
    ``cos_W`` (V, V) and ``L`` (V, m) (``L^mm`` and ``S~`` Frobenius-normalised).
    """
    cvx = convex_solution(cfg)
    out: dict[str, dict[str, np.ndarray]] = {}
    results = train_runs([cfg.run(model) for model in cfg.models])
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
