"""Sweeps run through dask: in-process, local processes, and a distributed LocalCluster
all return the same results in the same order."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ntpcore.core.sweep import map_runs


@dataclasses.dataclass(frozen=True)
class Run:
    seed: int
    size: int


def draw(run: Run) -> float:
    """A run whose result depends only on its own seed (module-level: picklable)."""
    return float(np.random.default_rng(run.seed).standard_normal(run.size).sum())


RUNS = [Run(seed, 5 + seed) for seed in range(6)]
EXPECTED = [draw(r) for r in RUNS]


def test_in_process_and_local_processes_agree():
    assert map_runs(draw, RUNS, progress=False) == EXPECTED
    assert map_runs(draw, RUNS, n_workers=2, progress=False) == EXPECTED
    assert map_runs(draw, [], progress=False) == []
    with pytest.raises(ValueError, match="n_workers"):
        map_runs(draw, RUNS, n_workers=0)


def test_distributed_local_cluster_gives_the_same_results(cluster):
    got = map_runs(draw, RUNS, scheduler=cluster, progress=False)
    assert got == EXPECTED


def _cache_dir_here() -> str:
    from ntpcore.core import paths

    return str(paths.cache_dir())


def test_cluster_workers_cache_apart_from_the_test_process(cluster, tmp_path):
    """The fixture's workers write their cache under ``tmp_path / "cluster"``, not where the
    serial run of a test (or the repository) keeps its own: a cluster sweep recomputes."""
    distributed = pytest.importorskip("distributed")
    with distributed.Client(cluster) as client:
        dirs = set(client.run(_cache_dir_here).values())
    assert dirs == {str((tmp_path / "cluster").resolve())}
