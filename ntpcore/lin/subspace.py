r"""The data subspace F, its projections and the finite component W* [lin, Def. 1, eq. (5)].

Generators.  For every context ``j`` fix an anchor :math:`z_j\in\mathcal S_j` (the smallest
in-support token).  The :math:`K = \sum_j (S_j - 1)` matrices

.. math::
    A_{(j,z')} = (e_{z_j} - e_{z'})\,\bar h_j^\top,\qquad z'\in\mathcal S_j\setminus\{z_j\},

span :math:`F` (eq. 5): every pairwise difference :math:`e_z - e_{z'}` inside a support is a
difference of two anchor differences, so the anchor form loses nothing.  Since
:math:`\langle A_{(j,z')}, W\rangle = (e_{z_j}-e_{z'})^\top W\bar h_j`, the compatibility
equations (4) read :math:`\mathcal A^\top(W) = b` with
:math:`b_{(j,z')} = \log(\hat p_{j,z_j}/\hat p_{j,z'})`.

Never forming the (V d x K) matrix.  The Gram matrix of the generators is
:math:`M = (E^\top E)\circ G_{\text{ctx},\text{ctx}}` with :math:`G = \bar H^\top\bar H` and
E the (V x K) matrix of the token differences.  Applying the generators to coefficients
:math:`\alpha` costs one (V, m) @ (m, d) product (scatter :math:`\alpha` into a (V, m)
matrix C, then :math:`W = C\bar H^\top`), and the adjoint is read off the logits
:math:`W\bar H`.  An orthonormal basis of F is :math:`\mathcal A\,\Gamma` with
:math:`\Gamma = U_r\Sigma_r^{-1}` from the eigen/singular decomposition of M (rank
tolerance ~1e-10 sigma_max, so rank-deficient embeddings are handled), whence

.. math::
    P_F(W) = \mathcal A\,\Gamma\Gamma^\top\mathcal A^\top(W),\qquad
    W^\star = \mathcal A\,\Gamma\Gamma^\top b = \operatorname{pinv}(\mathcal A^\top)\,b,

and the compatibility residual is :math:`\|b - U_rU_r^\top b\|` (zero iff (4) is solvable).
W* is the minimum-norm solution of (4), hence the unique solution lying in F (footnote 6).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.logits import support_of
from ntpcore.core.validate import as_float_array, as_support, check_number
from ntpcore.errors import DataError, IncompatibleError
from ntpcore.lin.data import check_embeddings_probs

Array = NDArray[np.float64]

#: Relative singular-value tolerance for the rank of the generator system of eq. (5), which
#: is rank-deficient when d < m or the embeddings are degenerate.
RANK_RTOL = 1e-10
#: Absolute tolerance on the compatibility residual (relative to max(1, ||b||)).
COMPAT_TOL = 1e-8


def anchor_tokens(S: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Anchor token :math:`z_j` of every context: the smallest in-support token id."""
    return np.argmax(S, axis=0).astype(np.int64)


def log_odds(P: Array, anchors: NDArray[np.int64], ctx: NDArray, tok: NDArray) -> Array:
    r""":math:`b_{(j,z')} = \log(\hat p_{j,z_j}/\hat p_{j,z'})` for the generators (ctx, tok)."""
    return np.log(P[anchors[ctx], ctx]) - np.log(P[tok, ctx])


def row_space_projector(H: ArrayLike, rtol: float = 1e-12) -> Array:
    r"""Orthogonal projector :math:`P_H` (d, d) onto span of the columns of H.

    GD leaves :math:`W(I-P_H)` unchanged since every gradient has its rows in span(H).
    """
    H = as_float_array(H, "H", ndim=2)
    rtol = check_number(rtol, "rtol", lo=0, hi=1, hi_open=True)
    U, s, _ = np.linalg.svd(H, full_matrices=False)
    r = int(np.sum(s > rtol * (s[0] if s.size else 0.0)))
    return U[:, :r] @ U[:, :r].T


