"""Solver faults of the linear paper's programs [lin, Def. 3, eq. (8)]: never an uncertified answer.

* near the NTP-separability threshold (d/m below 1, so H is rank-deficient, and
  ||W^mm|| ~ 100) the dual coordinate descent cannot certify an answer in its epoch budget:
  it says so without a NaN, and the dispatcher's answer is certified and equal to the
  interior-point reference;
* an ``optimal_inaccurate`` ending of cvxpy is retried and never returned (cvxpy's
  ``Problem.solve`` patched to report it);
* ``solver="auto"`` hands a failed method over to another certified one and records it;
* on the usual instances the dispatcher's answer is the first-choice solver's, unchanged.
"""

from __future__ import annotations

import functools

import cvxpy as cp
import numpy as np
import pytest

import ntpcore.lin.svm as svm_mod
from ntpcore import lin
from ntpcore.errors import SolverError
from ntpcore.lin.dual import svm_dual
from ntpcore.lin.dual_cd import svm_dual_cd
from ntpcore.lin.svm_problem import CHECK_TOL
from ntpcore.lin.svm_reference import ntp_svm_cvxpy

pytestmark = pytest.mark.theory

TIGHT = {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-11}


@pytest.fixture(scope="module")
def near_threshold() -> lin.NTPData:
    """V = 5, d = 28, m = 44, |S_j| = 2: separable, but barely (||W^mm|| ~ 100)."""
    return lin.make_synthetic(m=44, d=28, V=5, S=2, seed=100)


def _report_inaccurate(monkeypatch, n_times: int | None = None) -> list[str]:
    """Make cvxpy's Problem.solve end ``optimal_inaccurate`` (the first n_times calls)."""
    original = cp.Problem.solve
    calls: list[str] = []

    def solve(self, *args, **kw):
        out = original(self, *args, **kw)
        calls.append(kw.get("solver", ""))
        if n_times is None or len(calls) <= n_times:
            self._status = cp.OPTIMAL_INACCURATE
        return out

    monkeypatch.setattr(cp.Problem, "solve", solve)
    return calls


def _assert_certified(res, H, S, ref_norm):
    """(6a)-(6b) to CHECK_TOL, and the objective of the reference to 1e-6 relative."""
    mg = lin.margins(res.W_mm, H, S)
    assert mg["min_margin"] >= 1 - CHECK_TOL
    assert mg["max_spread"] <= CHECK_TOL * max(1.0, res.norm)
    assert abs(res.norm**2 - ref_norm**2) <= 1e-6 * ref_norm**2


def test_near_threshold_instance_is_solved_and_certified(near_threshold):
    H, S = near_threshold.H, near_threshold.S
    assert np.linalg.matrix_rank(H) < H.shape[1] and lin.is_ntp_separable(H, S)
    ref = ntp_svm_cvxpy(H, S, **TIGHT)
    assert ref.norm > 50  # far from the easy regime: 1/||W^mm|| is a tiny margin
    res = lin.solve_ntp_svm(H, S)
    _assert_certified(res, H, S, ref.norm)
    # the minimiser is unique (strongly convex objective): the points agree too
    assert np.linalg.norm(res.W_mm - ref.W_mm) <= 1e-4 * ref.norm


def test_dual_cd_failure_is_explicit_and_finite(near_threshold):
    """Out of epochs with no positive margin yet: a SolverError that says so, no NaN."""
    with pytest.raises(SolverError) as err:
        svm_dual_cd(near_threshold.H, near_threshold.S, max_epochs=40)
    msg = str(err.value)
    assert "nan" not in msg.lower() and "no convergence" in msg


def test_auto_falls_back_to_dual_cd_when_cvxpy_is_inaccurate(monkeypatch):
    """Tiny rank-deficient program: cvxpy first; it only reports inaccurate, dual-cd answers."""
    rng = np.random.default_rng(3)
    V, d, m = 6, 8, 12
    H = rng.standard_normal((d, m))
    S = np.zeros((V, m), dtype=bool)
    S[rng.integers(0, V, m), np.arange(m)] = True
    ref = ntp_svm_cvxpy(H, S, **TIGHT)
    _report_inaccurate(monkeypatch)
    res = lin.solve_ntp_svm(H, S)
    assert res.solver == "dual-cd"
    assert "optimal_inaccurate" in res.extra["fallback_from"]["cvxpy"]
    _assert_certified(res, H, S, ref.norm)
    assert np.linalg.norm(res.W_mm - ref.W_mm) <= 1e-5 * ref.norm


