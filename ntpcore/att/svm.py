r"""Graph-SVM, the subspaces S / S_fin / S_svm, the finite component W^fin and the
regularization path of the self-attention paper (key ``att``, §§2.3–2.5, 2.8).

Attention weights ``W`` (d, d) score position ``t`` of sequence ``i`` by
:math:`z_{it} = x_{it}^\top W \bar x_i`, so every constraint and every generator below is a
rank-one matrix :math:`(e_i - e_j) e_k^\top`; with the row-major ``ravel`` used throughout,
``vec((e_i - e_j) e_k^T) = kron(e_i - e_j, e_k)``.

Graph-SVM (§2.4)
    .. math::
        W^{\mathrm{svm}} = \arg\min_W \|W\|_F \ \text{s.t.}\
        (e_i-e_j)^\top W e_k = 0 \ (i \asymp_k j),\quad
        (e_i-e_j)^\top W e_k \ge 1 \ (i \Rightarrow_k j)

    for every edge ``i -> j`` of every TPG :math:`G^{(k)}`.  The specialised solver eliminates the
    equalities (orthonormal null-space basis ``N``), then solves the bias-free hard-margin SVM
    ``min ||v|| s.t. M v >= 1`` (``M = A_in N``) as a *least-distance program* through one
    non-negative least-squares problem (Lawson & Hanson 1974, ch. 23), and finally polishes on the
    active set and certifies the KKT conditions.  A zero NNLS residual is a Farkas certificate of
    infeasibility.

Subspaces (§2.3, appendix Defs. 3–5)
    ``S`` = span of the edge generators, ``S_fin`` = span of the same-SCC generators,
    ``S_svm = S ⊖ S_fin``.  Bases are row-orthonormal arrays ``(r, d*d)``.

Finite component (§2.5)
    :math:`W^{\mathrm{fin}} = \arg\min_{W\in S_\mathrm{fin}} L_\mathrm{fin}(W)`, the log-loss on the
    reduced sequences (label's SCC only, query = original last token, divided by the full n).
    Strictly convex and coercive on ``S_fin``; solved by damped Newton (reference: cvxpy).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import nnls

from ntpcore.att.priority import (
    SCCStructure,
    check_tokens,
    cyclic_samples,
    local_token_priority_graphs,
    reduced_position_mask,
    scc_structures,
    select_tokens,
    token_priority_graphs,
)
from ntpcore.core.validate import as_float_array
from ntpcore.errors import DataError, InfeasibleError, SolverError

RANK_TOL = 1e-10  # relative singular-value threshold for bases and null spaces
FEAS_TOL = 1e-9  # constraint tolerance accepted by the specialised solver's certificate
#: Clarabel settings for test-grade references (the defaults stop at ~1e-8 gaps, i.e. ~1e-5
#: relative error in the solution of these small, flat problems).
CLARABEL_TIGHT = {
    "tol_gap_abs": 1e-10,
    "tol_gap_rel": 1e-10,
    "tol_feas": 1e-10,
    "tol_ktratio": 1e-8,
}


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def check_embeddings(E, K: int | None = None) -> NDArray[np.float64]:
    """Validate the embedding matrix ``E`` (K, d): finite float64, row ``k`` = token ``k``."""
    E = as_float_array(E, "E", ndim=2)
    if K is not None and E.shape[0] != K:
        raise DataError(f"E must have K = {K} rows (one per token), got {E.shape[0]}")
    return E


def _orth_rows(A: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row-orthonormal basis of the row space of ``A`` (relative threshold RANK_TOL)."""
    if A.shape[0] == 0:
        return np.zeros((0, A.shape[1]))
    _, s, Vt = np.linalg.svd(A, full_matrices=False)
    r = int(np.sum(s > RANK_TOL * max(s[0], 1e-300))) if s.size else 0
    return Vt[:r]


def project(W, B: NDArray[np.float64]) -> NDArray[np.float64]:
    """Orthogonal projection :math:`\\Pi_B(W)` of ``W`` (..., d, d) on the span of the rows of
    ``B`` (r, d*d) (row-orthonormal).  Batched over leading axes."""
    W = np.asarray(W, dtype=float)
    d = W.shape[-1]
    w = W.reshape(*W.shape[:-2], d * d)
    return ((w @ B.T) @ B).reshape(W.shape)


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
    if pairs not in ("edges", "reachable", "reduced"):
        raise ValueError(f"pairs must be 'edges', 'reachable' or 'reduced', got {pairs!r}")
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


