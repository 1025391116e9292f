"""The definition checks of ntpcore.att.verify: they hold at the solvers' outputs and detect a
perturbed solution (so a claim built on them can fail)."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore.att import finite_component, graph_svm, token_priority_graphs, toy_dataset
from ntpcore.att.verify import finite_report, graph_svm_report, scc_report, theory_report


@pytest.mark.parametrize("name", ["acyclic", "cyclic", "cyclic-3to1", "conceptual", "fully-cyclic"])
def test_reports_hold_at_the_solutions_of_the_toys(name):
    d = toy_dataset(name)
    W_svm = graph_svm(d.E, d.tokens, d.labels)
    W_fin = finite_component(d.E, d.tokens, d.labels)
    rep = theory_report(d.E, d.tokens, d.labels, W_svm, W_fin)
    assert rep["scc_partition_ok"] and rep["scc_levels_ok"] and rep["scc_dag_ok"]
    assert rep["scc_all_singletons"] == (name == "acyclic")
    assert rep["svm_eq_violation"] <= 1e-9 and rep["svm_min_margin"] >= 1 - 1e-9
    assert rep["svm_cvxpy_rel_diff"] <= 1e-6
    assert rep["fin_grad_norm"] <= 1e-9 and rep["fin_off_subspace"] <= 1e-12
    assert rep["fin_hess_min_eig"] > 0 and rep["fin_cvxpy_diff"] <= 1e-4


def test_conceptual_sccs_and_levels():
    d = toy_dataset("conceptual")
    rep = scc_report(token_priority_graphs(d.tokens, d.labels, 6))
    assert rep["largest_scc"] == 2 and rep["n_nontrivial"] == 2


def test_perturbed_solutions_are_detected():
    d = toy_dataset("conceptual")
    W_svm = graph_svm(d.E, d.tokens, d.labels)
    rep = graph_svm_report(d.E, d.tokens, d.labels, 0.9 * W_svm, reference=False)
    assert rep["min_margin"] < 1 - 1e-3  # shrunk: margins below 1
    rep = graph_svm_report(d.E, d.tokens, d.labels, W_svm + 0.1 * np.eye(6), reference=False)
    assert rep["eq_violation"] == pytest.approx(0.0, abs=1e-12)  # I adds equal scores: still =
    bumped = W_svm.copy()
    bumped[0, 5] += 0.1  # token 0 scores above its SCC partner 1
    assert graph_svm_report(d.E, d.tokens, d.labels, bumped, reference=False)["eq_violation"] > 0.05
    W_fin = finite_component(d.E, d.tokens, d.labels)
    rep = finite_report(d.E, d.tokens, d.labels, 1.5 * W_fin, reference=False)
    assert rep["grad_norm"] > 1e-3
