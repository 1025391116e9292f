r"""Independent builds of the self-attention paper's objects (key ``att``), for the checks.

Every object a figure plots or measures is built a second time here from the raw data (the
embeddings ``E``, the token ids and the labels), by code that shares nothing with the room's
builders, so that a bug in a builder cannot pass both:

* the token-priority graphs :math:`G^{(k)}` (book ``att-def-tpg``) as a boolean adjacency
  array filled by numpy from the raw sequences (the room uses networkx), their SCCs by
  :func:`scipy.sparse.csgraph.connected_components` (the room: networkx), reachability by
  breadth-first search (:func:`scipy.sparse.csgraph.breadth_first_order`, the room: repeated
  squaring) and the priority levels by relaxation (book ``att-def-scc``);
* the Graph-SVM :math:`W^{\mathrm{svm}}` (book ``att-def-graph-svm``) by cvxpy + Clarabel on
  one constraint per edge of that adjacency (the room: an active-set NNLS on a reduced system);
* the cyclic subspace :math:`S_\mathrm{fin}` (book ``att-def-subspaces``) from those SCCs by a
  pivoted QR, and :math:`W^{\mathrm{fin}}` (book ``att-def-wfin``) by Newton's method on the
  reduced loss written in torch and differentiated by autograd (the room: closed-form
  gradient and Hessian in numpy);
* the metrics of the figures (correlations, projections, attention masses, losses) in plain
  numpy from their definitions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import torch
from numpy.typing import NDArray
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components

from ntpcore.errors import InfeasibleError, SolverError

__all__ = [
    "TIGHT",
    "Graphs",
    "attention",
    "components",
    "constraint_rows",
    "corr",
    "finite_component",
    "graph_svm",
    "graphs",
    "graphs_of",
    "log_loss",
    "reduced_data",
    "span_basis",
]

#: Clarabel at test-grade accuracy (the defaults stop at ~1e-5 relative error here)
TIGHT = {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-11, "tol_ktratio": 1e-9}


# ----------------------------------------------------------------------------- graphs
@dataclass(frozen=True)
class Graphs:
    """The K token-priority graphs of a dataset, built from the raw sequences.

    Attributes
    ----------
    adj : (K, K, K) bool    ``adj[k, i, j]``: the edge ``i -> j`` of :math:`G^{(k)}`
    comp : (K, K) int       ``comp[k, j]``: the SCC of token ``j`` in :math:`G^{(k)}` (scipy's
                            labels, in no particular order)
    reach : (K, K, K) bool  ``reach[k, i, j]``: ``j`` reachable from ``i`` (reflexive)
    level : (K, K) int      priority level of the SCC of ``j``: longest path to a sink of the
                            condensation
    """

    adj: NDArray[np.bool_]
    comp: NDArray[np.int64]
    reach: NDArray[np.bool_]
    level: NDArray[np.int64]

    @property
    def K(self) -> int:
        return int(self.adj.shape[0])

    def same(self, k: int) -> NDArray[np.bool_]:
        """(K, K): pairs in one SCC of :math:`G^{(k)}`."""
        return self.comp[k][:, None] == self.comp[k][None, :]

    def partition(self, k: int) -> list[tuple[int, ...]]:
        """The SCCs of :math:`G^{(k)}` as sorted tuples, sorted."""
        c = self.comp[k]
        return sorted(tuple(np.flatnonzero(c == v).tolist()) for v in np.unique(c))

    def cyclic(self, k: int) -> bool:
        """Whether :math:`G^{(k)}` has an SCC of two tokens or more."""
        return bool(np.bincount(self.comp[k]).max() > 1)


def graphs(tokens, labels, K: int) -> Graphs:
    """The TPGs of ``(tokens, labels)``: an edge ``y_i -> j`` in :math:`G^{(k_i)}` for every
    other token ``j`` of sequence ``i`` (nothing for a sample whose label is not in it)."""
    tok = np.asarray(tokens, dtype=np.int64)
    lab = np.asarray(labels, dtype=np.int64)
    adj = np.zeros((K, K, K), dtype=bool)
    for seq, y in zip(tok, lab, strict=True):
        if np.any(seq == y):
            adj[seq[-1], y, seq[seq != y]] = True
    return graphs_of(adj)


def graphs_of(adj) -> Graphs:
    """SCCs, reachability and priority levels of the graphs ``adj[k]`` (K, K, K) bool."""
    adj = np.asarray(adj, dtype=bool)
    K = adj.shape[0]
    comp = components(adj)
    reach = np.zeros((K, K, K), dtype=bool)
    level = np.zeros((K, K), dtype=np.int64)
    for k in range(K):
        M = csr_matrix(adj[k].astype(np.int8))
        for i in range(K):
            reach[k, i, breadth_first_order(M, i, directed=True, return_predecessors=False)] = True
        # longest path to a sink of the condensation, by relaxation along the edges between
        # SCCs (at most K rounds: a path of the condensation visits each SCC once)
        cross = adj[k] & (comp[k][:, None] != comp[k][None, :])
        for _ in range(K):
            up = np.where(cross, level[k][None, :] + 1, 0).max(axis=1)
            new = np.zeros(K, dtype=np.int64)
            np.maximum.at(new, comp[k], up)  # one level per SCC: its largest
            new = new[comp[k]]
            if np.array_equal(new, level[k]):
                break
            level[k] = new
    return Graphs(adj=adj, comp=comp, reach=reach, level=level)


def components(adj) -> NDArray[np.int64]:
    """(K, K): the SCC labels (scipy's) of every graph ``adj[k]`` of (K, K, K) bool."""
    adj = np.asarray(adj, dtype=bool)
    return np.array(
        [
            connected_components(csr_matrix(a.astype(np.int8)), directed=True, connection="strong")[
                1
            ]
            for a in adj
        ],
        dtype=np.int64,
    ).reshape(adj.shape[:2])


def reduced_data(tokens, labels, G: Graphs, anchor=None):
    """The reduced sequences of the finite component (book ``att-def-wfin``): ``mask`` (n, T)
    the positions whose token is in the SCC of ``anchor`` (default: the label) in
    :math:`G^{(k_i)}`, and ``cyclic`` (n,) the samples whose masked positions hold a second
    token."""
    tok = np.asarray(tokens, dtype=np.int64)
    a = np.asarray(labels if anchor is None else anchor, dtype=np.int64)
    k = tok[:, -1]
    mask = G.comp[k[:, None], tok] == G.comp[k, a][:, None]
    first = tok[np.arange(len(tok)), np.argmax(mask, axis=1)]
    cyclic = np.any(mask & (tok != first[:, None]), axis=1)
    return mask, cyclic


# ----------------------------------------------------------------------------- linear algebra
def _row(E, i: int, j: int, k: int) -> NDArray[np.float64]:
    """``vec((e_i - e_j) e_k^T)``, row-major."""
    return np.outer(E[i] - E[j], E[k]).ravel()


def constraint_rows(E, G: Graphs) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The Graph-SVM's constraints, one per edge ``i -> j`` of every :math:`G^{(k)}`:
    ``(A_eq, A_in)``, rows ``vec((e_i - e_j) e_k^T)`` for the edges inside an SCC (``= 0``) and
    between SCCs (``>= 1``)."""
    E = np.asarray(E, dtype=float)
    eq, ineq = [], []
    for k, i, j in zip(*np.nonzero(G.adj), strict=True):
        (eq if G.comp[k, i] == G.comp[k, j] else ineq).append(_row(E, i, j, k))
    p = E.shape[1] ** 2
    return np.array(eq).reshape(-1, p), np.array(ineq).reshape(-1, p)


def span_basis(rows: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row-orthonormal basis of the span of ``rows`` (pivoted QR, relative tolerance 1e-9)."""
    if rows.shape[0] == 0:
        return np.zeros((0, rows.shape[1]))
    Q, R, _ = scipy.linalg.qr(rows.T, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    rank = int(np.sum(diag > 1e-9 * diag[0]))
    return Q[:, :rank].T


def fin_basis(E, G: Graphs) -> NDArray[np.float64]:
    r"""Row-orthonormal basis of :math:`S_\mathrm{fin}`: the span of
    ``(e_i - e_j) e_k^T`` over every pair ``i, j`` in one SCC of :math:`G^{(k)}`."""
    E = np.asarray(E, dtype=float)
    rows = []
    for k in range(G.K):
        same = G.same(k) & ~np.eye(G.K, dtype=bool)
        rows += [_row(E, i, j, k) for i, j in zip(*np.nonzero(same), strict=True)]
    return span_basis(np.array(rows).reshape(-1, E.shape[1] ** 2))


def edge_basis(E, G: Graphs) -> NDArray[np.float64]:
    """Row-orthonormal basis of the edge span :math:`S` (every edge of every TPG)."""
    E = np.asarray(E, dtype=float)
    rows = [_row(E, i, j, k) for k, i, j in zip(*np.nonzero(G.adj), strict=True)]
    return span_basis(np.array(rows).reshape(-1, E.shape[1] ** 2))


def project(W, basis) -> NDArray[np.float64]:
    """Orthogonal projection of ``W`` (..., d, d) on the span of the rows of ``basis``."""
    W = np.asarray(W, dtype=float)
    w = W.reshape(*W.shape[:-2], -1)
    return (w @ basis.T @ basis).reshape(W.shape)


def corr(A, B) -> NDArray[np.float64]:
    r"""The papers' correlation :math:`\langle A, B\rangle / (\|A\| \|B\|)` over the last two
    axes (0 where a norm is 0)."""
    A, B = np.asarray(A, dtype=float), np.asarray(B, dtype=float)
    num = np.einsum("...ij,...ij->...", A, B)
    den = np.linalg.norm(A, axis=(-2, -1)) * np.linalg.norm(B, axis=(-2, -1))
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


# ----------------------------------------------------------------------------- solvers
def graph_svm(E, G: Graphs) -> NDArray[np.float64]:
    r""":math:`W^{\mathrm{svm}}` by cvxpy + Clarabel on :func:`constraint_rows`.

    Raises
    ------
    InfeasibleError  when Clarabel reports the constraints infeasible.
    """
    import cvxpy as cp

    E = np.asarray(E, dtype=float)
    d = E.shape[1]
    A_eq, A_in = constraint_rows(E, G)
    if A_in.shape[0] == 0:
        return np.zeros((d, d))
    w = cp.Variable(d * d)
    cons = [A_in @ w >= 1] + ([A_eq @ w == 0] if A_eq.shape[0] else [])
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w)), cons)
    prob.solve(solver=cp.CLARABEL, **TIGHT)
    if prob.status in ("infeasible", "infeasible_inaccurate"):
        raise InfeasibleError(f"independent Graph-SVM: Clarabel reports {prob.status}")
    if prob.status != "optimal":
        raise SolverError(f"independent Graph-SVM: Clarabel returned {prob.status!r}")
    return np.asarray(w.value).reshape(d, d)


