r"""Training the linear decoder and the metrics of Theorem 2 [lin, Lemma 2, Thm. 2].

Gradient descent :math:`W_{k+1} = W_k - \eta\nabla\mathrm{CE}(W_k)` on the loss of eq. (2)
(NGD and Adam of App. A.2 likewise, via :func:`ntpcore.core.optim.train`).  Under
NTP_H-compatibility (Def. 1) and NTP-separability (Def. 2):

* Lemma 2: :math:`\mathrm{CE}(W_k)\to\mathcal H` and :math:`\|W_k\|\to\infty`;
* Theorem 2: :math:`W_k/\|W_k\|\to W^{\mathrm{mm}}/\|W^{\mathrm{mm}}\|` (Def. 3) and
  :math:`P_F(W_k)\to W^\star` (Def. 1, eq. (5)), i.e.
  :math:`W_k\approx W^\star + \|P_\perp(W_k)\|\,\overline W^{\mathrm{mm}}`.

:func:`solution_pair` computes the two limits, :func:`train_metrics` measures an iterate
against them (the curves of Figs. 1, 4, 5), and :func:`train_ntp` runs an optimizer and
records those metrics.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.logits import ce_excess, support_of
from ntpcore.core.metrics import cos
from ntpcore.core.optim import INITS, Trajectory, check_hyper, init_weights, train
from ntpcore.core.validate import as_float_array, check_choice, check_seed
from ntpcore.lin.data import NTPData, check_data
from ntpcore.lin.loss import make_loss_grad
from ntpcore.lin.subspace import DataSubspace, finite_component_info
from ntpcore.lin.svm import solve_ntp_svm

Array = NDArray[np.float64]


def solution_pair(H: ArrayLike, P: ArrayLike, *, solver: str = "auto") -> dict:
    """W*, W^mm, the subspace F and the SVM record in one call (the objects of Thm. 2)."""
    H, P, _ = check_data(H, P)
    fc = finite_component_info(H, P)
    svm = solve_ntp_svm(H, support_of(P), solver=solver)
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
    shape = (P.shape[0], H.shape[0])
    W_star = as_float_array(W_star, "W_star", shape=shape)
    W_mm = as_float_array(W_mm, "W_mm", shape=shape)
    ns = float(np.linalg.norm(W_star))

    def metrics(W: Array) -> dict[str, float]:
        gap = ce_excess(W @ H, P, pi)  # CE - H without cancellation
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
    check_hyper(optimizer, eta, n_steps, record_steps, betas, eps)  # before any computation
    check_choice(init, "init", INITS)
    check_seed(init_seed, "init_seed")
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
