r"""SCC statistics of random token-priority graphs (key ``att``, beyond the paper) versus
the number of samples n and the length T, one cached cell per (T, n).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ntpcore.att.data import sample_dataset
from ntpcore.att.experiments.trials import trial_rng
from ntpcore.att.priority import (
    cyclic_samples,
    reduced_position_mask,
    scc_structures,
    token_priority_graphs,
)
from ntpcore.core.cache import cached

__all__ = ["SCCCellConfig", "SCCStatsConfig", "run_scc_stats", "scc_cell"]


# ============================================================================================
# SCC statistics of random data (beyond the paper)
# ============================================================================================
@dataclass(frozen=True)
class SCCStatsConfig:
    """SCC statistics of random TPGs versus the number of samples n and the length T."""

    trial_seed: int = 0  # base seed; cell i uses SeedSequence(trial_seed).spawn(...)[i]
    n_trials: int = 20  # datasets per (n, T)
    vocab_size: int = 20  # K
    seq_lens: tuple = (3, 5, 8)  # T values
    sample_sizes: tuple = (5, 10, 20, 50, 100, 200, 500, 1000, 2000)  # n values


_SCC_STATS = ("n_sccs", "largest_frac", "single_scc", "cyclic_frac", "pure_comp")


@dataclass(frozen=True)
class SCCCellConfig:
    """One (T, n) cell of the SCC statistics: ``n_trials`` datasets drawn from the generator
    ``SeedSequence(trial_seed).spawn(...)[index]`` (the same stream as a serial loop would use)."""

    trial_seed: int
    index: int
    seq_len: int
    n_samples: int
    vocab_size: int
    n_trials: int


@cached
def scc_cell(cell: SCCCellConfig) -> dict:
    """The statistics of one cell, one value per trial: an independent run of the sweep."""
    rng = trial_rng(cell.trial_seed, cell.index)
    K, T, n = cell.vocab_size, cell.seq_len, cell.n_samples
    out = {k: np.zeros(cell.n_trials) for k in _SCC_STATS}
    for r in range(cell.n_trials):
        data = sample_dataset(rng, n, T, K, 1, graph="any")
        st = scc_structures(token_priority_graphs(data.tokens, data.labels, K))
        used = [s for s in st if s.touched.any()]
        n_scc = [len(np.unique(s.scc[s.touched])) for s in used]
        big = [np.bincount(s.scc[s.touched]).max() / s.touched.sum() for s in used]
        out["n_sccs"][r] = np.mean(n_scc)
        out["largest_frac"][r] = np.mean(big)
        out["single_scc"][r] = np.mean(np.array(n_scc) == 1)
        out["cyclic_frac"][r] = cyclic_samples(data.tokens, data.labels, st).mean()
        mask = reduced_position_mask(data.tokens, data.labels, st)
        out["pure_comp"][r] = mask.all(axis=1).mean()
    return out


def run_scc_stats(
    cfg: SCCStatsConfig,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
    progress: bool = True,
) -> dict:
    """Per (T, n), averaged over trials and over the TPGs that have edges:
    ``n_sccs`` (SCCs among touched tokens), ``largest_frac`` (largest SCC / touched tokens),
    ``single_scc`` (fraction of TPGs that are one SCC: W^svm e_k = 0 there), and per sample
    ``cyclic_frac`` (label's SCC holds another token) and ``pure_comp`` (label's SCC holds every
    token of the sequence: no hard retrieval left, pure soft composition).

    The (T, n) cells are independent runs (per-cell cached) with their own generators: they go
    through :func:`ntpcore.core.sweep.map_runs`, in-process by default, on ``n_workers``
    local processes or on a ``dask.distributed`` scheduler.  How they run does not change
    what they compute, so neither is part of ``cfg`` or of any cache key.
    """
    from ntpcore.core.sweep import map_runs

    t0 = time.perf_counter()
    cells = [
        SCCCellConfig(
            cfg.trial_seed, a * len(cfg.sample_sizes) + b, T, n, cfg.vocab_size, cfg.n_trials
        )
        for a, T in enumerate(cfg.seq_lens)
        for b, n in enumerate(cfg.sample_sizes)
    ]
    results = map_runs(
        scc_cell,
        cells,
        n_workers=n_workers,
        scheduler=scheduler,
        desc="SCC statistics",
        progress=progress,
    )
    shape = (len(cfg.seq_lens), len(cfg.sample_sizes), cfg.n_trials)
    stats = {k: np.stack([r[k] for r in results]).reshape(shape) for k in _SCC_STATS}
    return {
        "seq_lens": np.array(cfg.seq_lens),
        "sample_sizes": np.array(cfg.sample_sizes),
        **stats,
        "compute_seconds": float(time.perf_counter() - t0),
    }
