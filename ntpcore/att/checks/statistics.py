r"""SCC statistics of random token-priority graphs (key ``att``, beyond the paper): as the
number of sequences grows a giant SCC forms, the TPGs collapse into one SCC
(:math:`W^{\mathrm{svm}} e_k = 0`) and attention becomes pure composition.

The checks compare the run (:func:`ntpcore.att.experiments.run_scc_stats`) with
:func:`ntpcore.att.checks.references.statistics_reference`: the same statistics of the run's
own datasets computed by independent code (exactly equal), and of an independent simulation
with its own generator (equal within the seed spread); the figure's statements take a margin
of a quarter of the range of a fraction.

Tolerance against the simulation: 3 standard errors of the difference of the two means of
each (T, n) cell, plus 2% of the statistic's range (1 for a fraction, K for a count of SCCs).
"""

from __future__ import annotations

import numpy as np

from ntpcore.att.checks.references import STATISTICS
from ntpcore.figure import claims

__all__ = ["scc_statistics"]

DEFS = "[att, TPG and SCC definitions]"


def scc_statistics(ledger, res: dict, ref: dict, cfg) -> None:
    """The statistics against their independent computation and simulation, and the figure's
    three statements."""
    same = max(float(np.max(np.abs(np.asarray(res[k]) - ref[k]))) for k in STATISTICS)
    ledger.check(
        "statistics-independent",
        "every statistic of every dataset equals its computation by independent code (numpy "
        "adjacency, scipy strong components) on the same data: largest difference",
        same,
        claims.at_most(1e-12),
        source=DEFS,
        digits=0,
    )
    worst = 0.0
    for k in STATISTICS:
        run, sim = np.asarray(res[k]), ref[f"sim_{k}"]
        se = np.sqrt(run.var(-1) / run.shape[-1] + sim.var(-1) / sim.shape[-1])
        slack = 0.02 * (cfg.vocab_size if k == "n_sccs" else 1.0)
        worst = max(worst, float(np.max(np.abs(run.mean(-1) - sim.mean(-1)) / (3 * se + slack))))
    ledger.check(
        "simulation-agrees",
        "every curve agrees with an independent simulation (its own generator and seed) at "
        "every (T, n): largest difference of the means in units of its tolerance (3 standard "
        "errors + 2% of the range)",
        worst,
        claims.at_most(1.0),
        source=DEFS,
        digits=2,
    )
    big, pure, single = (
        np.asarray(res[k]).mean(-1) for k in ("largest_frac", "pure_comp", "single_scc")
    )
    ledger.check(
        "giant-scc-majority",
        "at the largest n a giant SCC holds most tokens of its TPG (smallest mean fraction over T)",
        float(big[:, -1].min()),
        claims.at_least(0.5),
        source=DEFS,
    )
    ledger.check(
        "single-scc-grows",
        r"the fraction of TPGs that are one SCC ($W^{\mathrm{svm}} e_k = 0$) grows from the "
        "smallest to the largest n by at least a quarter, for every T (smallest increase)",
        float((single[:, -1] - single[:, 0]).min()),
        claims.at_least(0.25),
        source="[att, Graph-SVM definition]",
        digits=2,
    )
    ledger.check(
        "pure-composition-grows",
        "the fraction of samples answered by composition alone grows from the smallest to the "
        "largest n by at least a quarter, for every T (smallest increase)",
        float((pure[:, -1] - pure[:, 0]).min()),
        claims.at_least(0.25),
        source="[att, automaton interpretation]",
        digits=2,
    )
