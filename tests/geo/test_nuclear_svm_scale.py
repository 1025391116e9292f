"""Large-vocabulary nuclear-norm NTP-SVM [geo, eq. (6)]: agreement with two independent
solvers (cvxpy/SCS and the reference ADMM), exact feasibility of primal and dual, the
certified duality gap, and the two projections of the dual polish against independent
computations (a generic QP and a full SVD)."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore import geo as g
from ntpcore.errors import SolverError
from ntpcore.geo.svm_problem import reduce_support
from ntpcore.geo.svm_scale import (
    _clip_op,
    _dual_polish,
    _dual_value,
    _project_dual_cone,
    solve_nuclear_svm_scale,
)

pytestmark = pytest.mark.theory


def zipf_supports(V: int, m: int, seed: int, k_max: int = 4) -> np.ndarray:
    """Supports of 1..k_max words drawn with Zipf frequencies, m/4 distinct patterns."""
    rng = np.random.default_rng(seed)
    freq = 1.0 / np.arange(1, V + 1)
    n_pat = max(2, m // 4)
    pat = np.zeros((V, n_pat), dtype=bool)
    for k in range(n_pat):
        pat[rng.choice(V, rng.integers(1, k_max + 1), replace=False, p=freq / freq.sum()), k] = 1
    return pat[:, rng.integers(0, n_pat, m)]


@pytest.fixture(scope="module")
def small():
    S = zipf_supports(25, 60, seed=3)
    return S, g.nuclear_svm_cvxpy(S, solver="SCS"), solve_nuclear_svm_scale(S, tol=1e-8)


def test_matches_scs(small) -> None:
    """Same optimum as the generic conic solver (SCS at eps 1e-8)."""
    _, ref, sol = small
    assert abs(sol.objective - ref.objective) <= 1e-6 * ref.objective


def test_certificate_exact(small) -> None:
    """Primal feasible, dual feasible (op norm <= 1, column sums 0, <= 0 off support), and
    the certified gap is the one reported."""
    S, _, sol = small
    c = g.check_certificate(sol.G, S, sol.L)
    assert c["violation"] < 1e-12
    assert c["op_norm"] <= 1 + 1e-12 and c["colsum"] < 1e-10 and c["off_pos"] == 0
    assert 0 <= c["gap"] <= 1e-8
    assert abs(c["primal"] - sol.objective) <= 1e-10 * sol.objective
    assert abs(c["dual"] - sol.dual_objective) <= 1e-10 * sol.objective
    # weak duality against the reference: the certified lower bound is below every
    # feasible value, including SCS's
    assert sol.dual_objective <= g.nuclear_norm(small[1].L) * (1 + 1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_instances_match_admm(seed: int) -> None:
    """Random instances (with repeated rows and columns): the two specialised solvers,
    different iterations on the same reduction, certify the same optimum."""
    rng = np.random.default_rng(seed)
    V, m = int(rng.integers(20, 60)), int(rng.integers(40, 200))
    S = zipf_supports(V, m, seed=seed)
    S[:, 0] = False
    S[0, 0] = True  # a one-word support
    a = g.solve_nuclear_svm(S, tol=1e-9)
    b = solve_nuclear_svm_scale(S, tol=1e-7)
    assert abs(a.objective - b.objective) <= 1e-6 * a.objective
    c = g.check_certificate(b.G, S, b.L)
    assert c["gap"] <= 1e-7 and c["violation"] < 1e-12 and c["op_norm"] <= 1 + 1e-12
    # the optimum is unique on these instances: the logits agree too
    assert np.abs(a.L - b.L).max() < 1e-2 * np.abs(a.L).max()


def test_uncertified_raises() -> None:
    """An iteration budget too small to certify the gap is an error, not an answer."""
    S = zipf_supports(40, 160, seed=5)
    with pytest.raises(SolverError, match="no certified solution"):
        solve_nuclear_svm_scale(S, tol=1e-12, max_iter=10)


def test_dispatcher_picks_by_size() -> None:
    """nuclear_svm(solver="auto") keeps the reference ADMM below the switch size."""
    S = zipf_supports(25, 60, seed=3)
    np.testing.assert_array_equal(g.nuclear_svm(S), g.nuclear_svm(S, solver="admm"))
    L = g.nuclear_svm(S, solver="dr-anderson")
    assert g.svm_constraint_violation(L, S) < 1e-12


def test_dual_cone_projection_matches_qp() -> None:
    """The column-wise root-finding projection onto {omega^T g = 0, g <= 0 off the support}
    equals the generic QP solution (cvxpy/Clarabel) and lies in the cone."""
    import cvxpy as cp

    rng = np.random.default_rng(7)
    r, u = 12, 9
    Sr = rng.random((r, u)) < 0.3
    Sr[rng.integers(0, r, u), np.arange(u)] = True
    omega = np.sqrt(rng.integers(1, 5, r).astype(float))
    H = rng.standard_normal((r, u))
    P = _project_dual_cone(H, Sr, omega)
    assert np.abs(omega @ P).max() < 1e-12 and P[~Sr].max() <= 0.0
    X = cp.Variable((r, u))
    cons = [omega @ X == 0, cp.multiply((~Sr).astype(float), X) <= 0]
    cp.Problem(cp.Minimize(cp.sum_squares(X - H)), cons).solve(solver="CLARABEL")
    np.testing.assert_allclose(P, X.value, atol=1e-6)


@pytest.mark.parametrize("shape", [(8, 13), (13, 8)])
def test_clip_op_matches_svd(shape: tuple[int, int]) -> None:
    """Clipping the singular values at 1 via the Gram eigen-decomposition equals the
    clipped full SVD, and the reported operator norm is the largest singular value."""
    G = np.random.default_rng(3).standard_normal(shape)
    U, s, Vt = np.linalg.svd(G, full_matrices=False)
    C, op = _clip_op(G)
    np.testing.assert_allclose(C, (U * np.minimum(s, 1.0)) @ Vt, atol=1e-12)
    assert abs(op - s[0]) <= 1e-12 * s[0]


def test_dual_polish_certifies_lower_bound(small) -> None:
    """Polishing a perturbed optimal dual by alternating projections: every point is
    dual feasible, its certified value is a lower bound on the optimum (weak duality
    against the SCS primal), and it beats the plain projection of the perturbed dual."""
    S, ref, sol = small
    red = reduce_support(S)
    rows = np.array([np.flatnonzero(red.row_of == i)[0] for i in range(red.Sr.shape[0])])
    cols = np.array([np.flatnonzero(red.col_of == j)[0] for j in range(red.Sr.shape[1])])
    scale = red.omega[:, None] * red.delta[None, :]
    G = sol.G[np.ix_(rows, cols)] * scale  # the reduced certificate
    G = G + 1e-3 * np.random.default_rng(0).standard_normal(G.shape)
    P0 = _project_dual_cone(G, red.Sr, red.omega)
    plain = _dual_value(P0, red.Sr, red.omega, red.delta) / np.linalg.norm(P0, 2)
    value, P, steps = _dual_polish(G, red.Sr, red.omega, red.delta, np.inf, 30)
    assert steps > 1 and value > plain
    op = np.linalg.norm(P, 2)
    assert np.abs(red.omega @ P).max() < 1e-12 and P[~red.Sr].max() <= 0.0
    assert abs(_dual_value(P, red.Sr, red.omega, red.delta) / max(1.0, op) - value) < 1e-9
    assert value <= g.nuclear_norm(ref.L) * (1 + 1e-9)


def _weighted_instance(seed: int, r: int = 14, u: int = 11):
    """A reduced problem's data: supports ``Sr`` (r x u), row and column weights."""
    rng = np.random.default_rng(seed)
    Sr = rng.random((r, u)) < 0.25
    Sr[rng.integers(0, r, u), np.arange(u)] = True
    omega = np.sqrt(rng.integers(1, 5, r).astype(float))
    delta = np.sqrt(rng.integers(1, 4, u).astype(float))
    return rng, Sr, omega, delta


