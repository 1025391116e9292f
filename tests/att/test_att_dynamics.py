"""Losses, gradients and descent (book att-eq-loss, att-eq-grad, att-lem-subspace): the closed-form
batched numpy gradients against torch autograd and finite differences, the gradient lying in S,
convexity of the identity log-loss (and its failure for the general head), and the frozen S-perp
part."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ntpcore.att import subspaces
from ntpcore.att.data import random_labels, random_sequences, sample_dataset, unit_embeddings
from ntpcore.att.descent import run_descent
from ntpcore.att.dynamics import (
    HEAD_LOSSES,
    attention_weights,
    loss_grad,
    make_problem,
    smoothness_bounds,
)
from ntpcore.att.oracle import OneLayerAttention, attention_loss, descent_step
from ntpcore.errors import DataError, ParameterError


def _data(seed, n=5, T=9, K=6, d=8):
    """Random data; T > K gives repeated tokens in every sequence."""
    rng = np.random.default_rng(seed)
    tok = random_sequences(rng, n, T, K)
    return unit_embeddings(rng, K, d), tok, random_labels(rng, tok), rng


def _torch_loss_grad(E, tok, lab, W, head, loss):
    model = OneLayerAttention(E, head=head)
    with torch.no_grad():
        model.W.copy_(torch.as_tensor(W))
    out, _ = model(torch.as_tensor(tok))
    value = attention_loss(out, torch.as_tensor(lab), head=head, loss=loss)
    value.backward()
    return float(value.detach()), model.W.grad.numpy().copy()


@pytest.mark.parametrize(("head", "loss"), HEAD_LOSSES)
@pytest.mark.parametrize("seed", range(3))
def test_closed_form_matches_torch_autograd(head, loss, seed):
    E, tok, lab, rng = _data(seed)
    W = rng.standard_normal((8, 8))
    L, G = loss_grad(W[None], make_problem(E, tok, lab, head=head, loss=loss))
    L_t, G_t = _torch_loss_grad(E, tok, lab, W, head, loss)
    assert L[0] == pytest.approx(L_t, rel=1e-12, abs=1e-14)
    np.testing.assert_allclose(G[0], G_t, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize(("head", "loss"), HEAD_LOSSES)
def test_finite_differences(head, loss):
    E, tok, lab, rng = _data(7)
    P = make_problem(E, tok, lab, head=head, loss=loss)
    W = rng.standard_normal((1, 8, 8))
    _, G = loss_grad(W, P)
    D = rng.standard_normal((1, 8, 8))
    h = 1e-5
    fd = (loss_grad(W + h * D, P)[0] - loss_grad(W - h * D, P)[0]) / (2 * h)
    an = np.sum(G * D)
    assert abs(fd[0] - an) <= 1e-6 * max(1.0, abs(an))


def test_token_level_and_position_level_losses_agree_with_repeats():
    E, tok, lab, rng = _data(3, T=11, K=4)
    W = rng.standard_normal((8, 8))
    L = loss_grad(W[None], make_problem(E, tok, lab), need_grad=False)[0][0]
    ref = 0.0
    for seq, y in zip(tok, lab, strict=True):
        V, m = np.unique(seq, return_counts=True)
        z = E[V] @ W @ E[seq[-1]]  # one score per distinct token
        iy = int(np.flatnonzero(V == y)[0])
        ref += np.log(np.sum(m * np.exp(z))) - z[iy] - np.log(m[iy])
    assert L == pytest.approx(ref / len(lab), rel=1e-13)


@pytest.mark.parametrize("seed", range(4))
def test_gradient_lies_in_S(seed):
    E, tok, lab, rng = _data(seed, T=4, K=6)
    B_S = subspaces(E, tok, lab).S
    P = make_problem(E, tok, lab)
    for _ in range(3):
        _, G = loss_grad(rng.standard_normal((1, 8, 8)) * 3, P)
        g = G[0].ravel()
        assert np.linalg.norm(g - B_S.T @ (B_S @ g)) <= 1e-12 * np.linalg.norm(g)


def _second_differences(P, rng, n_lines=60, h=0.3):
    out = []
    for _ in range(n_lines):
        W = rng.standard_normal((1, 8, 8)) * 2
        D = rng.standard_normal((1, 8, 8))
        f = [loss_grad(W + s * h * D, P, need_grad=False)[0][0] for s in (-1, 0, 1)]
        out.append(f[0] - 2 * f[1] + f[2])
    return np.array(out)


def test_identity_log_loss_is_convex_general_head_is_not():
    E, tok, lab, rng = _data(11, T=4, K=6)
    dd = _second_differences(make_problem(E, tok, lab), rng)
    assert dd.min() >= -1e-10
    # negative control: the general head with cross-entropy is nonconvex (book att-lem-convex)
    dd_gen = _second_differences(make_problem(E, tok, lab, head="general", loss="ce"), rng)
    assert dd_gen.min() < -1e-6


@pytest.mark.parametrize("normalized", [False, True])
def test_s_perp_component_frozen(normalized):
    """book att-lem-subspace: the gradient lies in S, so Pi_Sperp W(tau) = Pi_Sperp W(0) for GD and
    NGD."""
    data = sample_dataset(np.random.default_rng(2), 6, 4, 6, 8, graph="cyclic")
    sub = subspaces(data.E, data.tokens, data.labels)
    assert sub.S.shape[0] < 64  # S is a proper subspace, so the test is not empty
    rng = np.random.default_rng(0)
    W0 = rng.uniform(-1, 1, (1, 8, 8)) / np.sqrt(8)
    eta = 0.1 if normalized else 0.5
    _, traj = run_descent(
        W0,
        make_problem(data.E, data.tokens, data.labels),
        eta=eta,
        n_steps=3000,
        normalized=normalized,
        record=[0, 1000, 3000],
    )
    perp = sub.project(traj[:, 0], "S_perp")
    assert np.max(np.abs(perp - perp[0])) <= 1e-10
    assert np.linalg.norm(traj[-1, 0] - traj[0, 0]) > 1.0  # W did move


def test_plain_gd_with_safe_step_decreases_the_loss():
    E, tok, lab, rng = _data(4, T=4, K=6)
    P = make_problem(E, tok, lab)
    eta = 1.0 / smoothness_bounds(P)[0]
    assert eta >= 0.5 - 1e-12  # L_W <= T/2 = 2 for unit tokens and T = 4
    _, traj = run_descent(rng.standard_normal((1, 8, 8)), P, eta=eta, n_steps=200, normalized=False)
    losses = np.array([loss_grad(W, P, need_grad=False)[0][0] for W in traj])
    assert np.all(np.diff(losses) <= 1e-12)


def test_batched_runs_equal_individual_runs_and_torch_ngd():
    E, tok, lab, rng = _data(5, T=4, K=6)
    E2, tok2, lab2, _ = _data(6, T=4, K=6)
    W0 = rng.standard_normal((2, 8, 8))
    Pb = make_problem(np.stack([E, E2]), np.stack([tok, tok2]), np.stack([lab, lab2]))
    _, tb = run_descent(W0, Pb, eta=0.05, n_steps=50, record=[50])
    _, t0 = run_descent(W0[:1], make_problem(E, tok, lab), eta=0.05, n_steps=50, record=[50])
    np.testing.assert_allclose(tb[-1, 0], t0[-1, 0], atol=1e-13)
    model = OneLayerAttention(E)
    with torch.no_grad():
        model.W.copy_(torch.as_tensor(W0[0]))
    for _ in range(50):
        descent_step(model, torch.as_tensor(tok), torch.as_tensor(lab), eta=0.05, loss="log")
    np.testing.assert_allclose(model.W.detach().numpy(), t0[-1, 0], atol=1e-10)


def test_identity_head_equals_explicit_head_matrix():
    E, tok, lab, rng = _data(8, T=4, K=6)
    model = OneLayerAttention(E, init="uniform", generator=torch.Generator().manual_seed(0))
    t = torch.as_tensor(tok)
    out, attn = model(t)
    X = model.E[t]
    C = model.head_matrix()  # (E E^T)^{-1} E, so C E^T = I
    torch.testing.assert_close(C @ model.E.T, torch.eye(6, dtype=torch.float64))
    explicit = torch.einsum("kd,ntd,nt->nk", C, X, attn)
    torch.testing.assert_close(out, explicit)
    np.testing.assert_allclose(
        attn.detach().numpy(),
        attention_weights(model.W.detach().numpy()[None], make_problem(E, tok, lab))[0],
        atol=1e-14,
    )


def test_problem_rejects_bad_inputs():
    E, tok, lab, _ = _data(0, T=4, K=6)
    bad = lab.copy()
    bad[0] = np.setdiff1d(np.arange(6), tok[0])[0]  # a token absent from sequence 0
    with pytest.raises(DataError, match="label does not occur"):
        make_problem(E, tok, bad)
    make_problem(E, tok, bad, head="general", loss="ce")  # fine without the identity head
    with pytest.raises(DataError, match=r"\[0, K\)"):
        make_problem(E, tok + 6, lab)
    with pytest.raises(ParameterError, match="one of"):
        make_problem(E, tok, lab, head="identity", loss="ce")


def test_metric_conventions():
    """cos (the "correlation") is 0 against a zero matrix; the largest attention lies in [1/T,
    1]."""
    from ntpcore.att import cos

    A = np.arange(9.0).reshape(3, 3)
    assert cos(A, np.zeros((3, 3))) == 0.0
    assert cos(A, 2 * A) == pytest.approx(1.0)
    np.testing.assert_allclose(cos(np.stack([A, -A]), A), [1.0, -1.0])
    E, tok, lab, rng = _data(9, T=4, K=6)
    s = attention_weights(rng.uniform(-1, 1, (1, 8, 8)) / np.sqrt(8), make_problem(E, tok, lab))
    assert np.all(s.max(-1) >= 1 / 4 - 1e-15) and np.all(s.max(-1) <= 1)
