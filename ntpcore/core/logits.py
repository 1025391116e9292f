r"""Logits and supports: the quantities all three papers share, defined once.

Orientation: logits ``L``, probabilities ``P`` and supports ``S`` are ``(V, m)`` -- rows are
words (next tokens), columns the ``m`` distinct contexts; ``pi`` (m,) are the context
frequencies :math:`\hat\pi_j`.  With :math:`\mathcal S_j = \{z : \hat p_{j,z} > 0\}`:

* support matrix :math:`S = [\hat p_{j,z} > 0]` (:func:`support_matrix`);
* empirical conditional entropy
  :math:`\mathcal H = -\sum_j\hat\pi_j\sum_z\hat p_{j,z}\log\hat p_{j,z}`, the infimum of the
  NTP loss [lin, eq. (3)], [geo, Sec. 2] (:func:`entropy`);
* NTP cross-entropy :math:`\mathrm{CE}(L) = \sum_j\hat\pi_j[\mathrm{LSE}(\ell_j) -
  \hat p_j^\top\ell_j]` [lin, eq. (2)], [geo, eq. (1)] (:func:`ce`) and its gradient
  :math:`(Q(L) - P)\,\mathrm{diag}(\hat\pi)` with :math:`Q = \mathrm{softmax}` column-wise;
* the excess :math:`\mathrm{CE}(L) - \mathcal H = \sum_j\hat\pi_j
  \mathrm{KL}(\hat p_j\,\|\,\mathrm{softmax}(\ell_j))`, computed without cancellation
  (:func:`ce_excess`, :func:`ce_excess_grad`);
* the in-support subspace :math:`F = \mathrm{span}\{(e_z - e_{z'})e_j^\top : z, z' \in
  \mathcal S_j\}` of logit space and its orthogonal projection (:func:`project_F`): centre
  each column on its support, zero elsewhere [geo, Sec. 2].

The linear paper's loss is ``ce(W @ H, P, pi)``; the geometry paper works in logit space
directly; the attention paper's losses are per-sequence instances of the same expressions.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.validate import as_float_array, as_prob_matrix, as_support
from ntpcore.errors import DataError

__all__ = [
    "ce",
    "ce_excess",
    "ce_excess_grad",
    "ce_grad",
    "context_weights",
    "entropy",
    "log_softmax",
    "project_F",
    "softmax",
    "support_matrix",
]

Array = NDArray[np.float64]


def support_of(P: Array) -> NDArray[np.bool_]:
    """The support pattern ``S = P > 0`` (V, m) of a probability matrix already validated:
    the one place the package reads a support from probabilities."""
    return P > 0


def support_matrix(P: ArrayLike, name: str = "P") -> NDArray[np.bool_]:
    """Support matrix ``S = P > 0`` (V, m) of a probability matrix, validated first."""
    return support_of(as_prob_matrix(P, name))


def context_weights(pi: ArrayLike | None, m: int) -> Array:
    r"""Context frequencies :math:`\hat\pi` (m,): uniform when ``None``, else validated."""
    if pi is None:
        return np.full(m, 1.0 / m)
    arr = as_float_array(pi, "pi", ndim=1, shape=(m,))
    if np.any(arr < 0) or abs(arr.sum() - 1.0) > 1e-8:
        raise DataError("pi must be a probability vector over the m contexts")
    return arr


def log_softmax(L: Array) -> Array:
    """Column-wise log-softmax of a (V, m) logit matrix (stable)."""
    mx = L.max(axis=0, keepdims=True)
    Z = L - mx
    return Z - np.log(np.exp(Z).sum(axis=0, keepdims=True))


def softmax(L: Array) -> Array:
    """Column-wise softmax of a (V, m) logit matrix (stable)."""
    Z = np.exp(L - L.max(axis=0, keepdims=True))
    return Z / Z.sum(axis=0, keepdims=True)


def entropy(P: ArrayLike, pi: ArrayLike | None = None) -> float:
    r"""Empirical conditional entropy :math:`\mathcal H` in nats.

    The infimum of the CE loss when the data are NTP-compatible and NTP-separable
    [lin, Sec. 2, Prop. 1].
    """
    P = as_prob_matrix(P, "P")
    pi = context_weights(pi, P.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        S = support_of(P)
        plogp = np.where(S, P * np.log(np.where(S, P, 1.0)), 0.0)
    return float(-(plogp.sum(axis=0) @ pi))


def ce_unchecked(L: Array, P: Array, pi: Array) -> float:
    """:func:`ce` on validated float64 arrays (the inner loop of the trainers)."""
    mx = L.max(axis=0)
    lse = mx + np.log(np.exp(L - mx).sum(axis=0))
    return float(pi @ (lse - (P * L).sum(axis=0)))


def ce_grad_unchecked(L: Array, P: Array, pi: Array) -> tuple[float, Array]:
    r"""``(CE(L), (Q(L) - P) diag(pi))`` on validated float64 arrays."""
    mx = L.max(axis=0)
    E = np.exp(L - mx)
    Zs = E.sum(axis=0)
    lse = mx + np.log(Zs)
    loss = float(pi @ (lse - (P * L).sum(axis=0)))
    return loss, (E / Zs - P) * pi  # (V, m)


def ce(L: ArrayLike, P: ArrayLike, pi: ArrayLike | None = None) -> float:
    r"""NTP cross-entropy :math:`\mathrm{CE}(L)` of a (V, m) logit matrix."""
    P = as_prob_matrix(P, "P")
    L = as_float_array(L, "L", shape=P.shape)
    return ce_unchecked(L, P, context_weights(pi, P.shape[1]))


def ce_grad(L: ArrayLike, P: ArrayLike, pi: ArrayLike | None = None) -> Array:
    r"""Gradient :math:`(Q(L) - P)\,\mathrm{diag}(\hat\pi)` of :func:`ce`; columns sum to 0."""
    P = as_prob_matrix(P, "P")
    L = as_float_array(L, "L", shape=P.shape)
    return ce_grad_unchecked(L, P, context_weights(pi, P.shape[1]))[1]


def ce_excess_grad(L: Array, P: Array, pi: Array) -> tuple[float, Array, Array]:
    r"""Stable ``(CE(L) - H, grad CE(L), Q(L))`` on validated arrays.

    Writing :math:`\mathrm{LSE}_S` for the log-sum-exp over the support and
    :math:`\varepsilon_j = \sum_{v\notin\mathcal S_j} e^{\ell_{v,j} - \mathrm{LSE}_S}`,

    .. math:: \mathrm{KL}_j = \sum_{z\in\mathcal S_j}\hat p_{j,z}\big(\log\hat p_{j,z} -
              \ell_{z,j} + \mathrm{LSE}_S\big) + \log(1 + \varepsilon_j),

    so neither term cancels against :math:`\mathcal H` even when the excess is far below
    machine precision relative to CE (the off-support mass decays exponentially along the
    max-margin direction).
    """
    S = support_of(P)
    with np.errstate(divide="ignore"):
        logp = np.where(S, np.log(np.where(S, P, 1.0)), 0.0)
    L_on = np.where(S, L, -np.inf)
    mS = L_on.max(axis=0)
    e = np.exp(L_on - mS)  # 0 off the support
    Z = e.sum(axis=0)
    lse_S = mS + np.log(Z)
    s = e / Z  # softmax restricted to the support
    off = np.where(S, 0.0, np.exp(np.minimum(L - lse_S, 700.0)))
    eps = off.sum(axis=0)
    kl = np.where(S, P * (logp - (L - lse_S)), 0.0).sum(axis=0) + np.log1p(eps)
    shrink = eps / (1.0 + eps)
    q_minus_p = np.where(S, (s - P) - s * shrink, off / (1.0 + eps))
    Q = np.where(S, s, off) / (1.0 + eps)
    return float(kl @ pi), q_minus_p * pi[None, :], Q


def ce_excess(L: ArrayLike, P: ArrayLike, pi: ArrayLike | None = None) -> float:
    r""":math:`\mathrm{CE}(L) - \mathcal H`, computed without cancellation."""
    P = as_prob_matrix(P, "P")
    L = as_float_array(L, "L", shape=P.shape)
    return ce_excess_grad(L, P, context_weights(pi, P.shape[1]))[0]


def project_F(L: ArrayLike, S: ArrayLike) -> Array:
    r"""Orthogonal projection of logits onto :math:`F`: centre each column on its support.

    Column-wise because :math:`F` is a direct sum over contexts of the sum-zero vectors
    supported on :math:`\mathcal S_j`.
    """
    S = as_support(S)
    L = as_float_array(L, "L", shape=S.shape)
    k = S.sum(axis=0)
    mean = np.where(S, L, 0.0).sum(axis=0) / k
    return np.where(S, L - mean[None, :], 0.0)
