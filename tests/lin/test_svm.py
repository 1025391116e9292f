"""NTP-SVM and NTP-separability [lin, Defs. 2-3, Lemma 1], two solvers against each other."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import comb

from ntpcore import lin
from ntpcore.errors import InfeasibleError
from ntpcore.lin.dual import svm_dual
from ntpcore.lin.svm_reference import ntp_svm_cvxpy

pytestmark = pytest.mark.theory

TIGHT = {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-11}


def _kkt_checks(W, H, S):
    mg = lin.margins(W, H, S)
    assert mg["min_margin"] >= 1 - 1e-6
    assert mg["n_active"] >= 1
    assert mg["max_spread"] <= 1e-6
    F = lin.data_subspace(H, S)
    assert np.linalg.norm(F.project(W)) <= 1e-6 * np.linalg.norm(W)
    assert np.abs(W.sum(axis=0)).max() <= 1e-8 * np.linalg.norm(W)  # 1^T W^mm = 0
    PH = lin.row_space_projector(H)
    assert np.linalg.norm(W - W @ PH) <= 1e-6 * np.linalg.norm(W)  # rows in span(H)


def test_svm_kkt_synth(synth, synth_pair):
    Wmm = synth_pair["W_mm"]
    assert synth_pair["svm"].solver == "dual"
    _kkt_checks(Wmm, synth.H, synth.S)
    Ws = synth_pair["W_star"]
    assert abs(np.vdot(Ws, Wmm)) <= 1e-6 * np.linalg.norm(Ws) * np.linalg.norm(Wmm)


def test_svm_beats_free_feasible_point(synth, synth_pair):
    """Check 14: ||W^mm|| <= ||W^d|| for the feasible W^d = L_d H^+ (indicator logits)."""
    Wd = synth.S.astype(float) @ np.linalg.pinv(synth.H)
    mg = lin.margins(Wd, synth.H, synth.S)
    assert abs(mg["min_margin"] - 1) <= 1e-10 and mg["max_spread"] <= 1e-10
    assert synth_pair["svm"].norm <= np.linalg.norm(Wd)


def test_dual_matches_cvxpy_synth(synth, synth_pair):
    ref = ntp_svm_cvxpy(synth.H, synth.S, **TIGHT)
    mine = synth_pair["svm"]
    assert abs(mine.norm**2 - ref.norm**2) <= 1e-6 * ref.norm**2
    assert np.linalg.norm(mine.W_mm - ref.W_mm) <= 1e-5 * ref.norm


@pytest.mark.parametrize(
    ("V", "d", "m", "S", "seed"),
    [(5, 12, 10, 2, 1), (8, 25, 20, 1, 2), (12, 30, 30, 5, 3), (6, 20, 8, 4, 4)],
)
def test_dual_matches_cvxpy_random(V, d, m, S, seed):
    data = lin.make_synthetic(m=m, d=d, V=V, S=S, seed=seed)
    mine = svm_dual(data.H, data.S)
    ref = ntp_svm_cvxpy(data.H, data.S, **TIGHT)
    assert abs(mine.norm**2 - ref.norm**2) <= 1e-6 * ref.norm**2
    assert mine.min_margin >= 1 - 1e-6 and mine.max_spread <= 1e-6
    assert np.linalg.norm(mine.W_mm - ref.W_mm) <= 1e-5 * ref.norm


def test_dual_working_set_path_agrees():
    data = lin.make_synthetic(m=30, d=40, V=15, S=3, seed=5)
    a = svm_dual(data.H, data.S, init_all=True)
    b = svm_dual(data.H, data.S, init_all=False, add_per_round=2)
    assert b.extra["rounds"] >= 2
    assert np.linalg.norm(a.W_mm - b.W_mm) <= 1e-9 * a.norm


def test_mixed_support_sizes_and_full_support_context():
    data = lin.make_synthetic(m=12, d=15, V=6, S=3, seed=6)
    P = data.P.copy()
    P[:, 0] = 1 / 6  # one context with full support (no margin constraint)
    P[:, 1] = np.eye(6)[2]  # one one-hot context
    a = lin.solve_ntp_svm(data.H, P > 0, solver="dual")
    b = lin.solve_ntp_svm(data.H, P > 0, solver="cvxpy")
    assert abs(a.norm - b.norm) <= 1e-6 * b.norm


def test_probability_invariance(synth, synth_pair):
    """Check 15: W^mm depends on P only through the support; W* does not."""
    rng = np.random.default_rng(11)
    P2 = np.zeros_like(synth.P)
    for j in range(synth.m):
        s = synth.S[:, j]
        P2[s, j] = rng.dirichlet(np.ones(s.sum()))
    W2 = lin.ntp_svm(synth.H, P2)
    assert np.linalg.norm(W2 - synth_pair["W_mm"]) <= 1e-6 * synth_pair["svm"].norm
    assert np.linalg.norm(lin.finite_component(synth.H, P2) - synth_pair["W_star"]) > 0.1


def test_toy_geometry(toy, toy_pair):
    """The toy's W^mm [lin, Fig. 1]: the reference rows (unit embeddings at 10/100/260 degrees)."""
    W = toy_pair["W_mm"]
    assert np.linalg.norm(W[0] - W[4]) <= 1e-6  # words 1 and 5 share their support pattern
    assert np.linalg.norm(toy_pair["W_star"][0] - toy_pair["W_star"][4]) > 1e-2
    assert abs(toy_pair["svm"].norm - 6.479) <= 1e-3
    assert np.allclose(W[2], [2.301, 0.013], atol=1e-3)
    hA, hB, hC = toy.H.T
    ang = np.degrees(np.arccos(W[2] @ hA / np.linalg.norm(W[2])))
    assert ang < 15  # w_3 "almost aligned" with h_A
    assert W[2] @ hA > 0 > max(W[2] @ hB, W[2] @ hC)
    _kkt_checks(W, toy.H, toy.S)
    ref = ntp_svm_cvxpy(toy.H, toy.S, **TIGHT)
    assert np.linalg.norm(W - ref.W_mm) <= 1e-6 * ref.norm


