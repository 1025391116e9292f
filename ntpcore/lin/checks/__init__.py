r"""The checks of the linear paper (key ``lin``): each statement a figure illustrates, once.

A check takes the figure's configuration and its computed results and records its claims on
the figure's :class:`~ntpcore.figure.claims.Ledger`, with the source in the paper, the
paper's number where it prints one, and a two-sided tolerance against an independent
reference (:mod:`~ntpcore.lin.checks.reference`: the solutions solved again, the runs re-done
in torch, F spanned by every in-support pair).  A notebook calls each statement it
illustrates in one line, after its Discussion::

    ledger = claims.Ledger(fig_id, profile, defer=True)
    checks.descent(ledger, cfg, res, figure="Fig. 4")
    checks.gd_rates(ledger, spread)
    ledger.report()

Statements (function: what it checks [source]):

* :func:`synthetic_set` -- the entropy of App. A.2's set against the paper's 1.445;
* :func:`finite_part` -- :math:`W^\star`, the solution of (4) in F [Def. 1];
* :func:`max_margin` -- :math:`W^{\mathrm{mm}}` or its norm [Def. 3];
* :func:`toy_geometry`, :func:`toy_rows` -- the rows in Figs. 1-2;
* :func:`prop1` -- the loss along :math:`W^\star + \gamma W^{\mathrm{mm}}` [Prop. 1];
* :func:`descent` -- a run's curves, re-done [Lemma 2, Thm. 2, Figs. 1, 4, 5];
* :func:`gd_rates`, :func:`toy_rates`, :func:`optimizer_rates` -- what the long runs reach;
* :func:`reg_path` -- the regularization path [Thm. 1];
* :func:`separability` -- the phase diagram [Lemma 1, Remark 1];
* :func:`support_sweep` -- the support-size sweep; :func:`scale` -- Theorem 2 at scale.

:mod:`~ntpcore.lin.checks.panels` declares what every panel of every figure must show.
"""

import ntpcore.lin.checks.panels as panels
from ntpcore.lin.checks.solutions import (
    finite_part,
    max_margin,
    prop1,
    synthetic_set,
    toy_geometry,
    toy_rows,
)
from ntpcore.lin.checks.sweeps import reg_path, scale, separability, support_sweep
from ntpcore.lin.checks.training import descent, gd_rates, optimizer_rates, toy_rates

__all__ = [
    "descent",
    "finite_part",
    "gd_rates",
    "max_margin",
    "optimizer_rates",
    "panels",
    "prop1",
    "reg_path",
    "scale",
    "separability",
    "support_sweep",
    "synthetic_set",
    "toy_geometry",
    "toy_rates",
    "toy_rows",
]
