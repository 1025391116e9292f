"""Timers of the geometry paper's trainers and solvers (tools.bench.geo)."""

from __future__ import annotations

import math

import numpy as np

from ntpcore.geo.synthetic import synthetic_dataset
from ntpcore.geo.train import AdamWProtocol, TrainerConfig
from tools.bench.geo import (
    benchmark_nuclear_svm,
    epoch_seconds,
    naive_epoch_seconds,
    random_supports,
)


def test_epoch_timers_measure_both_formulations() -> None:
    ds = synthetic_dataset(seed=0)
    for model in ("ufm", "lstm"):
        cfg = TrainerConfig(AdamWProtocol(dim=8), model, lstm_layers=1)
        for t in (
            naive_epoch_seconds(ds, cfg, n_epochs=2, warmup=1),
            epoch_seconds(ds, cfg, n_epochs=2),
        ):
            assert math.isfinite(t) and t > 0


def test_random_supports_and_solver_benchmark() -> None:
    S = random_supports(8, 6, 3, seed=0)
    k = S.sum(axis=0)
    assert S.shape == (8, 6) and k.min() >= 1 and k.max() <= 3
    np.testing.assert_array_equal(S, random_supports(8, 6, 3, seed=0))
    out = benchmark_nuclear_svm(S, n_repeats=1, reference="CLARABEL")
    assert out["t_admm"] > 0 and out["t_ref"] > 0
    assert out["rel_obj_diff"] < 1e-4  # the two solvers agree on ||L_mm||_*
