r"""Next-token data mined from real English text [geo, Sec. 3].

The pipeline of the paper's real-text set, on a plain-text corpus
(:func:`text_dataset`): tokenise (:func:`tokenize`), count the ``T``-grams and the word
that follows each, keep the most frequent contexts with several continuations, drop rare
next words of contexts with many, expand every context by word substitutions
(:data:`~ntpcore.geo.tables.SUBSTITUTIONS`; a variant inherits the next-word set of its
original, so a context and its variants form one support group, the groups whose context
embeddings collapse, book: ``geo-def-collapse``), and resample the multiplicities
uniformly.  The result is a :class:`~ntpcore.geo.data.ContextDataset`: counts
:math:`n_{z,j}`, soft labels :math:`\hat p_j` and supports :math:`\mathcal S_j`.

By default the corpus is ``lee_background.cor`` (Lee news corpus) shipped inside the gensim
wheel (:func:`builtin_corpus_path`); any local UTF-8 text file can be used instead.
Nothing is downloaded.
"""

from __future__ import annotations

import functools
import importlib.resources
import itertools
import os
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ntpcore.errors import DataError
from ntpcore.geo.data import ContextDataset, dataset_from_pairs, resample_counts
from ntpcore.geo.tables import BUILTIN_CORPORA, FROZEN_WORDS, SUBSTITUTIONS

