"""Graph-SVM (book att-def-graph-svm): closed-form toys, constraints, KKT, subspaces, an independent
cvxpy formulation, invariances and infeasibility."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore.att import (
    graph_svm,
    graph_svm_cvxpy,
    scc_structures,
    subspaces,
    token_priority_graphs,
)
from ntpcore.att.data import sample_dataset, toy_dataset, unit_embeddings
from ntpcore.att.linalg import generator_rows
from ntpcore.att.svm import (
    _edge_triples,
    graph_svm_constraints,
    solve_graph_svm,
    solve_max_margin,
)
from ntpcore.errors import DataError, InfeasibleError

TOL = 1e-6


def test_closed_form_acyclic_toy():
    d = toy_dataset("acyclic")
    W = graph_svm(d.E, d.tokens, d.labels)
    expected = np.zeros((3, 3))
    expected[:, 2] = [2 / 3, -1 / 3, -1 / 3]
    np.testing.assert_allclose(W, expected, atol=1e-12)
    assert np.sum(W**2) == pytest.approx(2 / 3, abs=1e-12)


def test_closed_form_cyclic_toy():
    d = toy_dataset("cyclic")
    W = graph_svm(d.E, d.tokens, d.labels)
    expected = np.zeros((3, 3))
    expected[:, 2] = [1 / 3, 1 / 3, -2 / 3]
    np.testing.assert_allclose(W, expected, atol=1e-12)


def test_closed_form_conceptual_toy_and_fully_cyclic():
    d = toy_dataset("conceptual")
    W = graph_svm(d.E, d.tokens, d.labels)
    np.testing.assert_allclose(W[:, 5], [1, 1, 0, 0, -1, -1], atol=1e-12)
    assert np.sum(W**2) == pytest.approx(4.0, abs=1e-12)
    f = toy_dataset("fully-cyclic")  # every TPG one SCC: W_svm = 0
    np.testing.assert_array_equal(graph_svm(f.E, f.tokens, f.labels), 0.0)


def _random_set(seed, n=6, T=4, K=6, d=8, graph="cyclic"):
    return sample_dataset(np.random.default_rng(seed), n, T, K, d, graph=graph)


@pytest.mark.parametrize("seed", range(6))
def test_constraints_kkt_and_subspaces(seed):
    data = _random_set(seed, graph="cyclic" if seed % 2 else "any")
    graphs = token_priority_graphs(data.tokens, data.labels, data.K)
    res = solve_graph_svm(data.E, graphs)
    W = res.W
    A_eq, A_in, _ = graph_svm_constraints(data.E, graphs)  # every edge of every TPG
    w = W.ravel()
    # book att-def-graph-svm: constraint satisfaction (much tighter than 1e-6) and an active
    # inequality
    assert np.max(np.abs(A_eq @ w), initial=0.0) <= 1e-10
    assert np.min(A_in @ w) >= 1 - 1e-10
    assert np.any(np.abs(A_in @ w - 1) <= 1e-9)
    # KKT on the reduced system the solver uses (res.multipliers refer to it):
    # w = A_in^T alpha + A_eq^T beta, alpha >= 0, complementary slackness
    A_eq, A_in, _ = graph_svm_constraints(data.E, graphs, pairs="reduced")
    assert A_in.shape[0] == res.n_in
    assert np.all(res.multipliers >= -1e-12)
    assert np.all(res.multipliers[~res.active] <= 1e-9)
    beta = np.linalg.lstsq(A_eq.T, w - A_in.T @ res.multipliers, rcond=None)[0]
    np.testing.assert_allclose(A_in.T @ res.multipliers + A_eq.T @ beta, w, atol=1e-9)
    # [att, App. Lemma 6(i)]: W_svm in S, orthogonal to S_fin
    sub = subspaces(data.E, data.tokens, data.labels)
    nrm = np.linalg.norm(W)
    assert np.linalg.norm(W - sub.project(W, "S")) <= 1e-8 * nrm
    assert np.linalg.norm(sub.project(W, "S_fin")) <= 1e-8 * nrm
    np.testing.assert_allclose(sub.project(W, "S_svm"), W, atol=1e-8 * nrm)
    assert sub.S_fin.shape[0] + sub.S_svm.shape[0] == sub.S.shape[0]


@pytest.mark.parametrize("seed", range(4))
def test_edges_vs_all_reachable_pairs_vs_reduced_system(seed):
    data = _random_set(seed, n=8 + 4 * seed)
    graphs = token_priority_graphs(data.tokens, data.labels, data.K)
    W_edges = solve_graph_svm(data.E, graphs, pairs="edges").W
    W_pairs = solve_graph_svm(data.E, graphs, pairs="reachable").W
    W_red = solve_graph_svm(data.E, graphs, pairs="reduced").W
    np.testing.assert_allclose(W_pairs, W_edges, atol=1e-9 * np.linalg.norm(W_edges))
    np.testing.assert_allclose(W_red, W_edges, atol=1e-9 * np.linalg.norm(W_edges))
    n_edges = sum(len(c) for c in graph_svm_constraints(data.E, graphs)[:2])
    n_red = sum(len(c) for c in graph_svm_constraints(data.E, graphs, pairs="reduced")[:2])
    assert n_red <= n_edges


@pytest.mark.parametrize("seed", range(4))
def test_matches_independent_cvxpy_formulation(seed):
    data = _random_set(seed, n=6 + seed, T=4, K=6, d=8)
    W = graph_svm(data.E, data.tokens, data.labels)
    W_ref = graph_svm_cvxpy(data.E, data.tokens, data.labels)  # per sample/position, Clarabel
    assert np.linalg.norm(W - W_ref) <= 1e-6 * np.linalg.norm(W)
    # equal accuracy: objective within 1e-6 relative
    assert abs(np.sum(W**2) - np.sum(W_ref**2)) <= 1e-6 * np.sum(W**2)
    # and the generic max-margin solver through cvxpy agrees too
    graphs = token_priority_graphs(data.tokens, data.labels, data.K)
    A_eq, A_in, _ = graph_svm_constraints(data.E, graphs)
    w_cp = solve_max_margin(A_eq, A_in, method="cvxpy").w
    assert np.linalg.norm(w_cp - W.ravel()) <= 1e-6 * np.linalg.norm(W)


def test_invariance_to_duplicated_samples():
    data = _random_set(3)
    W = graph_svm(data.E, data.tokens, data.labels)
    tok2 = np.concatenate([data.tokens, data.tokens[:3], data.tokens[:1]])
    lab2 = np.concatenate([data.labels, data.labels[:3], data.labels[:1]])
    np.testing.assert_allclose(graph_svm(data.E, tok2, lab2), W, atol=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_orthogonal_equivariance(seed):
    data = _random_set(seed)
    rng = np.random.default_rng(100 + seed)
    Q = np.linalg.qr(rng.standard_normal((8, 8)))[0]
    W = graph_svm(data.E, data.tokens, data.labels)
    W_Q = graph_svm(data.E @ Q, data.tokens, data.labels)
    np.testing.assert_allclose(W_Q, Q.T @ W @ Q, atol=1e-9 * np.linalg.norm(W))


def test_feasible_when_embeddings_independent():
    for seed in range(10):
        data = _random_set(seed, K=6, d=6, graph="any")  # K = d, full rank: always feasible
        graph_svm(data.E, data.tokens, data.labels)


def test_infeasible_when_K_exceeds_d():
    """K=12 tokens in d=3 (book att-def-graph-svm: typically infeasible); the error says why."""
    n_inf = 0
    for seed in range(5):
        rng = np.random.default_rng(seed)
        data = sample_dataset(rng, 12, 4, 12, 3, graph="any")
        try:
            graph_svm(data.E, data.tokens, data.labels)
        except InfeasibleError as exc:
            n_inf += 1
            msg = str(exc)
            assert "Graph-SVM infeasible" in msg
            assert "K = 12" in msg and "d = 3" in msg and "linearly dependent" in msg
    assert n_inf >= 4


def test_infeasible_hand_made_case_and_reference_agree():
    # d = 1, e_0 = 1, e_1 = 2 (K > d).  (1, 0) -> 1 needs (e_1 - e_0) w e_0 = w >= 1, while
    # (0, 1) -> 0 needs (e_0 - e_1) w e_1 = -2 w >= 1: no scalar w does both.
    E = np.array([[1.0], [2.0]])
    tokens, labels = [[1, 0], [0, 1]], [1, 0]
    with pytest.raises(InfeasibleError, match="Farkas certificate"):
        graph_svm(E, tokens, labels)
    with pytest.raises(InfeasibleError):
        graph_svm_cvxpy(E, tokens, labels)
    # either constraint alone is feasible, with the closed-form minimum-norm answers
    assert graph_svm(E, tokens[:1], labels[:1])[0, 0] == pytest.approx(1.0, abs=1e-12)
    assert graph_svm(E, tokens[1:], labels[1:])[0, 0] == pytest.approx(-0.5, abs=1e-12)


def test_degenerate_inputs():
    with pytest.raises(DataError):
        graph_svm(np.eye(3)[:2], [[0, 1, 2]], [0])  # E has fewer rows than token ids
    with pytest.raises(DataError):
        graph_svm(np.full((3, 3), np.nan), [[0, 1, 2]], [0])


def test_rows_are_kron_vectorisations():
    E = unit_embeddings(np.random.default_rng(0), 4, 5)
    triples = [(0, 1, 2), (3, 2, 0)]
    rows = generator_rows(E, triples)
    for r, (i, j, k) in zip(rows, triples, strict=True):
        np.testing.assert_allclose(r, np.outer(E[i] - E[j], E[k]).ravel())
    d = toy_dataset("cyclic")
    graphs = token_priority_graphs(d.tokens, d.labels, 3)
    eq, ineq = _edge_triples(graphs, scc_structures(graphs))
    assert sorted(eq) == [(0, 1, 2), (1, 0, 2)] and sorted(ineq) == [(0, 2, 2), (1, 2, 2)]


def test_local_graph_svm_uses_the_selected_tokens():
    """book att-conj-local: the local Graph-SVM is the Graph-SVM of the graph of the selected
    tokens. When attention selects exactly the labels, it equals the global Graph-SVM; when it
    selects another token, that token takes the label's place."""
    from ntpcore.att import local_graph_svm

    d = toy_dataset("acyclic")  # (0, 1, 2) -> 0
    on_label = np.array([[1.0, 0.0, 0.0]])
    np.testing.assert_allclose(
        local_graph_svm(d.E, d.tokens, on_label), graph_svm(d.E, d.tokens, d.labels), atol=1e-12
    )
    on_token_1 = np.array([[0.0, 1.0, 0.0]])
    np.testing.assert_allclose(
        local_graph_svm(d.E, d.tokens, on_token_1), graph_svm(d.E, d.tokens, [1]), atol=1e-12
    )
    shared = np.array([[0.5, 0.5, 0.0]])  # two selected tokens form one local SCC
    W = local_graph_svm(d.E, d.tokens, shared)
    np.testing.assert_allclose(W[:, 2], [1 / 3, 1 / 3, -2 / 3], atol=1e-12)
