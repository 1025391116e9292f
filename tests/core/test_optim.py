"""The generic trainers of ntpcore.core.optim on problems with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore.core.optim import init_weights, train
from ntpcore.errors import DataError, ParameterError, SolverError


def quad(A: np.ndarray):
    """loss(W) = 1/2 <W, A W> with gradient A W (A symmetric positive definite)."""

    def lg(W):
        g = A @ W
        return 0.5 * float(np.vdot(W, g)), g

    return lg


def test_gd_on_quadratic_matches_closed_form():
    A = np.diag([1.0, 0.5])
    W0 = np.array([[1.0, 2.0], [3.0, 4.0]])
    tr = train(
        quad(A), W0, optimizer="gd", eta=0.3, n_steps=10, record_steps=[0, 10], store_iterates=True
    )
    expected = np.linalg.matrix_power(np.eye(2) - 0.3 * A, 10) @ W0
    assert np.allclose(tr.W_final, expected, atol=1e-14)
    assert np.allclose(tr.iterates[-1], expected, atol=1e-14)
    assert tr.loss.shape == (11,) and np.all(np.diff(tr.loss) < 0)
    assert list(tr.steps) == [0, 10]


def test_ngd_steps_have_length_eta():
    A = np.diag([2.0, 1.0, 0.1])
    W0 = np.ones((3, 2))
    tr = train(quad(A), W0, optimizer="ngd", eta=0.01, n_steps=50, store_iterates=True)
    steps = np.linalg.norm(np.diff(tr.iterates, axis=0), axis=(1, 2))
    assert np.allclose(steps, 0.01, atol=1e-15)


def test_adam_first_step_is_sign_step():
    """Bias correction: the first Adam step is eta * g / (|g| + eps) elementwise."""
    A = np.diag([3.0, 0.2])
    W0 = np.array([[1.0, -2.0], [0.5, 1.0]])
    tr = train(quad(A), W0, optimizer="adam", eta=0.1, n_steps=1, eps=0.0, store_iterates=True)
    g = A @ W0
    assert np.allclose(tr.W_final, W0 - 0.1 * np.sign(g), atol=1e-15)


def test_metrics_callback_and_records():
    A = np.eye(2)
    tr = train(
        quad(A),
        np.ones((2, 2)),
        eta=0.1,
        n_steps=100,
        record_steps=[0, 5, 100, 500],
        metrics=lambda W: {"trace": float(np.trace(W))},
    )
    assert list(tr.steps) == [0, 5, 100]
    assert np.allclose(tr["trace"], 2 * 0.9**tr.steps)
    assert tr.at(5)["norm"] == pytest.approx(2 * 0.9**5)
    with pytest.raises(KeyError):
        tr.at(7)


def test_errors():
    with pytest.raises(ParameterError, match="optimizer must be one of"):
        train(quad(np.eye(2)), np.ones((2, 2)), optimizer="sgd")
    with pytest.raises(ParameterError, match="eta must lie in"):
        train(quad(np.eye(2)), np.ones((2, 2)), eta=-1.0)
    with pytest.raises(DataError, match="W0 contains NaN"):
        train(quad(np.eye(2)), np.full((2, 2), np.nan))
    with pytest.raises(SolverError, match="diverged"):
        train(quad(np.eye(2) * 1e3), np.ones((2, 2)), eta=10.0, n_steps=500)
    with pytest.raises(ParameterError, match="init must be one of"):
        init_weights((2, 2), "xavier")


def test_lecun_init_scale():
    W = init_weights((200, 400), "lecun", 0)
    assert abs(W.var() - 1 / 400) < 0.05 / 400
    assert np.all(init_weights((3, 4), "zero") == 0)
