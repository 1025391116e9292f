"""Data generators, CE loss and entropy bound [lin, eqs. (2)-(3)] and input validation."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore import lin
from ntpcore.errors import DataError, NTPError, ParameterError


# ----------------------------------------------------------------------------- check 1-2
def test_synthetic_structure(synth):
    assert (synth.d, synth.m, synth.V) == (60, 50, 10)
    assert np.allclose(synth.P.sum(axis=0), 1, atol=1e-12)
    assert np.all(synth.support_sizes == 6)
    assert np.isclose(synth.pi.sum(), 1)
    H = synth.entropy
    assert 0 <= H <= float(synth.pi @ np.log(synth.support_sizes))
    assert 1.35 <= H <= 1.55  # Dirichlet(1) on 6 words: E[H] = H_6 - 1 = 1.45


def test_synthetic_entropy_band_over_seeds():
    Hs = [lin.make_synthetic(seed=s).entropy for s in range(8)]
    assert np.mean([1.35 <= h <= 1.55 for h in Hs]) >= 0.75


def test_toy_structure(toy):
    assert (toy.d, toy.m, toy.V) == (2, 3, 5)
    supp = [set(np.flatnonzero(c)) for c in toy.S.T]
    assert supp == [{1, 2, 3}, {0, 1, 4}, {0, 3, 4}]  # paper's "234", "125", "145"
    assert abs(toy.entropy - lin.TOY_ENTROPY) < 5e-3
    assert toy.entropy <= np.log(3)
    assert np.allclose(np.linalg.norm(toy.H, axis=0), 1)


def test_synthetic_seeds_and_options():
    a = lin.make_synthetic(seed=1)
    b = lin.make_synthetic(seed=1)
    assert np.array_equal(a.H, b.H) and np.array_equal(a.P, b.P)
    c = lin.make_synthetic(seed=1, S=3)
    assert np.array_equal(a.H, c.H)  # independent streams: embeddings do not depend on S
    u = lin.make_synthetic(emb="unit")
    assert np.allclose(np.linalg.norm(u.H, axis=0), 1)
    mult = lin.make_synthetic(freq="multinomial", n=5000)
    assert np.isclose(mult.pi.sum(), 1) and np.all(mult.support_sizes <= 6)
    assert np.allclose(mult.P.sum(axis=0), 1)


# ----------------------------------------------------------------------------- check 3-5
def test_ce_decomposition_and_bound(synth):
    rng = np.random.default_rng(3)
    for _ in range(3):
        W = rng.standard_normal((synth.V, synth.d))
        ce = lin.ce_W(W, synth.H, synth.P, synth.pi)
        kl = float(synth.pi @ lin.kl_terms(W, synth.H, synth.P))
        assert abs(ce - synth.entropy - kl) <= 1e-12
        assert ce > synth.entropy
        assert abs(lin.ce_excess_W(W, synth.H, synth.P, synth.pi) - kl) <= 1e-14 * kl


def test_gradient_finite_difference(synth):
    rng = np.random.default_rng(4)
    W = rng.standard_normal((synth.V, synth.d)) * 0.3
    g = lin.ce_grad_W(W, synth.H, synth.P, synth.pi)
    E = rng.standard_normal(W.shape)
    h = 1e-5
    fd = (
        lin.ce_W(W + h * E, synth.H, synth.P, synth.pi)
        - lin.ce_W(W - h * E, synth.H, synth.P, synth.pi)
    ) / (2 * h)
    assert abs(fd - np.vdot(g, E)) <= 1e-6 * abs(fd)


def test_softmax_shift_invariance(synth):
    rng = np.random.default_rng(5)
    W = rng.standard_normal((synth.V, synth.d))
    x = rng.standard_normal(synth.d)
    a = lin.ce_W(W, synth.H, synth.P, synth.pi)
    b = lin.ce_W(W + np.outer(np.ones(synth.V), x), synth.H, synth.P, synth.pi)
    assert abs(a - b) <= 1e-12
    g = lin.ce_grad_W(W, synth.H, synth.P, synth.pi)
    assert np.abs(g.sum(axis=0)).max() <= 1e-14


def test_hessian_and_smoothness(toy):
    rng = np.random.default_rng(6)
    W = rng.standard_normal((toy.V, toy.d))
    Hs = lin.ce_hessian(W, toy.H, toy.P, toy.pi)
    E = rng.standard_normal(W.shape) * 1e-6
    g1 = lin.ce_grad_W(W + E, toy.H, toy.P, toy.pi)
    g0 = lin.ce_grad_W(W - E, toy.H, toy.P, toy.pi)
    assert np.allclose((g1 - g0) / 2, (Hs @ E.ravel()).reshape(W.shape), rtol=0, atol=1e-12)
    assert np.linalg.eigvalsh(Hs)[-1] <= lin.smoothness_bound(toy.H, toy.pi) + 1e-12
    assert np.isclose(lin.smoothness_bound(toy.H, toy.pi), 1 / 3)  # unit h_j, pi = 1/3


def test_ce_F_lower_bound(synth):
    rng = np.random.default_rng(7)
    W = rng.standard_normal((synth.V, synth.d))
    assert lin.ce_F(W, synth.H, synth.P, synth.pi) <= lin.ce_W(W, synth.H, synth.P, synth.pi)


def test_one_hot_entropy_zero():
    d = lin.make_synthetic(m=20, d=30, V=5, S=1, seed=2)
    assert d.entropy == 0.0
    F = lin.data_subspace(d.H, d.S)
    assert F.dim == 0
    assert np.all(lin.finite_component(d.H, d.P) == 0)


# ----------------------------------------------------------------------------- bad inputs
GOOD_H = np.eye(3)
GOOD_P = np.array([[0.5, 0.0, 1.0], [0.5, 1.0, 0.0]])


@pytest.mark.parametrize(
    ("H", "P", "match"),
    [
        (GOOD_H, GOOD_P * 1.1, "sum to 1"),
        (GOOD_H, np.array([[1.5, 0.0, 1.0], [-0.5, 1.0, 0.0]]), "negative"),
        (np.eye(3)[:, :2], GOOD_P, "columns"),
        (np.where(GOOD_H == 1, np.nan, GOOD_H), GOOD_P, "NaN"),
        (GOOD_H, np.where(GOOD_P == 1.0, np.nan, GOOD_P), "NaN"),
        (np.ones(3), GOOD_P, "2-dimensional"),
    ],
)
@pytest.mark.parametrize("fn", ["finite_component", "ntp_svm"])
def test_bad_inputs_raise(H, P, match, fn):
    with pytest.raises(DataError, match=match):
        getattr(lin, fn)(H, P)


def test_bad_W_and_pi():
    with pytest.raises(DataError, match="shape"):
        lin.ce_W(np.zeros((3, 3)), GOOD_H, GOOD_P)
    with pytest.raises(DataError, match="sum to 1"):
        lin.ce_W(np.zeros((2, 3)), GOOD_H, GOOD_P, np.ones(3))
    with pytest.raises(ParameterError, match=r"support size S must lie in \[1, 10\]"):
        lin.make_synthetic(S=11, V=10)
    with pytest.raises(NTPError):
        lin.ntp_svm(GOOD_H, GOOD_P, solver="nope")


def test_full_support_has_no_svm():
    P = np.full((3, 4), 1 / 3)
    with pytest.raises(DataError, match="full support"):
        lin.ntp_svm(np.eye(4), P)