@pytest.mark.parametrize("seed", [0, 1])
def test_column_projection_is_the_euclidean_projection(seed: int, monkeypatch) -> None:
    """The blocked Newton projection onto C' = {x_w = omega_w a on the support, x_w <=
    omega_w (a - delta) off it}: x lies in C' exactly and satisfies the projection's KKT
    conditions (R = y - x is >= 0 off the support, 0 where the bound is slack, and
    omega^T R = 0, the derivative in a), agrees with a generic QP (cvxpy/Clarabel, to its
    accuracy), and is the same from any warm start and whatever the column blocks."""
    import cvxpy as cp

    import ntpcore.geo.svm_problem as svm

    rng, Sr, omega, delta = _weighted_instance(seed)
    Y = 2.0 * rng.standard_normal(Sr.shape)
    X, alpha = svm._project_columns(Y, Sr, omega, delta)
    bound = omega[:, None] * (alpha - delta)[None, :]
    assert np.all(X[Sr] == (omega[:, None] * alpha[None, :])[Sr]) and np.all(X[~Sr] <= bound[~Sr])
    R = Y - X
    assert R[~Sr].min() >= 0 and np.all(R[~Sr & (X < bound - 1e-12)] == 0)
    assert np.abs(omega @ R).max() < 1e-12
    for j in range(Sr.shape[1]):  # one small QP per column
        x, a = cp.Variable(Sr.shape[0]), cp.Variable()
        on, off = np.flatnonzero(Sr[:, j]), np.flatnonzero(~Sr[:, j])
        cons = [x[on] == omega[on] * a, x[off] <= omega[off] * (a - delta[j])]
        cp.Problem(cp.Minimize(cp.sum_squares(x - Y[:, j])), cons).solve(solver="CLARABEL")
        np.testing.assert_allclose(X[:, j], x.value, atol=1e-4)
        assert np.sum(R[:, j] ** 2) <= np.sum((Y[:, j] - x.value) ** 2) + 1e-9
    monkeypatch.setattr(svm, "_BLOCK_ENTRIES", 1)
    X1, alpha1 = svm._project_columns(Y, Sr, omega, delta, alpha0=rng.standard_normal(alpha.size))
    np.testing.assert_allclose(X1, X, atol=1e-12)
    np.testing.assert_allclose(alpha1, alpha, atol=1e-12)


