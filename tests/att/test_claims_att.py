"""The claims ledger of the attention paper's notebooks fails loudly when the mathematics breaks.

A ``sitecustomize.py`` on the kernel's path scales the Graph-SVM solution of the room's solver
by 1.01 (``ntpcore.att.svm.solve_graph_svm``, which the automaton of the ``att-conceptual``
notebook calls): its margins are no longer 1 and it no longer equals the closed form nor the
independent cvxpy build of :mod:`ntpcore.att.checks.independent`, so the quick run of the figure
must fail, naming the claim ``svm-exact`` [att, Graph-SVM definition], and publish nothing.
"""

from __future__ import annotations

import pytest

SABOTAGE = """\
import dataclasses as _dc

import ntpcore.att.svm as _svm

_original = _svm.solve_graph_svm


def _scaled(*args, **kw):
    res = _original(*args, **kw)
    return _dc.replace(res, W=1.01 * res.W)


_svm.solve_graph_svm = _scaled
"""


@pytest.mark.long
def test_a_wrong_graph_svm_fails_the_conceptual_figure(sabotaged_run):
    rc, printed, status = sabotaged_run("att-conceptual", SABOTAGE)
    assert rc != 0
    assert "att-conceptual:svm-exact" in printed
    assert status["att-conceptual:svm-exact"] == "fail"
    # the claims that do not involve W^svm still hold: the sabotage is what failed
    assert status["att-conceptual:wfin-exact"] == "pass"
    assert status["att-conceptual:sccs-exact"] == "pass"
