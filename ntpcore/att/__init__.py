r"""Public API of the self-attention paper (key ``att``).

Li, Huang, Ildiz, Rawat & Oymak, *Mechanics of Next Token Prediction with Self-Attention*,
AISTATS 2024 (arXiv:2403.08081).

Conventions
-----------
* token embeddings ``E`` (K, d), row ``k`` = token ``k`` (0-based ids);
* sequences as integer token ids ``tokens`` (n, T); the **last column is the last token**
  :math:`\bar x_i` (the query, which also attends to itself);
* labels ``labels`` (n,);
* attention weights ``W`` (d, d) with scores :math:`z_{it} = x_{it}^\top W \bar x_i`.

The paper's three central objects:

* :func:`token_priority_graphs` — the K TPGs :math:`G^{(k)}` (networkx DiGraphs; book
  ``att-def-tpg``, SCCs ``att-def-scc``);
* :func:`graph_svm` — the Graph-SVM direction :math:`W^{\mathrm{svm}}` (d, d) (book
  ``att-def-graph-svm``), raising :class:`ntpcore.errors.InfeasibleError` with the reason when
  infeasible;
* :func:`finite_component` — :math:`W^{\mathrm{fin}}`, the minimiser of the reduced loss on the
  cyclic subspace (book ``att-def-wfin``).

By the convergence theorem [att, GD convergence theorem] (book ``att-thm-gd``), gradient descent
on the log-loss gives :math:`W(\tau) \approx R(\tau) W^{\mathrm{svm}}/\|W^{\mathrm{svm}}\|
+ W^{\mathrm{fin}} + \Pi_{S^\perp} W(0)` with :math:`R(\tau) \to \infty`.

The rest of the paper's machinery is re-exported from the modules, one per job:
:mod:`~ntpcore.att.priority` (TPGs, SCCs, priority order, local TPGs), :mod:`~ntpcore.att.svm`
(the Graph-SVM program and its solvers), :mod:`~ntpcore.att.finite` (subspaces :math:`S,
S_\mathrm{fin}, S_\mathrm{svm}` and :math:`W^{\mathrm{fin}}`), :mod:`~ntpcore.att.regpath`
(regularization path), :mod:`~ntpcore.att.linalg` (generators, bases, projections),
:mod:`~ntpcore.att.dynamics` (losses, closed-form gradients), :mod:`~ntpcore.att.descent` (GD /
normalized GD, batched), :mod:`~ntpcore.att.automaton` (hard retrieval + soft composition) and
:mod:`~ntpcore.att.data` (generators, exact toys); ``cos`` is :func:`ntpcore.core.metrics.cos`,
the papers' "correlation". Public submodules not re-exported: :mod:`~ntpcore.att.experiments`
(cached experiments behind the figures), :mod:`~ntpcore.att.plots` and the torch model
:class:`ntpcore.att.oracle.OneLayerAttention` (imported on demand: torch is heavy), and
:mod:`~ntpcore.att.checks`, the checks of the paper's statements that the figures record.
"""

from __future__ import annotations

from ntpcore.att.automaton import (
    Automaton,
    AutomatonOutput,
    automaton_predict,
    build_automaton,
    model_output,
    total_variation,
)
from ntpcore.att.data import (
    TOYS,
    AttDataset,
    random_labels,
    random_sequences,
    sample_dataset,
    toy_dataset,
    unit_embeddings,
)
from ntpcore.att.descent import run_descent
from ntpcore.att.dynamics import (
    HEAD_LOSSES,
    AttentionProblem,
    attention_weights,
    loss_grad,
    make_problem,
    smoothness_bounds,
)
from ntpcore.att.finite import (
    Subspaces,
    finite_component,
    finite_component_cvxpy,
    reduced_log_loss,
    subspaces,
)
from ntpcore.att.linalg import project_onto_span
from ntpcore.att.priority import (
    SCCStructure,
    cyclic_samples,
    is_acyclic,
    local_token_priority_graphs,
    reduced_position_mask,
    scc_structure,
    scc_structures,
    select_tokens,
    token_priority_graphs,
)
from ntpcore.att.regpath import regularization_path
from ntpcore.att.svm import (
    GraphSVMResult,
    graph_svm,
    graph_svm_constraints,
    graph_svm_cvxpy,
    local_graph_svm,
    solve_graph_svm,
    solve_max_margin,
)
from ntpcore.att.verify import (
    finite_report,
    graph_svm_report,
    scc_report,
    theory_report,
)
from ntpcore.core.metrics import cos

__all__ = [
    "HEAD_LOSSES",
    "TOYS",
    "AttDataset",
    "AttentionProblem",
    "Automaton",
    "AutomatonOutput",
    "GraphSVMResult",
    "SCCStructure",
    "Subspaces",
    "attention_weights",
    "automaton_predict",
    "build_automaton",
    "cos",
    "cyclic_samples",
    "finite_component",
    "finite_component_cvxpy",
    "graph_svm",
    "graph_svm_constraints",
    "graph_svm_cvxpy",
    "solve_graph_svm",
    "is_acyclic",
    "local_graph_svm",
    "local_token_priority_graphs",
    "loss_grad",
    "make_problem",
    "model_output",
    "project_onto_span",
    "random_labels",
    "random_sequences",
    "reduced_log_loss",
    "reduced_position_mask",
    "regularization_path",
    "run_descent",
    "sample_dataset",
    "scc_structure",
    "scc_structures",
    "select_tokens",
    "smoothness_bounds",
    "solve_max_margin",
    "subspaces",
    "token_priority_graphs",
    "toy_dataset",
    "total_variation",
    "finite_report",
    "graph_svm_report",
    "scc_report",
    "theory_report",
    "unit_embeddings",
]
