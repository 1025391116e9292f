"""Large-vocabulary nuclear-norm NTP-SVM [geo, eq. (6)]: agreement with two independent
solvers (cvxpy/SCS and the reference ADMM), exact feasibility of primal and dual, and
the certified duality gap."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore import geo as g
from ntpcore.errors import SolverError
from ntpcore.geo.svm_scale import solve_nuclear_svm_scale

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
