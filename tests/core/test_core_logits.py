"""The quantities the three papers share (ntpcore.core.logits): CE [lin, eq. (2)], [geo,
eq. (1)], its gradient, the entropy [lin, eq. (3)], the excess CE - H, softmax and the
in-support projection onto F [geo, Sec. 2], each checked against an independent
implementation (scipy's logsumexp, softmax and rel_entr, an explicit basis of F, finite
differences) or a closed form on a small instance.  Written against the survivors of the
code-level mutation run of the unit tests (mutmut)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_softmax as sp_log_softmax
from scipy.special import logsumexp, rel_entr
from scipy.special import softmax as sp_softmax

from ntpcore.core import logits as lg
from ntpcore.errors import DataError

pytestmark = pytest.mark.theory

#: column shifts far apart: a shift by a global instead of a per-column maximum underflows
SHIFTS = np.array([0.0, -3000.0, 2500.0, 40.0])


def _instance(seed: int, V: int = 5, m: int = 4):
    """Random logits, supports (a full column, a singleton, two partial ones), P and pi."""
    rng = np.random.default_rng(seed)
    S = rng.random((V, m)) < 0.5
    S[:, 0] = True
    S[:, 1] = False
    S[rng.integers(V), 1] = True
    for j in range(2, m):
        S[rng.choice(V, 2, replace=False), j] = True
        S[rng.integers(V), j] = False if S[:, j].sum() > 2 else S[rng.integers(V), j]
    P = np.where(S, rng.random((V, m)) + 0.1, 0.0)
    P /= P.sum(axis=0)
    pi = rng.dirichlet(np.ones(m))
    L = 2.0 * rng.standard_normal((V, m))
    return L, P, pi, S


def _ce_reference(L, P, pi):
    """sum_j pi_j [LSE(l_j) - p_j^T l_j] with scipy's logsumexp, column by column."""
    return sum(pi[j] * (logsumexp(L[:, j]) - P[:, j] @ L[:, j]) for j in range(L.shape[1]))


def _kl_reference(L, P, pi):
    """sum_j pi_j KL(p_j || softmax(l_j)) with scipy's rel_entr (0 log 0 = 0)."""
    Q = sp_softmax(L, axis=0)
    return float(pi @ rel_entr(P, Q).sum(axis=0))


@pytest.mark.parametrize("seed", range(4))
def test_ce_matches_logsumexp_reference_with_and_without_pi(seed):
    L, P, pi, _ = _instance(seed)
    m = P.shape[1]
    assert lg.ce(L, P, pi) == pytest.approx(_ce_reference(L, P, pi), rel=1e-13)
    uniform = _ce_reference(L, P, np.full(m, 1.0 / m))
    assert lg.ce(L, P) == pytest.approx(uniform, rel=1e-13)
    assert abs(uniform - _ce_reference(L, P, pi)) > 1e-3  # pi matters on this instance
    loss, grad = lg.ce_grad_unchecked(L, P, pi)
    assert loss == pytest.approx(lg.ce(L, P, pi), rel=1e-14)
    assert lg.ce_unchecked(L, P, pi) == pytest.approx(loss, rel=1e-14)


