"""Regularization path [lin, eq. (8), Thm. 1]: Newton-ridge solver against cvxpy."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore import lin
from ntpcore.errors import SolverError

pytestmark = pytest.mark.theory

B_LIST = [5.0, 10.0, 20.0, 40.0]


@pytest.fixture(scope="module")
def path(synth):
    return lin.regularization_path(synth.H, synth.P, synth.pi, B_LIST)


def test_on_boundary_and_aligning(synth, synth_pair, path):
    Wmm, Ws, F = synth_pair["W_mm"], synth_pair["W_star"], synth_pair["F"]
    cosv, dist = [], []
    for B, W in zip(B_LIST, path["W"], strict=True):
        if lin.ce_excess_W(W, synth.H, synth.P, synth.pi) < 1e-7:  # solver-tolerance regime
            continue
        assert abs(np.linalg.norm(W) - B) <= 1e-3
        cosv.append(lin.cos(W, Wmm))
        dist.append(np.linalg.norm(F.project(W) - Ws) / np.linalg.norm(Ws))
    assert np.all(np.diff(cosv) > 0) and cosv[-1] > 0.98
    assert dist[-1] < 1e-3
    assert np.all(path["mu"] > 0) and np.all(np.diff(path["mu"]) < 0)


def test_kkt_of_ball_problem(synth, path):
    """Optimality on the sphere: grad CE(W_B) = -mu W_B with mu > 0."""
    for W, mu in zip(path["W"], path["mu"], strict=True):
        g = lin.ce_grad_W(W, synth.H, synth.P, synth.pi)
        assert np.linalg.norm(g + mu * W) <= 1e-9 * max(1.0, np.linalg.norm(g))


def test_matches_cvxpy(synth, path):
    ref = lin.regularization_path_cvxpy(synth.H, synth.P, synth.pi, B_LIST[:2])
    for Wr, W in zip(ref["W"], path["W"][:2], strict=True):
        assert np.linalg.norm(Wr - W) <= 1e-4 * np.linalg.norm(W)
        ce_ref = lin.ce_W(Wr, synth.H, synth.P, synth.pi)
        assert lin.ce_W(W, synth.H, synth.P, synth.pi) <= ce_ref + 1e-9


def test_ridge_solution_stationary(toy):
    W = lin.ridge_solution(toy.H, toy.P, toy.pi, 0.1)
    g = lin.ce_grad_W(W, toy.H, toy.P, toy.pi)
    assert np.linalg.norm(g + 0.1 * W) <= 1e-12


def test_too_large_radius_is_a_typed_error(synth):
    with pytest.raises(SolverError):
        lin.regularization_path(synth.H, synth.P, synth.pi, [200.0])