def _torch_reduced_loss(E, tokens, labels, mask, keep, n):
    """The reduced log-loss as a torch function of ``W`` (d, d): for every kept sample,
    ``log sum_{masked t} e^{z_t} - log sum_{label t} e^{z_t}``, summed and divided by ``n``."""
    Et = torch.as_tensor(np.asarray(E, dtype=float))
    tok = torch.as_tensor(np.asarray(tokens)[keep])
    X = Et[tok]  # (c, T, d)
    xbar = X[:, -1]
    on_label = torch.as_tensor((np.asarray(tokens) == np.asarray(labels)[:, None])[keep])
    m = torch.as_tensor(np.asarray(mask)[keep])
    ninf = torch.tensor(-torch.inf, dtype=torch.float64)

    def loss(W):
        z = torch.einsum("ctd,de,ce->ct", X, W, xbar)
        top = torch.logsumexp(torch.where(m, z, ninf), dim=-1)
        lab = torch.logsumexp(torch.where(m & on_label, z, ninf), dim=-1)
        return (top - lab).sum() / n

    return loss


def finite_component(E, tokens, labels, G: Graphs) -> tuple[NDArray[np.float64], float]:
    r""":math:`W^{\mathrm{fin}}` and :math:`L_\star = L_\mathrm{fin}(W^{\mathrm{fin}})`: the
    minimiser on :math:`S_\mathrm{fin}` (:func:`fin_basis`) of the reduced log-loss of the
    cyclic samples (query: the original last token; divided by the full ``n``), by Newton's
    method in coordinates, gradient and Hessian by torch autograd, to rounding level (a
    gradient below 1e-9 at least)."""
    E = np.asarray(E, dtype=float)
    d = E.shape[1]
    B = fin_basis(E, G)
    mask, cyclic = reduced_data(tokens, labels, G)
    if B.shape[0] == 0 or not cyclic.any():
        return np.zeros((d, d)), 0.0
    loss = _torch_reduced_loss(E, tokens, labels, mask, cyclic, len(cyclic))
    Bt = torch.as_tensor(B.reshape(-1, d, d))

    def f(a):
        return loss(torch.einsum("b,bde->de", a, Bt))

    a = torch.zeros(B.shape[0], dtype=torch.float64)
    for _ in range(100):
        a_req = a.clone().requires_grad_(True)
        g = torch.autograd.grad(f(a_req), a_req)[0]
        H = torch.autograd.functional.hessian(f, a)
        step = torch.linalg.solve(H, -g)
        if float(g.norm()) <= 1e-13 or -float(g @ step) <= 1e-26:  # at rounding level
            break
        t, f0 = 1.0, float(f(a))
        while float(f(a + t * step)) > f0 + 1e-4 * t * float(g @ step) and t > 1e-10:
            t *= 0.5
        if t <= 1e-10:  # no decrease left in floating point
            break
        a = a + t * step
    if not float(g.norm()) <= 1e-9:
        raise SolverError(f"independent W^fin: Newton stopped at |grad| = {float(g.norm()):.1e}")
    return (a.numpy() @ B).reshape(d, d), float(f(a))


