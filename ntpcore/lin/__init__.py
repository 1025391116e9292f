r"""Implicit optimization bias of NTP in linear models (paper key ``lin``).

Thrampoulidis, *Implicit Optimization Bias of Next-Token Prediction in Linear Models*,
NeurIPS 2024 (arXiv:2402.18551v2).

Conventions (all float64): embeddings ``H`` (d, m) as columns, next-token distributions
``P`` (V, m) as columns summing to 1, supports ``P > 0``, context frequencies ``pi`` (m,),
decoder ``W`` (V, d), logits ``W @ H``.

The mathematics lives in

* :mod:`ntpcore.lin.data`      training sets, the toy of Figs. 1-2, the synthetic set of A.2
* :mod:`ntpcore.lin.loss`      CE (eq. 2), its gradient and Hessian, CE_F (eq. 12), entropy
* :mod:`ntpcore.lin.subspace`  the subspace F (eq. 5), projections, W* (Def. 1, eq. 4)
* :mod:`ntpcore.lin.svm`       NTP-separability (Def. 2) and the NTP-SVM (Def. 3)
* :mod:`ntpcore.lin.regpath`   the regularization path (eq. 8, Theorem 1)
* :mod:`ntpcore.core.optim`         GD / NGD / Adam (Theorem 2 and App. A.2)

and this module is the public face: it re-exports them and adds the training metrics.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.optim import Trajectory, init_weights, train
from ntpcore.errors import IncompatibleError
from ntpcore.lin.data import (
    TOY_ANGLES_DEG,
    TOY_ENTROPY,
    TOY_SUPPORTS,
    NTPData,
    check_data,
    entropy,
    make_data,
    make_synthetic,
    make_toy,
    toy_embeddings,
)
from ntpcore.lin.loss import (
    ce,
    ce_F,
    ce_gap,
    ce_grad,
    ce_hessian,
    kl_terms,
    make_loss_grad,
    smoothness_bound,
)
from ntpcore.lin.regpath import reg_path, reg_path_cvxpy, ridge_solution
from ntpcore.lin.subspace import (
    DataSubspace,
    cos,
    data_subspace,
    finite_component,
    finite_component_info,
    row_space_projector,
)
from ntpcore.lin.svm import (
    SVMResult,
    is_ntp_separable,
    margins,
    ntp_svm,
    ntp_svm_solve,
    separability_lp,
)

__all__ = [
    "TOY_ANGLES_DEG",
    "TOY_ENTROPY",
    "TOY_SUPPORTS",
    "DataSubspace",
    "NTPData",
    "SVMResult",
    "Trajectory",
    "ce",
    "ce_F",
    "ce_gap",
    "ce_grad",
    "ce_hessian",
    "cos",
    "data_subspace",
    "entropy",
    "finite_component",
    "finite_component_info",
    "init_weights",
    "is_compatible",
    "is_ntp_separable",
    "kl_terms",
    "make_data",
    "make_loss_grad",
    "make_synthetic",
    "make_toy",
    "margins",
    "ntp_svm",
    "ntp_svm_solve",
    "proj_F",
    "proj_perp",
    "reg_path",
    "reg_path_cvxpy",
    "ridge_solution",
    "row_space_projector",
    "separability_lp",
    "smoothness_bound",
    "solution_pair",
    "toy_embeddings",
    "train",
    "train_metrics",
    "train_ntp",
]

Array = NDArray[np.float64]


def proj_F(W: ArrayLike, H: ArrayLike, P: ArrayLike) -> Array:
    """Orthogonal projection of W onto the data subspace F of (H, supp P) (eq. 5)."""
    H, P, _ = check_data(H, P)
    return data_subspace(H, P > 0).project(W)


def proj_perp(W: ArrayLike, H: ArrayLike, P: ArrayLike) -> Array:
    """Orthogonal projection of W onto the complement of F."""
    H, P, _ = check_data(H, P)
    return data_subspace(H, P > 0).project_perp(W)


def is_compatible(H: ArrayLike, P: ArrayLike) -> bool:
    """True iff the data are NTP_H-compatible (Def. 1): eq. (4) has a solution."""
    try:
        finite_component(H, P)
    except IncompatibleError:
        return False
    return True


def solution_pair(H: ArrayLike, P: ArrayLike, *, solver: str = "auto") -> dict:
    """W*, W^mm, the subspace F and the SVM record in one call (the objects of Thm. 2)."""
    H, P, _ = check_data(H, P)
    fc = finite_component_info(H, P)
    svm = ntp_svm_solve(H, P > 0, solver=solver)
    return {
        "W_star": fc["W_star"],
        "W_mm": svm.W_mm,
        "F": fc["F"],
        "svm": svm,
        "compat_residual": fc["residual"],
    }


def train_metrics(
    H: ArrayLike,
    P: ArrayLike,
    pi: ArrayLike | None,
    W_star: Array,
    W_mm: Array,
    F: DataSubspace,
) -> Callable[[Array], dict[str, float]]:
    r"""Metrics of Figs. 1, 4, 5 for an iterate W.

    ``gap`` CE - H; ``cos`` cos(W, W^mm); ``cos_corr`` cos(W - W*, W^mm) (the paper's
    "corrected" iterate); ``cos_perp`` cos(P_perp W, W^mm); ``dist_F`` ||P_F W - W*||;
    ``rel_dist_F`` dist_F / ||W*||; ``norm_perp`` ||P_perp W||.
    """
    H, P, pi = check_data(H, P, pi)
    ns = float(np.linalg.norm(W_star))
    S = P > 0
    logP = np.log(np.where(S, P, 1.0))

    def metrics(W: Array) -> dict[str, float]:
        L = W @ H
        mx = L.max(axis=0)
        lq = L - (mx + np.log(np.exp(L - mx).sum(axis=0)))
        gap = float(pi @ np.where(S, P * (logP - lq), 0.0).sum(axis=0))
        WF = F.project(W)
        Wp = W - WF
        dist = float(np.linalg.norm(WF - W_star))
        return {
            "gap": gap,
            "cos": cos(W, W_mm),
            "cos_corr": cos(W - W_star, W_mm),
            "cos_perp": cos(Wp, W_mm),
            "dist_F": dist,
            "rel_dist_F": dist / ns if ns > 0 else dist,
            "norm_perp": float(np.linalg.norm(Wp)),
        }

    return metrics


def train_ntp(
    data: NTPData,
    *,
    optimizer: str = "gd",
    eta: float = 0.5,
    n_steps: int = 10_000,
    init: str = "lecun",
    init_seed: int = 0,
    record_steps: ArrayLike | None = None,
    betas: tuple[float, float] = (0.9, 0.99),
    eps: float = 1e-8,
    pair: dict | None = None,
    progress: bool = False,
) -> Trajectory:
    """Train the linear decoder on ``data`` and record the metrics of :func:`train_metrics`.

    ``init`` is ``"lecun"`` (N(0, 1/d), App. A.2) or ``"zero"`` (the checklist's choice);
    ``pair`` may pass a precomputed :func:`solution_pair`.
    """
    pair = pair or solution_pair(data.H, data.P)
    W0 = init_weights((data.V, data.d), init, init_seed)
    met = train_metrics(data.H, data.P, data.pi, pair["W_star"], pair["W_mm"], pair["F"])
    return train(
        make_loss_grad(data.H, data.P, data.pi),
        W0,
        optimizer=optimizer,
        eta=eta,
        n_steps=n_steps,
        record_steps=record_steps,
        metrics=met,
        betas=betas,
        eps=eps,
        progress=progress,
    )
