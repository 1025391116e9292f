"""Shared fixtures of the ``lin`` tests: the A.2 synthetic set, the toy, their solutions."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore import lin
from ntpcore.core.optim import log_steps


@pytest.fixture(scope="session")
def synth() -> lin.NTPData:
    """App. A.2 data: m = 50, d = 60, V = 10, S = 6 (seed 0)."""
    return lin.make_synthetic(seed=0)


@pytest.fixture(scope="session")
def synth_pair(synth) -> dict:
    return lin.solution_pair(synth.H, synth.P)


@pytest.fixture(scope="session")
def toy() -> lin.NTPData:
    return lin.make_toy(seed=0)


@pytest.fixture(scope="session")
def toy_pair(toy) -> dict:
    return lin.solution_pair(toy.H, toy.P)


@pytest.fixture(scope="session")
def gd_synth(synth, synth_pair) -> lin.Trajectory:
    """GD, eta = 0.5, LeCun init, T = 1e4 on the A.2 data [lin, Fig. 4]."""
    rec = np.union1d(log_steps(10_000, 60), [1000])
    return lin.train_ntp(
        synth,
        optimizer="gd",
        eta=0.5,
        n_steps=10_000,
        init="lecun",
        init_seed=0,
        record_steps=rec,
        pair=synth_pair,
    )