def test_auto_raises_when_no_method_certifies(monkeypatch, near_threshold):
    """cvxpy inaccurate and dual-cd out of epochs: an error naming both, never a W."""
    _report_inaccurate(monkeypatch)
    monkeypatch.setattr(svm_mod, "svm_dual_cd", functools.partial(svm_dual_cd, max_epochs=40))
    with pytest.raises(SolverError) as err:
        lin.solve_ntp_svm(near_threshold.H, near_threshold.S)
    msg = str(err.value)
    assert "optimal_inaccurate" in msg and "dual CD" in msg


def test_auto_falls_back_from_newton_dual(monkeypatch, synth):
    """Full-rank program: a failing projected Newton hands over to dual-cd, same W^mm."""
    first = lin.solve_ntp_svm(synth.H, synth.S)
    assert first.solver == "dual" and "fallback_from" not in first.extra

    def broken(H, S):
        raise SolverError("NTP-SVM dual: line search failed (numerical trouble)")

    monkeypatch.setattr(svm_mod, "svm_dual", broken)  # where the dispatch looks it up
    res = lin.solve_ntp_svm(synth.H, synth.S)
    assert res.solver == "dual-cd" and "line search" in res.extra["fallback_from"]["dual"]
    assert np.linalg.norm(res.W_mm - first.W_mm) <= 1e-6 * first.norm


def test_svm_cvxpy_inaccurate_is_retried(monkeypatch, toy):
    exact = ntp_svm_cvxpy(toy.H, toy.S)
    calls = _report_inaccurate(monkeypatch, n_times=1)
    res = ntp_svm_cvxpy(toy.H, toy.S)
    assert len(calls) == 2 and res.status == cp.OPTIMAL
    assert "optimal_inaccurate" in res.extra["failed_attempts"][0]
    _assert_certified(res, toy.H, toy.S, exact.norm)


def test_svm_cvxpy_inaccurate_everywhere_raises(monkeypatch, toy):
    calls = _report_inaccurate(monkeypatch)
    with pytest.raises(SolverError, match="optimal_inaccurate"):
        ntp_svm_cvxpy(toy.H, toy.S)
    assert len(calls) >= 2  # retried before giving up


def test_regpath_cvxpy_inaccurate_is_retried_or_raises(monkeypatch, toy):
    B = [1.0, 2.0]
    exact = lin.regularization_path_cvxpy(toy.H, toy.P, toy.pi, B)
    assert list(exact["status"]) == [cp.OPTIMAL] * 2
    newton = lin.regularization_path(toy.H, toy.P, toy.pi, B)
    _report_inaccurate(monkeypatch, n_times=1)
    retried = lin.regularization_path_cvxpy(toy.H, toy.P, toy.pi, B)
    assert list(retried["status"]) == [cp.OPTIMAL] * 2
    # the retried radii solve eq. (8): they agree with the ridge-Newton path (to Clarabel's
    # default exponential-cone accuracy, as in test_regpath.py)
    assert np.linalg.norm(retried["W"] - newton["W"]) <= 1e-4 * np.linalg.norm(newton["W"])
    monkeypatch.undo()
    _report_inaccurate(monkeypatch)
    with pytest.raises(SolverError, match="optimal_inaccurate"):
        lin.regularization_path_cvxpy(toy.H, toy.P, toy.pi, B)


def test_dispatch_unchanged_on_usual_instances(synth, toy):
    """No fallback on the A.2 data and the toy: the first choice's answer, bit for bit."""
    a = lin.solve_ntp_svm(synth.H, synth.S)
    assert a.solver == "dual" and "fallback_from" not in a.extra
    np.testing.assert_array_equal(a.W_mm, svm_dual(synth.H, synth.S).W_mm)
    b = lin.solve_ntp_svm(toy.H, toy.S)
    assert b.solver == "cvxpy" and "fallback_from" not in b.extra
    assert b.extra["failed_attempts"] == [] and b.extra["backend"] == "CLARABEL"
    np.testing.assert_array_equal(b.W_mm, ntp_svm_cvxpy(toy.H, toy.S).W_mm)
