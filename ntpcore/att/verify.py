r"""The paper's definitions checked at a computed solution (key ``att``), for the tests.

Three reports, each a check of what the solvers of the room return (they share the room's
TPG builder; the figures' checks use the independent builds of
:mod:`ntpcore.att.checks.independent`):

SCC decomposition (book ``att-def-scc``)
    :math:`i \asymp_k j` iff each reaches the other in :math:`G^{(k)}`; the SCCs partition the
    tokens and the condensation is a DAG whose priority levels strictly decrease along every
    edge between SCCs.  The report compares the stored partition with the one read from the
    reachability matrix, checks the levels against the edges of :math:`G^{(k)}` and the
    condensation with :func:`networkx.is_directed_acyclic_graph`.

Graph-SVM (book ``att-def-graph-svm``)
    At :math:`W^{\mathrm{svm}}`, over **every edge** ``i -> j`` of every :math:`G^{(k)}` (the
    paper's definition, not the reduced system the solver uses):
    :math:`(e_i-e_j)^\top W e_k = 0` inside an SCC and :math:`\ge 1` across SCCs; and the
    solution agrees with the independent per-sample cvxpy formulation.

Finite component (book ``att-def-wfin``)
    :math:`W^{\mathrm{fin}} \in S_\mathrm{fin}` is the stationary point of the reduced loss
    :math:`L_\mathrm{fin}` on :math:`S_\mathrm{fin}`: the projection of its gradient (computed by
    the closed-form gradient of :mod:`ntpcore.att.dynamics` on the reduced sequences, not by the
    Newton solver) vanishes; the Hessian on :math:`S_\mathrm{fin}` (central differences of that
    gradient) is positive definite, so the minimiser is unique [att, App. Lemma 7] (book
    ``att-lem-convex``); and it agrees with the cvxpy token-level formulation.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np

from ntpcore.att.dynamics import loss_grad, make_problem
from ntpcore.att.finite import finite_component_cvxpy, subspaces
from ntpcore.att.linalg import check_embeddings
from ntpcore.att.priority import (
    check_graphs,
    check_tokens,
    cyclic_samples,
    reduced_position_mask,
    scc_structures,
    token_priority_graphs,
)
from ntpcore.att.svm import graph_svm_constraints, graph_svm_cvxpy
from ntpcore.core.validate import as_float_array, check_number

__all__ = [
    "finite_report",
    "graph_svm_report",
    "scc_report",
    "theory_report",
]


def scc_report(graphs: Sequence[nx.DiGraph]) -> dict:
    """SCC decomposition of the TPGs checked against reachability and the edges.

    Returns
    -------
    dict with ``partition_ok`` (the SCCs are the mutual-reachability classes),
    ``levels_ok`` (level equal inside an SCC's edges, strictly decreasing along every edge
    between SCCs), ``dag_ok`` (every condensation is a DAG), ``largest_scc`` (tokens in the
    largest SCC of any TPG), ``n_nontrivial`` (SCCs with at least two tokens, all TPGs) and
    ``all_singletons`` (every SCC is a single token: the acyclic case).
    """
    graphs = check_graphs(graphs)
    partition_ok = levels_ok = dag_ok = True
    largest, nontrivial = 1, 0
    for s, G in zip(scc_structures(graphs), graphs, strict=True):
        mutual = s.reach & s.reach.T
        partition_ok &= bool(np.array_equal(mutual, s.scc[:, None] == s.scc[None, :]))
        for i, j in G.edges:
            same = s.scc[i] == s.scc[j]
            levels_ok &= bool(s.level[i] == s.level[j] if same else s.level[i] > s.level[j])
        dag_ok &= nx.is_directed_acyclic_graph(nx.condensation(G))
        sizes = np.bincount(s.scc)
        largest = max(largest, int(sizes.max()))
        nontrivial += int(np.sum(sizes > 1))
    return {
        "partition_ok": bool(partition_ok),
        "levels_ok": bool(levels_ok),
        "dag_ok": bool(dag_ok),
        "largest_scc": largest,
        "n_nontrivial": nontrivial,
        "all_singletons": largest == 1,
    }


def graph_svm_report(E, tokens, labels, W_svm, *, reference: bool = True) -> dict:
    """The Graph-SVM constraints over every TPG edge at ``W_svm``, and the cvxpy reference.

    Returns
    -------
    dict with ``eq_violation`` (largest ``|(e_i-e_j)^T W e_k|`` over same-SCC edges, 0 if
    none), ``min_margin`` (smallest ``(e_i-e_j)^T W e_k`` over edges between SCCs, ``inf`` if
    none), ``n_eq``/``n_in`` (numbers of such edges) and, with ``reference``, ``cvxpy_rel_diff``
    = ``||W_svm - W_cvxpy|| / max(||W_cvxpy||, 1)``.
    """
    E = check_embeddings(E)
    tok, lab = check_tokens(tokens, labels, E.shape[0])
    graphs = token_priority_graphs(tok, lab, E.shape[0])
    d = E.shape[1]
    W_svm = as_float_array(W_svm, "W_svm", shape=(d, d))
    A_eq, A_in, _ = graph_svm_constraints(E, graphs, pairs="edges")
    w = W_svm.ravel()
    out = {
        "eq_violation": float(np.abs(A_eq @ w).max()) if len(A_eq) else 0.0,
        "min_margin": float((A_in @ w).min()) if len(A_in) else float("inf"),
        "n_eq": len(A_eq),
        "n_in": len(A_in),
    }
    if reference:
        W_ref = graph_svm_cvxpy(E, tok, lab)
        out["cvxpy_rel_diff"] = float(
            np.linalg.norm(W_svm - W_ref) / max(np.linalg.norm(W_ref), 1.0)
        )
    return out


def finite_report(E, tokens, labels, W_fin, *, reference: bool = True, h: float = 1e-4) -> dict:
    r"""Stationarity, uniqueness and the cvxpy reference of :math:`W^{\mathrm{fin}}`.

    Returns
    -------
    dict with ``dim_S_fin``; ``off_subspace`` = :math:`\|W^{fin} - \Pi_{S_fin} W^{fin}\|`;
    ``grad_norm`` = :math:`\|\Pi_{S_fin} \nabla L_{fin}(W^{fin})\|`; ``hess_min_eig``, the
    smallest eigenvalue of the Hessian of :math:`L_{fin}` on :math:`S_{fin}` (``inf`` when
    :math:`S_{fin} = \{0\}`); with ``reference``, ``cvxpy_diff`` =
    :math:`\|W^{fin} - W^{fin}_{cvxpy}\|`.
    """
    E = check_embeddings(E)
    tok, lab = check_tokens(tokens, labels, E.shape[0])
    W_fin = as_float_array(W_fin, "W_fin", shape=(E.shape[1], E.shape[1]))
    h = check_number(h, "h", lo=0, lo_open=True)
    graphs = token_priority_graphs(tok, lab, E.shape[0])
    structures = scc_structures(graphs)
    B = subspaces(E, tok, lab, graphs=graphs).S_fin
    d = E.shape[1]
    off = W_fin.ravel() - B.T @ (B @ W_fin.ravel()) if B.shape[0] else W_fin.ravel()
    out = {"dim_S_fin": int(B.shape[0]), "off_subspace": float(np.linalg.norm(off))}
    cyc = cyclic_samples(tok, lab, structures)
    if B.shape[0] == 0 or not cyc.any():
        out.update({"grad_norm": 0.0, "hess_min_eig": float("inf")})
    else:
        P = make_problem(
            E,
            tok,
            lab,
            mask=reduced_position_mask(tok, lab, structures),
            sample_weight=np.where(cyc, 1.0 / len(lab), 0.0),
        )

        def grad(W):  # coordinates of the projected gradient in the basis of S_fin
            return B @ loss_grad(W[None], P)[1][0].ravel()

        out["grad_norm"] = float(np.linalg.norm(grad(W_fin)))
        H = np.array(
            [
                (grad(W_fin + h * b.reshape(d, d)) - grad(W_fin - h * b.reshape(d, d))) / (2 * h)
                for b in B
            ]
        )
        out["hess_min_eig"] = float(np.linalg.eigvalsh(0.5 * (H + H.T)).min())
    if reference:
        out["cvxpy_diff"] = float(np.linalg.norm(W_fin - finite_component_cvxpy(E, tok, lab)))
    return out


def theory_report(E, tokens, labels, W_svm, W_fin, *, reference: bool = True) -> dict:
    """:func:`scc_report`, :func:`graph_svm_report` and :func:`finite_report` in one flat dict
    (keys prefixed ``scc_``, ``svm_``, ``fin_``)."""
    E = check_embeddings(E)
    d = E.shape[1]
    as_float_array(W_svm, "W_svm", shape=(d, d))  # before any report is computed
    as_float_array(W_fin, "W_fin", shape=(d, d))
    graphs = token_priority_graphs(tokens, labels, E.shape[0])
    out = {f"scc_{k}": v for k, v in scc_report(graphs).items()}
    rep = graph_svm_report(E, tokens, labels, W_svm, reference=reference)
    out.update({f"svm_{k}": v for k, v in rep.items()})
    rep = finite_report(E, tokens, labels, W_fin, reference=reference)
    out.update({f"fin_{k}": v for k, v in rep.items()})
    return out
