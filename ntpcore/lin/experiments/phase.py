r"""The NTP-separability / compatibility phase diagram in d/m (key ``lin``): beyond the
paper, the threshold left open by Remark 1 / Sec. 7, predicted by the statistical dimension
of the dual cone (:func:`cone_threshold`) and measured (:func:`run_phase`, :func:`crossing`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ntpcore.core.cache import cached
from ntpcore.core.sweep import map_runs
from ntpcore.errors import SolverError
from ntpcore.lin.separability import separability_lp
from ntpcore.lin.subspace import data_subspace

__all__ = [
    "PhaseConfig",
    "PhasePointConfig",
    "cone_threshold",
    "crossing",
    "run_phase",
    "phase_instances",
    "run_phase_point",
]


def cone_threshold(V: int, S: int, n_samples: int = 200_000, seed: int = 0) -> float:
    r"""Predicted NTP-separability threshold :math:`\delta(\mathcal C_S)/(V-1)` for d/m.

    :math:`\mathcal C_S = \{c\in\mathbb R^V: 1^\top c = 0,\ c_v\le 0\ (v\notin S)\}` is the cone
    of admissible dual columns (KKT of Def. 3), and its statistical dimension equals
    :math:`\mathbb E\,\mathrm{dist}^2(g, K_S)` for :math:`g\sim N(0, I_V)` and the polar cone
    :math:`K_S = \{\ell: \ell_z = \ell_{z'}\ (z,z'\in S),\ \ell_z\ge\ell_v\ (v\notin S)\}` of
    logit vectors that satisfy (6a)-(6b) weakly.  Monte Carlo with ``n_samples`` draws.
    For V = 2, S = 1 it is exactly 1/2 (Cover).
    """
    if not 1 <= S < V:
        raise ValueError(f"need 1 <= S < V, got S={S}, V={V}")
    if (V, S) == (2, 1):
        return 0.5  # Cover: the polar cone is a half-line, statistical dimension 1/2
    g = np.random.default_rng(seed).standard_normal((n_samples, V))
    gs = g[:, :S]
    go = -np.sort(-g[:, S:], axis=1)  # off-support coordinates, descending
    ssum = gs.sum(axis=1)
    # Projection onto K_S: in-support coordinates and the k largest off-support ones move to
    # a common level c = (sum_S g + sum_top-k g) / (S + k); k is the consistent one.
    dist2 = np.full(n_samples, np.nan)
    csum = np.zeros(n_samples)
    idx = np.arange(V - S)[None, :]
    for k in range(V - S + 1):
        if k:
            csum = csum + go[:, k - 1]
        c = (ssum + csum) / (S + k)
        ok = np.ones(n_samples, dtype=bool)
        if k:
            ok &= go[:, k - 1] > c
        if k < V - S:
            ok &= go[:, k] <= c
        d2 = ((gs - c[:, None]) ** 2).sum(axis=1) + (
            np.where(idx < k, go - c[:, None], 0.0) ** 2
        ).sum(axis=1)
        dist2 = np.where(ok & np.isnan(dist2), d2, dist2)
    return float(np.mean(dist2) / (V - 1))


def crossing(x: np.ndarray, p: np.ndarray, level: float = 0.5) -> float:
    r"""The first x at which the curve p(x) rises through ``level``, linearly interpolated.

    The measured NTP-separability threshold of the phase diagram: with p the fraction of
    separable instances at the ratios x = d/m, the first i with
    :math:`p_i < \text{level} \le p_{i+1}` gives
    :math:`x_i + (\text{level} - p_i)(x_{i+1} - x_i)/(p_{i+1} - p_i)`; NaN when p never
    crosses.
    """
    x, p = np.asarray(x, dtype=float), np.asarray(p, dtype=float)
    i = np.flatnonzero((p[:-1] < level) & (p[1:] >= level))
    if i.size == 0:
        return float("nan")
    i = i[0]
    return float(x[i] + (level - p[i]) * (x[i + 1] - x[i]) / (p[i + 1] - p[i]))


@dataclass(frozen=True)
class PhasePointConfig:
    """One point of the phase diagram: n_trials Gaussian instances at (V, S, m, d)."""

    trial_seed: int
    vocab_size: int
    support_size: int
    n_contexts: int
    dim: int
    n_trials: int


def phase_instances(cfg: PhasePointConfig):
    """The ``n_trials`` random instances ``(H, S)`` of one point: Gaussian embeddings
    (d, m) and uniformly random supports of size S among V words (V, m), trial r drawn from
    ``SeedSequence([trial_seed, V, S, m, d]).spawn(n_trials)[r]``."""
    ss = np.random.SeedSequence(
        [cfg.trial_seed, cfg.vocab_size, cfg.support_size, cfg.n_contexts, cfg.dim]
    ).spawn(cfg.n_trials)
    V, S, m, d = cfg.vocab_size, cfg.support_size, cfg.n_contexts, cfg.dim
    for s in ss:
        rng = np.random.default_rng(s)
        H = rng.standard_normal((d, m))
        Sm = np.zeros((V, m), dtype=bool)
        for j in range(m):
            Sm[rng.choice(V, S, replace=False), j] = True
        yield H, Sm


@cached
def run_phase_point(cfg: PhasePointConfig) -> dict:
    n_sep = n_compat = n_fail = 0
    for H, Sm in phase_instances(cfg):
        try:
            n_sep += separability_lp(H, Sm)["separable"]
        except SolverError:
            n_fail += 1
        F = data_subspace(H, Sm)
        n_compat += F.dim == F.n_generators
    return {
        "n_separable": n_sep,
        "n_compatible": n_compat,
        "n_lp_failed": n_fail,
        "n_trials": cfg.n_trials,
    }


@dataclass(frozen=True)
class PhaseConfig:
    """NTP-separability / compatibility phase diagram.

    Beyond the paper: the threshold left open in [lin, Remark 1, Sec. 7].
    """

    trial_seed: int = 0  # base seed: point (V, S, m, d) uses SeedSequence([trial_seed, V, S, m, d])
    vocab_size: int = 10
    support_sizes: tuple[int, ...] = (1, 2, 3, 6)
    onehot_vocab_sizes: tuple[int, ...] = (2, 3, 5, 20)
    n_contexts: int = 50
    ratios: tuple[float, ...] = (
        0.05,
        0.1,
        0.15,
        0.2,
        0.25,
        0.3,
        0.35,
        0.4,
        0.45,
        0.5,
        0.55,
        0.6,
        0.7,
        0.8,
        0.9,
        1.0,
        1.1,
    )
    n_trials: int = 40


def run_phase(
    cfg: PhaseConfig,
    progress: bool = True,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
) -> dict:
    """Fraction of NTP-separable / compatible instances vs d/m (per-point cached).

    The points are independent runs: they go through :func:`ntpcore.core.sweep.map_runs`
    (in-process by default, ``n_workers`` local processes, or a ``dask.distributed``
    scheduler address).  How they run does not change what they compute, so neither is
    part of ``cfg`` or of any cache key.
    """

    t0 = time.perf_counter()
    dims = np.unique(np.maximum(1, np.round(np.asarray(cfg.ratios) * cfg.n_contexts)))
    dims = dims.astype(np.int64)
    curves = [(cfg.vocab_size, S) for S in cfg.support_sizes]
    curves += [(V, 1) for V in cfg.onehot_vocab_sizes]
    curves = list(dict.fromkeys(curves))  # one curve per (V, S), even if listed twice
    points = [
        PhasePointConfig(cfg.trial_seed, V, S, cfg.n_contexts, int(d), cfg.n_trials)
        for V, S in curves
        for d in dims
    ]
    results = map_runs(
        run_phase_point,
        points,
        n_workers=n_workers,
        scheduler=scheduler,
        desc="phase diagram",
        progress=progress,
    )
    sep: dict[tuple[int, int], list[float]] = {}
    comp: dict[tuple[int, int], list[float]] = {}
    for pt, r in zip(points, results, strict=True):
        ok = r["n_trials"] - r["n_lp_failed"]
        sep.setdefault((pt.vocab_size, pt.support_size), []).append(r["n_separable"] / max(ok, 1))
        comp.setdefault((pt.vocab_size, pt.support_size), []).append(
            r["n_compatible"] / r["n_trials"]
        )
    out: dict = {"dims": dims, "ratio": dims / cfg.n_contexts}
    for S in cfg.support_sizes:
        key = (cfg.vocab_size, S)
        out[f"sep_S{S}"], out[f"comp_S{S}"] = np.array(sep[key]), np.array(comp[key])
        out[f"pred_S{S}"] = cone_threshold(cfg.vocab_size, S) if S < cfg.vocab_size else 1.0
    for V in cfg.onehot_vocab_sizes:
        out[f"sep_V{V}"] = np.array(sep[(V, 1)])
        out[f"pred_V{V}"] = cone_threshold(V, 1)
    # Cover's exact finite-m curve for V = 2 one-hot: P = 2^(1-m) sum_{k<d} C(m-1, k).
    # (scipy.stats takes a second to import, so only here.)
    from scipy.stats import binom

    out["cover_V2"] = binom.cdf(dims - 1, cfg.n_contexts - 1, 0.5)
    out["compute_seconds"] = time.perf_counter() - t0
    return out