@dataclass(frozen=True, eq=False)
class DataSubspace:
    r"""The subspace F of one support pattern and embedding matrix (see module docstring).

    Attributes
    ----------
    H : (d, m)           embeddings
    S : (V, m) bool      supports
    anchors : (m,)       anchor token per context
    ctx, tok : (K,)      generator k is (e_{anchors[ctx[k]]} - e_{tok[k]}) h_{ctx[k]}^T
    U : (K, r)           orthonormal eigenvectors of the generator Gram matrix M (rank r)
    sv : (r,)            singular values of the generator system (sqrt of M's eigenvalues)
    """

    H: Array
    S: NDArray[np.bool_]
    anchors: NDArray[np.int64]
    ctx: NDArray[np.int64]
    tok: NDArray[np.int64]
    U: Array
    sv: Array

    @property
    def V(self) -> int:
        return self.S.shape[0]

    @property
    def d(self) -> int:
        return self.H.shape[0]

    @property
    def n_generators(self) -> int:
        """K = sum_j (S_j - 1): the number of anchor equations in (4)."""
        return int(self.ctx.size)

    @property
    def dim(self) -> int:
        """dim F = rank of the generator system."""
        return int(self.sv.size)

    # -- generators ---------------------------------------------------------------------
    def apply(self, alpha: ArrayLike) -> Array:
        r""":math:`\mathcal A(\alpha) = \sum_k \alpha_k A_k`, shape (V, d)."""
        alpha = np.asarray(alpha, dtype=float)
        C = np.zeros(self.S.shape)
        np.add.at(C, (self.anchors[self.ctx], self.ctx), alpha)
        np.add.at(C, (self.tok, self.ctx), -alpha)
        return C @ self.H.T

    def adjoint(self, W: ArrayLike) -> Array:
        r""":math:`\mathcal A^\top(W)_k = \langle A_k, W\rangle`, shape (K,)."""
        L = np.asarray(W, dtype=float) @ self.H  # (V, m)
        return L[self.anchors[self.ctx], self.ctx] - L[self.tok, self.ctx]

    # -- projections --------------------------------------------------------------------
    def _check(self, W: ArrayLike) -> Array:
        return as_float_array(W, "W", ndim=2, shape=(self.V, self.d))

    def coords(self, W: ArrayLike) -> Array:
        """Coordinates of P_F(W) in the orthonormal basis of F, shape (r,)."""
        return (self.U.T @ self.adjoint(self._check(W))) / self.sv

    def project(self, W: ArrayLike) -> Array:
        """Orthogonal projection P_F(W) (V, d)."""
        return self.apply(self.U @ (self.coords(W) / self.sv))

    def project_perp(self, W: ArrayLike) -> Array:
        """Orthogonal projection onto the complement, W - P_F(W)."""
        W = self._check(W)
        return W - self.project(W)

    def basis(self) -> Array:
        """Orthonormal basis of F as a (r, V*d) array (row-major vec); small problems only."""
        G = self.U / self.sv  # (K, r)
        return np.stack([self.apply(G[:, i]).ravel() for i in range(self.dim)])

    # -- the finite component -----------------------------------------------------------
    def solve(self, b: ArrayLike) -> tuple[Array, float]:
        r"""Minimum-norm solution of :math:`\mathcal A^\top(W) = b` and its residual norm."""
        b = np.asarray(b, dtype=float)
        ub = self.U.T @ b
        W = self.apply(self.U @ (ub / self.sv**2))
        resid = float(np.linalg.norm(b - self.U @ ub))
        return W, resid