_TOKEN_RE = re.compile(r"\w+(?:'\w+)?|[.,!?;:]", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Lower-case word tokenisation; keeps ``. , ! ? ; :`` as tokens, drops other symbols.

    Digits-only tokens are kept; words may contain an inner apostrophe (``laden's``).
    """
    return _TOKEN_RE.findall(text.lower())


def builtin_corpus_path(name: str = "lee_background") -> Path:
    """Path of a corpus shipped inside an installed package (no download).

    ``lee_background`` is the Lee news corpus (English, 360 kB) in the gensim wheel;
    ``crime_and_punishment`` is a 4 kB Russian excerpt in the same wheel (no 5-word context
    recurs with two continuations; usable with ``context_len=2``).
    """
    try:
        package, rel = BUILTIN_CORPORA[name]
    except KeyError as exc:
        raise DataError(
            f"unknown built-in corpus {name!r}; choose one of {sorted(BUILTIN_CORPORA)}"
        ) from exc
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError as exc:
        raise DataError(f"built-in corpus {name!r} needs the package {package!r}") from exc
    res = root.joinpath(*rel.split("/"))
    if not res.is_file():
        raise DataError(f"built-in corpus {name!r} not found inside {package} ({rel})")
    return Path(os.fspath(res))


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise DataError(f"corpus file {str(path)!r} does not exist or is not a file")
    raw = path.read_bytes()
    if not raw.strip():
        raise DataError(f"corpus file {path.name!r} is empty")
    if b"\x00" in raw[:65536]:
        raise DataError(f"corpus file {path.name!r} is not text (it contains NUL bytes)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"corpus file {path.name!r} is not UTF-8 text ({exc.reason})") from exc


def _expand(
    contexts: Sequence[tuple[str, ...]],
    substitutions: Mapping[str, Sequence[str]],
    n_positions: int,
    max_subs: int = 1,
) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Variants of each context by substituting words among its first ``n_positions``.

    Up to ``max_subs`` positions are substituted at once (each by one of its listed
    alternatives).  Returns (variant, original) pairs; originals come first (paired with
    themselves), and a variant equal to an existing context or an earlier variant is
    dropped, so every variant inherits exactly one original's next-word set.
    """
    out: list[tuple[tuple[str, ...], tuple[str, ...]]] = [(c, c) for c in contexts]
    seen = set(contexts)
    for c in contexts:
        options = [
            (pos, substitutions.get(c[pos], ()))
            for pos in range(min(n_positions, len(c)))
            if c[pos] not in FROZEN_WORDS and substitutions.get(c[pos])
        ]
        for r in range(1, max_subs + 1):
            for combo in itertools.combinations(options, r):
                positions = [p for p, _ in combo]
                for alts in itertools.product(*(a for _, a in combo)):
                    v = list(c)
                    for p, alt in zip(positions, alts, strict=True):
                        v[p] = alt
                    tv = tuple(v)
                    if tv not in seen:
                        seen.add(tv)
                        out.append((tv, c))
    return out


@functools.lru_cache(maxsize=8)
def _ngram_table(text: str, T: int) -> dict[tuple[str, ...], Counter[str]]:
    toks = tokenize(text)
    if len(toks) <= T:
        raise DataError(
            f"corpus has only {len(toks)} word tokens; need more than {T} for {T}-word contexts"
        )
    nxt: dict[tuple[str, ...], Counter[str]] = defaultdict(Counter)
    for i in range(len(toks) - T):
        nxt[tuple(toks[i : i + T])][toks[i + T]] += 1
    return dict(nxt)


def text_dataset(
    path: str | os.PathLike[str] | None = None,
    *,
    corpus: str = "lee_background",
    context_len: int = 5,
    top_k: int = 40,
    min_count: int = 2,
    min_next: int = 2,
    many_next: int = 8,
    expand: bool = True,
    substitutions: Mapping[str, Sequence[str]] | None = None,
    n_positions: int = 3,
    max_subs: int = 2,
    counts: str = "resample",
    max_repeat: int = 4,
    seed: int = 0,
) -> ContextDataset:
    r"""Next-token dataset mined from a plain-text corpus by the paper's real-text pipeline.

    1. Lower-case and tokenise (:func:`tokenize`); count all ``context_len``-grams and the
       word that follows each.
    2. Keep the ``top_k`` most frequent contexts seen at least ``min_count`` times with at
       least ``min_next`` distinct next words.
    3. Frequency filter: for a context with ``>= many_next`` distinct next words keep only
       next words seen at least twice (if fewer than ``min_next`` survive, keep its
       ``min_next`` most frequent ones).
    4. Synonym expansion (``expand``): every context is duplicated by replacing up to
       ``max_subs`` of its first ``n_positions`` words by alternatives listed in
       ``substitutions`` (default :data:`SUBSTITUTIONS`); each variant inherits the
       original's next-word set, so a context and its variants form one support group.
    5. Counts: ``"resample"`` draws each (context, word) multiplicity uniformly in
       {1, ..., ``max_repeat``} (the paper's choice); ``"observed"`` keeps the corpus counts
       (a variant copies its original's counts).

    Parameters
    ----------
    path : path-like or None
        A local UTF-8 text file.  ``None`` uses the built-in corpus named by ``corpus``
        (resolved inside the installed wheel by :func:`builtin_corpus_path`).

    Raises
    ------
    DataError
        If the file is missing, empty or not UTF-8 text, or too few contexts qualify.
    """
    if counts not in ("resample", "observed"):
        raise DataError(f"counts must be 'resample' or 'observed', got {counts!r}")
    for name, val, lo in (
        ("context_len", context_len, 1),
        ("top_k", top_k, 1),
        ("min_count", min_count, 1),
        ("min_next", min_next, 2),
        ("many_next", many_next, 2),
        ("max_repeat", max_repeat, 1),
    ):
        if int(val) < lo:
            raise DataError(f"{name} must be >= {lo}, got {val}")
    if path is None:
        file = builtin_corpus_path(corpus)
        name = corpus
    else:
        file = Path(path)
        name = file.stem
    table = _ngram_table(_read_text(file), context_len)

    # step 2: frequent contexts with several continuations (ties broken alphabetically)
    cands = [
        (sum(c.values()), ctx)
        for ctx, c in table.items()
        if sum(c.values()) >= min_count and len(c) >= min_next
    ]
    cands.sort(key=lambda t: (-t[0], t[1]))
    chosen = [ctx for _, ctx in cands[:top_k]]
    if not chosen:
        raise DataError(
            f"{file.name}: only {len(chosen)} {context_len}-word context(s) occur >= {min_count} "
            f"times with >= {min_next} different next words; the corpus is too small"
        )

    # step 3: frequency filter
    kept: dict[tuple[str, ...], dict[str, int]] = {}
    for ctx in chosen:
        c = table[ctx]
        if len(c) >= many_next:
            sel = {z: k for z, k in c.items() if k >= 2}
            if len(sel) < min_next:
                sel = dict(sorted(c.items(), key=lambda t: (-t[1], t[0]))[:min_next])
        else:
            sel = dict(c)
        kept[ctx] = sel

    # step 4: synonym expansion
    subs = SUBSTITUTIONS if substitutions is None else substitutions
    pairs_of = _expand(chosen, subs, n_positions, max_subs) if expand else [(c, c) for c in chosen]

    # step 5: multiplicities
    rng = np.random.default_rng(seed)
    if counts == "resample":
        pair_counts = resample_counts({v: sorted(kept[o]) for v, o in pairs_of}, rng, max_repeat)
    else:
        pair_counts = {(v, z): k for v, o in pairs_of for z, k in kept[o].items()}
    how = "observed counts"
    if counts == "resample":
        how = f"multiplicities uniform in {{1..{max_repeat}}}"
    desc = (
        f"{file.name}: top {len(chosen)} {context_len}-grams with >= {min_next} continuations, "
        f"{'expanded by substitution' if expand else 'no expansion'}, {how}"
    )
    return dataset_from_pairs(name, pair_counts, description=desc, n_original=len(chosen))
