r"""Cached experiments of the linear paper (key ``lin``), one function per notebook.

Each checks a statement of [lin] numerically: the toy of Figs. 1-2 (:func:`run_toy`: W*
of Def. 1 and W^mm of Def. 3; :func:`run_toy_gd`: Lemma 2 and Theorem 2), GD, NGD and Adam
on the synthetic data of App. A.2 (Figs. 4-5: :math:`\mathrm{CE}(W_k)\to\mathcal H`,
:math:`W_k/\|W_k\|\to W^{\mathrm{mm}}/\|W^{\mathrm{mm}}\|`, :math:`P_F(W_k)\to W^\star`),
the regularization path of eq. (8) against Theorem 1 (:func:`run_reg_path`), and two
extensions: the NTP-separability threshold in d/m left open by Remark 1 / Sec. 7
(:func:`run_phase`, predicted by the statistical dimension of the dual cone,
:func:`cone_threshold`) and the support-size sweep (:func:`run_sparsity`).

Every public ``run_*`` takes one frozen ``*Config`` whose fields are the notebook's parameter
names and returns a dict of arrays and scalars, cached by :func:`ntpcore.pipeline.cache.cached`.
The configs are composed: :class:`LinDataConfig` / :class:`LinSupportConfig` (the data) and
:class:`LinProtocolConfig` (initialisation and recording), plus each figure's own fields.
Per-run / per-point helpers are cached too, so an interrupted sweep resumes.

Defaults follow the paper (App. A) and, where it is silent, our choices: Gaussian
embeddings, Dirichlet(1) probabilities, LeCun initialisation for the A.2 figures and zero
initialisation for the toy.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from ntpcore import lin
from ntpcore.core.optim import log_steps
from ntpcore.errors import SolverError
from ntpcore.pipeline.cache import cached

__all__ = [
    "LinDataConfig",
    "LinDistsConfig",
    "LinGDConfig",
    "LinOptimizersConfig",
    "LinPhaseConfig",
    "LinPhasePointConfig",
    "LinProtocolConfig",
    "LinRegPathConfig",
    "LinSparsityConfig",
    "LinSupportConfig",
    "LinToyConfig",
    "LinToyGDConfig",
    "LinTrainRunConfig",
    "cone_threshold",
    "crossing",
    "decade_change",
    "genie_gaps",
    "log_slope",
    "median_seed",
    "run_dists",
    "run_gd",
    "run_gd_seeds",
    "run_optimizers",
    "run_optimizers_seeds",
    "run_phase",
    "run_phase_point",
    "run_reg_path",
    "run_sparsity",
    "run_toy",
    "run_toy_gd",
    "run_toy_seeds",
    "run_train",
    "solution_facts",
    "sparsity_point",
    "synthetic_data",
    "synthetic_facts",
    "train_run",
]


def _traj_out(
    tr: lin.Trajectory,
    keys=(
        "loss",
        "norm",
        "gap",
        "cos",
        "cos_corr",
        "cos_perp",
        "rel_dist_F",
        "dist_F",
        "norm_perp",
    ),
) -> dict:
    out = {"steps": tr.steps.astype(np.int64)}
    out.update({k: tr.metrics[k] for k in keys})
    return out


def _trained(tr: lin.Trajectory, data: lin.NTPData, pair: dict) -> dict:
    """The recorded metrics of a run and the limits of Theorem 2 they are measured against."""
    out = _traj_out(tr)
    out.update(
        {
            "entropy": data.entropy,
            "norm_mm": pair["svm"].norm,
            "norm_star": float(np.linalg.norm(pair["W_star"])),
            "dim_F": pair["F"].dim,
            "monotone": bool(np.all(np.diff(tr.loss) <= 1e-12)),
        }
    )
    return out


# ----------------------------------------------------------------------------- claims
def solution_facts(
    H: np.ndarray, P: np.ndarray, W_mm: np.ndarray, pi: np.ndarray | None = None
) -> dict:
    r"""The checkable statements of Defs. 1-3 and Prop. 1 at the computed solutions.

    :math:`W^\star` is recomputed here by :func:`ntpcore.lin.finite_component` (so a fault in
    it shows in the claims), and measured against ``W_mm`` (a solution of Def. 3):

    * ``log_odds_error`` -- max over (j, z, z') of the error of eq. (4) at :math:`W^\star`;
    * ``star_perp_rel`` -- :math:`\|P_\perp W^\star\|/\|W^\star\|` (:math:`W^\star\in F`);
    * ``mm_F_rel`` -- :math:`\|P_F W^{\mathrm{mm}}\|/\|W^{\mathrm{mm}}\|` (eq. (6a):
      :math:`W^{\mathrm{mm}}\in F^\perp`);
    * ``inner_rel`` -- :math:`|\cos(W^\star, W^{\mathrm{mm}})|`;
    * ``min_margin``, ``max_spread``, ``n_active`` -- (6b), (6a) and the active margins;
    * ``colsum_rel`` -- :math:`\|1^\top W^{\mathrm{mm}}\|/\|W^{\mathrm{mm}}\|` and
      ``rowspan_rel`` -- :math:`\|W^{\mathrm{mm}}(I - P_H)\|/\|W^{\mathrm{mm}}\|` (KKT:
      :math:`W^{\mathrm{mm}} = C\bar H^\top` with zero-sum columns of C);
    * ``gamma``, ``gamma_gap`` -- :math:`\mathrm{CE}(W^\star + \gamma W^{\mathrm{mm}}) - \mathcal H`
      along a grid of :math:`\gamma` (Prop. 1; ``pi`` defaults to uniform), and
      ``gamma_bound`` -- the bound :math:`V e^{\|W^\star\| M} e^{-\gamma}`,
      :math:`M = \sqrt2\max_j\|\bar h_j\|`, of the proof of Theorem 1 (the "genie" point
      :math:`W^\star + R\,W^{\mathrm{mm}}`, whose off-support margins are at least R).
    """
    H = np.asarray(H, dtype=float)
    P = np.asarray(P, dtype=float)
    S = P > 0
    W_star = lin.finite_component(H, P)
    F = lin.data_subspace(H, S)
    L = W_star @ H
    z = np.argmax(S, axis=0)
    cols = np.arange(S.shape[1])
    err = np.where(S, (L - L[z, cols]) - (np.log(np.where(S, P, 1.0)) - np.log(P[z, cols])), 0.0)
    ns, nm = float(np.linalg.norm(W_star)), float(np.linalg.norm(W_mm))
    mg = lin.margins(W_mm, H, S)
    PH = lin.row_space_projector(H)
    gamma = np.arange(0.0, 21.0, 1.0)  # beyond ~25, CE - H is below double precision
    pi = np.full(S.shape[1], 1.0 / S.shape[1]) if pi is None else np.asarray(pi, dtype=float)
    gap = np.array([lin.ce_excess(W_star + g * W_mm, H, P, pi) for g in gamma])
    M = np.sqrt(2.0) * float(np.linalg.norm(H, axis=0).max())
    return {
        "W_star": W_star,
        "log_odds_error": float(np.abs(err).max()),
        "star_perp_rel": float(np.linalg.norm(F.project_perp(W_star))) / ns,
        "mm_F_rel": float(np.linalg.norm(F.project(W_mm))) / nm,
        "inner_rel": abs(float(np.vdot(W_star, W_mm))) / (ns * nm),
        "min_margin": mg["min_margin"],
        "max_spread": mg["max_spread"],
        "n_active": mg["n_active"],
        "colsum_rel": float(np.linalg.norm(W_mm.sum(axis=0))) / nm,
        "rowspan_rel": float(np.linalg.norm(W_mm - W_mm @ PH)) / nm,
        "gamma": gamma,
        "gamma_gap": gap,
        "gamma_bound": S.shape[0] * np.exp(ns * M - gamma),
    }


def log_slope(steps: np.ndarray, y: np.ndarray, k1: int, k2: int) -> float:
    r""":math:`(y(k_2) - y(k_1))/\ln(k_2/k_1)` at the recorded steps nearest to k1 and k2.

    For :math:`y = \|P_\perp W_k\|` under GD this tends to :math:`\|W^{\mathrm{mm}}\|`
    (:math:`W_k\approx W^\star + \|W^{\mathrm{mm}}\|\ln k\,\overline W^{\mathrm{mm}}`).
    """
    steps = np.asarray(steps)
    i1 = int(np.argmin(np.abs(steps - k1)))
    i2 = int(np.argmin(np.abs(steps - k2)))
    return float((y[i2] - y[i1]) / np.log(steps[i2] / steps[i1]))


def decade_change(steps: np.ndarray, y: np.ndarray) -> float:
    """y at the last recorded step over y at the recorded step nearest to a tenth of it."""
    steps = np.asarray(steps)
    i = int(np.argmin(np.abs(steps - steps[-1] / 10)))
    return float(y[-1] / y[i])


# ----------------------------------------------------------------------------- toy (Figs 1-2)
@dataclass(frozen=True)
class LinToyConfig:
    """The 2-D toy of Figs. 1-2 (embeddings and probabilities are our choices)."""

    seed: int = 0  # seed of the Dirichlet(1) probability draws
    angle_a: float = 10.0  # angle (degrees) of the embedding of context A
    angle_b: float = 100.0  # angle of context B
    angle_c: float = 260.0  # angle of context C
    target_entropy: float = 0.8811  # redraw probabilities until |H - target| < 5e-3


def _toy(cfg) -> lin.NTPData:
    return lin.make_toy(
        cfg.seed,
        angles_deg=(cfg.angle_a, cfg.angle_b, cfg.angle_c),
        target_entropy=cfg.target_entropy,
    )


@cached
def run_toy(cfg: LinToyConfig) -> dict:
    """Toy data, W^mm (NTP-SVM) and W* (finite component)."""
    data = _toy(cfg)
    pair = lin.solution_pair(data.H, data.P)
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
class LinToyGDConfig(LinToyConfig):
    """GD on the toy (Fig. 1, right)."""

    init: str = "zero"  # the paper's checklist: "starting from zero initialization"
    step_size: float = 0.5
    n_steps: int = 10_000
    n_records: int = 60


@cached
def run_toy_gd(cfg: LinToyGDConfig) -> dict:
    data = _toy(cfg)
    pair = lin.solution_pair(data.H, data.P)
    tr = lin.train_ntp(
        data,
        optimizer="gd",
        eta=cfg.step_size,
        n_steps=cfg.n_steps,
        init=cfg.init,
        init_seed=cfg.seed,
        record_steps=log_steps(cfg.n_steps, cfg.n_records),
        pair=pair,
    )
    return _trained(tr, data, pair)


def median_seed(seeds, values) -> int:
    """The seed whose value is the median of ``values`` (the lower middle one for an even count).

    The rule that picks the draw a figure shows from a spread of draws: by rank, never by
    how the draw looks.
    """
    seeds, values = np.asarray(seeds), np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    return int(seeds[order[(len(order) - 1) // 2]])


def _draws(
    run, cfgs: list, seeds: list[int], desc: str, progress: bool, n_workers: int, scheduler
) -> dict:
    """Run ``run`` on one config per draw through :func:`ntpcore.pipeline.sweep.map_runs` and
    stack what the seed spreads of Figs. 1 and 4 report (see :func:`run_toy_seeds`)."""
    from ntpcore.pipeline.sweep import map_runs

    runs = map_runs(
        run, cfgs, n_workers=n_workers, scheduler=scheduler, desc=desc, progress=progress
    )
    curves = ("loss", "gap", "norm", "cos", "cos_corr", "rel_dist_F")
    out: dict = {"seeds": np.asarray(seeds, dtype=np.int64), "steps": runs[0]["steps"]}
    out.update({f"{key}_curves": np.stack([r[key] for r in runs]) for key in curves})
    out.update({f"{key}_end": out[f"{key}_curves"][:, -1] for key in curves})
    out["norm_star"] = np.array([r["norm_star"] for r in runs])
    out["norm_mm"] = np.array([r["norm_mm"] for r in runs])
    out["loss_monotone"] = np.array([r["monotone"] for r in runs])
    out["cos_monotone"] = np.array([bool(np.all(np.diff(r["cos"]) >= -1e-12)) for r in runs])
    out["median_seed"] = median_seed(seeds, out["cos_end"])
    return out


def run_toy_seeds(
    cfg: LinToyGDConfig,
    seeds,
    progress: bool = True,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
) -> dict:
    r"""GD on the toy for several probability draws: the spread of the key quantities.

    One cached :func:`run_toy_gd` per seed (``cfg`` with its ``seed`` replaced), run through
    :func:`ntpcore.pipeline.sweep.map_runs` (in-process, ``n_workers`` local processes or a
    ``dask.distributed`` scheduler; none of them changes what is computed).  Returns, per
    draw, the recorded curves ``<key>_curves`` (draws x records, at ``steps``) and their last
    values ``<key>_end`` for CE, CE - H, the norm, :math:`\cos(W_k, W^{\mathrm{mm}})`,
    :math:`\cos(W_k - W^\star, W^{\mathrm{mm}})` and
    :math:`\|P_F W_k - W^\star\|/\|W^\star\|`; :math:`\|W^\star\|`,
    :math:`\|W^{\mathrm{mm}}\|`, whether CE and :math:`\cos(W_k, W^{\mathrm{mm}})` are
    monotone over the record, and ``median_seed``: the draw whose final cosine is the median.
    """
    seeds = [int(s) for s in seeds]
    cfgs = [replace(cfg, seed=s) for s in seeds]
    return _draws(run_toy_gd, cfgs, seeds, "toy draws", progress, n_workers, scheduler)


# ----------------------------------------------------------------------------- A.2 data
@dataclass(frozen=True)
class LinDataConfig:
    """The synthetic data of App. A.2, up to the support size (Gaussian embeddings, ...)."""

    seed: int = 0  # seed of the embeddings, supports and probabilities
    n_contexts: int = 50  # m: distinct contexts
    dim: int = 60  # d: embedding dimension (d > m => NTP-separable, Lemma 1)
    vocab_size: int = 10  # V
    emb: str = "gauss"  # "gauss" | "unit": embeddings N(0, I_d) or normalised
    prob: str = "dirichlet"  # "dirichlet" | "uniform": in-support probabilities


@dataclass(frozen=True)
class LinSupportConfig(LinDataConfig):
    """The synthetic data of App. A.2 with supports of one size."""

    support_size: int = 6  # |S_j| of every context


@dataclass(frozen=True)
class LinProtocolConfig:
    """The training protocol of App. A.2: initialisation and recording schedule."""

    init: str = "lecun"  # W_0: "lecun" N(0, 1/d) entries (App. A.2) or "zero"
    init_seed: int = 0  # seed of W_0
    n_steps: int = 10_000  # optimizer steps
    n_records: int = 60  # recorded iterates, log-spaced (ntpcore.core.optim.log_steps)


def synthetic_data(cfg: LinSupportConfig) -> lin.NTPData:
    """The A.2 synthetic set of a data configuration."""
    return lin.make_synthetic(
        m=cfg.n_contexts,
        d=cfg.dim,
        V=cfg.vocab_size,
        S=cfg.support_size,
        seed=cfg.seed,
        emb=cfg.emb,
        prob=cfg.prob,
    )


@dataclass(frozen=True)
class LinDistsConfig(LinSupportConfig):
    """Fig. 3: next-token distributions of randomly picked contexts."""

    n_shown: int = 8


@cached
def run_dists(cfg: LinDistsConfig) -> dict:
    data = synthetic_data(cfg)
    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 3]))
    shown = np.sort(rng.choice(cfg.n_contexts, min(cfg.n_shown, cfg.n_contexts), replace=False))
    return {"P": data.P, "shown": shown.astype(np.int64), "entropy": data.entropy}


@dataclass(frozen=True)
class LinTrainRunConfig(LinProtocolConfig, LinSupportConfig):
    """One training run on the A.2 data (shared by Figs. 4-5 and the sweeps)."""

    optimizer: str = "gd"  # "gd" | "ngd" | "adam"
    step_size: float = 0.5  # eta
    beta1: float = 0.9  # Adam only
    beta2: float = 0.99  # Adam only
    eps: float = 1e-8  # Adam only


def train_run(cfg: LinProtocolConfig, **own) -> LinTrainRunConfig:
    """The training run of a figure's config: the fields it shares with a run, then ``own``."""
    names = {f.name for f in fields(LinTrainRunConfig)}
    shared = {k: v for k, v in asdict(cfg).items() if k in names}
    return LinTrainRunConfig(**{**shared, **own})


@cached
def run_train(cfg: LinTrainRunConfig) -> dict:
    t0 = time.perf_counter()
    data = synthetic_data(cfg)
    pair = lin.solution_pair(data.H, data.P)
    tr = lin.train_ntp(
        data,
        optimizer=cfg.optimizer,
        eta=cfg.step_size,
        n_steps=cfg.n_steps,
        init=cfg.init,
        init_seed=cfg.init_seed,
        record_steps=log_steps(cfg.n_steps, cfg.n_records),
        betas=(cfg.beta1, cfg.beta2),
        eps=cfg.eps,
        pair=pair,
    )
    out = _trained(tr, data, pair)
    out["smoothness"] = lin.smoothness_bound(data.H, data.pi)
    out["compute_seconds"] = time.perf_counter() - t0
    return out


@dataclass(frozen=True)
class LinGDConfig(LinProtocolConfig, LinSupportConfig):
    """Fig. 4: GD on the A.2 data."""

    step_size: float = 0.5  # eta


def run_gd(cfg: LinGDConfig) -> dict:
    return run_train(train_run(cfg, optimizer="gd"))


def run_gd_seeds(
    cfg: LinGDConfig,
    seeds,
    progress: bool = True,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
) -> dict:
    r"""GD on independent draws of the A.2 data (Fig. 4): draw ``s`` uses data seed ``s`` and
    initialisation seed ``s``.  Same outputs and executors as :func:`run_toy_seeds`; here
    :math:`W^{\mathrm{mm}}` changes with the draw too (new embeddings and supports)."""
    seeds = [int(s) for s in seeds]
    cfgs = [train_run(replace(cfg, seed=s, init_seed=s), optimizer="gd") for s in seeds]
    return _draws(run_train, cfgs, seeds, "A.2 draws", progress, n_workers, scheduler)


@dataclass(frozen=True)
class LinOptimizersConfig(LinProtocolConfig, LinSupportConfig):
    """Fig. 5: NGD and Adam on the A.2 data (GD as a reference)."""

    ngd_step_size: float = 0.01
    adam_step_size: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-8
    gd_step_size: float = 0.5


def run_optimizers(cfg: LinOptimizersConfig) -> dict[str, dict]:
    """{'gd': ..., 'ngd': ..., 'adam': ...}, each the output of :func:`run_train`."""
    return {
        "gd": run_train(train_run(cfg, optimizer="gd", step_size=cfg.gd_step_size)),
        "ngd": run_train(train_run(cfg, optimizer="ngd", step_size=cfg.ngd_step_size)),
        "adam": run_train(train_run(cfg, optimizer="adam", step_size=cfg.adam_step_size)),
    }


def run_optimizers_seeds(
    cfg: LinOptimizersConfig,
    seeds,
    progress: bool = True,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
) -> dict[str, dict]:
    """:func:`run_optimizers` on independent draws of the A.2 data (Fig. 5): for each of
    ``'gd'``, ``'ngd'``, ``'adam'`` the spread of :func:`run_gd_seeds` (draw ``s``: data
    seed ``s``, initialisation seed ``s``).  The GD runs are those of Fig. 4 when the
    settings agree, so the two figures can show the same draw."""
    seeds = [int(s) for s in seeds]
    steps = {"gd": cfg.gd_step_size, "ngd": cfg.ngd_step_size, "adam": cfg.adam_step_size}
    out = {}
    for opt, eta in steps.items():
        cfgs = [
            train_run(replace(cfg, seed=s, init_seed=s), optimizer=opt, step_size=eta)
            for s in seeds
        ]
        out[opt] = _draws(
            run_train, cfgs, seeds, f"A.2 draws ({opt})", progress, n_workers, scheduler
        )
    return out


# ----------------------------------------------------------------------------- Theorem 1
@dataclass(frozen=True)
class LinRegPathConfig(LinProtocolConfig, LinSupportConfig):
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
    step_size: float = 0.5
    n_steps: int = 300_000
    n_records: int = 80


@cached
def run_reg_path(cfg: LinRegPathConfig) -> dict:
    t0 = time.perf_counter()
    data = synthetic_data(cfg)
    pair = lin.solution_pair(data.H, data.P)
    Wmm, Ws, F = pair["W_mm"], pair["W_star"], pair["F"]
    path = lin.regularization_path(data.H, data.P, data.pi, cfg.radii, on_fail="stop")
    ns = float(np.linalg.norm(Ws))
    W = path["W"]
    out = {
        "radii": path["B"],
        "path_norm": path["norm"],
        "mu": path["mu"],
        "n_failed": path["n_failed"],
        "path_cos": np.array([lin.cos(w, Wmm) for w in W]),
        "path_cos_corr": np.array([lin.cos(w - Ws, Wmm) for w in W]),
        "path_rel_dist_F": np.array([np.linalg.norm(F.project(w) - Ws) / ns for w in W]),
        "path_gap": np.array([lin.ce_excess(w, data.H, data.P, data.pi) for w in W]),
        "norm_mm": pair["svm"].norm,
        "norm_star": ns,
    }
    gd = run_train(train_run(cfg, optimizer="gd"))
    out.update({f"gd_{k}": v for k, v in gd.items() if isinstance(v, np.ndarray)})
    out["compute_seconds"] = time.perf_counter() - t0
    return out


def genie_gaps(cfg: LinSupportConfig, radii) -> np.ndarray:
    r"""CE - H at the "genie" points :math:`W^\star + R(B)\,W^{\mathrm{mm}}` of radius B.

    :math:`R(B) = \sqrt{B^2 - \|W^\star\|^2}/\|W^{\mathrm{mm}}\|` puts the point on the
    sphere :math:`\|W\| = B` (:math:`W^\star\perp W^{\mathrm{mm}}`), so the minimiser
    :math:`\widehat W_B` of eq. (8) can do no worse (proof of Theorem 1).  NaN for
    :math:`B \le \|W^\star\|`.
    """
    data = synthetic_data(cfg)
    pair = lin.solution_pair(data.H, data.P)
    Ws, Wmm = pair["W_star"], pair["W_mm"]
    ns, nm = float(np.linalg.norm(Ws)), pair["svm"].norm
    out = []
    for B in radii:
        if B <= ns:
            out.append(np.nan)
            continue
        R = np.sqrt(B**2 - ns**2) / nm
        out.append(lin.ce_excess(Ws + R * Wmm, data.H, data.P, data.pi))
    return np.asarray(out)


def synthetic_facts(cfg: LinSupportConfig) -> dict:
    """:func:`solution_facts` on the A.2 synthetic set of ``cfg``."""
    data = synthetic_data(cfg)
    W_mm = lin.ntp_svm_solve(data.H, data.S).W_mm
    return solution_facts(data.H, data.P, W_mm, data.pi)


# ----------------------------------------------------------------------------- phase diagram
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
class LinPhasePointConfig:
    """One point of the phase diagram: n_trials Gaussian instances at (V, S, m, d)."""

    seed: int
    vocab_size: int
    support_size: int
    n_contexts: int
    dim: int
    n_trials: int


@cached
def run_phase_point(cfg: LinPhasePointConfig) -> dict:
    ss = np.random.SeedSequence(
        [cfg.seed, cfg.vocab_size, cfg.support_size, cfg.n_contexts, cfg.dim]
    ).spawn(cfg.n_trials)
    V, S, m, d = cfg.vocab_size, cfg.support_size, cfg.n_contexts, cfg.dim
    n_sep = n_compat = n_fail = 0
    for s in ss:
        rng = np.random.default_rng(s)
        H = rng.standard_normal((d, m))
        Sm = np.zeros((V, m), dtype=bool)
        for j in range(m):
            Sm[rng.choice(V, S, replace=False), j] = True
        try:
            n_sep += lin.separability_lp(H, Sm)["separable"]
        except SolverError:
            n_fail += 1
        F = lin.data_subspace(H, Sm)
        n_compat += F.dim == F.n_generators
    return {
        "n_separable": n_sep,
        "n_compatible": n_compat,
        "n_lp_failed": n_fail,
        "n_trials": cfg.n_trials,
    }


@dataclass(frozen=True)
class LinPhaseConfig:
    """NTP-separability / compatibility phase diagram.

    Beyond the paper: the threshold left open in [lin, Remark 1, Sec. 7].
    """

    seed: int = 0
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
    cfg: LinPhaseConfig,
    progress: bool = True,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
) -> dict:
    """Fraction of NTP-separable / compatible instances vs d/m (per-point cached).

    The points are independent runs: they go through :func:`ntpcore.pipeline.sweep.map_runs`
    (in-process by default, ``n_workers`` local processes, or a ``dask.distributed``
    scheduler address).  How they run does not change what they compute, so neither is
    part of ``cfg`` or of any cache key.
    """
    from ntpcore.pipeline.sweep import map_runs

    t0 = time.perf_counter()
    dims = np.unique(np.maximum(1, np.round(np.asarray(cfg.ratios) * cfg.n_contexts)))
    dims = dims.astype(np.int64)
    curves = [(cfg.vocab_size, S) for S in cfg.support_sizes]
    curves += [(V, 1) for V in cfg.onehot_vocab_sizes]
    curves = list(dict.fromkeys(curves))  # one curve per (V, S), even if listed twice
    points = [
        LinPhasePointConfig(cfg.seed, V, S, cfg.n_contexts, int(d), cfg.n_trials)
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
    from scipy.stats import binom

    out["cover_V2"] = binom.cdf(dims - 1, cfg.n_contexts - 1, 0.5)
    out["compute_seconds"] = time.perf_counter() - t0
    return out


# ----------------------------------------------------------------------------- sparsity sweep
@dataclass(frozen=True)
class LinSparsityConfig(LinProtocolConfig, LinDataConfig):
    """Support-size sweep from one-hot [lin, Remark 1] to full support (beyond the paper)."""

    support_sizes: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 9, 10)
    step_size: float = 0.5
    n_steps: int = 100_000