def data_subspace(H: ArrayLike, S: ArrayLike, *, rtol: float = RANK_RTOL) -> DataSubspace:
    """Build the generator system of F for embeddings ``H`` (d, m) and supports ``S`` (V, m)."""
    H = as_float_array(H, "H", ndim=2)
    S = as_support(S, "S")
    rtol = check_number(rtol, "rtol", lo=0, hi=1, hi_open=True)
    if S.shape[1] != H.shape[1]:
        raise DataError(f"H has {H.shape[1]} columns but S has {S.shape[1]}")
    anchors = anchor_tokens(S)
    nonanchor = S.copy()
    nonanchor[anchors, np.arange(S.shape[1])] = False
    tok, ctx = np.nonzero(nonanchor)  # row-major: grouped by token; order is irrelevant
    order = np.lexsort((tok, ctx))
    tok, ctx = tok[order].astype(np.int64), ctx[order].astype(np.int64)
    K = ctx.size
    if K == 0:
        empty = np.zeros((0, 0))
        return DataSubspace(H, S, anchors, ctx, tok, empty, np.zeros(0))
    # Gram matrix of the generators: <A_k, A_l> = (e_ak - e_tk)^T (e_al - e_tl) * G[ck, cl].
    a = anchors[ctx]
    EtE = (
        (a[:, None] == a[None, :]).astype(float)
        - (a[:, None] == tok[None, :])
        - (tok[:, None] == a[None, :])
        + (tok[:, None] == tok[None, :])
    )
    G = H.T @ H
    M = EtE * G[np.ix_(ctx, ctx)]
    lam, U = np.linalg.eigh(M)
    lam = lam[::-1]
    U = U[:, ::-1]
    # sqrt(lambda) are the singular values of the generator system; eigh resolves them
    # to ~sqrt(eps * lambda_max), so the relative tolerance is applied on lambda.
    tol = max(rtol**2, 1e-13) * lam[0] if lam[0] > 0 else np.inf
    keep = lam > tol
    return DataSubspace(H, S, anchors, ctx, tok, U[:, keep], np.sqrt(lam[keep]))


def finite_component_info(H: ArrayLike, P: ArrayLike) -> dict:
    """W*, the compatibility residual and the subspace (see :func:`finite_component`)."""
    H, P = check_embeddings_probs(H, P)
    F = data_subspace(H, support_of(P))
    b = log_odds(P, F.anchors, F.ctx, F.tok)
    W, resid = F.solve(b)
    return {"W_star": W, "residual": resid, "rhs_norm": float(np.linalg.norm(b)), "F": F}


def finite_component(H: ArrayLike, P: ArrayLike) -> Array:
    r"""The finite component :math:`W^\star` (V, d): the unique solution in F of eq. (4).

    .. math::
        (e_z - e_{z'})^\top W\bar h_j = \log(\hat p_{j,z}/\hat p_{j,z'})
        \quad\forall j,\ z\neq z'\in\mathcal S_j .

    Raises
    ------
    DataError          bad shapes, NaN, P columns not in the simplex
    IncompatibleError  if the data are not NTP_H-compatible (eq. 4 has no solution): the
        residual of the least-squares solution exceeds 1e-8 max(1, ||b||).
    """
    return require_compatible(finite_component_info(H, P))["W_star"]


def require_compatible(info: dict) -> dict:
    """``info`` of :func:`finite_component_info`, or IncompatibleError if (4) has no solution."""
    tol = COMPAT_TOL * max(1.0, info["rhs_norm"])
    if info["residual"] > tol:
        F = info["F"]
        raise IncompatibleError(
            "the data are not NTP_H-compatible: the in-support log-odds equations (4) have "
            f"no solution (least-squares residual {info['residual']:.3g} > {tol:.1g}; "
            f"rank {F.dim} < {F.n_generators} equations). This happens when the embeddings "
            "of contexts that share words are linearly dependent (e.g. d < m)."
        )
    return info


def is_compatible(H: ArrayLike, P: ArrayLike) -> bool:
    """True iff the data are NTP_H-compatible (Def. 1): eq. (4) has a solution."""
    try:
        finite_component(H, P)
    except IncompatibleError:
        return False
    return True


def project_F_W(W: ArrayLike, H: ArrayLike, S: ArrayLike) -> Array:
    """Orthogonal projection of W onto the data subspace F of (H, S) (eq. 5); S is the
    support pattern (V, m), as for :func:`ntpcore.core.logits.project_F` in logit space."""
    return data_subspace(as_float_array(H, "H", ndim=2), as_support(S, "S")).project(W)


def project_perp_W(W: ArrayLike, H: ArrayLike, S: ArrayLike) -> Array:
    """Orthogonal projection of W onto the complement of F (arguments as :func:`project_F_W`)."""
    return data_subspace(as_float_array(H, "H", ndim=2), as_support(S, "S")).project_perp(W)
