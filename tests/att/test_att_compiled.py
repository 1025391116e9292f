"""The compiled descent steps (``ntpcore/att/_steps.c``) against the numpy loop of
:func:`ntpcore.att.descent.descend`: two implementations of the same steps.

Normalized GD turns rounding into steps of the size of the step size once the gradient
vanishes (the oscillation around the finite component), so trajectories are compared over
the steps before it, to rounding; plain GD is compared to rounding throughout.
"""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore.att import compiled
from ntpcore.att.descent import descend
from ntpcore.att.dynamics import make_problem
from ntpcore.att.experiments.cyclic import GlobalConfig, draw_global_trial
from ntpcore.att.experiments.trials import trial_rngs
from ntpcore.errors import DataError

pytestmark = pytest.mark.skipif(
    compiled._LIB is None, reason=f"compiled steps not built: {compiled._REASON}"
)


def _both(monkeypatch, W0, P, **kw):
    """``descend`` on the compiled steps, then on the numpy loop."""
    out = []
    for flag in ("1", "0"):
        monkeypatch.setenv("NTP_COMPILED", flag)
        assert compiled.available() == (flag == "1")
        out.append(descend(W0, P, **kw))
    return out


def _close(a, b, rel=1e-11):
    """Equal to rounding, relative to the size of ``b``."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    assert np.max(np.abs(a - b)) <= rel * max(1.0, float(np.max(np.abs(b))))


def _identity_problem(seed, B=4, n=5, T=4, K=6, d=6, masked=True):
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((B, K, d)) / np.sqrt(d)
    tok = rng.integers(0, K, (B, n, T))
    lab = tok[:, :, 0].copy()  # the label occurs in its sequence (identity head)
    mask = np.ones((B, n, T), bool)
    if masked:  # reduced sequences: some positions off, the label's kept
        mask[:, :, 1:] = rng.random((B, n, T - 1)) < 0.7
    weight = np.where(rng.random((B, n)) < 0.8, 1.0 / n, 0.0)
    P = make_problem(E, tok, lab, mask=mask, sample_weight=weight)
    return P, rng


@pytest.mark.parametrize("scale", [0.3, 40.0])  # 40: scores beyond the no-shift bound
@pytest.mark.parametrize("normalized", [True, False])
def test_identity_log_paths_agree(monkeypatch, normalized, scale):
    P, rng = _identity_problem(1)
    W0 = scale * rng.standard_normal((P.batch, P.d, P.d))
    kw = dict(eta=0.01 if normalized else 0.5, normalized=normalized, loss=True, attention=True)
    a, b = _both(monkeypatch, W0, P, n_steps=40, **kw)
    np.testing.assert_array_equal(a.steps, b.steps)
    for key in ("W", "loss", "attention"):
        _close(getattr(a, key), getattr(b, key))


def test_identity_log_recorded_steps_and_rows(monkeypatch):
    """Plain GD recorded at a few steps, loss and attention of some problems only."""
    P, rng = _identity_problem(2, masked=False)
    W0 = rng.standard_normal((P.batch, P.d, P.d))
    record = [0, 1, 7, 30, 200]
    kw = dict(eta=0.5, normalized=False, record=record, loss=True, attention=True)
    a, b = _both(monkeypatch, W0, P, n_steps=200, rows=slice(1, 3), **kw)
    np.testing.assert_array_equal(a.steps, record)
    assert a.loss.shape == (len(record), 2)
    for key in ("W", "loss", "attention"):
        _close(getattr(a, key), getattr(b, key))


@pytest.mark.parametrize("loss", ["ce", "squared", "mixed"])
@pytest.mark.parametrize("normalized", [True, False])
def test_general_head_paths_agree(monkeypatch, loss, normalized):
    rng = np.random.default_rng(3)
    B, n, T, K, d = 4, 3, 5, 7, 6
    E = rng.standard_normal((B, K, d)) / np.sqrt(d)
    tok, lab = rng.integers(0, K, (B, n, T)), rng.integers(0, K, (B, n))
    losses = ["ce", "squared"] * (B // 2) if loss == "mixed" else loss
    P = make_problem(E, tok, lab, head="general", loss=losses)
    W0 = 0.3 * rng.standard_normal((B, d, d))
    kw = dict(eta=0.05 if normalized else 0.5, normalized=normalized, attention=True)
    a, b = _both(monkeypatch, W0, P, n_steps=40, loss=True, **kw)
    for key in ("W", "loss", "attention"):
        _close(getattr(a, key), getattr(b, key))


def test_cyclic_trials_with_stationary_reduced_runs(monkeypatch):
    """The batch of the cyclic experiment (W runs from W(0), reduced runs from 0; a reduced
    run at a stationary point stays there in both), chunk by chunk."""
    cfg = GlobalConfig(n_trials=3)
    trials = [draw_global_trial(rng, cfg) for rng in trial_rngs(cfg.trial_seed, cfg.n_trials)]
    stack = lambda name: np.array([getattr(t, name) for t in trials])  # noqa: E731
    n = cfg.n_samples
    P = make_problem(
        np.concatenate([stack("E")] * 2),
        np.concatenate([stack("tokens")] * 2),
        np.concatenate([stack("labels")] * 2),
        mask=np.concatenate([np.ones_like(stack("tokens"), bool), stack("mask")]),
        sample_weight=np.concatenate([np.full((3, n), 1.0 / n), stack("weight")]),
    )
    W0 = np.concatenate([stack("W0"), np.zeros((3, cfg.dim, cfg.dim))])
    got = {}
    for flag in ("1", "0"):
        monkeypatch.setenv("NTP_COMPILED", flag)
        chunks = got.setdefault(flag, [])

        def keep(c, chunks=chunks):
            chunks.append((c.steps.copy(), c.W.copy(), c.attention.copy()))

        descend(W0, P, eta=0.01, n_steps=100, attention=True, on_chunk=keep, chunk=32)
    assert [len(c[0]) for c in got["1"]] == [32, 32, 32, 5]
    for x, y in zip(got["1"], got["0"], strict=True):
        np.testing.assert_array_equal(x[0], y[0])
        _close(x[1], y[1])
        _close(x[2], y[2])
    W_end = got["1"][-1][1][-1]
    still = np.all(W_end == 0.0, axis=(1, 2))
    assert np.array_equal(still, np.all(got["0"][-1][1][-1] == 0.0, axis=(1, 2)))


def test_switch_and_reason(monkeypatch):
    monkeypatch.setenv("NTP_COMPILED", "0")
    assert not compiled.available()
    assert compiled.unavailable_reason() == "NTP_COMPILED=0"
    monkeypatch.delenv("NTP_COMPILED")
    assert compiled.available() and compiled.unavailable_reason() == ""


def test_bad_inputs_raise():
    rng = np.random.default_rng(0)
    G, n, T, d = 2, 3, 4, 3
    F = rng.standard_normal((G, n * T, d * d))
    bias, w = np.zeros((G, n * T)), np.full((G, n), 1.0 / n)
    label = np.zeros((G, n * T), bool)
    data = compiled.StepData(F, bias, w, np.ones(G), eps=1e-12, normalized=True, label=label)
    with pytest.raises(DataError, match="C-contiguous"):
        compiled.steps(data, np.zeros((G, d * d), np.float32), 1)
    with pytest.raises(DataError, match="W_out"):
        compiled.steps(data, np.zeros((G, d * d)), 2, W_out=np.zeros((G, 1, d * d)))
    with pytest.raises(DataError, match="more steps"):
        compiled.steps(data, np.zeros((G, d * d)), 1, e_out=np.zeros((G, 2, n * T)))
    with pytest.raises(DataError, match="inconsistent"):
        compiled.StepData(F, bias[:1], w, np.ones(G), eps=0.0, normalized=True, label=label)
    data.ds[0] = G  # a dataset index out of range: refused before any step
    W = np.ones((G, d * d))
    with pytest.raises(DataError, match="inconsistent sizes"):
        compiled.steps(data, W, 3)
    assert np.all(W == 1.0)


def test_large_problems_run(monkeypatch):
    """No size limit: d = 70 (d^2 = 4900 entries) agrees with the numpy loop."""
    P, rng = _identity_problem(4, B=2, n=2, T=3, K=4, d=70)
    W0 = 0.1 * rng.standard_normal((2, 70, 70))
    a, b = _both(monkeypatch, W0, P, eta=0.01, n_steps=5, loss=True)
    _close(a.W, b.W)
