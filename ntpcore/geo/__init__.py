r"""Implicit geometry of next-token prediction (paper key ``geo``).

Zhao, Behnia, Vakilian, Thrampoulidis, *Implicit Geometry of Next-token Prediction*,
COLM 2024.  The paper's public face.  Logits :math:`L\in\mathbb R^{V\times m}` of the
:math:`m` distinct contexts are trained with the cross-entropy :math:`\mathrm{CE}(L)\ge
\mathcal H` (book: ``geo-eq-ce``); along the regularization path of
:math:`\mathrm{CE}(L)+\lambda\|L\|_*` they split into a finite part :math:`L^{in}` on the
in-support subspace and a diverging max-margin part along :math:`L^{mm}`, the nuclear-norm
NTP-SVM of the support matrix (book: ``geo-thm-path``), which fixes the geometry of the
word and context embeddings.

Modules by job: :mod:`~ntpcore.geo.logits` (:math:`L^{in}`, :math:`\tilde S`),
:mod:`~ntpcore.geo.svm_problem` (the program of :math:`L^{mm}` and its certificates),
:mod:`~ntpcore.geo.svm` and :mod:`~ntpcore.geo.svm_scale` (its solvers),
:mod:`~ntpcore.geo.regpath` (the regularization path), :mod:`~ntpcore.geo.embeddings`
(factorisation and geometry measures), the datasets (:mod:`~ntpcore.geo.data`,
:mod:`~ntpcore.geo.synthetic`, :mod:`~ntpcore.geo.text`), training
(:mod:`~ntpcore.geo.train`, :mod:`~ntpcore.geo.models`); the cached experiments the
notebooks call live in :mod:`ntpcore.geo.experiments`.
"""

from ntpcore.core.logits import ce, ce_excess, ce_grad, entropy, project_F, support_matrix
from ntpcore.geo.embeddings import (
    balanced_factors,
    cosine_matrix,
    direction_distance,
    gram_distance,
    mm_embeddings,
    offdiag_correlation,
    same_support_pairs,
    structural_correlation,
    subspace_collapse,
)
from ntpcore.geo.logits import (
    centered_support,
    finite_logits,
    nuclear_norm,
    same_vs_other,
    support_on_top,
)
from ntpcore.geo.regpath import regularization_path, regularization_path_cvxpy
from ntpcore.geo.svm import (
    dual_certificate_cvxpy,
    nuclear_svm,
    nuclear_svm_cvxpy,
    solve_nuclear_svm,
)
from ntpcore.geo.svm_problem import (
    NuclearSVMResult,
    check_certificate,
    polar_certificate,
    reduce_support,
    svm_constraint_violation,
)

__all__ = [
    "NuclearSVMResult",
    "balanced_factors",
    "ce",
    "ce_excess",
    "ce_grad",
    "centered_support",
    "check_certificate",
    "cosine_matrix",
    "direction_distance",
    "dual_certificate_cvxpy",
    "entropy",
    "finite_logits",
    "gram_distance",
    "mm_embeddings",
    "nuclear_norm",
    "nuclear_svm",
    "nuclear_svm_cvxpy",
    "offdiag_correlation",
    "polar_certificate",
    "project_F",
    "regularization_path_cvxpy",
    "regularization_path",
    "same_support_pairs",
    "reduce_support",
    "same_vs_other",
    "solve_nuclear_svm",
    "structural_correlation",
    "subspace_collapse",
    "support_matrix",
    "support_on_top",
    "svm_constraint_violation",
]
