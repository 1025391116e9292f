"""The claims ledger of the geometry paper's notebooks fails loudly when the mathematics breaks.

A ``sitecustomize.py`` on the kernel's path scales the solution of the nuclear-norm NTP-SVM
returned by ``ntpcore.geo.svm.solve_nuclear_svm`` by 1.01 (where it is defined, so the
experiments of ``geo-support-lmm``, imported later, bind the scaled function). The scaled
matrix is still feasible, but it is no longer optimal: its nuclear norm exceeds the dual
bound of its certificate by 1% [geo, Sec. 2, NTP-SVM dual], and it is no longer the
independent cvxpy solution. The quick run of the figure must fail, naming the claim
``lmm-certified``, and publish nothing; the claims about :math:`L^{in}` and the feasibility
of the scaled solution, which the sabotage leaves true, still hold.
"""

from __future__ import annotations

SABOTAGE = """\
import dataclasses

import ntpcore.geo.svm as _svm

_original = _svm.solve_nuclear_svm


def _scaled(*args, **kwargs):
    res = _original(*args, **kwargs)
    return dataclasses.replace(res, L=1.01 * res.L, objective=1.01 * res.objective)


_svm.solve_nuclear_svm = _scaled
"""


def test_a_suboptimal_svm_solution_fails_the_support_lmm_figure(sabotaged_run):
    rc, printed, status = sabotaged_run("geo-support-lmm", SABOTAGE)
    assert rc != 0
    assert "geo-support-lmm:lmm-certified" in printed
    assert status["geo-support-lmm:lmm-certified"] == "fail"
    assert status["geo-support-lmm:lmm-cvxpy"] == "fail"
    # the claims that the sabotage leaves true still hold: it is what failed
    assert status["geo-support-lmm:finite-part"] == "pass"
    assert status["geo-support-lmm:lmm-feasible"] == "pass"