# ----------------------------------------------------------------------------- metrics
def attention(W, E, tokens, mask=None) -> NDArray[np.float64]:
    """Attention ``s`` (..., n, T) of ``W`` (..., d, d) on the sequences (softmax over the
    positions of ``mask``, default all), the last token as query."""
    E = np.asarray(E, dtype=float)
    X = E[np.asarray(tokens)]  # (n, T, d)
    z = np.einsum("ntd,...de,ne->...nt", X, np.asarray(W, dtype=float), X[:, -1])
    if mask is not None:
        z = np.where(mask, z, -np.inf)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def log_loss(W, E, tokens, labels) -> NDArray[np.float64]:
    r"""The log-loss :math:`\frac1n \sum_i -\log \sum_{t: x_{it} = e_{y_i}} s_{it}` of ``W``
    (..., d, d), written ``log(1 + Z_other / Z_label)`` (accurate when the loss is tiny)."""
    E = np.asarray(E, dtype=float)
    tok = np.asarray(tokens)
    X = E[tok]
    z = np.einsum("ntd,...de,ne->...nt", X, np.asarray(W, dtype=float), X[:, -1])
    on = tok == np.asarray(labels)[:, None]
    lse = np.logaddexp.reduce
    a = lse(np.where(on, -np.inf, z), axis=-1)
    b = lse(np.where(on, z, -np.inf), axis=-1)
    return np.mean(np.logaddexp(0.0, a - b), axis=-1)
