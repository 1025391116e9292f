r"""Cached convex experiments of the geometry paper [geo, Sec. 2, Fig. 1].

The convex side of the paper in logit space :math:`L\in\mathbb R^{V\times m}`: the finite
part :math:`L^{in}` (book: ``geo-def-lin``), the nuclear-norm NTP-SVM

.. math:: L^{mm}=\arg\min\|L\|_*\ \text{s.t.}\ L_{zj}=L_{z'j},\ L_{zj}-L_{vj}\ge1
          \quad(z,z'\in\mathcal S_j,\ v\notin\mathcal S_j)

(book: ``geo-eq-svm``), its proxy :math:`\tilde S`, and the regularization path of
:math:`\mathrm{CE}(L)+\lambda\|L\|_*` along which :math:`P_F(L_\lambda)\to L^{in}` and
:math:`L_\lambda/\|L_\lambda\|_*\to L^{mm}/\|L^{mm}\|_*` (book: ``geo-thm-path``).
Each function takes one frozen configuration whose fields are the notebook's parameter
names and returns a dict of arrays and scalars (stored by
:func:`ntpcore.core.cache.cached`):

* :func:`run_support_lmm` -- ``S``, ``L_in``, ``L_mm``, ``S_tilde`` of a dataset
  [geo, Fig. 1, left];
* :func:`run_reg_path` -- the regularization path and the four statements of
  ``geo-thm-path``;
* :func:`run_proxy` -- when the centred support :math:`\tilde S` equals :math:`L^{mm}`
  (book: ``geo-prop-proxy``); its random instances are a sweep of independent runs
  (:func:`proxy_trial`, one cached entry each) through :func:`ntpcore.core.sweep.map_runs`;
* :func:`run_dataset_stats` -- statistics of the two datasets (book: *Datasets*).

The statements these results illustrate are checked by :mod:`ntpcore.geo.checks.convex`,
which verifies the objects the figures use (:math:`L^{mm}`, :math:`\tilde S`,
:math:`L^{in}`, the path's solutions) with code of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ntpcore.core.cache import cached
from ntpcore.core.logits import project_F
from ntpcore.errors import DataError
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.embeddings import (
    direction_distance,
    same_support_pairs,
    subspace_collapse,
)
from ntpcore.geo.experiments.datasets import DATASETS, DataConfig, load_dataset
from ntpcore.geo.logits import centered_support, finite_logits, nuclear_norm
from ntpcore.geo.regpath import regularization_path
from ntpcore.geo.svm import solve_nuclear_svm
from ntpcore.geo.svm_problem import NuclearSVMResult, polar_certificate
from ntpcore.geo.synthetic import synthetic_dataset
from ntpcore.geo.text import text_dataset

RANK_TOL = 1e-6  # singular values above RANK_TOL * sigma_max count towards the rank


def _rank(A: NDArray[np.float64]) -> int:
    s = np.linalg.svd(A, compute_uv=False)
    return int(np.sum(s > RANK_TOL * max(s[0], 1e-300)))


# ------------------------------------------------------------------------------------------
# S and L_mm
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SupportLmmConfig(DataConfig):
    """Support matrix and max-margin logits of one dataset."""


@cached
def run_support_lmm(cfg: SupportLmmConfig) -> dict[str, object]:
    """``S``, ``L_in``, ``L_mm`` (specialised solver), ``S_tilde`` and summary numbers."""
    ds = load_dataset(cfg)
    sol = solve_nuclear_svm(ds.S)
    St = centered_support(ds.S)
    L_in = finite_logits(ds.P)
    return {
        "S": ds.S.astype(np.float64),
        "L_mm": sol.L,
        "L_in": L_in,
        "S_tilde": St,
        "sv_mm": np.linalg.svd(sol.L, compute_uv=False),
        "sv_proxy": np.linalg.svd(St, compute_uv=False),
        "nuc_mm": sol.objective,
        "nuc_proxy": nuclear_norm(St),
        "gap": sol.gap,
        "violation": sol.violation,
        "rank_mm": _rank(sol.L),
        "rank_proxy": _rank(St),
        "n_groups": len(ds.support_groups),
        "L_in_fro": float(np.linalg.norm(L_in)),
        "inner_in_mm": float((L_in * sol.L).sum()),
        "dist_proxy": direction_distance(sol.L, St),
    }


# ------------------------------------------------------------------------------------------
# Regularization path
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegPathConfig(DataConfig):
    """Convex regularization path lambda = 10^{log10_lam_max} ... 10^{log10_lam_min}."""

    log10_lam_max: float = -1.0  # largest lambda (log10)
    log10_lam_min: float = -6.0  # smallest lambda (log10)
    n_lambdas: int = 11  # grid points, log-spaced
    init_seed: int = 0  # seed of the factor initialisation


def run_reg_path(cfg: RegPathConfig) -> dict[str, object]:
    r"""Solve the path and measure the four statements of the theorem (book: ``geo-thm-path``).

    Returns per lambda: ``excess`` (CE - H), ``nuclear`` (:math:`\|L_\lambda\|_*`),
    ``pf_err`` (:math:`\|P_F(L_\lambda)-L^{\mathrm{in}}\|_F`), ``dist_mm`` / ``dist_proxy``
    (direction distance of :math:`L_\lambda` to :math:`L^{\mathrm{mm}}` / :math:`\tilde S`),
    ``dist_mm_perp`` (same for :math:`L_\lambda-P_F(L_\lambda)`), optimality residuals, and
    the subspace-collapse measures of the same-support pairs (``raw_cos``, ``proj_cos``,
    shape (k, pairs)); the solutions ``L`` (k, V, m) and the objects the measures use,
    ``L_mm``, ``S_tilde`` and ``L_in`` (V, m), which the figure's checks verify (cached).
    """
    return _reg_path(cfg)


@cached
def _reg_path(cfg: RegPathConfig) -> dict[str, object]:
    if cfg.n_lambdas < 2 or cfg.log10_lam_min >= cfg.log10_lam_max:
        raise DataError("need n_lambdas >= 2 and log10_lam_min < log10_lam_max")
    ds = load_dataset(cfg)
    P, pi, S = ds.P, ds.pi, ds.S
    lams = np.logspace(cfg.log10_lam_max, cfg.log10_lam_min, cfg.n_lambdas)
    path = regularization_path(P, pi, lams, seed=cfg.init_seed)
    L_in = finite_logits(P)
    sol = solve_nuclear_svm(S)
    L_mm, St = sol.L, centered_support(S)
    pairs = same_support_pairs(S)
    r = _rank(L_mm)
    pf_err, d_mm, d_px, d_perp, raw, proj = [], [], [], [], [], []
    for L, W, H in zip(path["L"], path["W"], path["H"], strict=True):
        PF = project_F(L, S)
        pf_err.append(float(np.linalg.norm(PF - L_in)))
        zero = not np.any(L)
        d_mm.append(np.nan if zero else direction_distance(L, L_mm))
        d_px.append(np.nan if zero else direction_distance(L, St))
        d_perp.append(np.nan if zero else direction_distance(L - PF, L_mm))
        if zero or len(pairs) == 0:
            raw.append(np.full(len(pairs), np.nan))
            proj.append(np.full(len(pairs), np.nan))
        else:
            col = subspace_collapse(W, H, pairs, r)
            raw.append(col["raw_cos"])
            proj.append(col["proj_cos"])
    return {
        "lambdas": lams,
        "L": np.array(path["L"]).reshape(len(lams), *S.shape),
        "L_mm": L_mm,
        "S_tilde": St,
        "L_in": L_in,
        "excess": path["excess"],
        "nuclear": path["nuclear"],
        "opt_residual": path["opt_residual"],
        "align_residual": path["align_residual"],
        "pf_err": np.array(pf_err),
        "dist_mm": np.array(d_mm),
        "dist_proxy": np.array(d_px),
        "dist_mm_perp": np.array(d_perp),
        "raw_cos": np.array(raw).reshape(len(lams), len(pairs)),
        "proj_cos": np.array(proj).reshape(len(lams), len(pairs)),
        "pairs": pairs.astype(np.int64),
        "nuc_mm": sol.objective,
        "nuc_proxy": nuclear_norm(St),
        "rank_mm": r,
        "entropy": ds.entropy,
        "L_in_fro": float(np.linalg.norm(L_in)),
    }


# ------------------------------------------------------------------------------------------
# Proxy exactness
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProxyConfig:
    """Random supports of fixed size k (k = 1: one-hot) and the two datasets."""

    vocab_size: int = 20  # V
    n_contexts: int = 30  # m
    support_sizes: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12)  # k values tried
    n_trials: int = 10  # random instances per k
    trial_seed: int = 0  # base seed; trial t of size k uses SeedSequence(trial_seed).spawn
    data_seed: int = 0  # seed of the two datasets


#: certified relative duality gap of L^mm in the proxy figure: far below the smallest gap
#: ||S~||_* / ||L^mm||_* - 1 it tells from zero (1e-8)
PROXY_TOL = 1e-10

_PROXY_NUMBERS = ("gap", "dist", "max_off", "rank_mm", "rank_proxy", "n_groups")


def _proxy_numbers(
    S: NDArray[np.bool_], sol: NuclearSVMResult | None = None
) -> dict[str, float | int]:
    sol = solve_nuclear_svm(S, tol=PROXY_TOL) if sol is None else sol
    St = centered_support(S)
    nuc_px = nuclear_norm(St)
    cert = polar_certificate(S)
    n_groups = len(np.unique(S.T, axis=0))
    values = (
        nuc_px / sol.objective - 1.0,
        direction_distance(sol.L, St),
        float(cert["max_off"]),
        _rank(sol.L),
        _rank(St),
        n_groups,
    )
    return dict(zip(_PROXY_NUMBERS, values, strict=True))


@dataclass(frozen=True)
class ProxyTrialConfig:
    """One random instance of the proxy sweep: a V x m support with ``support_size`` words
    per context, drawn from the generator ``SeedSequence(trial_seed).spawn(...)[index]`` (the
    stream a serial loop over the trials would give it)."""

    trial_seed: int
    index: int
    vocab_size: int
    n_contexts: int
    support_size: int


@cached
def proxy_trial(cfg: ProxyTrialConfig) -> dict[str, float | int]:
    """The numbers of one random instance (an independent run of the sweep)."""
    rng = np.random.default_rng(np.random.SeedSequence(cfg.trial_seed, spawn_key=(cfg.index,)))
    S = np.zeros((cfg.vocab_size, cfg.n_contexts), dtype=bool)
    for j in range(cfg.n_contexts):
        S[rng.choice(cfg.vocab_size, cfg.support_size, replace=False), j] = True
    return _proxy_numbers(S)


@dataclass(frozen=True)
class ProxyDatasetsConfig:
    """The two datasets of the proxy figure (synthetic and real text)."""

    data_seed: int = 0  # seed of the two datasets


def proxy_datasets(cfg: ProxyDatasetsConfig) -> dict[str, object]:
    r"""The proxy numbers of the two datasets (``<number>_<dataset>``), their supports
    ``S_<dataset>``, max-margin logits ``L_mm_<dataset>`` and proxies ``S_tilde_<dataset>``,
    and the certificates of the synthetic set: ``G`` (optimal) and ``G0`` (polar factor of
    :math:`\tilde S`) (cached)."""
    return _proxy_datasets(cfg)


@cached
def _proxy_datasets(cfg: ProxyDatasetsConfig) -> dict[str, object]:
    res: dict[str, object] = {}
    for name in DATASETS:
        ds = load_dataset(DataConfig(name, cfg.data_seed))
        sol = solve_nuclear_svm(ds.S, tol=PROXY_TOL)
        res.update({f"{n}_{name}": val for n, val in _proxy_numbers(ds.S, sol).items()})
        res[f"mean_k_{name}"] = float(ds.support_sizes.mean())
        res[f"S_{name}"] = ds.S.astype(np.float64)
        res[f"L_mm_{name}"] = sol.L
        res[f"S_tilde_{name}"] = centered_support(ds.S)
        if name == "synthetic":
            St = res["S_tilde_synthetic"]
            U, s, Vt = np.linalg.svd(St, full_matrices=False)
            r = int(np.sum(s > 1e-9 * s[0]))
            res["G"] = sol.G
            res["G0"] = U[:, :r] @ Vt[:r]
    return res


def run_proxy(
    cfg: ProxyConfig,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
    progress: bool = True,
) -> dict[str, object]:
    r"""Nuclear-norm gap :math:`\|\tilde S\|_*/\|L^{mm}\|_*-1`, direction distance, and the
    polar-factor certificate (largest off-support entry of :math:`G_0`) per instance.

    Arrays of shape (len(support_sizes), n_trials): ``gap``, ``dist``, ``max_off``,
    ``rank_mm``, ``rank_proxy``, ``n_groups``; scalars ``<name>_<dataset>`` for the two
    datasets; ``G`` / ``G0`` (V, m): optimal and polar certificates of the synthetic set.

    The random instances are independent runs (per-instance cached by :func:`proxy_trial`;
    trial ``t`` of the ``a``-th size uses
    ``SeedSequence(trial_seed).spawn(...)[a * n_trials + t]``):
    they go through :func:`ntpcore.core.sweep.map_runs`, in-process by default, on
    ``n_workers`` local processes or on a ``dask.distributed`` scheduler.  How they run does
    not change what they compute, so neither is part of ``cfg`` or of any cache key.  The two
    datasets are solved in-process (:func:`proxy_datasets`, cached).
    """
    from ntpcore.core.sweep import map_runs

    V, m = cfg.vocab_size, cfg.n_contexts
    ks = np.array(cfg.support_sizes, dtype=np.int64)
    if ks.min() < 1 or ks.max() >= V:
        raise DataError(f"support sizes must lie in [1, V-1] = [1, {V - 1}]")
    trials = [
        ProxyTrialConfig(cfg.trial_seed, a * cfg.n_trials + t, V, m, int(k))
        for a, k in enumerate(ks)
        for t in range(cfg.n_trials)
    ]
    results = map_runs(
        proxy_trial,
        trials,
        n_workers=n_workers,
        scheduler=scheduler,
        desc="proxy instances",
        progress=progress,
    )
    shape = (ks.size, cfg.n_trials)
    res: dict[str, object] = {"support_sizes": ks}
    for n in _PROXY_NUMBERS:
        res[n] = np.array([r[n] for r in results], dtype=np.float64).reshape(shape)
    res.update(proxy_datasets(ProxyDatasetsConfig(cfg.data_seed)))
    return res


# ------------------------------------------------------------------------------------------
# Dataset statistics
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetStatsConfig:
    """Both datasets with the generators' settings (defaults = the book's datasets)."""

    data_seed: int = 0  # seed of both generators
    top_k: int = 40  # real text: frequent 5-gram contexts kept
    max_subs: int = 2  # real text: words substituted at once in synonym expansion
    max_repeat: int = 4  # multiplicities uniform in {1..max_repeat}


def dataset_sets(cfg: DatasetStatsConfig) -> dict[str, ContextDataset]:
    """The synthetic set and the real-text set of the dataset figure."""
    return {
        "synthetic": synthetic_dataset(cfg.data_seed, max_repeat=cfg.max_repeat),
        "text": text_dataset(
            seed=cfg.data_seed, top_k=cfg.top_k, max_subs=cfg.max_subs, max_repeat=cfg.max_repeat
        ),
    }


@cached
def run_dataset_stats(cfg: DatasetStatsConfig) -> dict[str, object]:
    """m, V, n, T, entropy, support groups, support sizes and group sizes of both sets."""
    sets = dataset_sets(cfg)
    res: dict[str, object] = {}
    for name, ds in sets.items():
        st = ds.stats()
        for key in (
            "m",
            "V",
            "n",
            "T",
            "input_vocab",
            "entropy",
            "support_groups",
            "mean_support",
            "n_original",
        ):
            res[f"{key}_{name}"] = st[key]
        res[f"support_sizes_{name}"] = ds.support_sizes
        res[f"group_sizes_{name}"] = np.array([len(gr) for gr in ds.support_groups])
        res[f"S_{name}"] = ds.S.astype(np.float64)
        res[f"name_{name}"] = ds.name
        res[f"description_{name}"] = ds.description
    return res
