r"""The Graph-SVM of the self-attention paper (key ``att``) and its solvers.

For every edge ``i -> j`` of every token-priority graph :math:`G^{(k)}` (book ``att-def-tpg``,
SCCs and priority order ``att-def-scc``) the Graph-SVM asks

.. math::
    W^{\mathrm{svm}} = \arg\min_W \|W\|_F \ \text{s.t.}\
    (e_i-e_j)^\top W e_k = 0 \ (i \asymp_k j),\quad
    (e_i-e_j)^\top W e_k \ge 1 \ (i \Rightarrow_k j)

(book ``att-def-graph-svm``); :math:`W^{\mathrm{svm}}/\|W^{\mathrm{svm}}\|` is the direction of
gradient descent in the convergence theorem [att, GD convergence theorem] (book ``att-thm-gd``)
and lies in :math:`S_\mathrm{svm}` [att, App. Lemma 6(i)].  In ``vec(W)`` coordinates the
constraints are the rows :math:`(e_i - e_j) \otimes e_k` of :mod:`ntpcore.att.linalg`, so the
program is :math:`\min \|w\|` s.t. ``A_eq w = 0``, ``A_in w >= 1``.

The specialised solver eliminates the equalities (orthonormal null-space basis ``N``), then
solves the bias-free hard-margin SVM ``min ||v|| s.t. M v >= 1`` (``M = A_in N``) as a
*least-distance program* through one non-negative least-squares problem (Lawson & Hanson 1974,
ch. 23), and finally polishes on the active set and certifies the KKT conditions.  A zero NNLS
residual is a Farkas certificate of infeasibility.  ``cvxpy`` + Clarabel give the references.

The local Graph-SVM is the same program on the local TPGs of the tokens a trained layer
selects (the paper's experiments with general heads; book ``att-conj-local``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import nnls

from ntpcore.att.linalg import CLARABEL_TIGHT, RANK_TOL, check_embeddings, generator_rows
from ntpcore.att.priority import (
    SCCStructure,
    check_graphs,
    check_tokens,
    local_token_priority_graphs,
    scc_structures,
    select_tokens,
    token_priority_graphs,
)
from ntpcore.core.validate import as_float_array, check_choice, check_cvxpy_solver
from ntpcore.errors import DataError, InfeasibleError, SolverError

FEAS_TOL = 1e-9  # constraint tolerance accepted by the specialised solver's certificate


# --------------------------------------------------------------------------------------------
# constraint system
# --------------------------------------------------------------------------------------------
#: constraint systems of :func:`_edge_triples` and solvers of :func:`solve_max_margin`
PAIRS = ("edges", "reachable", "reduced")
METHODS = ("nnls", "cvxpy")


def _edge_triples(
    graphs: Sequence[nx.DiGraph], structures: Sequence[SCCStructure], pairs: str = "edges"
) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """Constraint triples ``(i, j, k)``: equality (same SCC) and inequality lists.

    ``pairs="edges"`` uses the edges of ``G^(k)``; ``pairs="reachable"`` every ordered pair
    ``i != j`` of touched tokens with ``j`` reachable from ``i``; ``pairs="reduced"`` the
    smallest equivalent system: per non-trivial SCC ``{c_0, c_1, ...}`` the equalities
    ``(c_r, c_0)``, and one inequality per edge of the transitive reduction of the condensation
    (between the smallest tokens of the two SCCs).  All three have the same feasible set:
    equalities make every SCC member score alike, and inequalities add up along paths.
    """
    check_choice(pairs, "pairs", PAIRS)
    eq: list[tuple[int, int, int]] = []
    ineq: list[tuple[int, int, int]] = []
    for k, (G, s) in enumerate(zip(graphs, structures, strict=True)):
        if G.number_of_edges() == 0:
            continue
        if pairs == "reduced":
            for comp in s.nontrivial_components():
                eq.extend((int(c), int(comp[0]), k) for c in comp[1:])
            # SCC-level strict reachability; the transitive reduction of the condensation (a
            # DAG) is its covering relation: a -> b with no SCC strictly in between.
            rep = np.array([np.flatnonzero(s.scc == c)[0] for c in range(s.n_sccs)])
            Rc = s.reach[np.ix_(rep, rep)] & ~np.eye(len(rep), dtype=bool)
            Ri = Rc.astype(np.int64)
            cover = Rc & ((Ri @ Ri) == 0)
            ineq.extend((int(rep[a]), int(rep[b]), k) for a, b in np.argwhere(cover))
            continue
        if pairs == "edges":
            candidates = sorted(G.edges)
        else:
            t = np.flatnonzero(s.touched)
            candidates = [(int(i), int(j)) for i in t for j in t if i != j and s.reach[i, j]]
        for i, j in candidates:
            (eq if s.scc[i] == s.scc[j] else ineq).append((int(i), int(j), k))
    return eq, ineq


def graph_svm_constraints(
    E, graphs: Sequence[nx.DiGraph], *, pairs: str = "edges"
) -> tuple[NDArray[np.float64], NDArray[np.float64], dict]:
    """Constraint matrices of the Graph-SVM in ``vec(W)`` coordinates.

    Returns
    -------
    A_eq : (m_eq, d*d)   rows ``vec((e_i-e_j) e_k^T)`` for same-SCC edges (``A_eq w = 0``)
    A_in : (m_in, d*d)   rows for edges between SCCs (``A_in w >= 1``)
    info : dict with the triples ``eq``/``ineq`` and the SCC structures.
    """
    graphs = check_graphs(graphs)
    check_choice(pairs, "pairs", PAIRS)
    E = check_embeddings(E, len(graphs))
    structures = scc_structures(graphs)
    eq, ineq = _edge_triples(graphs, structures, pairs)
    return (
        generator_rows(E, eq),
        generator_rows(E, ineq),
        {"eq": eq, "ineq": ineq, "structures": structures},
    )


# --------------------------------------------------------------------------------------------
# the max-margin program: min ||w|| s.t. A_eq w = 0, A_in w >= 1
# --------------------------------------------------------------------------------------------
@dataclass
class MaxMarginResult:
    w: NDArray[np.float64]  # (p,) the solution
    active: NDArray[np.bool_]  # (m_in,) inequalities active at the solution
    multipliers: NDArray[np.float64]  # (m_in,) alpha >= 0 of the inequalities (0 if inactive)
    max_violation: float  # worst violation of any constraint
    solve_time: float  # seconds
    method: str


def _null_space(A_eq: NDArray[np.float64], p: int) -> NDArray[np.float64]:
    """Orthonormal basis (p, r) of ``null(A_eq)``."""
    if A_eq.shape[0] == 0:
        return np.eye(p)
    _, s, Vt = np.linalg.svd(A_eq, full_matrices=True)
    rank = int(np.sum(s > RANK_TOL * max(s[0], 1e-300)))
    return Vt[rank:].T


def solve_max_margin(
    A_eq: NDArray[np.float64], A_in: NDArray[np.float64], *, method: str = "nnls"
) -> MaxMarginResult:
    r"""Solve :math:`\min \|w\|_2` s.t. ``A_eq w = 0`` and ``A_in w >= 1``.

    ``method="nnls"`` (default): exact active-set solver.  With ``N`` an orthonormal basis of
    ``null(A_eq)`` and ``M = A_in N``, the problem is the least-distance program
    ``min ||v|| s.t. M v >= 1``.  Lawson–Hanson: solve ``min_{u>=0} ||[M^T; 1^T] u - e_{r+1}||``;
    with residual ``rho`` the solution is ``v = -rho[:r] / rho[r]``, and ``rho = 0`` certifies
    infeasibility (``u >= 0`` with ``M^T u = 0`` and ``1^T u = 1``).  The solution is then polished
    on the active set (minimum-norm solution of ``M_A v = 1``) and accepted only with a KKT
    certificate: ``v = M_A^T alpha`` with ``alpha >= 0`` and all constraints satisfied.

    ``method="cvxpy"``: the same program through cvxpy + Clarabel (reference).

    Raises
    ------
    InfeasibleError  no ``w`` satisfies the constraints (the message gives the certificate).
    SolverError      the certificate fails (numerically degenerate instance).
    """
    check_choice(method, "method", METHODS)
    A_eq = as_float_array(A_eq, "A_eq", ndim=2)
    A_in = as_float_array(A_in, "A_in", ndim=2)
    if A_eq.shape[1] != A_in.shape[1]:
        raise DataError(
            f"A_eq and A_in must have as many columns, got {A_eq.shape} and {A_in.shape}"
        )
    t0 = time.perf_counter()
    p = A_in.shape[1] if A_in.size else A_eq.shape[1]
    m_in = A_in.shape[0]
    if m_in == 0:  # no inequality: the minimum-norm point is 0
        return MaxMarginResult(
            np.zeros(p), np.zeros(0, bool), np.zeros(0), 0.0, time.perf_counter() - t0, method
        )
    if method == "cvxpy":
        return _solve_max_margin_cvxpy(A_eq, A_in, t0)

    N = _null_space(A_eq, p)  # (p, r)
    M = A_in @ N  # (m_in, r)
    scale = max(np.abs(A_in).max(), 1e-300)
    dead = np.flatnonzero(np.linalg.norm(M, axis=1) <= 1e-12 * scale * np.sqrt(p))
    if dead.size:
        raise InfeasibleError(
            f"inequality constraint #{int(dead[0])} (and {dead.size - 1} more) is forced to 0 "
            "by the equality constraints, so its margin can never reach 1"
        )
    r = M.shape[1]
    # Least-distance programming via NNLS (Lawson & Hanson, Alg. LDP).
    G_ext = np.vstack([M.T, np.ones((1, m_in))])  # (r+1, m_in)
    f = np.zeros(r + 1)
    f[-1] = 1.0
    u, _ = nnls(G_ext, f, maxiter=50 * (m_in + r + 1))
    rho = G_ext @ u - f
    if np.linalg.norm(rho) <= 1e-10 or abs(rho[-1]) <= 1e-12:
        cert = u / max(u.sum(), 1e-300)
        raise InfeasibleError(
            "a non-negative combination of the >= 1 constraints vanishes on the subspace "
            f"allowed by the equalities (Farkas certificate supported on {int(np.sum(cert > 1e-9))}"
            " constraints): no W can satisfy all margins"
        )
    v = -rho[:r] / rho[-1]
    # Polish on the active set and certify KKT.
    active = u > 1e-12 * max(u.max(), 1e-300)
    v_pol = np.linalg.lstsq(M[active], np.ones(int(active.sum())), rcond=None)[0]
    best = None
    for cand in (v_pol, v):
        alpha_A, res = nnls(M[active].T, cand, maxiter=50 * (m_in + r + 1))
        viol = max(float(np.max(1.0 - M @ cand)), 0.0)
        stat = res / max(np.linalg.norm(cand), 1e-300)
        if viol <= FEAS_TOL and stat <= 1e-9:
            best = (cand, alpha_A, viol)
            break
    if best is None:
        raise SolverError(
            "Graph-SVM: the specialised solver could not certify the KKT conditions "
            f"(violation {float(np.max(1.0 - M @ v)):.2e}); retry with method='cvxpy'"
        )
    cand, alpha_A, _ = best
    w = N @ cand
    alpha = np.zeros(m_in)
    alpha[active] = alpha_A
    margins = A_in @ w
    max_viol = max(float(np.max(1.0 - margins)), float(np.max(np.abs(A_eq @ w), initial=0.0)), 0)
    act = np.abs(margins - 1.0) <= 1e-8
    return MaxMarginResult(w, act, alpha, max_viol, time.perf_counter() - t0, "nnls")


def _solve_max_margin_cvxpy(A_eq, A_in, t0) -> MaxMarginResult:
    import cvxpy as cp

    p = A_in.shape[1]
    w = cp.Variable(p)
    cons = [A_in @ w >= 1]
    if A_eq.shape[0]:
        cons.append(A_eq @ w == 0)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w)), cons)
    prob.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    if prob.status in ("infeasible", "infeasible_inaccurate"):
        raise InfeasibleError(f"cvxpy/Clarabel reports the Graph-SVM {prob.status}")
    if prob.status != "optimal":
        raise SolverError(f"cvxpy/Clarabel returned status {prob.status!r}")
    wv = np.asarray(w.value)
    margins = A_in @ wv
    viol = max(float(np.max(1.0 - margins)), float(np.max(np.abs(A_eq @ wv), initial=0.0)), 0)
    alpha = np.asarray(cons[0].dual_value).ravel()
    return MaxMarginResult(
        wv, np.abs(margins - 1) <= 1e-6, alpha, viol, time.perf_counter() - t0, "cvxpy"
    )


# --------------------------------------------------------------------------------------------
# Graph-SVM
# --------------------------------------------------------------------------------------------
@dataclass
class GraphSVMResult:
    """Graph-SVM solution and its diagnostics."""

    W: NDArray[np.float64]  # (d, d) W^svm
    n_eq: int  # same-SCC (equality) constraints
    n_in: int  # between-SCC (>= 1) constraints
    eq: list = field(repr=False)  # equality triples (i, j, k)
    ineq: list = field(repr=False)  # inequality triples (i, j, k)
    active: NDArray[np.bool_] = field(repr=False)  # active inequalities
    multipliers: NDArray[np.float64] = field(repr=False)  # KKT multipliers of the inequalities
    max_violation: float = 0.0
    solve_time: float = 0.0
    method: str = "nnls"


def _infeasible_reason(E: NDArray[np.float64]) -> str:
    K, d = E.shape
    rank = int(np.linalg.matrix_rank(E))
    if rank < K:
        return (
            f"the embeddings are linearly dependent (rank E = {rank} < K = {K}"
            + (f", since K > d = {d}" if K > d else "")
            + "), so the scores e_j^T W e_k cannot be set independently for every token"
        )
    return "the priority constraints contradict each other for these embeddings"


def solve_graph_svm(
    E, graphs: Sequence[nx.DiGraph], *, method: str = "nnls", pairs: str = "reduced"
) -> GraphSVMResult:
    """Graph-SVM of arbitrary (possibly local) token-priority graphs; see :func:`graph_svm`.

    ``pairs`` selects the constraint system (see :func:`_edge_triples`); the default
    ``"reduced"`` is the smallest equivalent one.  ``eq``/``ineq``/``multipliers`` of the result
    refer to that system."""
    graphs = check_graphs(graphs)
    check_choice(method, "method", METHODS)
    check_choice(pairs, "pairs", PAIRS)
    E = check_embeddings(E, len(graphs))
    A_eq, A_in, info = graph_svm_constraints(E, graphs, pairs=pairs)
    try:
        sol = solve_max_margin(A_eq, A_in, method=method)
    except InfeasibleError as exc:
        raise InfeasibleError(f"Graph-SVM infeasible: {exc}; {_infeasible_reason(E)}") from exc
    d = E.shape[1]
    return GraphSVMResult(
        W=sol.w.reshape(d, d),
        n_eq=len(info["eq"]),
        n_in=len(info["ineq"]),
        eq=info["eq"],
        ineq=info["ineq"],
        active=sol.active,
        multipliers=sol.multipliers,
        max_violation=sol.max_violation,
        solve_time=sol.solve_time,
        method=sol.method,
    )


def graph_svm(
    E: ArrayLike, tokens: ArrayLike, labels: ArrayLike, *, method: str = "nnls"
) -> NDArray[np.float64]:
    r"""The Graph-SVM direction :math:`W^{\mathrm{svm}}` (book ``att-def-graph-svm``), shape (d, d).

    .. math::
        W^{\mathrm{svm}} = \arg\min_W \|W\|_F\ \text{s.t.}\
        (e_i-e_j)^\top W e_k = 0 \text{ if } i \asymp_k j,\
        (e_i-e_j)^\top W e_k \ge 1 \text{ if } i \Rightarrow_k j,

    over all edges ``i -> j`` of all TPGs :math:`G^{(k)}`.

    Parameters
    ----------
    E : (K, d) array        token embeddings, row k = token k
    tokens : (n, T) int     sequences; last column = last token (query)
    labels : (n,) int       next-token labels (must occur in their sequence)
    method : "nnls" (specialised, exact active set) or "cvxpy" (Clarabel reference)

    Returns
    -------
    W_svm : (d, d) array (zero when every TPG is a single SCC or has no edge).

    Raises
    ------
    InfeasibleError  with the reason (e.g. K > d: linearly dependent embeddings).
    DataError        bad ids, labels not in their sequence, E of the wrong shape.
    """
    check_choice(method, "method", METHODS)
    E = check_embeddings(E)
    graphs = token_priority_graphs(tokens, labels, E.shape[0])
    return solve_graph_svm(E, graphs, method=method).W


def local_graph_svm(E, tokens, attention_weights, *, c_thres: float = 1e-2, e_thres: float = 9e-3):
    r"""Local Graph-SVM (book ``att-conj-local``): the Graph-SVM of the local TPGs built from
    the tokens that a trained attention layer selects (mass > ``c_thres``; ambiguous tokens
    with mass in ``(e_thres, c_thres]`` are left out of the edges).

    Parameters
    ----------
    E : (K, d); tokens : (n, T) ids; attention_weights : (n, T) attention of the trained model.

    Returns
    -------
    W_svm_local : (d, d); raises InfeasibleError like :func:`graph_svm`.
    """
    E = check_embeddings(E)
    K = E.shape[0]
    sel, amb = select_tokens(tokens, attention_weights, K, c_thres=c_thres, e_thres=e_thres)
    return solve_graph_svm(E, local_token_priority_graphs(tokens, sel, amb, K)).W


def graph_svm_cvxpy(
    E, tokens, labels, *, solver: str = "CLARABEL", tight: bool = True
) -> NDArray[np.float64]:
    """Independent cvxpy formulation of the Graph-SVM (reference for tests).

    Constraints are written per sample and per position, as in the authors' experiments: for
    sample ``i`` with label ``y`` and last token ``k``, every position token ``j != y`` gives
    ``(e_y - e_j)^T W e_k == 0`` if ``y`` and ``j`` reach each other in ``G^(k)`` and ``>= 1``
    otherwise (vectorised per k).
    """
    import cvxpy as cp

    E = check_embeddings(E)
    solver = check_cvxpy_solver(solver)
    K, d = E.shape
    tok, lab = check_tokens(tokens, labels, K)
    structures = scc_structures(token_priority_graphs(tok, lab, K))
    W = cp.Variable((d, d))
    cons = []
    for k in np.unique(tok[:, -1]):
        rows_eq, rows_in = [], []
        s = structures[int(k)]
        for seq, y in zip(tok[tok[:, -1] == k], lab[tok[:, -1] == k], strict=True):
            for j in seq:
                if j == y:
                    continue
                mutual = s.reach[y, j] and s.reach[j, y]
                (rows_eq if mutual else rows_in).append(E[y] - E[j])
        if rows_eq:
            cons.append(np.array(rows_eq) @ W @ E[int(k)] == 0)
        if rows_in:
            cons.append(np.array(rows_in) @ W @ E[int(k)] >= 1)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(W)), cons)  # = ||W||_F^2, a QP
    prob.solve(solver=solver, **(CLARABEL_TIGHT if tight and solver == "CLARABEL" else {}))
    if prob.status in ("infeasible", "infeasible_inaccurate"):
        raise InfeasibleError(f"Graph-SVM infeasible ({solver}: {prob.status})")
    if prob.status != "optimal":
        raise SolverError(f"cvxpy/{solver} returned status {prob.status!r}")
    if not cons:
        return np.zeros((d, d))
    return np.asarray(W.value)