def test_one_hot_is_multiclass_svm():
    """Check 17: with S_j = 1 the NTP-SVM is the bias-free multiclass hard-margin SVM."""
    data = lin.make_synthetic(m=15, d=20, V=4, S=1, seed=7)
    W = lin.ntp_svm(data.H, data.P)
    y = data.P.argmax(axis=0)
    import cvxpy as cp

    X = cp.Variable((4, 20))
    cons = [(X[y[j]] - X[v]) @ data.H[:, j] >= 1 for j in range(15) for v in range(4) if v != y[j]]
    cp.Problem(cp.Minimize(cp.sum_squares(X)), cons).solve(solver="CLARABEL", **TIGHT)
    assert np.linalg.norm(W - X.value) <= 1e-5 * np.linalg.norm(W)


@pytest.mark.parametrize("seed", range(20))
def test_lemma1_overparameterized_is_separable(seed):
    """Check 18: d > m and Gaussian H => NTP-separable for random supports (Lemma 1)."""
    rng = np.random.default_rng(seed)
    S = int(rng.integers(1, 10))
    data = lin.make_synthetic(m=30, d=31, V=10, S=S, seed=seed)
    assert lin.is_ntp_separable(data.H, data.P)
    res = lin.solve_ntp_svm(data.H, data.S)
    assert res.min_margin >= 1 - 1e-6


def test_infeasible_raises_typed_error():
    """Two contexts with the same embedding but different next tokens: not separable."""
    H = np.array([[1.0, 1.0], [0.0, 0.0]])
    P = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    assert not lin.is_ntp_separable(H, P)
    with pytest.raises(InfeasibleError, match="not NTP-separable"):
        lin.ntp_svm(H, P)
    with pytest.raises(InfeasibleError):
        lin.ntp_svm(H, P, solver="cvxpy")


def test_never_returns_partial_answer_on_random_infeasible():
    """d << m one-hot: infeasible with overwhelming probability; always a typed error."""
    data = lin.make_synthetic(m=40, d=3, V=3, S=1, seed=8)
    assert not lin.is_ntp_separable(data.H, data.P)
    with pytest.raises(InfeasibleError):
        lin.ntp_svm(data.H, data.P)


def test_lp_matches_cover_for_binary_one_hot():
    """V = 2 one-hot separability is Cover's homogeneous dichotomy count:
    P(separable) = 2^(1-m) sum_{k<d} C(m-1, k).  Monte Carlo at m = 12, d = 6 (p = 0.613)."""
    m, d, n = 12, 6, 150
    p = 2.0 ** (1 - m) * sum(comb(m - 1, k) for k in range(d))
    ss = np.random.SeedSequence(0).spawn(n)
    hits = 0
    for s in ss:
        rng = np.random.default_rng(s)
        H = rng.standard_normal((d, m))
        y = rng.integers(0, 2, m)
        P = np.eye(2)[:, y]
        hits += lin.is_ntp_separable(H, P)
    se = np.sqrt(p * (1 - p) / n)
    assert abs(hits / n - p) <= 4 * se
