r"""Trials of the self-attention experiments (key ``att``): seeded draws of datasets,
embeddings and initialisations, and the sweep that runs one cached computation per trial.

Trial ``r`` draws from ``default_rng(SeedSequence(trial_seed).spawn(n_trials)[r])``; draws
rejected by the graph condition and infeasible Graph-SVM draws are counted (``n_rejected``,
``n_infeasible``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcore.att.data import AttDataset, sample_dataset, unit_embeddings
from ntpcore.att.priority import (
    token_priority_graphs,
)
from ntpcore.att.svm import solve_graph_svm
from ntpcore.errors import InfeasibleError

__all__ = [
    "DataConfig",
    "DescentSteps",
    "FeasibleTrial",
    "Trial",
    "sample_feasible_trial",
    "scc_onehot",
    "trial_rng",
    "trial_rngs",
    "trial_sweep",
]


@dataclass(frozen=True)
class DataConfig:
    """The random datasets of the experiments: ``n_trials`` draws of ``n_samples`` sequences of
    ``seq_len`` tokens over ``vocab_size`` words embedded in dimension ``dim``."""

    trial_seed: int = 0  # base seed; trial r uses SeedSequence(trial_seed).spawn(n_trials)[r]
    n_trials: int = 10  # independent trials (data, embeddings, init, SVM redrawn)
    n_samples: int = 6  # n: sequences per dataset
    seq_len: int = 4  # T: tokens per sequence (distinct when T <= K)
    vocab_size: int = 6  # K
    dim: int = 8  # d (K <= d: Graph-SVM always feasible)


@dataclass(frozen=True)
class DescentSteps:
    """The descent of the experiments: its learning rate (step size) and number of steps."""

    lr: float = 0.01  # eta, the step size
    n_steps: int = 4000  # iterations


def trial_rngs(seed: int, n_trials: int) -> list[np.random.Generator]:
    """Independent generators of the trials: ``SeedSequence(seed).spawn(n_trials)``."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n_trials)]


def trial_rng(seed: int, index: int) -> np.random.Generator:
    """The generator of trial ``index`` alone: ``trial_rngs(seed, n)[index]`` for any
    ``n > index`` (``SeedSequence(seed).spawn`` gives child ``i`` the spawn key ``(i,)``), so a
    trial run on its own draws what it draws in a serial loop."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))


@dataclass(frozen=True)
class Trial:
    """Trial ``index`` of the experiment ``cfg``: one point of a per-trial sweep."""

    cfg: Any  # the experiment's frozen config (with ``trial_seed`` and ``n_trials``)
    index: int


def trial_sweep(
    run_one, cfg, desc: str, n_workers: int, scheduler: str | None, progress: bool
) -> list[dict]:
    """``run_one(Trial(cfg, r))`` for every trial ``r`` of ``cfg``, in order, through
    :func:`ntpcore.core.sweep.map_runs` (in-process, ``n_workers`` local processes or a
    ``dask.distributed`` scheduler; none of them changes what is computed)."""
    from ntpcore.core.sweep import map_runs

    trials = [Trial(cfg, r) for r in range(cfg.n_trials)]
    return map_runs(
        run_one, trials, n_workers=n_workers, scheduler=scheduler, desc=desc, progress=progress
    )


@dataclass(frozen=True)
class FeasibleTrial:
    """A random dataset whose Graph-SVM is feasible, with its TPGs and W^svm."""

    data: AttDataset  # tokens, labels, embeddings (and draws rejected by the graph condition)
    graphs: list  # the K token-priority graphs G^(k)
    W_svm: np.ndarray  # (d, d) Graph-SVM direction
    n_infeasible: int  # embedding draws discarded because the Graph-SVM was infeasible


def sample_feasible_trial(
    rng: np.random.Generator, n: int, T: int, K: int, d: int, graph: str
) -> FeasibleTrial:
    """Draw a dataset satisfying the graph condition ``graph`` with a feasible Graph-SVM.

    Tokens and labels come from :func:`ntpcore.att.data.sample_dataset`; while the Graph-SVM of
    their TPGs is infeasible (typical only when K > d: dependent embeddings) the embeddings are
    redrawn, and each such draw is counted in ``n_infeasible``.

    Raises
    ------
    InfeasibleError  after 1000 infeasible embedding draws in a row.
    """
    data = sample_dataset(rng, n, T, K, d, graph=graph)
    graphs = token_priority_graphs(data.tokens, data.labels, K)
    for n_inf in range(1000):
        try:
            W_svm = solve_graph_svm(data.E, graphs).W
            return FeasibleTrial(data, graphs, W_svm, n_inf)
        except InfeasibleError:  # counted; a new embedding draw
            data = AttDataset(unit_embeddings(rng, K, d), data.tokens, data.labels, data.n_rejected)
    raise InfeasibleError(f"1000 infeasible embedding draws in a row (K={K}, d={d})")


def scc_onehot(tokens: np.ndarray, structures) -> np.ndarray:
    """(n, T, K) one-hot of the SCC id in ``G^(k_i)`` of the token at each position."""
    n, T = tokens.shape
    K = structures[0].K
    out = np.zeros((n, T, K))
    for i, seq in enumerate(tokens):
        out[i, np.arange(T), structures[int(seq[-1])].scc[seq]] = 1.0
    return out