def sparsity_point(run: LinTrainRunConfig) -> dict:
    r"""GD at one support size (an independent run of the sweep): :func:`run_train`, or
    :func:`_run_full_support` when the supports are full (no :math:`W^{\mathrm{mm}}`); both
    cached, so an interrupted sweep resumes."""
    return run_train(run) if run.support_size < run.vocab_size else _run_full_support(run)


def run_sparsity(
    cfg: LinSparsityConfig,
    progress: bool = True,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
) -> dict:
    """GD for every support size S (each run cached); W^mm norm, dim F, frozen P_perp.

    The support sizes are independent runs (:func:`sparsity_point`): they go through
    :func:`ntpcore.pipeline.sweep.map_runs`, in-process by default, on ``n_workers`` local
    processes or on a ``dask.distributed`` scheduler.  How they run does not change what
    they compute, so neither is part of ``cfg`` or of any cache key.
    """
    from ntpcore.pipeline.sweep import map_runs

    t0 = time.perf_counter()
    runs = [train_run(cfg, support_size=int(S), optimizer="gd") for S in cfg.support_sizes]
    results = map_runs(
        sparsity_point,
        runs,
        n_workers=n_workers,
        scheduler=scheduler,
        desc="support sizes",
        progress=progress,
    )
    out: dict = {"support_sizes": np.asarray(cfg.support_sizes), "steps": results[-1]["steps"]}
    for k in ("norm", "gap", "norm_perp", "rel_dist_F", "cos"):
        out[k] = np.stack([r[k] for r in results])
    out.update(
        {
            "norm_mm": np.array(
                [
                    r["norm_mm"] if run.support_size < cfg.vocab_size else np.nan
                    for run, r in zip(runs, results, strict=True)
                ]
            ),
            "dim_F": np.asarray([r["dim_F"] for r in results]),
            "norm_star": np.asarray([r["norm_star"] for r in results]),
            "compute_seconds": time.perf_counter() - t0,
        }
    )
    return out


