"""The checks of the attention figures (ntpcore.att.checks): their independent builds agree with
the room's on exact toys and random data, the torch retrace equals the room's descent, and
each check fails when the object or the curve it checks is wrong (so that a claim built on it
can fail)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from ntpcore.att import (  # noqa: E402
    finite_component,
    graph_svm,
    local_token_priority_graphs,
    plots,  # noqa: E402
    regularization_path,
    scc_structures,
    select_tokens,
    token_priority_graphs,
    toy_dataset,
)
from ntpcore.att.checks import independent as ind  # noqa: E402
from ntpcore.att.checks import objects, panels, references  # noqa: E402
from ntpcore.att.checks.retrace import descent as retrace  # noqa: E402
from ntpcore.att.data import sample_dataset  # noqa: E402
from ntpcore.att.descent import run_descent  # noqa: E402
from ntpcore.att.dynamics import attention_weights, make_problem  # noqa: E402
from ntpcore.errors import SolverError  # noqa: E402
from ntpcore.figure import claims  # noqa: E402
from ntpcore.figure.sourcedata import FigureDataError, check  # noqa: E402

TOYS = ["acyclic", "cyclic", "cyclic-3to1", "conceptual", "fully-cyclic"]


def _partition(labels):
    return sorted(tuple(np.flatnonzero(labels == v).tolist()) for v in np.unique(labels))


def _random(seed, graph="cyclic", n=6, T=4, K=6, d=8):
    return sample_dataset(np.random.default_rng(seed), n, T, K, d, graph=graph)


@pytest.mark.parametrize("name", TOYS)
def test_independent_objects_equal_the_rooms_on_the_toys(name):
    d = toy_dataset(name)
    K = d.E.shape[0]
    G = ind.graphs(d.tokens, d.labels, K)
    for s in scc_structures(token_priority_graphs(d.tokens, d.labels, K)):
        assert _partition(G.comp[s.k]) == _partition(s.scc)
        np.testing.assert_array_equal(G.level[s.k], s.level)
        np.testing.assert_array_equal(G.reach[s.k], s.reach)
    np.testing.assert_allclose(ind.graph_svm(d.E, G), graph_svm(d.E, d.tokens, d.labels), atol=1e-8)
    W_fin, _ = ind.finite_component(d.E, d.tokens, d.labels, G)
    np.testing.assert_allclose(W_fin, finite_component(d.E, d.tokens, d.labels), atol=1e-10)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_independent_objects_equal_the_rooms_on_random_data(seed):
    data = _random(seed)
    G = ind.graphs(data.tokens, data.labels, 6)
    W = graph_svm(data.E, data.tokens, data.labels)
    np.testing.assert_allclose(ind.graph_svm(data.E, G), W, atol=1e-7)
    W_fin, _ = ind.finite_component(data.E, data.tokens, data.labels, G)
    np.testing.assert_allclose(W_fin, finite_component(data.E, data.tokens, data.labels), atol=1e-9)


def test_the_toys_closed_forms():
    """The conceptual toy: W^svm e_5 = (1, 1, 0, 0, -1, -1), W^fin = log 2 / 2 (e_0 - e_1) e_5^T,
    levels 2, 2, 1, 1, 0, 0 -- from the independent builds alone."""
    d = toy_dataset("conceptual")
    G = ind.graphs(d.tokens, d.labels, 6)
    np.testing.assert_allclose(ind.graph_svm(d.E, G)[:, 5], [1, 1, 0, 0, -1, -1], atol=1e-9)
    W_fin, _ = ind.finite_component(d.E, d.tokens, d.labels, G)
    np.testing.assert_allclose(W_fin[:, 5], np.log(2) / 2 * np.array([1, -1, 0, 0, 0, 0]))
    np.testing.assert_array_equal(G.level[5], [2, 2, 1, 1, 0, 0])
    assert not G.reach[5][4, 5] and not G.reach[5][5, 4]


@pytest.mark.parametrize(
    ("head", "normalized"), [("identity", True), ("identity", False), ("general", True)]
)
def test_the_retrace_equals_the_rooms_descent(head, normalized):
    data = [_random(s) for s in (3, 4)]
    E = np.array([t.E for t in data])
    tok, lab = np.array([t.tokens for t in data]), np.array([t.labels for t in data])
    W0 = np.random.default_rng(5).uniform(-0.3, 0.3, (2, 8, 8))
    losses = ("ce", "squared") if head == "general" else "log"
    P = make_problem(E, tok, lab, head=head, loss=list(losses) if head == "general" else "log")
    _, room = run_descent(W0, P, eta=0.05, n_steps=60, normalized=normalized)
    ours = retrace(
        E, tok, lab, W0, lr=0.05, n_steps=60, normalized=normalized, head=head, losses=losses
    )
    np.testing.assert_allclose(ours, room, atol=1e-10)


def test_the_local_graphs_equal_the_rooms():
    data = _random(7, n=4, T=6, K=8)
    s = attention_weights(
        np.random.default_rng(0).normal(0, 3, (8, 8))[None],
        make_problem(data.E, data.tokens, data.labels),
    )[0]
    sel, amb = select_tokens(data.tokens, s, 8, c_thres=0.05, e_thres=0.02)
    ours = references.local_graphs(data.tokens, sel, amb, 8)
    for k, G in enumerate(local_token_priority_graphs(data.tokens, sel, amb, 8)):
        edges = {(int(i), int(j)) for i, j in zip(*np.nonzero(ours.adj[k]), strict=True)}
        assert edges == set(G.edges)
    mine = references.local_selection(
        np.random.default_rng(0).normal(0, 3, (8, 8)), data.E, data.tokens, 8, 0.05, 0.02
    )
    np.testing.assert_array_equal(mine[0], sel)
    np.testing.assert_array_equal(mine[1], amb)


def test_the_path_in_full_coordinates_equals_the_rooms():
    data = _random(0)
    radii = [1.0, 10.0]
    ours = references.path_solve(data.E, data.tokens, data.labels, radii)
    room = regularization_path(data.E, data.tokens, data.labels, radii)["W"]
    assert np.max(np.linalg.norm(ours - room, axis=(1, 2)) / radii) <= 1e-4


def test_the_path_tries_its_next_tolerance_and_names_every_status(monkeypatch):
    """A point that ends "optimal_inaccurate" at the first tolerance is solved at the next;
    where none ends optimal, the error names each status (an impossible gap: 1e-30)."""
    data = _random(0)
    never = {"tol_gap_abs": 1e-30, "tol_gap_rel": 1e-30, "tol_feas": 1e-30}
    monkeypatch.setattr(references, "PATH_TOLS", (never, references.PATH_TOLS[1]))
    ours = references.path_solve(data.E, data.tokens, data.labels, [1.0])
    room = regularization_path(data.E, data.tokens, data.labels, [1.0])["W"]
    assert np.linalg.norm(ours - room) <= 1e-4
    monkeypatch.setattr(references, "PATH_TOLS", (never, never))
    with pytest.raises(SolverError, match=r"R = 1\.0: .*1e-30.*, .*1e-30"):
        references.path_solve(data.E, data.tokens, data.labels, [1.0])


def test_the_statistics_equal_the_rooms():
    from ntpcore.att.experiments import SCCCellConfig, scc_cell

    cell = SCCCellConfig(0, 3, 5, 40, 20, 2)
    room = scc_cell.__wrapped__(cell)
    from ntpcore.att.experiments import trial_rng

    rng = trial_rng(0, 3)
    for r in range(2):
        data = sample_dataset(rng, 40, 5, 20, 1, graph="any")
        ours = references.tpg_statistics(data.tokens, data.labels, 20)
        for k, v in ours.items():
            assert v == pytest.approx(room[k][r], abs=1e-12)


def _ledger():
    return claims.Ledger("att-test-checks", "quick", defer=True)


def _status(ledger):
    return {c.id.split(":")[1]: c.status for c in ledger.claims}


def test_the_object_checks_catch_a_wrong_object():
    d = toy_dataset("conceptual")
    G = ind.graphs(d.tokens, d.labels, 6)
    W_svm, W_fin = graph_svm(d.E, d.tokens, d.labels), finite_component(d.E, d.tokens, d.labels)
    ref = {
        "W_svm": ind.graph_svm(d.E, G),
        "W_fin": ind.finite_component(d.E, d.tokens, d.labels, G)[0],
    }
    res = {"E": d.E, "tokens": d.tokens, "labels": d.labels, "W_svm": W_svm, "W_fin": W_fin}
    ledger = _ledger()
    objects.graph_svm(ledger, res, ref)
    objects.finite_component(ledger, res, ref)
    assert set(_status(ledger).values()) == {"pass"}
    ledger = _ledger()
    objects.graph_svm(ledger, {**res, "W_svm": 1.05 * W_svm}, ref)  # margins 1.05, not 1
    objects.finite_component(ledger, {**res, "W_fin": 1.01 * W_fin}, ref)
    assert _status(ledger) == {
        "svm-margins": "fail",
        "svm-equalities": "pass",  # a scaled W^svm keeps its equalities
        "svm-independent": "fail",
        "wfin-independent": "fail",
    }


@pytest.mark.parametrize("mode", ["std", "quantiles", "log"])
def test_the_declared_curve_is_what_plots_band_draws(mode):
    Y = np.random.default_rng(0).uniform(0.1, 1.0, (4, 30))
    x = np.arange(30)
    fig, ax = plt.subplots()
    plots.band(ax, x, Y, color="k", label="c", log=mode == "log", quantiles=mode == "quantiles")
    want = panels.curve(panels.Panels().axes(0), 0, x, Y, "c", mode)
    assert check(fig, want) == 2
    want = panels.curve(panels.Panels().axes(0), 0, x, Y[:3], "c", mode)  # another set of trials
    with pytest.raises(FigureDataError):
        check(fig, want)
    plt.close("all")
