"""The NTP-SVM at scale: dual block-coordinate descent (``svm_dual_cd``) for any rank of H.

Checked against the reference (cvxpy/Clarabel) with d < m (rank-deficient H, where the
projected-Newton ``svm_dual`` does not apply) and d >= m, through the KKT conditions of
the dual in C, and on non-separable data (InfeasibleError, by the LP and by the Farkas
certificate of the unbounded dual)."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore import lin
from ntpcore.errors import InfeasibleError
from ntpcore.lin.dual import svm_dual
from ntpcore.lin.dual_cd import project_column, svm_dual_cd
from ntpcore.lin.separability import infeasibility_bound, separability_lp
from ntpcore.lin.svm_reference import ntp_svm_cvxpy

pytestmark = pytest.mark.theory

TIGHT = {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-11}


def _sparse_instance(V, d, m, smax, seed):
    """Gaussian contexts, supports of 1..smax random tokens (separable for small smax)."""
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((d, m))
    S = np.zeros((V, m), dtype=bool)
    for j in range(m):
        S[rng.choice(V, int(rng.integers(1, smax + 1)), replace=False), j] = True
    return H, S


def _violation(W, H, S):
    mg = lin.margins(W, H, S)
    return max(0.0, 1.0 - mg["min_margin"], mg["max_spread"])


def test_project_column_kkt():
    """The block step is the exact Euclidean projection onto {1^T x = 0, x_off <= 0}."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(2, 12))
        ins = rng.random(n) < 0.4
        ins[rng.integers(n)] = True
        y = rng.standard_normal(n) * 3
        x, tau = project_column(y, ins)
        assert abs(x.sum()) <= 1e-12 * max(1.0, np.abs(y).sum())
        assert np.all(x[~ins] <= 0)
        assert np.allclose(x[ins], y[ins] - tau)  # free entries: shifted by the multiplier
        # off entries: x = min(y - tau, 0), i.e. KKT with nu = max(y - tau, 0) >= 0
        assert np.allclose(x[~ins], np.minimum(y[~ins] - tau, 0.0))
        # optimality against random feasible points
        for _ in range(5):
            p = rng.standard_normal(n)
            p[~ins] = -np.abs(p[~ins])
            p[ins] -= p.sum() / ins.sum()
            assert np.sum((x - y) ** 2) <= np.sum((p - y) ** 2) + 1e-12


@pytest.mark.parametrize(
    ("V", "d", "m", "smax", "seed"),
    [
        (12, 10, 30, 2, 0),  # d < m, rank-deficient H
        (40, 16, 60, 2, 5),  # d < m
        (50, 32, 100, 5, 0),  # d < m, larger
        (8, 30, 20, 4, 2),  # d >= m
    ],
)
def test_cd_matches_cvxpy(V, d, m, smax, seed):
    H, S = _sparse_instance(V, d, m, smax, seed)
    mine = svm_dual_cd(H, S)
    ref = ntp_svm_cvxpy(H, S, **TIGHT)
    assert mine.solver == "dual-cd"
    assert abs(mine.norm**2 - ref.norm**2) <= 1e-6 * ref.norm**2
    assert _violation(mine.W_mm, H, S) <= 1e-6
    assert np.linalg.norm(mine.W_mm - ref.W_mm) <= 1e-4 * ref.norm  # W^mm is unique


def test_cd_matches_newton_full_rank(synth):
    """d >= m (App. A.2 data): both specialised solvers find the same W^mm."""
    a = svm_dual_cd(synth.H, synth.S)
    b = svm_dual(synth.H, synth.S)
    assert abs(a.norm**2 - b.norm**2) <= 1e-8 * b.norm**2
    assert np.linalg.norm(a.W_mm - b.W_mm) <= 1e-5 * b.norm


@pytest.mark.parametrize("polish", [True, False])
def test_cd_kkt_and_gap(polish):
    """Dual feasibility, W = C H^T, complementary slackness and a certified gap."""
    H, S = _sparse_instance(30, 20, 40, 4, 3)
    res = svm_dual_cd(H, S, polish=polish)
    C, W = res.C, res.W_mm
    off = ~S
    scale = np.abs(C).max()
    assert np.all(C[off] <= 1e-12 * scale)  # multipliers of the margin constraints >= 0
    assert np.abs(C.sum(axis=0)).max() <= 1e-10 * scale  # zero column sums
    assert np.linalg.norm(W - C @ H.T) <= 1e-12 * max(1.0, np.linalg.norm(W))
    mg = lin.margins(W, H, S)
    assert mg["min_margin"] >= 1 - 1e-9 and mg["max_spread"] <= 1e-8
    # duality gap: P(W) - D(C) = ||W||^2 + <B, C> = sum over active constraints of
    # alpha (margin - 1): small relative to the optimum
    primal = 0.5 * np.linalg.norm(W) ** 2
    dual = -0.5 * np.linalg.norm(C @ H.T) ** 2 - C[off].sum()
    assert dual <= primal * (1 + 1e-12)
    assert primal - dual <= 1e-8 * primal
    # complementary slackness: strictly positive multipliers sit on margin-1 constraints
    L = W @ H
    z = np.argmax(S, axis=0)
    marg = L[z, np.arange(S.shape[1])][None, :] - L
    act = off & (C < -1e-6 * scale)
    assert act.any() and np.abs(marg[act] - 1).max() <= 1e-6


def test_auto_routes_by_rank(synth):
    H, S = _sparse_instance(12, 10, 30, 2, 0)
    assert lin.solve_ntp_svm(H, S).solver == "cvxpy"  # tiny and rank-deficient
    H, S = _sparse_instance(40, 16, 60, 2, 5)
    assert lin.solve_ntp_svm(H, S).solver == "dual-cd"
    assert lin.solve_ntp_svm(synth.H, synth.S).solver == "dual"  # small, full rank
    big = lin.make_synthetic(m=60, d=80, V=20, S=12, seed=0)  # full rank, V m > 1000
    a = lin.solve_ntp_svm(big.H, big.S)
    assert a.solver == "dual-cd"
    b = svm_dual(big.H, big.S)
    assert abs(a.norm**2 - b.norm**2) <= 1e-8 * b.norm**2


def test_infeasible_lp_path():
    """Dense supports with d << m: not NTP-separable; the LP decides (small problem)."""
    data = lin.make_synthetic(m=30, d=8, V=10, S=6, seed=0)
    assert not separability_lp(data.H, data.S)["separable"]
    with pytest.raises(InfeasibleError, match="not NTP-separable"):
        svm_dual_cd(data.H, data.S)
    with pytest.raises(InfeasibleError):
        lin.solve_ntp_svm(data.H, data.S)


def test_infeasible_certificate_path():
    """Same regime, decided by the Farkas certificate (the LP path switched off)."""
    data = lin.make_synthetic(m=40, d=10, V=12, S=7, seed=1)
    assert not separability_lp(data.H, data.S)["separable"]
    with pytest.raises(InfeasibleError, match="Farkas certificate"):
        svm_dual_cd(data.H, data.S, lp_max_size=0)


def test_certificate_not_issued_when_separable():
    """On separable data the certificate test never proves a large norm bound."""
    H, S = _sparse_instance(20, 12, 40, 2, 1)
    res = svm_dual_cd(H, S)
    cert = infeasibility_bound(res.C, H, S, ~S)
    assert cert["norm_lower_bound"] <= res.norm * (1 + 1e-9)