@pytest.mark.parametrize("seed", range(3))
def test_ce_grad_is_q_minus_p_times_pi_and_matches_finite_differences(seed):
    L, P, pi, _ = _instance(seed)
    G = lg.ce_grad(L, P, pi)
    np.testing.assert_allclose(G, (sp_softmax(L, axis=0) - P) * pi, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(G.sum(axis=0), 0.0, atol=1e-15)  # softmax and P both sum to 1
    h = 1e-6
    fd = np.zeros_like(L)
    for idx in np.ndindex(L.shape):
        E = np.zeros_like(L)
        E[idx] = h
        fd[idx] = (lg.ce(L + E, P, pi) - lg.ce(L - E, P, pi)) / (2 * h)
    np.testing.assert_allclose(G, fd, atol=1e-8)
    m = L.shape[1]
    np.testing.assert_allclose(lg.ce_grad(L, P), lg.ce_grad(L, P, np.full(m, 1.0 / m)))


@pytest.mark.parametrize("seed", range(3))
def test_ce_excess_and_softmax_are_invariant_to_column_shifts(seed):
    """Adding c_j to column j changes neither softmax nor CE (P's columns sum to 1)."""
    L, P, pi, S = _instance(seed)
    Ls = L + SHIFTS[None, :]
    assert lg.ce(Ls, P, pi) == pytest.approx(lg.ce(L, P, pi), rel=1e-12)
    loss, grad = lg.ce_grad_unchecked(Ls, P, pi)
    assert loss == pytest.approx(lg.ce(L, P, pi), rel=1e-12)
    np.testing.assert_allclose(grad, lg.ce_grad(L, P, pi), rtol=1e-10, atol=1e-15)
    assert lg.ce_excess(Ls, P, pi) == pytest.approx(lg.ce_excess(L, P, pi), rel=1e-10)
    np.testing.assert_allclose(lg.softmax(Ls), lg.softmax(L), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(lg.log_softmax(Ls), lg.log_softmax(L), rtol=1e-10)
    np.testing.assert_allclose(lg.project_F(Ls, S), lg.project_F(L, S), atol=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_softmax_and_log_softmax_match_scipy(seed):
    L = _instance(seed)[0] + SHIFTS[None, :]
    Q = lg.softmax(L)
    np.testing.assert_allclose(Q, sp_softmax(L, axis=0), rtol=1e-13, atol=1e-300)
    np.testing.assert_allclose(Q.sum(axis=0), 1.0, rtol=1e-14)
    np.testing.assert_allclose(lg.log_softmax(L), sp_log_softmax(L, axis=0), rtol=1e-13)


def test_entropy_closed_forms():
    """Uniform over k words: log k; a one-hot column: 0; the weights pi average the columns."""
    P = np.zeros((4, 3))
    P[:, 0] = 0.25
    P[:2, 1] = 0.5
    P[3, 2] = 1.0
    H = np.array([np.log(4), np.log(2), 0.0])
    assert lg.entropy(P) == pytest.approx(H.mean(), rel=1e-15)
    pi = np.array([0.5, 0.3, 0.2])
    assert lg.entropy(P, pi) == pytest.approx(pi @ H, rel=1e-15)
    assert lg.entropy(P[:, [2]]) == 0.0


@pytest.mark.parametrize("seed", range(4))
def test_ce_minus_entropy_is_the_kl_and_ce_excess_computes_it(seed):
    L, P, pi, _ = _instance(seed)
    kl = _kl_reference(L, P, pi)
    assert lg.ce(L, P, pi) - lg.entropy(P, pi) == pytest.approx(kl, rel=1e-12)
    assert lg.ce_excess(L, P, pi) == pytest.approx(kl, rel=1e-12)
    m = P.shape[1]
    assert lg.ce_excess(L, P) == pytest.approx(_kl_reference(L, P, np.full(m, 1 / m)), rel=1e-12)
    # at the in-support log-probabilities with the off-support words at -inf the excess is 0
    Lstar = np.where(P > 0, np.log(np.where(P > 0, P, 1.0)), -800.0)
    assert lg.ce(Lstar, P, pi) == pytest.approx(lg.entropy(P, pi), rel=1e-14)


@pytest.mark.parametrize("seed", range(3))
def test_ce_excess_grad_agrees_with_ce_grad_and_softmax(seed):
    """The stable triple (CE - H, grad CE, Q) against the plain formulas where both are exact."""
    L, P, pi, _ = _instance(seed)
    exc, grad, Q = lg.ce_excess_grad(L, P, pi)
    assert exc == pytest.approx(_kl_reference(L, P, pi), rel=1e-12)
    np.testing.assert_allclose(grad, lg.ce_grad(L, P, pi), rtol=1e-11, atol=1e-16)
    np.testing.assert_allclose(Q, sp_softmax(L, axis=0), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("gamma", [0.0, 5.0, 40.0])
def test_ce_excess_closed_form_along_the_off_support_direction(gamma):
    """With the in-support logits at log p_j and the off-support ones at a_v - gamma,
    softmax restricted to the support is p_j, so with eps_j = sum_{v not in S_j} e^{a_v-gamma}

        KL_j = log(1 + eps_j),   Q = (p_j, e^{a - gamma}) / (1 + eps_j),
        grad_j = pi_j (Q_j - p_j) = pi_j (-p_j eps_j, e^{a - gamma}) / (1 + eps_j),

    the excess and Q to full relative precision even when eps_j ~ 1e-17 (where CE - H
    cancels to noise); the in-support gradient carries the rounding of s_j - p_j (~1e-17)."""
    _, P, pi, S = _instance(7)
    a = np.random.default_rng(1).standard_normal(P.shape)
    L = np.where(S, np.log(np.where(S, P, 1.0)), a - gamma)
    off = np.where(S, 0.0, np.exp(a - gamma))
    eps = off.sum(axis=0)
    exc, grad, Q = lg.ce_excess_grad(L, P, pi)
    assert exc == pytest.approx(float(pi @ np.log1p(eps)), rel=1e-12)
    assert lg.ce_excess(L, P, pi) == exc
    Q_ref = np.where(S, P, off) / (1.0 + eps)
    np.testing.assert_allclose(Q, Q_ref, rtol=1e-12, atol=0)
    g_ref = np.where(S, -P * eps, off) / (1.0 + eps) * pi
    np.testing.assert_allclose(grad[~S], g_ref[~S], rtol=1e-12, atol=0)
    np.testing.assert_allclose(grad[S], g_ref[S], rtol=1e-10, atol=1e-15)


def _F_basis(S):
    """Orthonormal basis (columns) of F = span{(e_z - e_z') e_j^T : z, z' in S_j}, vec'd."""
    V, m = S.shape
    gens = []
    for j in range(m):
        s = np.flatnonzero(S[:, j])
        for z in s[1:]:
            G = np.zeros((V, m))
            G[s[0], j], G[z, j] = 1.0, -1.0
            gens.append(G.ravel())
    if not gens:
        return np.zeros((V * m, 0))
    Q, R = np.linalg.qr(np.array(gens).T)
    return Q[:, np.abs(np.diag(R)) > 1e-12]


@pytest.mark.parametrize("seed", range(4))
def test_project_F_is_the_orthogonal_projection_onto_F(seed):
    L, _, _, S = _instance(seed)
    B = _F_basis(S)
    PL = lg.project_F(L, S)
    np.testing.assert_allclose(PL.ravel(), B @ (B.T @ L.ravel()), atol=1e-12)
    np.testing.assert_allclose(lg.project_F(PL, S), PL, atol=1e-13)  # idempotent
    assert np.all(PL[~S] == 0.0)
    np.testing.assert_allclose(PL.sum(axis=0), 0.0, atol=1e-13)
    # an integer 0/1 support is the same support
    np.testing.assert_allclose(lg.project_F(L, S.astype(int)), PL)


def test_support_matrix_is_the_positive_pattern_of_p():
    _, P, _, S = _instance(2)
    np.testing.assert_array_equal(lg.support_matrix(P), S)
    assert lg.support_matrix(P).dtype == np.bool_


def test_context_weights():
    np.testing.assert_array_equal(lg.context_weights(None, 4), np.full(4, 0.25))
    np.testing.assert_array_equal(lg.context_weights([1.0, 0.0], 2), [1.0, 0.0])
    lg.context_weights([0.5, 0.5 + 5e-9], 2)  # within 1e-8 of a probability vector
    for bad in ([1.5, -0.5], [0.5, 0.6], [0.5, 0.5 + 2e-8]):
        with pytest.raises(DataError, match="pi must be a probability vector"):
            lg.context_weights(bad, 2)
    with pytest.raises(DataError, match=r"^pi has 3 entries along axis 0, expected 2"):
        lg.context_weights([0.5, 0.25, 0.25], 2)
    with pytest.raises(DataError, match=r"^pi must be 1-dimensional"):
        lg.context_weights([[0.5, 0.5]], 2)


@pytest.mark.parametrize("fn", [lg.ce, lg.ce_grad, lg.ce_excess])
def test_bad_inputs_name_the_argument(fn):
    """Typed errors that name the offending argument (ntpcore.core.validate)."""
    L, P, pi, _ = _instance(0)
    with pytest.raises(DataError, match=r"^P has negative entries"):
        fn(L, -P, pi)
    with pytest.raises(DataError, match=r"^L has 4 entries along axis 1, expected 3"):
        fn(L, P[:, :3], pi[:3] / pi[:3].sum())
    with pytest.raises(DataError, match=r"^pi has 3 entries along axis 0, expected 4"):
        fn(L, P, pi[:3] / pi[:3].sum())


def test_bad_inputs_name_the_argument_entropy_support_projection():
    L, P, _, S = _instance(0)
    with pytest.raises(DataError, match=r"^P has negative entries"):
        lg.entropy(-P)
    with pytest.raises(DataError, match=r"^P has negative entries"):
        lg.support_matrix(-P)
    with pytest.raises(DataError, match=r"^Q has negative entries"):
        lg.support_matrix(-P, name="Q")
    with pytest.raises(DataError, match=r"^L has 4 entries along axis 1, expected 3"):
        lg.project_F(L, S[:, :3])
    with pytest.raises(DataError, match=r"^S must be a 2-D"):
        lg.project_F(L, S[:, 0])
