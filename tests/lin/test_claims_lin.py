"""The claims ledger of the linear paper's notebooks fails loudly when the mathematics breaks.

A ``sitecustomize.py`` on the kernel's path scales W* by 1.05 inside
``ntpcore.lin.subspace.finite_component_info`` (where the toy's solutions get W*): eq. (4)
no longer holds, and the quick run of ``lin-toy-solutions`` must fail, naming the claim
``w-star`` [lin, Def. 1, eq. (4)] (the figure's W* against the independent solution of (4)),
and publish nothing.
"""

from __future__ import annotations

import pytest

SABOTAGE = """\
import sys

import ntpcore.lin.subspace as _subspace

_original = _subspace.finite_component_info


def _scaled(H, P):
    info = dict(_original(H, P))
    info["W_star"] = 1.05 * info["W_star"]
    return info


# wherever the package binds it (importing the module ran the paper's face, which bound it)
for _module in list(sys.modules.values()):
    if getattr(_module, "__name__", "").startswith("ntpcore") and getattr(
        _module, "finite_component_info", None
    ) is _original:
        _module.finite_component_info = _scaled
"""


@pytest.mark.long
def test_a_wrong_finite_component_fails_the_toy_solutions_figure(sabotaged_run):
    rc, printed, status = sabotaged_run("lin-toy-solutions", SABOTAGE)
    assert rc != 0
    assert "lin-toy-solutions:w-star" in printed
    assert status["lin-toy-solutions:w-star"] == "fail"
    # the claims that do not involve eq. (4) still hold: the sabotage is what failed
    assert status["lin-toy-solutions:w1-equals-w5"] == "pass"
    assert status["lin-toy-solutions:w-mm"] == "pass"
