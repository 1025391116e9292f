r"""The checks of the self-attention paper's statements (key ``att``), one function per
statement, each recording its claims on a figure's ledger
(:class:`ntpcore.figure.claims.Ledger`); a notebook calls the check of each statement it
illustrates in one line, after its discussion.

The checks compare what a run computed with references computed independently on the same
data (:mod:`~ntpcore.att.checks.independent`: the TPGs, SCCs, Graph-SVM and finite component
built again by other code; :mod:`~ntpcore.att.checks.retrace`: the descents re-implemented
with torch autograd; :mod:`~ntpcore.att.checks.references`: both applied to a figure's run),
with the paper's numbers at the steps its figures show them, and with the theorem's
quantitative predictions:

* :func:`sccs`, :func:`graph_svm`, :func:`finite_component` -- the objects a figure uses
  (:mod:`~ntpcore.att.checks.objects`);
* :func:`gd_convergence` -- the convergence theorem (:mod:`~ntpcore.att.checks.convergence`);
* :func:`local_convergence` -- local convergence with a general head
  (:mod:`~ntpcore.att.checks.local`);
* :func:`regularization_path` -- the regularization path (:mod:`~ntpcore.att.checks.path`);
* :func:`conceptual`, :func:`playground` -- the automaton
  (:mod:`~ntpcore.att.checks.automaton`);
* :func:`scc_statistics` -- SCC statistics of random TPGs
  (:mod:`~ntpcore.att.checks.statistics`).

:mod:`~ntpcore.att.checks.panels` says what every panel of every figure must show.
"""

from ntpcore.att.checks import panels
from ntpcore.att.checks.automaton import conceptual, playground
from ntpcore.att.checks.convergence import gd_convergence
from ntpcore.att.checks.local import local_convergence
from ntpcore.att.checks.objects import finite_component, graph_svm, sccs
from ntpcore.att.checks.path import regularization_path
from ntpcore.att.checks.references import (
    automaton_reference,
    global_reference,
    local_reference,
    path_reference,
    statistics_reference,
)
from ntpcore.att.checks.statistics import scc_statistics

__all__ = [
    "automaton_reference",
    "conceptual",
    "finite_component",
    "gd_convergence",
    "global_reference",
    "graph_svm",
    "local_convergence",
    "local_reference",
    "panels",
    "path_reference",
    "playground",
    "regularization_path",
    "sccs",
    "scc_statistics",
    "statistics_reference",
]
