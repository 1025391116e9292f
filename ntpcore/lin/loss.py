r"""Cross-entropy of next-token prediction with a linear decoder [lin, eq. (2)].

With logits :math:`L = W\bar H` (V, m), column softmax :math:`\Sigma = \mathbb S(L)` and
:math:`\Pi = \operatorname{diag}(\hat\pi)`:

.. math::
    \mathrm{CE}(W) = \sum_j \hat\pi_j\big(\operatorname{logsumexp}(L_{:,j})
        - \hat p_j^\top L_{:,j}\big),\qquad
    \nabla\mathrm{CE}(W) = (\Sigma - P)\,\Pi\,\bar H^\top .

:math:`\mathrm{CE}(W) = H + \sum_j\hat\pi_j\,\mathrm{KL}(\hat p_j\,\|\,\mathbb S(W\bar h_j))`,
so CE is bounded below by the empirical entropy H and, because the softmax is strictly
positive, never reaches it at a finite W when some support is not full.

The logit-space CE, its gradient and the softmax are the shared ones of
:mod:`ntpcore.core.logits` (``ce``, ``ce_grad``, ``ce_excess`` of logits ``L``, as on every
paper's face); the functions here take the decoder ``W`` and the embeddings ``H`` and carry
the suffix ``_W``: :func:`ce_W` is ``ce(W @ H, P, pi)``, :func:`ce_grad_W` its gradient in
``W``, :func:`ce_excess_W` the excess.  :func:`loss_and_grad` skips validation, and trainers
build it once after checking the data (see :func:`make_loss_grad`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core import logits
from ntpcore.core.logits import (
    ce_grad_unchecked,
    ce_unchecked,
    log_softmax,
    softmax,
    support_of,
)
from ntpcore.core.validate import as_float_array
from ntpcore.errors import DataError
from ntpcore.lin.data import check_data

Array = NDArray[np.float64]


def _check_W(W: ArrayLike, V: int, d: int) -> Array:
    return as_float_array(W, "W", ndim=2, shape=(V, d))


def loss_and_grad(W: Array, H: Array, P: Array, pi: Array) -> tuple[float, Array]:
    r"""``(CE(W), grad CE(W))`` on validated float64 arrays: the trainers' inner loop."""
    loss, G = ce_grad_unchecked(W @ H, P, pi)  # G: (V, m)
    return loss, G @ H.T


def ce_W(W: ArrayLike, H: ArrayLike, P: ArrayLike, pi: ArrayLike | None = None) -> float:
    """CE loss of eq. (2); ``pi=None`` means uniform context frequencies."""
    H, P, pi = check_data(H, P, pi)
    W = _check_W(W, P.shape[0], H.shape[0])
    return ce_unchecked(W @ H, P, pi)


def ce_grad_W(W: ArrayLike, H: ArrayLike, P: ArrayLike, pi: ArrayLike | None = None) -> Array:
    r"""The gradient :math:`(\Sigma - P)\Pi\bar H^\top` (V, d) of CE at W; the chain rule
    through the logits :math:`W\bar H` of :func:`ntpcore.core.logits.ce_grad`."""
    H, P, pi = check_data(H, P, pi)
    W = _check_W(W, P.shape[0], H.shape[0])
    return loss_and_grad(W, H, P, pi)[1]


def kl_terms(W: ArrayLike, H: ArrayLike, P: ArrayLike) -> Array:
    r"""Per-context :math:`\mathrm{KL}(\hat p_j\,\|\,\mathbb S(W\bar h_j))`, shape (m,)."""
    H, P, _ = check_data(H, P, None)
    W = _check_W(W, P.shape[0], H.shape[0])
    lq = log_softmax(W @ H)
    S = support_of(P)
    logp = np.log(np.where(S, P, 1.0))
    return np.where(S, P * (logp - lq), 0.0).sum(axis=0)