def test_breakpoint_roots_newton_equals_sorting() -> None:
    """Newton's iteration on the piecewise-linear root and the exact root by sorting the
    breakpoints agree; a step budget too small for Newton falls back to sorting."""
    from ntpcore.geo.svm_problem import _NEVER, _breakpoint_roots, _roots_by_sorting

    rng, Sr, omega, delta = _weighted_instance(5, r=40, u=30)
    T = np.where(Sr, _NEVER, rng.standard_normal(Sr.shape))
    A, B = rng.standard_normal(30), (omega**2) @ Sr
    w2 = omega**2
    exact = _roots_by_sorting(T, A, B, w2)
    phi = B * exact - A - (w2[:, None] * np.maximum(np.where(Sr, -np.inf, T) - exact, 0.0)).sum(0)
    assert np.abs(phi).max() < 1e-12  # a root of B a - A - sum w2 (T - a)_+
    np.testing.assert_allclose(_breakpoint_roots(T, A, B, w2, A / B), exact, atol=1e-12)
    np.testing.assert_allclose(
        _breakpoint_roots(T, A, B, w2, A / B, max_steps=1), exact, atol=1e-12
    )


@pytest.fixture(scope="module")
def distinct():
    from tools.bench.solvers import geo_supports

    S = geo_supports(24, 50, "distinct", seed=2)
    return S, g.nuclear_svm_cvxpy(S, solver="SCS"), solve_nuclear_svm_scale(S, tol=1e-8)


def test_all_distinct_supports_match_scs_with_exact_kkt(distinct) -> None:
    """All supports distinct (the reduction keeps every column): same optimum as SCS, a
    feasible primal, a dual-feasible certificate with the reported gap, and the KKT
    conditions: <G, L> = ||L||_* (G a subgradient at L) and G < 0 off the support only where
    the margin constraint is active."""
    S, ref, sol = distinct
    assert sol.reduced_shape[1] == S.shape[1] == len(np.unique(S, axis=1).T)
    assert abs(sol.objective - ref.objective) <= 1e-6 * ref.objective
    c = g.check_certificate(sol.G, S, sol.L)
    assert c["violation"] < 1e-12 and c["off_pos"] == 0
    assert c["op_norm"] <= 1 + 1e-12 and c["colsum"] < 1e-10
    assert 0 <= c["gap"] <= 1e-8 and abs(c["gap"] - sol.gap) < 1e-10
    assert abs(c["alignment"] - 1) < 1e-7
    a = np.where(S, sol.L, -np.inf).max(axis=0)  # the support's common logit
    slack = (a[None, :] - 1.0 - sol.L)[~S]
    G_off = sol.G[~S]
    # complementary slackness: sum of |G| * slack vanishes with the gap
    assert float(-(G_off * slack).sum()) <= 1e-6 * sol.objective


