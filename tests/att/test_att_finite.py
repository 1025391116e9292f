"""Finite component W^fin (book att-def-wfin; the fully cyclic toy) and the regularization path
(book att-thm-regpath)."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore.att import (
    cos,
    cyclic_samples,
    finite_component,
    finite_component_cvxpy,
    graph_svm,
    reduced_log_loss,
    reduced_position_mask,
    regularization_path,
    scc_structures,
    subspaces,
    token_priority_graphs,
)
from ntpcore.att.data import sample_dataset, toy_dataset
from ntpcore.att.descent import run_descent
from ntpcore.att.dynamics import make_problem

LOG2 = np.log(2.0)


def test_closed_form_cyclic_toy():
    d = toy_dataset("cyclic")
    W = finite_component(d.E, d.tokens, d.labels)
    expected = np.zeros((3, 3))
    expected[:, 2] = [LOG2 / 2, -LOG2 / 2, 0.0]
    np.testing.assert_allclose(W, expected, atol=1e-12)
    W_cp = finite_component_cvxpy(d.E, d.tokens, d.labels)
    np.testing.assert_allclose(W_cp, expected, atol=1e-5)  # exp-cone reference accuracy


def test_label_frequencies_move_w_fin_but_not_w_svm():
    a, b = toy_dataset("cyclic"), toy_dataset("cyclic-3to1")
    np.testing.assert_allclose(
        graph_svm(b.E, b.tokens, b.labels), graph_svm(a.E, a.tokens, a.labels), atol=1e-12
    )
    W = finite_component(b.E, b.tokens, b.labels)
    np.testing.assert_allclose(W[:, 2], [np.log(3) / 2, -np.log(3) / 2, 0.0], atol=1e-12)
    p = np.exp(W[:2, 2]) / np.exp(W[:2, 2]).sum()
    np.testing.assert_allclose(p, [3 / 4, 1 / 4], atol=1e-12)


def test_fully_cyclic_closed_form():
    d = toy_dataset("fully-cyclic")  # composition (1/2, 1/4, 1/4)
    W = finite_component(d.E, d.tokens, d.labels)
    np.testing.assert_allclose(W[:, 2], LOG2 * np.array([2, -1, -1]) / 3, atol=1e-12)


def test_acyclic_gives_zero():
    d = toy_dataset("acyclic")
    np.testing.assert_array_equal(finite_component(d.E, d.tokens, d.labels), 0.0)


def _cyclic(seed, n=6, T=4, K=6, d=8):
    return sample_dataset(np.random.default_rng(seed), n, T, K, d, graph="cyclic")


@pytest.mark.parametrize("seed", [0, 1, 2, 5, 7])
def test_newton_matches_cvxpy_and_lies_in_s_fin(seed):
    data = _cyclic(seed, n=8)
    W = finite_component(data.E, data.tokens, data.labels)
    W_cp = finite_component_cvxpy(data.E, data.tokens, data.labels)
    assert np.linalg.norm(W - W_cp) <= 5e-5 * max(1.0, np.linalg.norm(W))  # exp-cone accuracy
    sub = subspaces(data.E, data.tokens, data.labels)
    np.testing.assert_allclose(sub.project(W, "S_fin"), W, atol=1e-12)
    # optimality: the reduced loss does not decrease along random directions of S_fin
    rng = np.random.default_rng(seed)
    L0 = reduced_log_loss(W, data.E, data.tokens, data.labels)
    for _ in range(5):
        D = (rng.standard_normal(sub.S_fin.shape[0]) @ sub.S_fin).reshape(W.shape) * 1e-3
        assert reduced_log_loss(W + D, data.E, data.tokens, data.labels) >= L0 - 1e-14


@pytest.mark.parametrize("seed", [0, 3])
def test_w_fin_equals_reduced_gd_from_zero(seed):
    """book att-def-wfin: plain GD from 0 on the reduced loss stays in S_fin and reaches W^fin;
    normalized GD at lr 0.01 (the paper's recipe) ends within 0.02."""
    data = _cyclic(seed)
    W_fin = finite_component(data.E, data.tokens, data.labels)
    st = scc_structures(token_priority_graphs(data.tokens, data.labels, data.K))
    mask = reduced_position_mask(data.tokens, data.labels, st)
    w = np.where(cyclic_samples(data.tokens, data.labels, st), 1.0 / len(data.labels), 0.0)
    P = make_problem(data.E, data.tokens, data.labels, mask=mask, sample_weight=w)
    zero = np.zeros((1, 8, 8))
    _, tr = run_descent(zero, P, eta=0.5, n_steps=4000, normalized=False, record=[4000])
    assert np.linalg.norm(tr[-1, 0] - W_fin) <= 1e-4
    _, tr = run_descent(zero, P, eta=0.01, n_steps=4000, normalized=True, record=[4000])
    assert np.linalg.norm(tr[-1, 0] - W_fin) <= 0.02


def test_regularization_path():
    """book att-thm-regpath on one cyclic dataset: corr increases, ||W_R|| = R, Pi_fin W_R ->
    W^fin."""
    data = _cyclic(0)
    radii = [1.0, 3.0, 10.0, 30.0]
    WR = regularization_path(data.E, data.tokens, data.labels, radii)["W"]
    W_svm = graph_svm(data.E, data.tokens, data.labels)
    W_fin = finite_component(data.E, data.tokens, data.labels)
    c = cos(WR, W_svm)
    assert np.all(np.diff(c) > 0) and c[-1] >= 0.99
    np.testing.assert_allclose(np.linalg.norm(WR, axis=(1, 2)), radii, rtol=1e-5)
    sub = subspaces(data.E, data.tokens, data.labels)
    assert np.linalg.norm(sub.project(WR[-1], "S_fin") - W_fin) <= 1e-3


def test_regularization_path_never_accepts_an_inaccurate_solve(monkeypatch):
    """An "optimal_inaccurate" status is re-solved, and raises when no attempt is optimal."""
    import cvxpy as cp

    from ntpcore.errors import SolverError

    data = sample_dataset(np.random.default_rng(0), 6, 4, 6, 8, graph="cyclic")
    real = cp.Problem.solve
    calls = []

    def inaccurate_first(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        calls.append(kwargs.get("solver"))
        if len(calls) == 1:
            self._status = "optimal_inaccurate"
        return out

    monkeypatch.setattr(cp.Problem, "solve", inaccurate_first)
    WR = regularization_path(data.E, data.tokens, data.labels, [2.0])["W"]
    assert len(calls) == 2 and np.isfinite(WR).all()

    def always_inaccurate(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        self._status = "optimal_inaccurate"
        return out

    monkeypatch.setattr(cp.Problem, "solve", always_inaccurate)
    with pytest.raises(SolverError, match="no optimal solve at R=2.0"):
        regularization_path(data.E, data.tokens, data.labels, [2.0])
