"""Convex side of paper ``geo``: L_in, L_mm, the proxy, the certificate, the path [geo, Sec. 2]."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore import geo as g
from ntpcore.errors import DataError
from ntpcore.geo.svm_problem import reduce_support
from ntpcore.geo.synthetic import synthetic_dataset

pytestmark = pytest.mark.theory


def random_instance(V: int, m: int, k_max: int, seed: int, n_repeat: int = 3):
    """Random supports (sizes 1..k_max) with ``n_repeat`` repeated support columns, and
    random multiplicities in {1..4}; returns (P, pi, S)."""
    rng = np.random.default_rng(seed)
    S = np.zeros((V, m), dtype=bool)
    for j in range(m - n_repeat):
        S[rng.choice(V, rng.integers(1, k_max + 1), replace=False), j] = True
    for j in range(m - n_repeat, m):
        S[:, j] = S[:, rng.integers(0, m - n_repeat)]
    counts = np.where(S, rng.integers(1, 5, size=S.shape), 0)
    P = counts / counts.sum(axis=0)
    pi = counts.sum(axis=0) / counts.sum()
    return P, pi, S


@pytest.fixture(scope="module")
def inst():
    return random_instance(12, 15, 4, seed=1)


@pytest.fixture(scope="module")
def ref(inst):
    """cvxpy reference solution of the nuclear-norm SVM (SCS at high accuracy)."""
    return g.nuclear_svm_cvxpy(inst[2], solver="SCS")


# ---------------------------------------------------------------- components (geo-def-lin)


def test_finite_logits(inst) -> None:
    P, _, S = inst
    L_in = g.finite_logits(P)
    np.testing.assert_allclose(g.project_F(L_in, S), L_in, atol=1e-13)
    assert np.all(L_in[~S] == 0)
    for j in range(P.shape[1]):
        sj = S[:, j]
        e = np.exp(L_in[sj, j])
        np.testing.assert_allclose(e / e.sum(), P[sj, j], atol=1e-12)


def test_project_F_is_orthogonal_projection(inst) -> None:
    _, _, S = inst
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((2, *S.shape))
    PA = g.project_F(A, S)
    np.testing.assert_allclose(g.project_F(PA, S), PA, atol=1e-13)
    assert abs((PA * B).sum() - (A * g.project_F(B, S)).sum()) < 1e-12


def test_centered_support_feasible_margin_one(inst) -> None:
    _, _, S = inst
    St = g.centered_support(S)
    np.testing.assert_allclose(St.sum(axis=0), 0, atol=1e-13)
    assert g.svm_constraint_violation(St, S) < 1e-13
    for j in range(S.shape[1]):
        if (~S[:, j]).any():
            assert abs(St[S[:, j], j].min() - St[~S[:, j], j].max() - 1) < 1e-13


# ---------------------------------------------------------------- L_mm (geo-def-lmm)


def test_admm_matches_cvxpy(inst, ref) -> None:
    S = inst[2]
    sol = g.solve_nuclear_svm(S, tol=1e-9)
    assert abs(sol.objective - ref.objective) <= 1e-6 * ref.objective
    assert sol.violation <= 1e-9 and ref.violation <= 1e-6
    assert np.abs(sol.L - ref.L).max() < 1e-4
    # the certified gap is a true bound: dual <= optimum <= primal
    assert sol.dual_objective <= ref.objective * (1 + 1e-9)
    assert sol.gap <= 1e-9


def test_lmm_properties(inst) -> None:
    P, _, S = inst
    L = g.nuclear_svm(S)
    St = g.centered_support(S)
    assert g.svm_constraint_violation(L, S) < 1e-6
    assert np.abs(g.project_F(L, S)).max() < 1e-6
    np.testing.assert_allclose(L.sum(axis=0), 0, atol=1e-9)
    assert abs((g.finite_logits(P) * L).sum()) < 1e-6
    n_mm, n_st = g.nuclear_norm(L), g.nuclear_norm(St)
    assert n_mm <= n_st + 1e-6
    # multi-label: the proxy is close but not optimal (geo-prop-proxy)
    assert 1e-5 < n_st / n_mm - 1 < 0.02
    assert 0.005 < g.direction_distance(L, St) < 0.3


def test_identical_supports_identical_columns(inst) -> None:
    _, _, S = inst
    L = g.nuclear_svm(S)
    W, H = g.mm_embeddings(L)
    pairs = g.same_support_pairs(S)
    assert len(pairs) >= 3
    for j, k in pairs:
        np.testing.assert_allclose(L[:, j], L[:, k], atol=1e-6)
        np.testing.assert_allclose(H[:, j], H[:, k], atol=1e-6)
    col = g.subspace_collapse(W, H, pairs, r=H.shape[0])
    assert np.all(col["proj_rel_diff"] < 1e-5) and np.all(col["proj_cos"] > 1 - 1e-9)


def test_reduction_is_exact() -> None:
    """Duplicating rows and columns of S does not change the cvxpy optimum (module proof)."""
    _, _, S = random_instance(7, 6, 3, seed=4, n_repeat=0)
    S_big = np.hstack([S, S[:, :3]])  # repeated columns
    S_big = np.vstack([S_big, S_big[:2]])  # repeated rows
    red = reduce_support(S_big)
    assert red.Sr.shape[0] <= 7 and red.Sr.shape[1] <= 6
    ref = g.nuclear_svm_cvxpy(S_big, solver="SCS")
    sol = g.solve_nuclear_svm(S_big)
    assert abs(sol.objective - ref.objective) <= 1e-6 * ref.objective
    assert np.abs(sol.L - ref.L).max() < 1e-4


@pytest.mark.parametrize("V,m", [(6, 15), (10, 10), (12, 5)])
def test_one_hot_proxy_exact(V: int, m: int) -> None:
    rng = np.random.default_rng(V * m)
    y = np.concatenate([np.arange(min(V, m)), rng.integers(0, V, max(0, m - V))])
    S = np.zeros((V, m), dtype=bool)
    S[y, np.arange(m)] = True
    sol = g.solve_nuclear_svm(S, tol=1e-10)
    St = g.centered_support(S)
    np.testing.assert_allclose(sol.L, St, atol=1e-6 * np.abs(St).max())
    assert g.polar_certificate(S)["certified"]


def test_polar_certificate_fails_for_soft_labels(inst) -> None:
    cert = g.polar_certificate(inst[2])
    assert not cert["certified"] and cert["max_off"] > 1e-3


def test_dual_certificate(inst, ref) -> None:
    S = inst[2]
    G = g.dual_certificate_cvxpy(S)
    c = g.check_certificate(G, S, ref.L)
    assert c["op_norm"] <= 1 + 1e-6 and c["colsum"] < 1e-6 and c["off_pos"] < 1e-6
    assert abs(c["gap"]) < 1e-5
    # the certificate of the specialised solver is exactly feasible and aligned
    sol = g.solve_nuclear_svm(S)
    c2 = g.check_certificate(sol.G, S, sol.L)
    assert c2["op_norm"] <= 1 + 1e-12 and c2["colsum"] < 1e-10 and c2["off_pos"] == 0
    assert 0 <= c2["gap"] < 1e-7 and abs(c2["alignment"] - 1) < 1e-7


def test_synthetic_lmm_structure() -> None:
    ds = synthetic_dataset(0)
    sol = g.solve_nuclear_svm(ds.S)
    rank = int(np.sum(np.linalg.svd(sol.L, compute_uv=False) > 1e-6))
    assert rank <= len(ds.support_groups)
    assert sol.reduced_shape[1] == len(ds.support_groups)


# ---------------------------------------------------------------- factorisation, geo-lem-nuclear


def test_balanced_factorisation() -> None:
    rng = np.random.default_rng(2)
    L = rng.standard_normal((7, 5)) @ rng.standard_normal((5, 9))
    W, H = g.balanced_factors(L)
    np.testing.assert_allclose(W @ H, L, atol=1e-10)
    assert abs(0.5 * ((W**2).sum() + (H**2).sum()) - g.nuclear_norm(L)) < 1e-10
    np.testing.assert_allclose(W.T @ W, H @ H.T, atol=1e-10)
    Q, _ = np.linalg.qr(rng.standard_normal((W.shape[1], W.shape[1])))
    assert g.gram_distance(W @ Q, W) < 1e-12  # rotation invariant
    for _ in range(5):  # other factorisations never do better
        R = rng.standard_normal((W.shape[1], W.shape[1]))
        W2, H2 = W @ R, np.linalg.solve(R, H)
        assert 0.5 * ((W2**2).sum() + (H2**2).sum()) >= g.nuclear_norm(L) - 1e-10


# ---------------------------------------------------------------- path, geo-thm-path


def test_path_matches_cvxpy() -> None:
    P, pi, S = random_instance(8, 9, 3, seed=3)
    lams = np.array([1e-2, 1e-3])
    path = g.regularization_path(P, pi, lams)
    ref = g.regularization_path_cvxpy(P, pi, lams)
    np.testing.assert_array_equal(ref["lambdas"], lams)
    for i, lam in enumerate(lams):
        L_ref = ref["L"][i]
        L = path["L"][i]
        f = g.ce(L, P, pi) + lam * g.nuclear_norm(L)
        f_ref = g.ce(L_ref, P, pi) + lam * g.nuclear_norm(L_ref)
        assert f <= f_ref + 1e-8 * abs(f_ref)
        assert np.linalg.norm(L - L_ref) <= 1e-3 * np.linalg.norm(L_ref)
        W, H = path["W"][i], path["H"][i]
        assert np.linalg.norm(W.T @ W - H @ H.T) < 1e-6 * np.linalg.norm(W.T @ W)
        U, s, Vt = np.linalg.svd(L)
        root = (U[:, : len(s)] * s) @ U[:, : len(s)].T  # (L L^T)^{1/2}
        np.testing.assert_allclose(W @ W.T, root, atol=1e-5 * np.abs(root).max())
        assert np.linalg.norm(W.sum(axis=0)) < 1e-5 * np.linalg.norm(W)
        assert abs(path["opt_residual"][i]) < 1e-6


def test_regularization_path_theorem() -> None:
    P, pi, S = random_instance(10, 12, 4, seed=5, n_repeat=2)
    lams = 10.0 ** -np.arange(1, 6)
    path = g.regularization_path(P, pi, lams)
    L_in, L_mm = g.finite_logits(P), g.nuclear_svm(S)
    n_mm = g.nuclear_norm(L_mm)
    pf = np.array([np.linalg.norm(g.project_F(L, S) - L_in) for L in path["L"]])
    ratio = pf[1:-1] / pf[2:]  # lambda <= 1e-2
    assert np.all((ratio > 5) & (ratio < 20))  # P_F(L) -> L^in linearly in lambda
    small = lams <= 1e-3
    assert np.all(np.abs(path["excess"][small] / (lams[small] * n_mm) - 1) < 0.1)  # 15
    slope = np.diff(path["nuclear"])[-2:] / (np.log(10) * n_mm)
    assert np.all(np.abs(slope - 1) < 0.1)  # 16
    dist = np.array([g.direction_distance(L, L_mm) for L in path["L"][1:]])
    assert np.all(np.diff(dist) < 0)  # 17: monotone (slow, logarithmic)
    assert np.all(path["opt_residual"] < 1e-5)


# ---------------------------------------------------------------- metrics [geo, Fig. 2(d)]


def test_structural_correlation() -> None:
    rng = np.random.default_rng(0)
    X = g.cosine_matrix(rng.standard_normal((8, 4)))
    Y = g.cosine_matrix(rng.standard_normal((8, 4)))
    assert abs(g.structural_correlation(X, X, paper_ddof=False) - 1) < 1e-4
    assert abs(g.structural_correlation(X, -X, paper_ddof=False) + 1) < 1e-3
    # the paper's mixed ddof gives 1 - 1/N on identical matrices
    assert abs(g.structural_correlation(X, X) - (1 - 1 / X.size)) < 1e-4
    assert abs(g.offdiag_correlation(X, 2 * X - 0.5) - 1) < 1e-12
    assert abs(g.offdiag_correlation(X, -X) + 1) < 1e-12
    # the shared all-ones diagonal inflates the structural correlation of unrelated matrices
    assert g.structural_correlation(X, Y) > g.offdiag_correlation(X, Y) + 0.1


# ---------------------------------------------------------------- bad inputs


def test_bad_inputs() -> None:
    with pytest.raises(DataError, match="sum to 1"):
        g.finite_logits(np.array([[0.5, 0.2], [0.4, 0.8]]))
    with pytest.raises(DataError, match="empty support"):
        g.nuclear_svm(np.array([[1, 0], [0, 0]]))
    with pytest.raises(DataError, match="no margin"):
        g.nuclear_svm(np.ones((3, 2)))
    with pytest.raises(DataError, match="0 and 1"):
        g.centered_support(np.array([[2, 0], [0, 1]]))
    with pytest.raises(DataError, match="decreasing"):
        g.regularization_path(np.eye(2), None, [1e-3, 1e-2])


# ---------------------------------------------------------------- cached experiments


def test_experiments_roundtrip(tmp_path, monkeypatch) -> None:
    """The cached experiment functions run, and a cache hit returns the same numbers."""
    from ntpcore.geo.experiments import convex as ex

    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path))
    cfg = ex.ProxyConfig(vocab_size=8, n_contexts=10, support_sizes=(1, 3), n_trials=2)
    first = ex.run_proxy(cfg)
    again = ex.run_proxy(cfg)
    np.testing.assert_array_equal(first["gap"], again["gap"])
    assert np.all(first["gap"][0] < 1e-8) and first["gap"][1].max() > 1e-6
    lmm = ex.run_support_lmm(ex.SupportLmmConfig())
    assert lmm["rank_mm"] <= lmm["n_groups"] and lmm["gap"] < 1e-7


@pytest.mark.long
def test_proxy_instances_are_the_same_serially_on_processes_and_on_a_cluster(
    tmp_path, monkeypatch, cluster
) -> None:
    """The random instances of the proxy sweep are independent runs of the sweep API; each
    draws the support that a serial loop over ``SeedSequence(seed).spawn`` gives it."""
    from ntpcore.geo.experiments import convex as ex

    cfg = ex.ProxyConfig(vocab_size=6, n_contexts=8, support_sizes=(1, 2), n_trials=2, trial_seed=3)
    names = ("gap", "dist", "max_off", "rank_mm", "rank_proxy", "n_groups")
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "serial"))
    serial = ex.run_proxy(cfg, progress=False)
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "procs"))  # no shared cache hits
    procs = ex.run_proxy(cfg, n_workers=2, progress=False)
    clus = ex.run_proxy(cfg, scheduler=cluster, progress=False)
    for key in names:
        assert serial[key].shape == (2, 2)
        np.testing.assert_array_equal(procs[key], serial[key])
        np.testing.assert_array_equal(clus[key], serial[key])
    seqs = np.random.SeedSequence(cfg.trial_seed).spawn(4)
    for a, k in enumerate(cfg.support_sizes):
        for t in range(cfg.n_trials):
            rng = np.random.default_rng(seqs[a * cfg.n_trials + t])
            S = np.zeros((cfg.vocab_size, cfg.n_contexts), dtype=bool)
            for j in range(cfg.n_contexts):
                S[rng.choice(cfg.vocab_size, k, replace=False), j] = True
            # a second implementation of two of the numbers: distinct supports, rank of S~
            assert serial["n_groups"][a, t] == len({tuple(col) for col in S.T})
            assert serial["rank_proxy"][a, t] == np.linalg.matrix_rank(g.centered_support(S))
    assert np.all(serial["gap"][0] < 1e-8)  # one-hot: S~ = L^mm (geo-prop-proxy)


# ------------------------------------------- facts that hold by construction (not ledger claims)


def test_centring_removes_at_most_one_direction(inst) -> None:
    """rank S - 1 <= rank S~ <= rank S: S~ = (I - 11^T/V) S, a rank-one change of S."""
    S = inst[2].astype(float)
    r, r_tilde = np.linalg.matrix_rank(S), np.linalg.matrix_rank(g.centered_support(S))
    assert r - 1 <= r_tilde <= r


def test_entropy_bounds_of_the_sets() -> None:
    """H <= log k_max for any soft labels; with k_j = 3 and counts in {1..4} the synthetic
    set's entropy lies between that of counts (1, 1, 4) and log 3."""
    ds = synthetic_dataset(0)
    low = -(np.log(1 / 6) + 2 * np.log(2 / 3)) / 3  # H(1/6, 1/6, 4/6)
    assert low <= ds.entropy <= np.log(3)
    assert ds.entropy <= np.log(ds.support_sizes.max())


def test_path_minimisers_are_balanced_so_projection_changes_no_cosine() -> None:
    """At a balanced minimiser of the factorised path (W^T W = H H^T), H lies in the top
    right-singular subspace of W, so projected and raw cosines of same-support pairs agree."""
    P, pi, S = random_instance(10, 12, 4, seed=5, n_repeat=2)
    path = g.regularization_path(P, pi, np.array([1e-2, 1e-3]))
    pairs = g.same_support_pairs(S)
    r = int(np.sum(np.linalg.svd(g.nuclear_svm(S), compute_uv=False) > 1e-6))
    for W, H in zip(path["W"], path["H"], strict=True):
        col = g.subspace_collapse(W, H, pairs, r)
        np.testing.assert_allclose(col["proj_cos"], col["raw_cos"], atol=1e-6)
