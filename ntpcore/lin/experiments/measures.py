r"""The measured quantities the linear paper's claims read (key ``lin``).

:func:`solution_facts` recomputes the checkable statements of Defs. 1-3 and Prop. 1 at the
computed solutions; :func:`log_slope` and :func:`decade_change` read rates off a recorded
curve; :func:`median_seed` picks the draw a figure shows, by rank.
"""

from __future__ import annotations

import numpy as np

from ntpcore.core.logits import support_of
from ntpcore.lin.loss import ce_excess_W
from ntpcore.lin.subspace import data_subspace, finite_component, row_space_projector
from ntpcore.lin.svm_problem import margins

__all__ = ["decade_change", "log_slope", "median_seed", "solution_facts"]


def solution_facts(
    H: np.ndarray, P: np.ndarray, W_mm: np.ndarray, pi: np.ndarray | None = None
) -> dict:
    r"""The checkable statements of Defs. 1-3 and Prop. 1 at the computed solutions.

    :math:`W^\star` is recomputed here by :func:`ntpcore.lin.subspace.finite_component` (so a
    fault in it shows in the claims), and measured against ``W_mm`` (a solution of Def. 3):

    * ``log_odds_error`` -- max over (j, z, z') of the error of eq. (4) at :math:`W^\star`;
    * ``star_perp_rel`` -- :math:`\|P_\perp W^\star\|/\|W^\star\|` (:math:`W^\star\in F`);
    * ``mm_F_rel`` -- :math:`\|P_F W^{\mathrm{mm}}\|/\|W^{\mathrm{mm}}\|` (eq. (6a):
      :math:`W^{\mathrm{mm}}\in F^\perp`);
    * ``inner_rel`` -- :math:`|\cos(W^\star, W^{\mathrm{mm}})|`;
    * ``min_margin``, ``max_spread``, ``n_active`` -- (6b), (6a) and the active margins;
    * ``colsum_rel`` -- :math:`\|1^\top W^{\mathrm{mm}}\|/\|W^{\mathrm{mm}}\|` and
      ``rowspan_rel`` -- :math:`\|W^{\mathrm{mm}}(I - P_H)\|/\|W^{\mathrm{mm}}\|` (KKT:
      :math:`W^{\mathrm{mm}} = C\bar H^\top` with zero-sum columns of C);
    * ``gamma``, ``gamma_gap`` -- :math:`\mathrm{CE}(W^\star + \gamma W^{\mathrm{mm}}) - \mathcal H`
      along a grid of :math:`\gamma` (Prop. 1; ``pi`` defaults to uniform), and
      ``gamma_bound`` -- the bound :math:`V e^{\|W^\star\| M} e^{-\gamma}`,
      :math:`M = \sqrt2\max_j\|\bar h_j\|`, of the proof of Theorem 1 (the "genie" point
      :math:`W^\star + R\,W^{\mathrm{mm}}`, whose off-support margins are at least R).
    """
    H = np.asarray(H, dtype=float)
    P = np.asarray(P, dtype=float)
    S = support_of(P)
    W_star = finite_component(H, P)
    F = data_subspace(H, S)
    L = W_star @ H
    z = np.argmax(S, axis=0)
    cols = np.arange(S.shape[1])
    err = np.where(S, (L - L[z, cols]) - (np.log(np.where(S, P, 1.0)) - np.log(P[z, cols])), 0.0)
    ns, nm = float(np.linalg.norm(W_star)), float(np.linalg.norm(W_mm))
    mg = margins(W_mm, H, S)
    PH = row_space_projector(H)
    gamma = np.arange(0.0, 21.0, 1.0)  # beyond ~25, CE - H is below double precision
    pi = np.full(S.shape[1], 1.0 / S.shape[1]) if pi is None else np.asarray(pi, dtype=float)
    gap = np.array([ce_excess_W(W_star + g * W_mm, H, P, pi) for g in gamma])
    M = np.sqrt(2.0) * float(np.linalg.norm(H, axis=0).max())
    return {
        "W_star": W_star,
        "log_odds_error": float(np.abs(err).max()),
        "star_perp_rel": float(np.linalg.norm(F.project_perp(W_star))) / ns,
        "mm_F_rel": float(np.linalg.norm(F.project(W_mm))) / nm,
        "inner_rel": abs(float(np.vdot(W_star, W_mm))) / (ns * nm),
        "min_margin": mg["min_margin"],
        "max_spread": mg["max_spread"],
        "n_active": mg["n_active"],
        "colsum_rel": float(np.linalg.norm(W_mm.sum(axis=0))) / nm,
        "rowspan_rel": float(np.linalg.norm(W_mm - W_mm @ PH)) / nm,
        "gamma": gamma,
        "gamma_gap": gap,
        "gamma_bound": S.shape[0] * np.exp(ns * M - gamma),
    }


def log_slope(steps: np.ndarray, y: np.ndarray, k1: int, k2: int) -> float:
    r""":math:`(y(k_2) - y(k_1))/\ln(k_2/k_1)` at the recorded steps nearest to k1 and k2.

    For :math:`y = \|P_\perp W_k\|` under GD this tends to :math:`\|W^{\mathrm{mm}}\|`
    (:math:`W_k\approx W^\star + \|W^{\mathrm{mm}}\|\ln k\,\overline W^{\mathrm{mm}}`).
    """
    steps = np.asarray(steps)
    i1 = int(np.argmin(np.abs(steps - k1)))
    i2 = int(np.argmin(np.abs(steps - k2)))
    return float((y[i2] - y[i1]) / np.log(steps[i2] / steps[i1]))


def decade_change(steps: np.ndarray, y: np.ndarray) -> float:
    """y at the last recorded step over y at the recorded step nearest to a tenth of it."""
    steps = np.asarray(steps)
    i = int(np.argmin(np.abs(steps - steps[-1] / 10)))
    return float(y[-1] / y[i])


def median_seed(seeds, values) -> int:
    """The seed whose value is the median of ``values`` (the lower middle one for an even count).

    The rule that picks the draw a figure shows from a spread of draws: by rank, never by
    how the draw looks.
    """
    seeds, values = np.asarray(seeds), np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    return int(seeds[order[(len(order) - 1) // 2]])