def ce_excess_W(W: ArrayLike, H: ArrayLike, P: ArrayLike, pi: ArrayLike | None = None) -> float:
    r""":math:`\mathrm{CE}(W) - \mathcal H = \sum_j\hat\pi_j\mathrm{KL}_j`, without cancellation.

    The excess of the logits :math:`W\bar H` (:func:`ntpcore.core.logits.ce_excess`).
    """
    H, P, pi = check_data(H, P, pi)
    W = _check_W(W, P.shape[0], H.shape[0])
    return logits.ce_excess(W @ H, P, pi)


def ce_F(W: ArrayLike, H: ArrayLike, P: ArrayLike, pi: ArrayLike | None = None) -> float:
    r"""The in-support loss of eq. (12), a lower bound of CE with :math:`\inf_F = H`.

    .. math::
        \mathrm{CE}_F(W) = \sum_j\hat\pi_j\sum_{z\in\mathcal S_j}\hat p_{j,z}
        \log\Big(1 + \sum_{z'\in\mathcal S_j, z'\neq z} e^{-(e_z-e_{z'})^\top W\bar h_j}\Big)

    i.e. the cross-entropy of the softmax restricted to each support.
    """
    H, P, pi = check_data(H, P, pi)
    W = _check_W(W, P.shape[0], H.shape[0])
    L = W @ H
    S = support_of(P)
    Ls = np.where(S, L, -np.inf)
    mx = Ls.max(axis=0)
    lse = mx + np.log(np.where(S, np.exp(Ls - mx), 0.0).sum(axis=0))
    return float(pi @ (lse - np.where(S, P * L, 0.0).sum(axis=0)))


def ce_hessian(W: ArrayLike, H: ArrayLike, P: ArrayLike, pi: ArrayLike | None = None) -> Array:
    r"""Dense Hessian of CE in row-major ``vec(W)`` (V*d, V*d).

    :math:`\nabla^2\mathrm{CE} = \sum_j\hat\pi_j(\operatorname{diag}(s_j) - s_js_j^\top)
    \otimes\bar h_j\bar h_j^\top`; only for small V*d (tests, smoothness constants).
    """
    H, P, pi = check_data(H, P, pi)
    V, d = P.shape[0], H.shape[0]
    W = _check_W(W, V, d)
    Sg = softmax(W @ H)
    out = np.zeros((V * d, V * d))
    for j in range(H.shape[1]):
        s = Sg[:, j]
        out += pi[j] * np.kron(np.diag(s) - np.outer(s, s), np.outer(H[:, j], H[:, j]))
    return out


def smoothness_bound(H: ArrayLike, pi: ArrayLike | None = None) -> float:
    r"""Upper bound :math:`\tfrac12\lambda_{\max}(\bar H\Pi\bar H^\top)` on the smoothness of CE.

    The Hessian is :math:`\sum_j\hat\pi_j(\operatorname{diag}(s_j)-s_js_j^\top)\otimes
    \bar h_j\bar h_j^\top` (:func:`ce_hessian`) and
    :math:`\lambda_{\max}(\operatorname{diag}(s)-ss^\top)\le 1/2`; the proof of [lin, Thm. 2]
    takes :math:`\eta\le 1/(2L)`.
    """
    H = as_float_array(H, "H", ndim=2)
    m = H.shape[1]
    pi = np.full(m, 1.0 / m) if pi is None else as_float_array(pi, "pi", shape=(m,))
    if np.any(pi < 0):
        raise DataError("pi has negative entries")
    return 0.5 * float(np.linalg.eigvalsh((H * pi) @ H.T)[-1])


def make_loss_grad(
    H: ArrayLike, P: ArrayLike, pi: ArrayLike | None = None
) -> Callable[[Array], tuple[float, Array]]:
    """Validate once and return ``W -> (CE(W), grad CE(W))`` for the trainers."""
    H, P, pi = check_data(H, P, pi)
    H = np.ascontiguousarray(H)
    shape = (P.shape[0], H.shape[0])

    def loss_grad(W: Array) -> tuple[float, Array]:
        if np.shape(W) != shape:
            raise DataError(f"W must have shape {shape} (V, d), got {np.shape(W)}")
        return loss_and_grad(W, H, P, pi)

    return loss_grad