def _rows(E: NDArray[np.float64], triples: Sequence[tuple[int, int, int]]) -> NDArray[np.float64]:
    """Stack ``vec((e_i - e_j) e_k^T) = kron(e_i - e_j, e_k)`` for each triple."""
    d = E.shape[1]
    if not triples:
        return np.zeros((0, d * d))
    t = np.asarray(triples, dtype=np.int64)
    diff = E[t[:, 0]] - E[t[:, 1]]  # (m, d)
    return (diff[:, :, None] * E[t[:, 2]][:, None, :]).reshape(len(t), d * d)


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
    E = check_embeddings(E, len(graphs))
    structures = scc_structures(graphs)
    eq, ineq = _edge_triples(graphs, structures, pairs)
    return _rows(E, eq), _rows(E, ineq), {"eq": eq, "ineq": ineq, "structures": structures}


# --------------------------------------------------------------------------------------------
# the max-margin program: min ||w|| s.t. A_eq w = 0, A_in w >= 1
# --------------------------------------------------------------------------------------------
@dataclass
class MaxMarginSolution:
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
) -> MaxMarginSolution:
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
    t0 = time.perf_counter()
    p = A_in.shape[1] if A_in.size else A_eq.shape[1]
    m_in = A_in.shape[0]
    if m_in == 0:  # no inequality: the minimum-norm point is 0
        return MaxMarginSolution(
            np.zeros(p), np.zeros(0, bool), np.zeros(0), 0.0, time.perf_counter() - t0, method
        )
    if method == "cvxpy":
        return _solve_max_margin_cvxpy(A_eq, A_in, t0)
    if method != "nnls":
        raise ValueError(f"method must be 'nnls' or 'cvxpy', got {method!r}")

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
    return MaxMarginSolution(w, act, alpha, max_viol, time.perf_counter() - t0, "nnls")


