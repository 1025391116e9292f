"""Input validation scales its tolerances with the precision of the input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ntpcore.core.validate import as_prob_matrix
from ntpcore.errors import DataError


def test_float32_softmax_probabilities_are_accepted():
    g = torch.Generator().manual_seed(0)
    P32 = torch.softmax(torch.randn(50, 30, generator=g), dim=0).numpy()
    assert P32.dtype == np.float32
    assert np.abs(P32.astype(np.float64).sum(0) - 1).max() > 1e-8  # would fail at float64 tol
    P = as_prob_matrix(P32)
    assert P.dtype == np.float64


def test_float64_columns_must_sum_to_one_and_the_error_says_by_how_much():
    P = np.full((4, 2), 0.25)
    P[0, 1] += 1e-6
    with pytest.raises(DataError, match=r"column 1 sums to 1 \+1\.00e-06"):
        as_prob_matrix(P)
    with pytest.raises(DataError, match="column 0"):
        as_prob_matrix(np.full((4, 2), 0.25, dtype=np.float32) * 1.01)


def test_an_unknown_solver_is_the_same_error_in_every_paper():
    """Issue 22: solver="bogus" was a SolverError (from cvxpy) in geo, a DataError in lin."""
    import numpy as np

    from ntpcore import geo, lin
    from ntpcore.errors import ParameterError

    S = np.array([[1, 0], [0, 1], [0, 0]], dtype=bool)
    with pytest.raises(ParameterError, match="solver must be one of .*got 'bogus'"):
        geo.nuclear_svm(S, solver="bogus")
    with pytest.raises(ParameterError, match="solver must be .*got 'bogus'"):
        lin.ntp_svm(np.eye(2), S, solver="bogus")


def test_progress_bars_are_off_when_the_environment_says_so(monkeypatch):
    from ntpcore.core.progress import progress_bar, progress_enabled

    monkeypatch.delenv("NTP_PROGRESS", raising=False)
    assert progress_enabled() and not progress_enabled(False)
    assert not progress_bar(total=3).disable
    monkeypatch.setenv("NTP_PROGRESS", "0")  # the runner's kernels and the nbval checks
    assert not progress_enabled() and progress_bar(total=3).disable
