r"""The checks of the two datasets of the geometry paper [geo, Sec. 3.1], for ``geo-datasets``.

Every number is read from the raw training pairs (:func:`ntpcore.geo.checks.convex.raw_supports`),
not from the statistics the dataset reports, and compared with the paper's set:

* the synthetic set (:func:`check_synthetic_set`): the vocabulary of the paper's Fig. 1, the
  multiplicity law of the authors' sampler and the entropy it gives, within the spread of our
  generator's draws;
* the real-text set (:func:`check_text_set`): a different corpus (the Lee news corpus in place
  of TinyStories), so its sizes are compared with the authors' extract in shape: within a
  factor :data:`SHAPE_FACTOR`.
"""

from __future__ import annotations

import numpy as np

from ntpcore.figure import claims
from ntpcore.geo.checks.convex import SEED_DRAWS, raw_entropy, raw_supports, synthetic_spread
from ntpcore.geo.data import ContextDataset

__all__ = ["SHAPE_FACTOR", "check_synthetic_set", "check_text_set"]

DATA = "[geo, Sec. 3.1, datasets]"
CODE = "the authors' code"
LOGS = "the authors' run logs (TinyStories extract)"
#: the paper's synthetic sampler: multiplicities uniform in {1, ..., PAPER_REPEAT}
#: (range_repeat = 5 in the authors' code; the only law that gives their entropy)
PAPER_REPEAT = 4
#: the entropy of the paper's synthetic set (hard-coded in the authors' plotting script)
PAPER_ENTROPY = 1.0166
#: the real-text set is another corpus than the paper's: its sizes are compared in shape,
#: within this factor of the authors' TinyStories extract
SHAPE_FACTOR = 1.5


def check_synthetic_set(ledger: claims.Ledger, ds: ContextDataset) -> dict[str, float]:
    r"""The synthetic set has the paper's shape [geo, Sec. 3.1, Fig. 1]:

    * ``synthetic-vocabulary``: :math:`V=30` next words, the rows of the paper's Fig. 1;
    * ``synthetic-multiplicities``: the mean multiplicity of a (context, word) pair is that of
      the authors' law, uniform on :math:`\{1,\dots,4\}`: 2.5 within three standard errors
      of the mean of that law over the set's pairs;
    * ``synthetic-entropy``: :math:`\mathcal H` is the paper's 1.0166 nats within three
      standard deviations over :data:`SEED_DRAWS` draws of our generator.

    The supports themselves (16 contexts, 3 next words each, two identical pairs) are what the
    generator builds; its unit tests check them.
    """
    raw = raw_supports(ds)
    mult = raw.counts[raw.counts > 0]
    var = (PAPER_REPEAT**2 - 1) / 12.0  # variance of the uniform law on {1..R}
    entropy = raw_entropy(raw)
    sd = float(np.std(synthetic_spread(max_repeat=PAPER_REPEAT)["entropy"], ddof=1))
    ledger.check(
        "synthetic-vocabulary",
        r"synthetic set: $V$ next words, as in the paper's Fig. 1",
        raw.V,
        claims.close_to(30, atol=0.5),
        source="[geo, Fig. 1]",
        paper=30,
        paper_source="[geo, Fig. 1]: the rows of its support matrix",
    )
    ledger.check(
        "synthetic-multiplicities",
        r"synthetic set: multiplicities drawn as the authors' (uniform on $\{1,\dots,4\}$): "
        "mean multiplicity of a (context, word) pair (tolerance: 3 standard errors)",
        float(mult.mean()),
        claims.close_to((1 + PAPER_REPEAT) / 2, atol=3 * np.sqrt(var / mult.size)),
        source=DATA,
        reference=(1 + PAPER_REPEAT) / 2,
        reference_source=CODE + " (range_repeat = 5)",
    )
    ledger.check(
        "synthetic-entropy",
        r"synthetic set: entropy $\mathcal H$ (nats) as the paper's (tolerance: 3 standard "
        rf"deviations over {SEED_DRAWS} draws of our generator)",
        entropy,
        claims.close_to(PAPER_ENTROPY, atol=3 * sd),
        source=DATA,
        digits=4,
        reference=PAPER_ENTROPY,
        reference_source=CODE + " (plotting script)",
    )
    return {"V": raw.V, "multiplicity": float(mult.mean()), "entropy": entropy}


def _shape(theirs: float) -> claims.Expect:
    return claims.between(theirs / SHAPE_FACTOR, theirs * SHAPE_FACTOR)


def check_text_set(ledger: claims.Ledger, ds: ContextDataset) -> dict[str, float]:
    r"""The real-text set has the shape of the authors' TinyStories extract [geo, Sec. 3.1]
    (403 contexts over 104 next words in 31 support groups, supports of about 5 words), each
    size within a factor :data:`SHAPE_FACTOR`: ``text-contexts``, ``text-vocabulary``,
    ``text-groups`` (contexts grouped by identical supports, from the raw pairs) and
    ``text-support``."""
    raw = raw_supports(ds)
    k = np.array([len(s) for s in raw.support])
    numbers = {
        "m": raw.m,
        "V": raw.V,
        "groups": len(raw.groups),
        "support": float(k.mean()),
    }
    within = f"(within a factor {SHAPE_FACTOR:g} of the authors' extract)"
    for key, cid, what, theirs in (
        ("m", "text-contexts", "distinct contexts $m$", 403),
        ("V", "text-vocabulary", "next words $V$", 104),
        ("groups", "text-groups", "support groups (identical supports)", 31),
        ("support", "text-support", r"mean support size $\bar k$", 5),
    ):
        ledger.check(
            cid,
            f"real text (Lee corpus, in place of TinyStories): {what} {within}",
            numbers[key],
            _shape(theirs),
            source=DATA,
            reference=theirs,
            reference_source=LOGS + (" (about 5)" if key == "support" else ""),
        )
    return numbers