def _solve_max_margin_cvxpy(A_eq, A_in, t0) -> MaxMarginSolution:
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
    return MaxMarginSolution(
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


def graph_svm_from_graphs(
    E, graphs: Sequence[nx.DiGraph], *, method: str = "nnls", pairs: str = "reduced"
) -> GraphSVMResult:
    """Graph-SVM of arbitrary (possibly local) token-priority graphs; see :func:`graph_svm`.

    ``pairs`` selects the constraint system (see :func:`_edge_triples`); the default
    ``"reduced"`` is the smallest equivalent one.  ``eq``/``ineq``/``multipliers`` of the result
    refer to that system."""
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
    r"""The Graph-SVM direction :math:`W^{\mathrm{svm}}` of §2.4, shape (d, d).

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
    E = check_embeddings(E)
    graphs = token_priority_graphs(tokens, labels, E.shape[0])
    return graph_svm_from_graphs(E, graphs, method=method).W


def local_graph_svm(E, tokens, attention_weights, *, c_thres: float = 1e-2, e_thres: float = 9e-3):
    r"""Local Graph-SVM of §2.11: the Graph-SVM of the local TPGs built from the tokens that a
    trained attention layer selects (mass > ``c_thres``; ambiguous tokens with mass in
    ``(e_thres, c_thres]`` are left out of the edges).

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
    return graph_svm_from_graphs(E, local_token_priority_graphs(tokens, sel, amb, K)).W


def graph_svm_cvxpy(
    E, tokens, labels, *, solver: str = "CLARABEL", tight: bool = True
) -> NDArray[np.float64]:
    """Independent cvxpy formulation of the Graph-SVM (reference for tests).

    Constraints are written per sample and per position, as in §2.4: for sample ``i`` with label
    ``y`` and last token ``k``, every position token ``j != y`` gives ``(e_y - e_j)^T W e_k == 0``
    if ``y`` and ``j`` reach each other in ``G^(k)`` and ``>= 1`` otherwise (vectorised per k).
    """
    import cvxpy as cp

    E = check_embeddings(E)
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


# --------------------------------------------------------------------------------------------
# subspaces
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Subspaces:
    r"""Row-orthonormal bases (r, d*d) of :math:`S`, :math:`S_\mathrm{fin}` and
    :math:`S_\mathrm{svm} = S \ominus S_\mathrm{fin}` (appendix Defs. 3–5)."""

    S: NDArray[np.float64]
    S_fin: NDArray[np.float64]
    S_svm: NDArray[np.float64]
    d: int

    def project(self, W, which: str) -> NDArray[np.float64]:
        """Projection on ``which`` in {"S", "S_fin", "S_svm", "S_perp"} (batched)."""
        if which == "S_perp":
            return np.asarray(W, dtype=float) - project(W, self.S)
        return project(W, getattr(self, which))


def subspaces(E, tokens, labels, *, graphs: Sequence[nx.DiGraph] | None = None) -> Subspaces:
    r"""Bases of :math:`S` (edge span), :math:`S_\mathrm{fin}` (cyclic subspace) and
    :math:`S_\mathrm{svm}`.

    ``S_fin`` is generated by ``(e_c - e_{c_0}) e_k^T`` for the members ``c`` of every non-trivial
    SCC ``{c_0, c_1, ...}`` of every ``G^(k)`` (enough: differences along an SCC span all pairs).
    ``graphs`` overrides the TPGs (e.g. local TPGs); then ``tokens``/``labels`` are unused.
    """
    E = check_embeddings(E)
    K, d = E.shape
    if graphs is None:
        graphs = token_priority_graphs(tokens, labels, K)
    structures = scc_structures(graphs)
    edges = [(int(i), int(j), k) for k, G in enumerate(graphs) for i, j in G.edges]
    B_S = _orth_rows(_rows(E, edges))
    fin = [
        (c, comp[0], s.k)
        for s in structures
        for comp in s.nontrivial_components()
        for c in comp[1:]
    ]
    B_fin = _orth_rows(_rows(E, fin))
    # S_svm: the part of S orthogonal to S_fin.
    R = B_S - (B_S @ B_fin.T) @ B_fin if B_fin.shape[0] else B_S
    B_svm = _orth_rows(R)[: B_S.shape[0] - B_fin.shape[0]]
    return Subspaces(S=B_S, S_fin=B_fin, S_svm=B_svm, d=d)


# --------------------------------------------------------------------------------------------
# finite component
# --------------------------------------------------------------------------------------------
def _reduced_problem(E, tokens, labels, graphs=None):
    """Shared set-up: cyclic samples, reduced masks, S_fin basis, Jacobians ``J`` (n, T, r)."""
    E = check_embeddings(E)
    K, d = E.shape
    tok, lab = check_tokens(tokens, labels, K)
    if graphs is None:
        graphs = token_priority_graphs(tok, lab, K)
    structures = scc_structures(graphs)
    mask = reduced_position_mask(tok, lab, structures)  # (n, T)
    cyc = cyclic_samples(tok, lab, structures)  # (n,)
    sub = subspaces(E, tok, lab, graphs=graphs)
    B = sub.S_fin  # (r, d*d)
    X = E[tok]  # (n, T, d)
    xbar = X[:, -1]  # (n, d)
    # J[i, t, b] = x_it^T B_b xbar_i : score of position t along basis matrix b.
    J = np.einsum("ntd,bde,ne->ntb", X, B.reshape(-1, d, d), xbar)
    label_pos = tok == lab[:, None]
    return tok, lab, mask, cyc, B, J, label_pos


def reduced_log_loss(W, E, tokens, labels) -> float:
    r""":math:`L_\mathrm{fin}(W)`: log-loss of the reduced sequences (cyclic samples only),
    query = original last token, normalised by the full ``n`` (§2.5)."""
    E = check_embeddings(E)
    tok, lab = check_tokens(tokens, labels, E.shape[0])
    structures = scc_structures(token_priority_graphs(tok, lab, E.shape[0]))
    mask = reduced_position_mask(tok, lab, structures)
    cyc = cyclic_samples(tok, lab, structures)
    X = E[tok]
    z = np.einsum("ntd,de,ne->nt", X, np.asarray(W, float), X[:, -1])
    zm = np.where(mask, z, -np.inf)
    zl = np.where(tok == lab[:, None], z, -np.inf)
    from scipy.special import logsumexp

    per = logsumexp(zm, axis=1) - logsumexp(zl, axis=1)
    return float(np.sum(per[cyc]) / len(lab))


def finite_component(
    E: ArrayLike,
    tokens: ArrayLike,
    labels: ArrayLike,
    *,
    method: str = "newton",
    graphs: Sequence[nx.DiGraph] | None = None,
) -> NDArray[np.float64]:
    r"""The finite component :math:`W^{\mathrm{fin}}` of §2.5, shape (d, d).

    .. math::
        W^{\mathrm{fin}} = \arg\min_{W \in S_\mathrm{fin}} \frac1n \sum_{i\ \mathrm{cyclic}}
        -\log \sum_{t:\ \tilde x_{it} = e_{y_i}} \mathbb S(\tilde X_i W \bar x_i)_t

    where :math:`\tilde X_i` keeps the positions of sequence i whose token is in the SCC of
    :math:`y_i` in :math:`G^{(k_i)}`.  The objective is convex on ``S_fin``; it is strictly
    convex and coercive there (an edge inside every SCC), so the minimiser exists and is unique.

    ``method="newton"`` (default): damped Newton in the coordinates of an orthonormal basis of
    ``S_fin`` (quadratic convergence, gradient norm <= 1e-12 at exit).  ``method="cvxpy"``: the
    token-level log-sum-exp form through cvxpy + Clarabel (reference).

    Returns the zero matrix when ``S_fin = {0}`` (acyclic TPGs).

    Raises
    ------
    SolverError  if Newton does not reach the tolerance.
    """
    if method == "cvxpy":
        return finite_component_cvxpy(E, tokens, labels, graphs=graphs)
    if method != "newton":
        raise ValueError(f"method must be 'newton' or 'cvxpy', got {method!r}")
    E = check_embeddings(E)
    d = E.shape[1]
    tok, lab, mask, cyc, B, J, label_pos = _reduced_problem(E, tokens, labels, graphs)
    r = B.shape[0]
    if r == 0 or not cyc.any():
        return np.zeros((d, d))
    n = len(lab)
    J, m, lp = J[cyc], mask[cyc], label_pos[cyc]  # keep cyclic samples

    def f_g_h(a):
        z = J @ a  # (n_c, T) scores along S_fin
        zm = np.where(m, z, -np.inf)
        zmax = zm.max(axis=1, keepdims=True)
        e = np.exp(zm - zmax)
        s = e / e.sum(axis=1, keepdims=True)  # softmax over the reduced positions
        el = np.where(lp, e, 0.0)
        q = el / el.sum(axis=1, keepdims=True)  # renormalised on the label positions
        f = np.sum(np.log(e.sum(axis=1)) - np.log(el.sum(axis=1))) / n
        g = np.einsum("nt,ntb->b", s - q, J) / n
        # Hessian: softmax covariance of the scores minus that on the label positions (the
        # latter is 0: all label positions hold the same token, so equal Jacobian rows).
        Js = np.einsum("nt,ntb->nb", s, J)
        Jq = np.einsum("nt,ntb->nb", q, J)
        H = (
            np.einsum("nt,ntb,ntc->bc", s, J, J)
            - np.einsum("nb,nc->bc", Js, Js)
            - np.einsum("nt,ntb,ntc->bc", q, J, J)
            + np.einsum("nb,nc->bc", Jq, Jq)
        ) / n
        return f, g, H

    a = np.zeros(r)
    f, g, H = f_g_h(a)
    for _ in range(200):
        step = -np.linalg.solve(H, g)
        if -(g @ step) <= 1e-28:  # Newton decrement^2: converged to machine precision
            break
        t = 1.0
        while True:  # Armijo backtracking (objective convex, Newton direction descends)
            f_new, g_new, H_new = f_g_h(a + t * step)
            if f_new <= f + 1e-4 * t * (g @ step) or t < 1e-10:
                break
            t *= 0.5
        if t < 1e-10:  # no further decrease representable in floating point
            break
        a, f, g, H = a + t * step, f_new, g_new, H_new
    if not np.linalg.norm(g) <= 1e-9:
        raise SolverError(f"W^fin Newton did not converge (|grad| = {np.linalg.norm(g):.2e})")
    return (a @ B).reshape(d, d)


def finite_component_cvxpy(E, tokens, labels, *, graphs=None) -> NDArray[np.float64]:
    """Reference W^fin: token-level log-sum-exp on S_fin coordinates with cvxpy + Clarabel.

    Written as ``log_sum_exp(z + log m) - z_y - log m_y`` (DCP); ``-log_sum_exp(label scores)`` is
    not DCP.
    """
    import cvxpy as cp

    E = check_embeddings(E)
    d = E.shape[1]
    tok, lab, mask, cyc, B, J, label_pos = _reduced_problem(E, tokens, labels, graphs)
    r = B.shape[0]
    if r == 0 or not cyc.any():
        return np.zeros((d, d))
    a = cp.Variable(r)
    terms = []
    for i in np.flatnonzero(cyc):
        toks, first, counts = np.unique(tok[i][mask[i]], return_index=True, return_counts=True)
        Ji = J[i][mask[i]][first]  # (n_tokens, r): one row per distinct reduced token
        z = Ji @ a
        iy = int(np.flatnonzero(toks == lab[i])[0])
        terms.append(cp.log_sum_exp(z + np.log(counts)) - z[iy] - np.log(counts[iy]))
    prob = cp.Problem(cp.Minimize(cp.sum(cp.hstack(terms)) / len(lab)))
    prob.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    if prob.status != "optimal":
        raise SolverError(f"cvxpy/Clarabel returned status {prob.status!r} for W^fin")
    return (np.asarray(a.value) @ B).reshape(d, d)


# --------------------------------------------------------------------------------------------
# regularization path
# --------------------------------------------------------------------------------------------
def regularization_path(E, tokens, labels, radii, *, solver: str = "CLARABEL"):
    r"""Regularization path :math:`W_R = \arg\min_{\|W\|_F \le R} L(W)` (§2.8), shape (len, d, d).

    ``L`` depends on W only through its projection on ``S``; W is parametrised in an orthonormal
    basis of ``S`` so the minimiser is unique.  Log-loss at token level,
    ``log_sum_exp(z + log m) - z_y - log m_y`` (cvxpy + Clarabel, exponential cone).
    For very large R (>~ 50) the objective is flat to machine precision and the solver stops
    short of the constraint; use R <= 30 (spec §2.8).
    """
    import cvxpy as cp

    E = check_embeddings(E)
    K, d = E.shape
    tok, lab = check_tokens(tokens, labels, K)
    B = subspaces(E, tok, lab).S
    X = E[tok]
    J = np.einsum("ntd,bde,ne->ntb", X, B.reshape(-1, d, d), X[:, -1])
    c = cp.Variable(B.shape[0])
    R = cp.Parameter(nonneg=True)
    terms = []
    for i in range(len(lab)):
        toks, first, counts = np.unique(tok[i], return_index=True, return_counts=True)
        z = J[i][first] @ c
        iy = int(np.flatnonzero(toks == lab[i])[0])
        terms.append(cp.log_sum_exp(z + np.log(counts)) - z[iy] - np.log(counts[iy]))
    prob = cp.Problem(cp.Minimize(cp.sum(cp.hstack(terms)) / len(lab)), [cp.norm(c, 2) <= R])
    out = []
    for rad in radii:
        R.value = float(rad)
        with warnings.catch_warnings():
            # Clarabel's tight gap tolerance is occasionally out of reach (status
            # "optimal_inaccurate"); such a point is accepted below only if it is feasible.
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            prob.solve(solver=solver, **(CLARABEL_TIGHT if solver == "CLARABEL" else {}))
        ok = prob.status == "optimal" or (
            prob.status == "optimal_inaccurate"
            and np.linalg.norm(c.value) <= float(rad) * (1 + 1e-6)
        )
        if not ok:
            raise SolverError(f"regularization path: {solver} status {prob.status!r} at R={rad}")
        out.append((np.asarray(c.value) @ B).reshape(d, d))
    return np.array(out)
