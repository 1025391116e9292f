"""Subspace F, projections and the finite component W* [lin, Def. 1, eqs. (4)-(5)]."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore import lin
from ntpcore.errors import DataError, IncompatibleError
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
        lin.project_F_W(X, synth.H, synth.S) + lin.project_perp_W(X, synth.H, synth.S), X
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
    assert lin.ce_W(W, synth.H, synth.P, synth.pi) > synth.entropy


def test_W_star_cross_check_pinv(synth):
    """Check 10: W* = P_F(L_0 H^+) with centred log-probability logits (d >= m)."""
    S = synth.S
    logp = np.where(S, np.log(np.where(S, synth.P, 1.0)), 0.0)
    L0 = np.where(S, logp - logp.sum(axis=0) / S.sum(axis=0), 0.0)
    Wp = L0 @ np.linalg.pinv(synth.H)
    W = lin.finite_component(synth.H, synth.P)
    assert np.linalg.norm(lin.project_F_W(Wp, synth.H, synth.S) - W) <= 1e-10


def test_gap_along_W_star_plus_gamma_Wmm(synth, synth_pair):
    """Check 11: CE(W* + g W^mm) - H decreases in g with log-slope -> -1, and bound (9)."""
    Ws, Wmm = synth_pair["W_star"], synth_pair["W_mm"]
    gammas = np.arange(0.0, 21.0, 1.0)
    gaps = np.array([lin.ce_excess_W(Ws + g * Wmm, synth.H, synth.P, synth.pi) for g in gammas])
    assert np.all(np.diff(gaps) < 0)
    lg = np.log(gaps)
    for g in (6, 10, 14, 18):
        slope = (lg[g + 2] - lg[g]) / 2
        assert -1.05 <= slope <= -0.95
    M = np.sqrt(2) * np.linalg.norm(synth.H, axis=0).max()
    C = synth.V * np.exp(np.linalg.norm(Ws) * M)
    for R in (1.0, 5.0, 10.0):
        assert lin.ce_excess_W(Ws + R * Wmm, synth.H, synth.P, synth.pi) <= C * np.exp(-R)


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


# ---------------------------------- written against the survivors of code-level mutants (mutmut)
def _with_singular_values(s, d=4, seed=0):
    """H (d, len(s)) = U diag(s) V^T with random orthonormal U, V."""
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((d, len(s))))
    Vt, _ = np.linalg.qr(rng.standard_normal((len(s), len(s))))
    return U @ np.diag(s) @ Vt, U


@pytest.mark.parametrize("scale", [1e-8, 1.0, 1e8])
def test_row_space_projector_closed_form_and_scale_invariance(scale):
    """P_H = U_r U_r^T over the singular values above 1e-12 sigma_max: a relative rank, so
    span(cH) = span(H) gives the same projector at every scale c > 0."""
    H, U = _with_singular_values([1.0, 1e-5, 1e-14])
    PH = lin.row_space_projector(scale * H)
    np.testing.assert_allclose(PH, U[:, :2] @ U[:, :2].T, atol=1e-9)
    np.testing.assert_allclose(PH @ PH, PH, atol=1e-9)
    np.testing.assert_allclose(
        lin.row_space_projector(scale * H, rtol=1e-3), U[:, :1] @ U[:, :1].T, atol=1e-9
    )


def test_row_space_projector_of_no_or_zero_columns_is_zero():
    np.testing.assert_array_equal(lin.row_space_projector(np.zeros((3, 0))), np.zeros((3, 3)))
    np.testing.assert_array_equal(lin.row_space_projector(np.zeros((3, 2))), np.zeros((3, 3)))
    with pytest.raises(DataError, match=r"^H must be 2-dimensional"):
        lin.row_space_projector(np.ones(3))


def _explicit_projection(H, S, W):
    """P_F(W) from an explicit (V d x K) generator matrix and its QR (small problems)."""
    V = S.shape[0]
    cols = []
    for j in range(S.shape[1]):
        s = np.flatnonzero(S[:, j])
        cols += [np.outer(np.eye(V)[s[0]] - np.eye(V)[z], H[:, j]).ravel() for z in s[1:]]
    A = np.array(cols).T
    U, sv, _ = np.linalg.svd(A, full_matrices=False)
    U = U[:, sv > 1e-10 * sv[0]]
    return (U @ (U.T @ W.ravel())).reshape(W.shape), U.shape[1]


@pytest.mark.parametrize("scale", [1e-4, 1.0, 1e4])
def test_F_is_invariant_to_scaling_and_duplicating_contexts(toy, scale):
    """F = span{(e_z - e_z') h_j^T} does not change when H is scaled or a context is repeated
    (same embedding, same support): its dimension and projection stay those of the explicit
    generator matrix, although the Gram matrix becomes singular."""
    H = np.concatenate([toy.H, toy.H[:, :1]], axis=1) * scale
    S = np.concatenate([toy.S, toy.S[:, :1]], axis=1)
    F = lin.data_subspace(H, S)
    W = np.random.default_rng(0).standard_normal((toy.V, toy.d))
    PW, r = _explicit_projection(H, S, W)
    assert F.n_generators == 8 and F.dim == r == 6
    np.testing.assert_allclose(F.project(W), PW, atol=1e-10)
    np.testing.assert_allclose(lin.project_F_W(W, H, S), PW, atol=1e-10)


def test_F_rank_tolerance_is_relative_to_the_largest_singular_value():
    """V = 2, m = 2, full supports: the generators (e_0 - e_1) h_j^T have Gram matrix 2 H^T H,
    so with H = diag(1, s) the singular values are sqrt(2) (1, s): the second direction is
    kept iff s > rtol."""
    H, S = np.diag([1.0, 1e-4]), np.ones((2, 2), dtype=bool)
    assert lin.data_subspace(H, S, rtol=1e-3).dim == 1
    assert lin.data_subspace(H, S, rtol=1e-5).dim == 2
    np.testing.assert_allclose(lin.data_subspace(H, S).sv, np.sqrt(2) * np.array([1.0, 1e-4]))


def test_F_of_one_generator_and_of_zero_embeddings():
    H, S = np.array([[2.0]]), np.ones((2, 1), dtype=bool)  # K = 1: A = (e_0 - e_1) * 2
    F = lin.data_subspace(H, S)
    assert F.dim == 1 and F.sv == pytest.approx([2.0 * np.sqrt(2)])
    np.testing.assert_allclose(F.project(np.array([[3.0], [1.0]])), [[1.0], [-1.0]])
    assert lin.data_subspace(np.zeros((1, 1)), S).dim == 0  # F = {0}


def test_compatibility_tolerance_scales_with_the_right_hand_side(toy):
    """Compatible iff the residual is at most 1e-8 max(1, ||b||) (the docstring's rule)."""
    info = lin.finite_component_info(toy.H, toy.P)
    ok = lin.subspace.require_compatible
    tol = lin.subspace.COMPAT_TOL
    assert ok(dict(info, residual=5 * tol, rhs_norm=10.0))  # below 10 * tol
    assert ok(dict(info, residual=tol * 10.0, rhs_norm=10.0))  # at the tolerance
    with pytest.raises(IncompatibleError):
        ok(dict(info, residual=1.5 * tol, rhs_norm=0.5))  # ||b|| < 1: the tolerance is 1e-8


def test_bad_inputs_name_the_argument(toy):
    H, S, W = toy.H, toy.S, np.zeros((toy.V, toy.d))
    for fn in (
        lin.data_subspace,
        lambda H, S: lin.project_F_W(W, H, S),
        lambda H, S: lin.project_perp_W(W, H, S),
    ):
        with pytest.raises(DataError, match=r"^H must be 2-dimensional"):
            fn(H[0], S)
        with pytest.raises(DataError, match=r"^S must be a 2-D"):
            fn(H, S[:, 0])
    with pytest.raises(DataError, match=r"^H has 3 columns but S has 2"):
        lin.data_subspace(H, S[:, :2])
    F = lin.data_subspace(H, S)
    with pytest.raises(DataError, match=r"^W has 3 entries along axis 1, expected 2"):
        F.project(np.zeros((toy.V, 3)))
    with pytest.raises(DataError, match=r"^W has 3 entries along axis 1, expected 2"):
        F.project_perp(np.zeros((toy.V, 3)))
