"""Geometry solvers never return an uncertified answer silently."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

from ntpcore import geo
from ntpcore.errors import DataError, SolverError
from ntpcore.geo import train
from ntpcore.geo.synthetic import synthetic_dataset


def test_a_regularization_path_point_that_is_not_a_minimiser_raises():
    ds = synthetic_dataset()
    lams = np.geomspace(1e-1, 1e-3, 4)
    ok = geo.regularization_path(ds.P, ds.pi, lams, max_iter=5000)
    assert np.abs(ok["opt_residual"][ok["nuclear"] > 0]).max() < 1e-5
    with pytest.raises(SolverError, match=r"no certified minimiser at lambda="):
        geo.regularization_path(ds.P, ds.pi, lams, max_iter=2, polish=False)


def test_fit_ufm_ridge_refuses_a_run_that_stopped_short(monkeypatch):
    ds = synthetic_dataset()
    W, H = train.fit_ufm_ridge(ds, d=8, lam=1e-2)
    assert np.isfinite(W).all() and np.isfinite(H).all()
    real = scipy.optimize.minimize

    def stopped(*args, **kwargs):
        kwargs["options"] = {**kwargs["options"], "maxiter": 2}
        return real(*args, **kwargs)

    monkeypatch.setattr(scipy.optimize, "minimize", stopped)
    with pytest.raises(SolverError, match="without a stationary point"):
        train.fit_ufm_ridge(ds, d=8, lam=1e-2)


@pytest.mark.parametrize("shape", [(0, 0), (4, 0), (0, 3)])
def test_an_empty_support_matrix_is_named_empty(shape):
    """Issue 22: a 0x0 or V x 0 input was said to have "the full vocabulary as support"."""
    with pytest.raises(DataError, match=r"S is empty \(shape"):
        geo.nuclear_svm(np.zeros(shape, dtype=bool))
