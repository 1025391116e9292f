r"""The weight-decay-regularised UFM solved to convergence (a ridge fit of the UFM), the limit
the trained UFM is compared with.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from ntpcore.core.logits import ce_grad_unchecked
from ntpcore.errors import SolverError
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.train.protocol import AdamWProtocol, TrainerConfig
from ntpcore.geo.train.torch_nets import ufm_init_arrays

__all__ = ["fit_ufm_ridge"]


def fit_ufm_ridge(
    ds: ContextDataset,
    d: int,
    lam: float,
    *,
    seed: int = 0,
    gtol: float = 1e-10,
    maxiter: int = 20000,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""A stationary point of the ridge-regularised NTP-UFM by L-BFGS (float64).

    .. math:: \min_{W,H}\ \CE(WH) + \tfrac{\lambda}{2}(\|W\|_F^2 + \|H\|_F^2)

    (book: ``geo-def-ufm``; mean loss: ``CE`` weighted by :math:`\hat\pi`).  For
    ``d >= min(V, m)`` every local minimum is global and :math:`L = WH` solves the convex
    problem :math:`\min_L \CE(L) + \lambda\|L\|_*` (book: ``geo-lem-nuclear``); the tests
    certify this with the subgradient condition
    :math:`-\nabla\CE(L)/\lambda \in \partial\|L\|_*`.

    Returns ``W`` (V, d) and ``H`` (d, m).
    """
    from scipy.optimize import minimize

    V, m = ds.V, ds.m
    P, pi = ds.P, ds.pi
    nW = V * d
    W0, H0 = ufm_init_arrays(ds, TrainerConfig(AdamWProtocol(dim=d, init_seed=seed)))

    def fun(theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        W, H = theta[:nW].reshape(V, d), theta[nW:].reshape(d, m)
        ce, G = ce_grad_unchecked(W @ H, P, pi)  # G: (V, m) gradient of CE in L
        f = ce + 0.5 * lam * float(theta @ theta)
        g = np.concatenate([(G @ H.T + lam * W).ravel(), (W.T @ G + lam * H).ravel()])
        return f, g

    res = minimize(
        fun,
        np.concatenate([W0.ravel(), H0.ravel()]),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": maxiter, "gtol": gtol, "ftol": 0.0, "maxcor": 30},
    )
    # L-BFGS may stop with a line-search message at a point that is already stationary to
    # machine precision; the certificate is the gradient, not the message.
    grad = float(np.abs(res.jac).max())
    if not res.success and grad > 1e3 * gtol:
        raise SolverError(
            f"fit_ufm_ridge: L-BFGS stopped without a stationary point ({res.message}; "
            f"largest gradient entry {grad:.1e} > {1e3 * gtol:g}); raise maxiter"
        )
    theta = res.x
    return theta[:nW].reshape(V, d).copy(), theta[nW:].reshape(d, m).copy()
