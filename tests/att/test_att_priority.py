"""Token-priority graphs and their SCCs (book att-def-tpg, att-def-scc), and bad inputs."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from ntpcore.att import priority, token_priority_graphs
from ntpcore.att.data import random_labels, random_sequences, toy_dataset
from ntpcore.att.priority import (
    cyclic_samples,
    is_acyclic,
    local_token_priority_graphs,
    reduced_position_mask,
    scc_structure,
    scc_structures,
    select_tokens,
)
from ntpcore.errors import DataError, ParameterError


@pytest.fixture(autouse=True)
def _fresh_scc_structures():
    """Each test computes the SCC structures it checks: the cache is shared by the process,
    and a structure cached before (by another test, or by a clean run a mutation tool
    forks its mutants from) would hide a change in how it is computed."""
    priority._scc_structure.cache_clear()


def _random(seed: int, n: int = 12, T: int = 4, K: int = 7):
    rng = np.random.default_rng(seed)
    tok = random_sequences(rng, n, T, K)
    return tok, random_labels(rng, tok), K


@pytest.mark.parametrize("seed", range(5))
def test_tpg_edges_are_exactly_label_to_other_tokens(seed):
    tok, lab, K = _random(seed)
    graphs = token_priority_graphs(tok, lab, K)
    assert len(graphs) == K
    expected = [set() for _ in range(K)]
    for seq, y in zip(tok, lab, strict=True):
        expected[seq[-1]] |= {(int(y), int(j)) for j in seq if j != y}
    for k, G in enumerate(graphs):
        assert isinstance(G, nx.DiGraph)
        assert sorted(G.nodes) == list(range(K))
        assert set(G.edges) == expected[k]


def _closure_sccs(G: nx.DiGraph) -> list[frozenset]:
    """Reference SCCs by brute-force reachability (Floyd–Warshall on booleans)."""
    K = G.number_of_nodes()
    R = np.eye(K, dtype=bool)
    for i, j in G.edges:
        R[i, j] = True
    for m in range(K):
        R |= R[:, [m]] & R[[m], :]
    comps = {frozenset(np.flatnonzero(R[i] & R[:, i]).tolist()) for i in range(K)}
    return sorted(comps, key=min)


@pytest.mark.parametrize("seed", range(8))
def test_sccs_match_networkx_and_a_closure_reference(seed):
    tok, lab, K = _random(seed, n=15)
    for G in token_priority_graphs(tok, lab, K):
        s = scc_structure(G)
        ours = sorted((frozenset(c) for c in s.components()), key=min)
        nxs = sorted((frozenset(c) for c in nx.strongly_connected_components(G)), key=min)
        assert ours == nxs == _closure_sccs(G)
        # ids are a topological order of the condensation; levels decrease along edges
        for i, j in G.edges:
            if s.scc[i] != s.scc[j]:
                assert s.scc[i] < s.scc[j]
                assert s.level[i] > s.level[j]
                assert s.higher(i, j)
            else:
                assert s.level[i] == s.level[j] and s.same(i, j)
        assert s.is_acyclic == all(len(c) == 1 for c in s.components())


def test_acyclic_iff_all_sccs_singletons_and_cyclic_samples():
    cyc = toy_dataset("cyclic")
    st = scc_structures(token_priority_graphs(cyc.tokens, cyc.labels, 3))
    assert not is_acyclic(st)
    assert st[2].nontrivial_components() == [(0, 1)]
    assert cyclic_samples(cyc.tokens, cyc.labels, st).all()
    mask = reduced_position_mask(cyc.tokens, cyc.labels, st)
    np.testing.assert_array_equal(mask, [[1, 1, 0]] * 3)
    acy = toy_dataset("acyclic")
    st = scc_structures(token_priority_graphs(acy.tokens, acy.labels, 3))
    assert is_acyclic(st)
    assert not cyclic_samples(acy.tokens, acy.labels, st).any()


def test_incomparable_sccs_in_the_conceptual_toy():
    d = toy_dataset("conceptual")
    s = scc_structures(token_priority_graphs(d.tokens, d.labels, 6))[5]
    assert sorted(s.components()) == [(0, 1), (2, 3), (4,), (5,)]
    np.testing.assert_array_equal(s.level, [2, 2, 1, 1, 0, 0])
    assert not s.comparable(4, 5) and s.comparable(0, 4) and s.higher(0, 4)


@pytest.mark.parametrize(
    ("tokens", "labels", "K", "match"),
    [
        ([[0, 1, 2]], [3], 4, "does not occur in its sequence"),
        ([[0, 1, 5]], [0], 4, "outside"),
        ([[0, -1, 2]], [0], 4, "outside"),
        ([[0, 1, 2]], [0, 1], 4, "labels must have shape"),
        ([0, 1, 2], [0], 4, "shape"),
        ([[0.5, 1, 2]], [1], 4, "integer"),
    ],
)
def test_bad_inputs_raise_clear_errors(tokens, labels, K, match):
    with pytest.raises(DataError, match=match):
        token_priority_graphs(tokens, labels, K)


def test_local_tpg_from_attention_masses():
    tok = np.array([[0, 1, 2, 3], [1, 2, 0, 3]])
    attn = np.array([[0.6, 0.395, 0.005, 0.0], [0.9905, 0.0095, 0.0, 0.0]])
    sel, amb = select_tokens(tok, attn, 4)
    np.testing.assert_array_equal(sel, [[1, 1, 0, 0], [0, 1, 0, 0]])
    np.testing.assert_array_equal(amb, [[0, 0, 0, 0], [0, 0, 1, 0]])  # 0.0095: ambiguous
    g = local_token_priority_graphs(tok, sel, amb, 4)[3]
    assert set(g.edges) == {(0, 1), (0, 2), (0, 3), (1, 0), (1, 2), (1, 3)}
    # sample 2 alone: its selected token 1 gets no edge to the ambiguous token 2
    g2 = local_token_priority_graphs(tok[1:], sel[1:], amb[1:], 4)[3]
    assert set(g2.edges) == {(1, 0), (1, 3)}
    s = scc_structure(g)
    assert s.same(0, 1) and s.higher(0, 2) and not s.comparable(2, 3)


def test_tpg_of_the_shared_last_token_pools_every_sample():
    """When every sequence ends in the same token k (the conceptual toy: k = 5), G^(k) holds
    the edges y_i -> j of all samples and every other TPG is empty."""
    d = toy_dataset("conceptual")
    graphs = token_priority_graphs(d.tokens, d.labels, d.K)
    pooled = {
        (int(y), int(j)) for s, y in zip(d.tokens, d.labels, strict=True) for j in s if j != y
    }
    assert set(graphs[5].edges) == pooled
    assert sorted(graphs[5].nodes) == list(range(d.K))
    assert all(graphs[k].number_of_edges() == 0 for k in range(d.K) if k != 5)


def test_an_empty_dataset_is_a_clear_error():
    """Issue 22: the attention functions accepted an empty dataset (and returned zeros)."""
    from ntpcore import att

    E, tok, lab = np.eye(4), np.zeros((0, 3), dtype=int), np.zeros(0, dtype=int)
    with pytest.raises(DataError, match="the dataset is empty"):
        att.make_problem(E, tok, lab)
    with pytest.raises(DataError, match="the dataset is empty"):
        att.build_automaton(E, tok, lab)
    with pytest.raises(DataError, match="the dataset is empty"):
        att.token_priority_graphs(tok, lab, 4)


# ---------------------------------- written against the survivors of code-level mutants (mutmut)
def test_smallest_vocabularies_and_sequences_are_valid():
    """K = 1 (one token) and T = 1 (the query is the whole context, so y_i = k_i): valid data
    whose TPGs have no edge (an edge needs a context token other than the label)."""
    graphs = token_priority_graphs([[0], [0]], [0, 0], 1)
    assert len(graphs) == 1 and graphs[0].number_of_edges() == 0
    graphs = token_priority_graphs([[2], [1]], [2, 1], 3)
    assert all(G.number_of_edges() == 0 for G in graphs)
    assert is_acyclic(scc_structures(graphs))


@pytest.mark.parametrize(
    ("tokens", "labels", "K", "match"),
    [
        ([[0, 1, 4]], [0], 4, r"^tokens contains ids outside \[0, K\) = \[0, 4\): e\.g\. 4"),
        ([[0, 1, 2]], [4], 4, r"^labels contains ids outside \[0, K\) = \[0, 4\): e\.g\. 4"),
        ([[0, 5, 1]], [0], 4, r"e\.g\. 5"),
        ([[0, 1.5]], [0], 4, r"^tokens must be integer token ids"),
        ([[0, 1]], [np.nan], 4, r"^labels must be integer token ids"),
        ([[0, 1, 2]], [0, 1], 4, r"labels must have shape \(n,\) = \(1,\)"),
        ([[0, 1], [2, 3]], [0, 0], 4, "label 0 of sample 1 does not occur in its sequence"),
    ],
)
def test_bad_inputs_give_the_reason_and_the_offending_value(tokens, labels, K, match):
    with pytest.raises(DataError, match=match):
        token_priority_graphs(tokens, labels, K)


@pytest.mark.parametrize(
    ("K", "match"),
    [(0, r"K \(the vocabulary size\) must lie in \[1, inf\), got 0"), (2.5, "integer, got 2.5")],
)
def test_a_vocabulary_size_that_is_not_a_positive_integer_is_a_parameter_error(K, match):
    with pytest.raises(ParameterError, match=match):
        token_priority_graphs([[0]], [0], K)


def test_integral_float_ids_are_the_same_data():
    """Ids given as integral floats (as check_tokens accepts them) give the same TPGs, SCCs,
    reduced sequences, cyclic samples and local TPGs as the int64 ids."""
    from ntpcore.att.priority import check_tokens

    d = toy_dataset("cyclic")
    tokf, labf = d.tokens.astype(float), d.labels.astype(float)
    tok, lab = check_tokens(tokf, labf, 3)
    assert tok.dtype == np.int64 and lab.dtype == np.int64
    gi = token_priority_graphs(d.tokens, d.labels, 3)
    gf = token_priority_graphs(tokf, labf, 3)
    assert [set(G.edges) for G in gf] == [set(G.edges) for G in gi]
    st = scc_structures(gi)
    np.testing.assert_array_equal(
        reduced_position_mask(tokf, labf, st), reduced_position_mask(d.tokens, d.labels, st)
    )
    np.testing.assert_array_equal(
        cyclic_samples(tokf, labf, st), cyclic_samples(d.tokens, d.labels, st)
    )
    attn = np.full(d.tokens.shape, 1.0 / d.tokens.shape[1])
    sel, amb = select_tokens(d.tokens, attn, 3)
    self_f, ambf = select_tokens(tokf, attn, 3)
    np.testing.assert_array_equal(self_f, sel)
    np.testing.assert_array_equal(ambf, amb)
    assert [set(G.edges) for G in local_token_priority_graphs(tokf, sel, amb, 3)] == [
        set(G.edges) for G in local_token_priority_graphs(d.tokens, sel, amb, 3)
    ]


def test_cyclic_samples_is_per_sample():
    """A cyclic and an acyclic sample side by side: the answer is one bool per sample."""
    tok = np.array([[0, 1, 2], [1, 0, 2], [0, 3, 3]])
    lab = np.array([0, 1, 0])
    st = scc_structures(token_priority_graphs(tok, lab, 4))
    np.testing.assert_array_equal(cyclic_samples(tok, lab, st), [True, True, False])
    np.testing.assert_array_equal(
        reduced_position_mask(tok, lab, st), [[1, 1, 0], [1, 1, 0], [1, 0, 0]]
    )
    assert [s.k for s in st] == [0, 1, 2, 3]
    with pytest.raises(ValueError):  # one label per sequence
        cyclic_samples(tok, lab[:2], st)
    with pytest.raises(ValueError):
        reduced_position_mask(tok, lab[:2], st)


@pytest.mark.parametrize("seed", range(4))
def test_priority_relations_match_reachability(seed):
    """``higher`` is reachability one way only (a strict partial order), ``comparable`` either
    way, ``same`` both ways, each checked pair by pair against networkx."""
    tok, lab, K = _random(seed, n=10)
    for G in token_priority_graphs(tok, lab, K):
        s = scc_structure(G)
        for i in range(K):
            desc = nx.descendants(G, i) | {i}
            for j in range(K):
                back = i in (nx.descendants(G, j) | {j})
                assert s.higher(i, j) == (j in desc and not back)
                assert s.comparable(i, j) == (j in desc or back)
                assert s.same(i, j) == (j in desc and back)


def test_scc_structures_are_shared_read_only_and_need_nodes_0_to_K_minus_1():
    G = token_priority_graphs([[0, 1, 2]], [1], 3)[2]
    s = scc_structure(G, 2)
    for a in (s.scc, s.level, s.reach, s.touched):
        assert not a.flags.writeable
    with pytest.raises(ValueError):
        s.scc[0] = 5
    bad = nx.DiGraph([(1, 2)])
    with pytest.raises(DataError, match="must have the nodes 0..K-1"):
        scc_structure(bad)


def test_selection_thresholds_are_strict_as_defined():
    """C_i = {mass > c_thres}, E_i = {e_thres < mass <= c_thres}: a mass equal to a threshold
    is not above it."""
    tok = np.array([[0, 1, 2, 3]])
    attn = np.array([[0.981, 0.01, 0.009, 0.0]])
    sel, amb = select_tokens(tok, attn, 4, c_thres=0.01, e_thres=0.009)
    np.testing.assert_array_equal(sel, [[1, 0, 0, 0]])
    np.testing.assert_array_equal(amb, [[0, 1, 0, 0]])
    with pytest.raises(DataError, match=r"attention must have the shape of tokens \(1, 4\)"):
        select_tokens(tok, attn[:, :3], 4)


def test_local_tpg_bad_inputs():
    tok = np.array([[0, 1, 2, 3], [1, 2, 0, 3]])
    sel = np.zeros((2, 5), dtype=bool)
    sel[0, 4] = True
    ok_amb = np.zeros((2, 5), dtype=bool)
    with pytest.raises(DataError, match=r"selected token 4 of sample 0 is not in its sequence"):
        local_token_priority_graphs(tok, sel, ok_amb, 5)
    with pytest.raises(DataError, match=r"must have shape \(n, K\) = \(2, 5\)"):
        local_token_priority_graphs(tok, sel, ok_amb[:, :4], 5)
    with pytest.raises(DataError, match=r"must have shape \(n, K\) = \(2, 5\)"):
        local_token_priority_graphs(tok, sel[:, :4], ok_amb, 5)


def test_structure_of_a_single_edge_and_of_no_edge():
    """G^(k) with the single edge 0 -> 1 on K = 3 nodes: three singleton SCCs, 0 above 1 and
    2 incomparable to both; levels 1, 0, 0; reach adds (0, 1) only; 0 and 1 touched.  The
    arrays have the documented types (int ids and levels, bool reach and touched), with
    edges and without."""
    G = nx.empty_graph(3, create_using=nx.DiGraph)
    G.add_edge(0, 1)
    s = scc_structure(G, 0)
    np.testing.assert_array_equal(s.level, [1, 0, 0])
    np.testing.assert_array_equal(
        s.reach, np.eye(3, dtype=bool) | (np.arange(9) == 1).reshape(3, 3)
    )
    np.testing.assert_array_equal(s.touched, [True, True, False])
    assert s.is_acyclic and s.higher(0, 1) and not s.comparable(1, 2)
    empty = scc_structure(nx.empty_graph(3, create_using=nx.DiGraph), 1)
    np.testing.assert_array_equal(empty.scc, [0, 1, 2])
    np.testing.assert_array_equal(empty.level, [0, 0, 0])
    assert not empty.touched.any()
    for st in (s, empty):
        assert st.scc.dtype == np.int64 and st.level.dtype == np.int64
        assert st.reach.dtype == np.bool_ and st.touched.dtype == np.bool_