def test_single_precision_phase_certifies_the_same_optimum() -> None:
    """The early single-precision SVT changes the path, not the answer: with and without
    it the solver certifies the same optimum (each within its certified gap), and the
    returned L and G are float64 and feasible."""
    from tools.bench.solvers import geo_supports

    S = geo_supports(40, 120, "distinct", seed=1)
    mixed = solve_nuclear_svm_scale(S, tol=1e-7)
    double = solve_nuclear_svm_scale(S, tol=1e-7, single_until=0.0)
    assert mixed.L.dtype == double.L.dtype == mixed.G.dtype == np.float64
    for sol in (mixed, double):
        c = g.check_certificate(sol.G, S, sol.L)
        assert c["gap"] <= 1e-7 and c["violation"] < 1e-12 and c["op_norm"] <= 1 + 1e-12
    # each objective is within its own gap of the optimum, which lies between the two duals
    assert max(mixed.dual_objective, double.dual_objective) <= min(
        mixed.objective, double.objective
    ) * (1 + 1e-12)
    assert abs(mixed.objective - double.objective) <= 2e-7 * double.objective


@pytest.mark.parametrize("law", ["zipf1.1-k4", "zipf1.5-k4", "zipf1.1-k8"])
def test_zipf_laws_match_scs(law: str) -> None:
    """The bench's Zipf support laws (supports drawn independently, some repeated): the
    solver with its defaults (relaxed step, float32 Anderson history, single precision
    first) certifies the optimum of the generic conic solver."""
    from tools.bench.solvers import geo_supports

    S = geo_supports(30, 80, law, seed=0)
    ref = g.nuclear_svm_cvxpy(S, solver="SCS")
    sol = solve_nuclear_svm_scale(S, tol=1e-8)
    c = g.check_certificate(sol.G, S, sol.L)
    assert c["gap"] <= 1e-8 and c["violation"] < 1e-12 and c["op_norm"] <= 1 + 1e-12
    assert abs(sol.objective - ref.objective) <= 1e-6 * ref.objective


@pytest.fixture(scope="module")
def medium():
    """A medium instance (150 x 600, supports of 1-4 words, Zipf exponent 1.1; reduced to
    137 x 461), solved by the reference ADMM, by the solver's defaults and by its former
    path (plain Douglas-Rachford step, single precision until 1e-4)."""
    from tools.bench.solvers import geo_supports

    S = geo_supports(150, 600, "zipf1.1-k4", seed=1)
    return (
        S,
        g.solve_nuclear_svm(S, tol=1e-8),
        solve_nuclear_svm_scale(S, tol=1e-7),
        solve_nuclear_svm_scale(S, tol=1e-7, relax=1.0, single_until=1e-4),
    )


def test_medium_instance_matches_the_reference_admm_and_the_former_path(medium) -> None:
    """The faster defaults change the path, not the answer: the same certified optimum as
    the reference ADMM (an independent iteration) and as the former path, each within its
    certified gap, with exact feasibility of both certificates, and the same logits."""
    S, admm, fast, former = medium
    for sol in (fast, former):
        c = g.check_certificate(sol.G, S, sol.L)
        assert c["gap"] <= 1e-7 and c["violation"] < 1e-12 and c["op_norm"] <= 1 + 1e-12
        assert c["colsum"] < 1e-10 and c["off_pos"] == 0
        assert abs(sol.objective - admm.objective) <= 2e-7 * admm.objective
    # weak duality across solvers: every certified lower bound is below every feasible value
    duals = (admm.dual_objective, fast.dual_objective, former.dual_objective)
    assert max(duals) <= min(admm.objective, fast.objective, former.objective) * (1 + 1e-12)
    assert np.abs(fast.L - admm.L).max() < 1e-3 * np.abs(admm.L).max()


def test_relaxation_out_of_range_is_refused() -> None:
    from ntpcore.errors import ParameterError

    S = zipf_supports(25, 60, seed=3)
    for relax in (0.0, 2.0, -1.0):
        with pytest.raises(ParameterError, match="relax"):
            solve_nuclear_svm_scale(S, relax=relax)


def test_anderson_gram_row_refreshed_from_the_previous_right_hand_side() -> None:
    """The Gram row of the new difference, computed from the previous right-hand side
    (``dG g - dG g_prev``), equals the direct products, and ``H`` stays symmetric."""
    from ntpcore.geo.svm_scale import _anderson_update

    rng = np.random.default_rng(0)
    k, n = 5, 10_000
    dG = rng.standard_normal((k, n))
    g_prev = rng.standard_normal(n)
    g_new = g_prev + dG[2]  # slot 2 holds g_new - g_prev
    H = np.zeros((k, k))
    rhs = _anderson_update(H, dG, 2, k, g_new, dG @ g_prev)
    np.testing.assert_allclose(rhs, dG @ g_new, rtol=1e-12)
    np.testing.assert_allclose(H[2], dG @ dG[2], rtol=1e-9, atol=1e-9 * n)
    np.testing.assert_array_equal(H[:, 2], H[2])