@cached
def _run_full_support(cfg: LinTrainRunConfig) -> dict:
    """GD with full supports: no W^mm; metrics relative to W* only."""
    data = synthetic_data(cfg)
    fc = lin.finite_component_info(data.H, data.P)
    F, Ws = fc["F"], fc["W_star"]
    ns = float(np.linalg.norm(Ws))
    W0 = lin.init_weights((data.V, data.d), cfg.init, cfg.init_seed)
    perp0 = F.project_perp(W0)

    def metrics(W):
        WF = F.project(W)
        return {
            "gap": lin.ce_excess(W, data.H, data.P, data.pi),
            "rel_dist_F": float(np.linalg.norm(WF - Ws)) / ns,
            "norm_perp": float(np.linalg.norm(W - WF)),
            "perp_drift": float(np.linalg.norm(W - WF - perp0)),
            "cos": np.nan,
        }

    tr = lin.train(
        lin.make_loss_grad(data.H, data.P, data.pi),
        W0,
        optimizer="gd",
        eta=cfg.step_size,
        n_steps=cfg.n_steps,
        record_steps=log_steps(cfg.n_steps, cfg.n_records),
        metrics=metrics,
    )
    out = {"steps": tr.steps}
    out.update(tr.metrics)
    out.update({"dim_F": F.dim, "norm_star": ns})
    return out
