r"""The synthetic set: the structure of the paper's synthetic set, the project's words
[geo, Sec. 3, Fig. 1].

Sixteen five-word contexts from templated children's-story sentences
(:data:`~ntpcore.geo.tables.SYNTHETIC_TEMPLATES`), each with a support of
:math:`k_j=3` next words: the earliest words of a priority list
(:data:`~ntpcore.geo.tables.PRIORITY_WORDS`) among its observed endings, filled up with
random other endings.  Shared priority words make supports coincide: exactly two pairs of
contexts have identical supports (14 distinct supports), the same-support pairs whose
context embeddings collapse (book: ``geo-def-collapse``).  Every (context, word) pair gets a
multiplicity uniform in :math:`\{1,\dots,4\}`, which sets :math:`\hat\pi`, :math:`\hat p`
and the entropy :math:`\mathcal H` of :mod:`ntpcore.geo.data`.
"""

from __future__ import annotations

import numpy as np

from ntpcore.errors import DataError
from ntpcore.geo.data import ContextDataset, dataset_from_pairs, resample_counts
from ntpcore.geo.tables import PRIORITY_WORDS, SYNTHETIC_TEMPLATES
from ntpcore.geo.text import tokenize


def synthetic_sentences() -> list[str]:
    """The templated sentences of the synthetic set (context + one observed ending each)."""
    return [f"{ctx} {end}" for ctx, ends in SYNTHETIC_TEMPLATES for end in ends]


def synthetic_dataset(
    seed: int = 0, *, support_size: int = 3, max_repeat: int = 4
) -> ContextDataset:
    """The project's synthetic set with the structure of the paper's [geo, Sec. 3].

    Sentences are tokenised, the first 5 words form the context and the 6th is the next
    word.  For every context the support is the (up to ``support_size``) earliest priority
    words among its observed next words, filled up with random other observed next words;
    each (context, word) pair then gets a multiplicity uniform in {1, ..., max_repeat}.

    Parameters
    ----------
    seed : int
        Seed of the support fill and the multiplicities (``np.random.default_rng``).
    support_size : int
        ``k_j`` for every context (the paper: 3).
    max_repeat : int
        Largest multiplicity (the paper's ``range_repeat - 1``; 4 matches its entropy).
    """
    if support_size < 2:
        raise DataError("support_size must be at least 2 (several next words per context)")
    if max_repeat < 1:
        raise DataError("max_repeat must be >= 1")
    rng = np.random.default_rng(seed)
    observed: dict[tuple[str, ...], list[str]] = {}
    for sentence in synthetic_sentences():
        toks = tokenize(sentence)
        ctx, z = tuple(toks[:5]), toks[5]
        observed.setdefault(ctx, [])
        if z not in observed[ctx]:
            observed[ctx].append(z)
    supports: dict[tuple[str, ...], list[str]] = {}
    for ctx, words in observed.items():
        if len(words) < support_size:
            raise DataError(f"template {' '.join(ctx)!r} has fewer than {support_size} endings")
        prio = sorted((w for w in words if w in PRIORITY_WORDS), key=PRIORITY_WORDS.index)
        prio = prio[:support_size]
        rest = [w for w in words if w not in prio and w not in PRIORITY_WORDS]
        fill = list(rng.choice(rest, size=support_size - len(prio), replace=False))
        supports[ctx] = prio + [str(w) for w in fill]
    pairs = resample_counts(supports, rng, max_repeat)
    ds = dataset_from_pairs(
        "synthetic",
        pairs,
        description=(
            f"16 templated five-word contexts, {support_size} next words each "
            f"(priority-list supports), multiplicities uniform in {{1..{max_repeat}}}, seed {seed}"
        ),
    )
    _check_synthetic_structure(ds)
    return ds


def _check_synthetic_structure(ds: ContextDataset) -> None:
    sizes = sorted(len(g) for g in ds.support_groups)
    if ds.m != len(SYNTHETIC_TEMPLATES) or sizes.count(2) < 2:
        raise DataError(  # a template edit broke the designed structure
            f"synthetic set lost its structure: m={ds.m}, group sizes {sizes}"
        )
