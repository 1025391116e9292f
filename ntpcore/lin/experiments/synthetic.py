r"""GD, NGD and Adam on the synthetic data of App. A.2 of the linear paper (key ``lin``):
Figs. 3-5.

The configurations are composed: :class:`DataConfig` / :class:`SupportConfig` (the data)
and :class:`InitAndRecording` (initialisation and recording), plus each figure's own fields.
:class:`RunConfig` is one training run (shared by Figs. 4-5 and the sweeps), built from a
figure's configuration by :func:`run_config` and computed (cached) by :func:`train_run`.
Defaults follow App. A and, where it is silent, our choices: Gaussian embeddings,
Dirichlet(1) probabilities, LeCun initialisation.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from ntpcore.core.cache import cached
from ntpcore.core.optim import log_steps
from ntpcore.lin.data import NTPData, make_synthetic
from ntpcore.lin.experiments.measures import solution_facts
from ntpcore.lin.experiments.runs import run_draws, trained_result
from ntpcore.lin.loss import smoothness_bound
from ntpcore.lin.svm import solve_ntp_svm
from ntpcore.lin.training import solution_pair, train_ntp

__all__ = [
    "DataConfig",
    "DistsConfig",
    "GDConfig",
    "OptimizersConfig",
    "RunConfig",
    "SupportConfig",
    "InitAndRecording",
    "run_config",
    "run_dists",
    "run_gd",
    "run_gd_seeds",
    "run_optimizers",
    "run_optimizers_seeds",
    "synthetic_data",
    "synthetic_facts",
    "train_run",
]


@dataclass(frozen=True)
class DataConfig:
    """The synthetic data of App. A.2, up to the support size (Gaussian embeddings, ...)."""

    data_seed: int = 0  # seed of the embeddings, supports and probabilities
    n_contexts: int = 50  # m: distinct contexts
    dim: int = 60  # d: embedding dimension (d > m => NTP-separable, Lemma 1)
    vocab_size: int = 10  # V
    emb: str = "gauss"  # "gauss" | "unit": embeddings N(0, I_d) or normalised
    prob: str = "dirichlet"  # "dirichlet" | "uniform": in-support probabilities


@dataclass(frozen=True)
class SupportConfig(DataConfig):
    """The synthetic data of App. A.2 with supports of one size."""

    support_size: int = 6  # |S_j| of every context


@dataclass(frozen=True)
class InitAndRecording:
    """What every training run of App. A.2 shares: the initialisation :math:`W_0` (its law
    and seed), the number of optimizer steps and the recorded iterates."""

    init: str = "lecun"  # W_0: "lecun" N(0, 1/d) entries (App. A.2) or "zero"
    init_seed: int = 0  # seed of W_0
    n_steps: int = 10_000  # optimizer steps
    n_records: int = 60  # recorded iterates, log-spaced (ntpcore.core.optim.log_steps)


def synthetic_data(cfg: SupportConfig) -> NTPData:
    """The A.2 synthetic set of a data configuration."""
    return make_synthetic(
        m=cfg.n_contexts,
        d=cfg.dim,
        V=cfg.vocab_size,
        S=cfg.support_size,
        seed=cfg.data_seed,
        emb=cfg.emb,
        prob=cfg.prob,
    )


def synthetic_facts(cfg: SupportConfig) -> dict:
    """:func:`solution_facts` on the A.2 synthetic set of ``cfg``."""
    data = synthetic_data(cfg)
    W_mm = solve_ntp_svm(data.H, data.S).W_mm
    return solution_facts(data.H, data.P, W_mm, data.pi)


@dataclass(frozen=True)
class DistsConfig(SupportConfig):
    """Fig. 3: next-token distributions of randomly picked contexts."""

    n_shown: int = 8


@cached
def run_dists(cfg: DistsConfig) -> dict:
    data = synthetic_data(cfg)
    rng = np.random.default_rng(np.random.SeedSequence([cfg.data_seed, 3]))
    shown = np.sort(rng.choice(cfg.n_contexts, min(cfg.n_shown, cfg.n_contexts), replace=False))
    return {"P": data.P, "shown": shown.astype(np.int64), "entropy": data.entropy}


@dataclass(frozen=True)
class RunConfig(InitAndRecording, SupportConfig):
    """One training run on the A.2 data (shared by Figs. 4-5 and the sweeps)."""

    optimizer: str = "gd"  # "gd" | "ngd" | "adam"
    lr: float = 0.5  # eta
    beta1: float = 0.9  # Adam only
    beta2: float = 0.99  # Adam only
    eps: float = 1e-8  # Adam only


def run_config(cfg: InitAndRecording, **own) -> RunConfig:
    """The training run of a figure's config: the fields it shares with a run, then ``own``."""
    names = {f.name for f in fields(RunConfig)}
    shared = {k: v for k, v in asdict(cfg).items() if k in names}
    return RunConfig(**{**shared, **own})


@cached
def train_run(cfg: RunConfig) -> dict:
    t0 = time.perf_counter()
    data = synthetic_data(cfg)
    pair = solution_pair(data.H, data.P)
    tr = train_ntp(
        data,
        optimizer=cfg.optimizer,
        eta=cfg.lr,
        n_steps=cfg.n_steps,
        init=cfg.init,
        init_seed=cfg.init_seed,
        record_steps=log_steps(cfg.n_steps, cfg.n_records),
        betas=(cfg.beta1, cfg.beta2),
        eps=cfg.eps,
        pair=pair,
    )
    out = trained_result(tr, data, pair)
    out["smoothness"] = smoothness_bound(data.H, data.pi)
    out["compute_seconds"] = time.perf_counter() - t0
    return out


@dataclass(frozen=True)
class GDConfig(InitAndRecording, SupportConfig):
    """Fig. 4: GD on the A.2 data."""

    lr: float = 0.5  # eta


def run_gd(cfg: GDConfig) -> dict:
    return train_run(run_config(cfg, optimizer="gd"))


def run_gd_seeds(
    cfg: GDConfig,
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
    cfgs = [run_config(replace(cfg, data_seed=s, init_seed=s), optimizer="gd") for s in seeds]
    return run_draws(train_run, cfgs, seeds, "A.2 draws", progress, n_workers, scheduler)


@dataclass(frozen=True)
class OptimizersConfig(InitAndRecording, SupportConfig):
    """Fig. 5: NGD and Adam on the A.2 data (GD as a reference)."""

    ngd_lr: float = 0.01
    adam_lr: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-8
    gd_lr: float = 0.5


def run_optimizers(cfg: OptimizersConfig) -> dict[str, dict]:
    """{'gd': ..., 'ngd': ..., 'adam': ...}, each the output of :func:`train_run`."""
    return {
        "gd": train_run(run_config(cfg, optimizer="gd", lr=cfg.gd_lr)),
        "ngd": train_run(run_config(cfg, optimizer="ngd", lr=cfg.ngd_lr)),
        "adam": train_run(run_config(cfg, optimizer="adam", lr=cfg.adam_lr)),
    }


def run_optimizers_seeds(
    cfg: OptimizersConfig,
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
    steps = {"gd": cfg.gd_lr, "ngd": cfg.ngd_lr, "adam": cfg.adam_lr}
    out = {}
    for opt, eta in steps.items():
        cfgs = [
            run_config(replace(cfg, data_seed=s, init_seed=s), optimizer=opt, lr=eta) for s in seeds
        ]
        out[opt] = run_draws(
            train_run, cfgs, seeds, f"A.2 draws ({opt})", progress, n_workers, scheduler
        )
    return out
