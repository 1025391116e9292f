"""The claims ledger of the linear paper's notebooks fails loudly when the mathematics breaks.

A ``sitecustomize.py`` on the kernel's path scales W* by 1.05 inside
``ntpcore.lin.subspace.finite_component`` (the function the ``lin-toy-solutions`` notebook computes
W* with): eq. (4) no longer holds, and the quick run of the figure must fail, naming the
claim ``wstar-log-odds`` [lin, Def. 1, eq. (4)], and publish nothing.
"""

from __future__ import annotations

SABOTAGE = """\
import ntpcore.lin.subspace as _subspace

_original = _subspace.finite_component


def _scaled(H, P):
    return 1.05 * _original(H, P)


# where it is defined: the experiments, imported later, bind the scaled function
_subspace.finite_component = _scaled
"""


def test_a_wrong_finite_component_fails_the_toy_solutions_figure(sabotaged_run):
    rc, printed, status = sabotaged_run("lin-toy-solutions", SABOTAGE)
    assert rc != 0
    assert "lin-toy-solutions:wstar-log-odds" in printed
    assert status["lin-toy-solutions:wstar-log-odds"] == "fail"
    # the claims that do not involve eq. (4) still hold: the sabotage is what failed
    assert status["lin-toy-solutions:wmm-w1-equals-w5"] == "pass"
