"""The claims ledger of the attention paper's notebooks fails loudly when the mathematics breaks.

A ``sitecustomize.py`` on the kernel's path scales the cvxpy reference of the Graph-SVM by 1.01
where :mod:`ntpcore.att.verify` looks it up (``verify.graph_svm_cvxpy``, called by the
``att-conceptual`` notebook through ``theory_report``): the solver and the reference no longer
agree, and the quick run of the figure must fail, naming the claim ``svm-cvxpy``
[att, Graph-SVM definition], and publish nothing.
"""

from __future__ import annotations

SABOTAGE = """\
import ntpcore.att.verify as _verify

_original = _verify.graph_svm_cvxpy


def _scaled(E, tokens, labels, **kw):
    return 1.01 * _original(E, tokens, labels, **kw)


_verify.graph_svm_cvxpy = _scaled
"""


def test_a_wrong_graph_svm_reference_fails_the_conceptual_figure(sabotaged_run):
    rc, printed, status = sabotaged_run("att-conceptual", SABOTAGE)
    assert rc != 0
    assert "att-conceptual:svm-cvxpy" in printed
    assert status["att-conceptual:svm-cvxpy"] == "fail"
    # the claims that do not involve the reference still hold: the sabotage is what failed
    assert status["att-conceptual:svm-margins"] == "pass"
    assert status["att-conceptual:wfin-cvxpy"] == "pass"
