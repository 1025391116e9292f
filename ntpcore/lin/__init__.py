r"""Implicit optimization bias of NTP in linear models (paper key ``lin``).

Thrampoulidis, *Implicit Optimization Bias of Next-Token Prediction in Linear Models*,
NeurIPS 2024 (arXiv:2402.18551v2).

Conventions (all float64): embeddings ``H`` (d, m) as columns, next-token distributions
``P`` (V, m) as columns summing to 1, supports ``P > 0``, context frequencies ``pi`` (m,),
decoder ``W`` (V, d), logits ``L = W @ H``.  As on the other papers' faces, ``ce``,
``ce_grad``, ``ce_excess`` and ``project_F`` take logits ``L`` (:mod:`ntpcore.core.logits`);
their weight-space forms, which take ``W`` and ``H``, carry the suffix ``_W`` (``ce_W``,
``ce_grad_W``, ``ce_excess_W``, ``project_F_W``, ``project_perp_W``).

This module is the paper's public face; the mathematics lives in

* :mod:`ntpcore.lin.data`      training sets, the toy of Figs. 1-2, the synthetic set of A.2
* :mod:`ntpcore.lin.loss`      CE (eq. 2) of the decoder W, its gradient and Hessian, CE_F
  (eq. 12), CE - H
* :mod:`ntpcore.lin.subspace`  the subspace F (eq. 5), projections, W* (Def. 1, eq. 4)
* :mod:`ntpcore.lin.separability`  NTP-separability (Def. 2) by an LP
* :mod:`ntpcore.lin.svm_problem`  the NTP-SVM program (Def. 3): margins, the post-check
* :mod:`ntpcore.lin.svm`       its solver dispatch; its solvers in
  :mod:`ntpcore.lin.svm_reference` (cvxpy), :mod:`ntpcore.lin.dual` (dual QP,
  projected Newton) and :mod:`ntpcore.lin.dual_cd` (dual QP, coordinate descent)
* :mod:`ntpcore.lin.regpath`   the regularization path (eq. 8, Theorem 1)
* :mod:`ntpcore.lin.training`  GD / NGD / Adam and the metrics of Theorem 2
* :mod:`ntpcore.lin.checks`    each statement the figures illustrate, checked once against
  independent references (the notebooks' claims), and the panels every figure must show
"""

from __future__ import annotations

from ntpcore.core.logits import ce, ce_excess, ce_grad, project_F
from ntpcore.core.metrics import cos
from ntpcore.core.optim import Trajectory, init_weights, train
from ntpcore.lin.data import (
    TOY_ANGLES_DEG,
    TOY_ENTROPY,
    TOY_SUPPORTS,
    NTPData,
    entropy,
    make_data,
    make_synthetic,
    make_toy,
    toy_embeddings,
)
from ntpcore.lin.loss import (
    ce_excess_W,
    ce_F,
    ce_grad_W,
    ce_hessian,
    ce_W,
    kl_terms,
    make_loss_grad,
    smoothness_bound,
)
from ntpcore.lin.regpath import regularization_path, regularization_path_cvxpy, ridge_solution
from ntpcore.lin.separability import is_ntp_separable, separability_lp
from ntpcore.lin.subspace import (
    DataSubspace,
    data_subspace,
    finite_component,
    finite_component_info,
    is_compatible,
    project_F_W,
    project_perp_W,
    row_space_projector,
)
from ntpcore.lin.svm import ntp_svm, solve_ntp_svm
from ntpcore.lin.svm_problem import NTPSVMResult, margins
from ntpcore.lin.training import solution_pair, train_metrics, train_ntp

__all__ = [
    "TOY_ANGLES_DEG",
    "TOY_ENTROPY",
    "TOY_SUPPORTS",
    "DataSubspace",
    "NTPData",
    "NTPSVMResult",
    "Trajectory",
    "ce",
    "ce_F",
    "ce_W",
    "ce_excess",
    "ce_excess_W",
    "ce_grad",
    "ce_grad_W",
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
    "solve_ntp_svm",
    "project_F",
    "project_F_W",
    "project_perp_W",
    "regularization_path",
    "regularization_path_cvxpy",
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
