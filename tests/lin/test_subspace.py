"""Subspace F, projections and the finite component W* [lin, Def. 1, eqs. (4)-(5)]."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore import lin
from ntpcore.errors import IncompatibleError
from ntpcore.lin.subspace import log_odds

pytestmark = pytest.mark.theory


def test_dim_F(synth, toy):
    F = lin.data_subspace(synth.H, synth.S)
    assert F.n_generators == 250 and F.dim == 250  # sum_j (S_j - 1), H full column rank
    Ft = lin.data_subspace(toy.H, toy.S)
    assert Ft.dim == 6  # toy: d = 2 < m = 3, still 6 (K = sum_j (S_j - 1) = 6)


def test_dim_F_matches_explicit_basis(toy):
    """The generator bookkeeping agrees with an explicit (V d x K) matrix and its SVD."""
    F = lin.data_subspace(toy.H, toy.S)
    A = np.stack(
        [
            np.outer(np.eye(toy.V)[F.anchors[j]] - np.eye(toy.V)[t], toy.H[:, j]).ravel()
            for j, t in zip(F.ctx, F.tok, strict=True)
        ],
        axis=1,
    )
    assert np.linalg.matrix_rank(A) == F.dim
    Q = F.basis()
    assert np.allclose(Q @ Q.T, np.eye(F.dim), atol=1e-12)
    Qa, _ = np.linalg.qr(A)
    assert np.allclose(Q.T @ Q, Qa @ Qa.T, atol=1e-12)


def test_projection_properties(synth):
    F = lin.data_subspace(synth.H, synth.S)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((2, synth.V, synth.d))
    PX = F.project(X)
    assert np.linalg.norm(F.project(PX) - PX) <= 1e-12 * max(1, np.linalg.norm(PX))
    assert abs(np.vdot(PX, Y) - np.vdot(X, F.project(Y))) <= 1e-12 * np.linalg.norm(X) ** 2
    assert abs(np.vdot(PX, F.project_perp(X))) <= 1e-11
    assert np.allclose(
        lin.project_F(X, synth.H, synth.S) + lin.project_perp(X, synth.H, synth.S), X
    )


def test_W_star_solves_eq4(synth):
    info = lin.finite_component_info(synth.H, synth.P)
    W, F = info["W_star"], info["F"]
    b = log_odds(synth.P, F.anchors, F.ctx, F.tok)
    assert np.linalg.norm(F.adjoint(W) - b) <= 1e-8
    assert np.linalg.norm(F.project_perp(W)) <= 1e-10
    # Pairwise logit differences inside each support equal the log-odds (all pairs).
    L = W @ synth.H
    for j in range(synth.m):
        s = np.flatnonzero(synth.S[:, j])
        dl = L[s, j][:, None] - L[s, j][None, :]
        dp = np.log(synth.P[s, j])[:, None] - np.log(synth.P[s, j])[None, :]
        assert np.abs(dl - dp).max() <= 1e-10


def test_CE_F_at_W_star_is_entropy(synth):
    W = lin.finite_component(synth.H, synth.P)
    assert abs(lin.ce_F(W, synth.H, synth.P, synth.pi) - synth.entropy) <= 1e-10
    assert lin.ce(W, synth.H, synth.P, synth.pi) > synth.entropy


def test_W_star_cross_check_pinv(synth):
    """Check 10: W* = P_F(L_0 H^+) with centred log-probability logits (d >= m)."""
    S = synth.S
    logp = np.where(S, np.log(np.where(S, synth.P, 1.0)), 0.0)
    L0 = np.where(S, logp - logp.sum(axis=0) / S.sum(axis=0), 0.0)
    Wp = L0 @ np.linalg.pinv(synth.H)
    W = lin.finite_component(synth.H, synth.P)
    assert np.linalg.norm(lin.project_F(Wp, synth.H, synth.S) - W) <= 1e-10


def test_gap_along_W_star_plus_gamma_Wmm(synth, synth_pair):
    """Check 11: CE(W* + g W^mm) - H decreases in g with log-slope -> -1, and bound (9)."""
    Ws, Wmm = synth_pair["W_star"], synth_pair["W_mm"]
    gammas = np.arange(0.0, 21.0, 1.0)
    gaps = np.array([lin.ce_excess(Ws + g * Wmm, synth.H, synth.P, synth.pi) for g in gammas])
    assert np.all(np.diff(gaps) < 0)
    lg = np.log(gaps)
    for g in (6, 10, 14, 18):
        slope = (lg[g + 2] - lg[g]) / 2
        assert -1.05 <= slope <= -0.95
    M = np.sqrt(2) * np.linalg.norm(synth.H, axis=0).max()
    C = synth.V * np.exp(np.linalg.norm(Ws) * M)
    for R in (1.0, 5.0, 10.0):
        assert lin.ce_excess(Ws + R * Wmm, synth.H, synth.P, synth.pi) <= C * np.exp(-R)


def test_incompatible_raises():
    """d = 1: two contexts with collinear embeddings but different log-odds."""
    H = np.array([[1.0, 2.0]])
    P = np.array([[0.5, 0.5], [0.5, 0.1], [0.0, 0.4]])
    # context 0 wants (e0 - e1) w h = 0, context 1 wants 2 (e0 - e1) w = log 5.
    with pytest.raises(IncompatibleError, match="not NTP_H-compatible"):
        lin.finite_component(H, P)
    assert not lin.is_compatible(H, P)
    assert lin.is_compatible(np.eye(2), P)


def test_W_star_depends_on_probabilities(synth):
    P2 = lin.make_synthetic(seed=0).P.copy()
    rng = np.random.default_rng(1)
    for j in range(synth.m):
        s = synth.S[:, j]
        P2[s, j] = rng.dirichlet(np.ones(s.sum()))
    W1 = lin.finite_component(synth.H, synth.P)
    W2 = lin.finite_component(synth.H, P2)
    assert np.linalg.norm(W1 - W2) > 0.1 * np.linalg.norm(W1)
