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

At corpus scale (:func:`corpus_dataset`, used by :mod:`ntpcore.geo.wiki`) the pipeline is
the plain one, without expansion or resampling: a tokenised corpus
(:class:`TokenCorpus`), the most frequent words as vocabulary (:func:`top_vocabulary`),
streaming counts of the ``(T + 1)``-grams inside it (:func:`ngram_counts`), and the most
frequent contexts with their observed counts :math:`n_{z,j}`, held sparse.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import itertools
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from ntpcore.core.io import read_utf8_text
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
    return read_utf8_text(path, "corpus file")


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


# ------------------------------------------------------------------------------------------
# Corpus scale: a whole vocabulary, observed counts, sparse throughout
# ------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class TokenCorpus:
    """A tokenised corpus: documents of word ids (contexts never cross a document boundary).

    Attributes
    ----------
    name : str
        Short name printed in the book.
    words : tuple of str
        Id -> word, in order of first appearance.
    tokens : (N,) int64 array
        The word ids of all documents, concatenated.
    doc_starts : (D + 1,) int64 array
        Document ``d`` is ``tokens[doc_starts[d]:doc_starts[d + 1]]``.
    """

    name: str
    words: tuple[str, ...]
    tokens: NDArray[np.int64]
    doc_starts: NDArray[np.int64]

    def __post_init__(self) -> None:
        tokens = np.asarray(self.tokens, dtype=np.int64)
        starts = np.asarray(self.doc_starts, dtype=np.int64)
        if starts.ndim != 1 or starts.size < 2 or starts[0] != 0 or starts[-1] != tokens.size:
            raise DataError("doc_starts must run from 0 to the number of tokens")
        if np.any(np.diff(starts) < 0):
            raise DataError("doc_starts must be non-decreasing")
        if tokens.size and (tokens.min() < 0 or tokens.max() >= len(self.words)):
            raise DataError("token ids must index words")
        for arr in (tokens, starts):
            arr.setflags(write=False)
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "doc_starts", starts)
        object.__setattr__(self, "words", tuple(str(w) for w in self.words))

    @classmethod
    def from_documents(cls, name: str, docs: Iterable[Sequence[str]]) -> TokenCorpus:
        """Build a corpus from documents given as lists of tokens (e.g. :func:`tokenize`)."""
        index: dict[str, int] = {}
        ids: list[int] = []
        starts = [0]
        for doc in docs:
            ids.extend(index.setdefault(w, len(index)) for w in doc)
            starts.append(len(ids))
        return cls(name, tuple(index), np.array(ids, dtype=np.int64), np.array(starts))

    @property
    def n_docs(self) -> int:
        """Number of documents."""
        return int(self.doc_starts.size - 1)

    def frequencies(self) -> NDArray[np.int64]:
        """(len(words),) number of occurrences of each word."""
        return np.bincount(self.tokens, minlength=len(self.words)).astype(np.int64)

    def documents(self) -> Iterator[NDArray[np.int64]]:
        """The documents as word-id arrays, one at a time."""
        for a, b in itertools.pairwise(self.doc_starts):
            yield self.tokens[a:b]


def top_vocabulary(corpus: TokenCorpus, size: int) -> NDArray[np.int64]:
    """Ids of the ``size`` most frequent words of ``corpus`` (ties: alphabetical order)."""
    if size < 2:
        raise DataError(f"the vocabulary needs at least 2 words, got vocab_size={size}")
    freq = corpus.frequencies()
    order = sorted(np.flatnonzero(freq), key=lambda w: (-freq[w], corpus.words[w]))
    return np.array(order[:size], dtype=np.int64)


def ngram_counts(
    docs: Iterable[NDArray[np.int64]], context_len: int, base: int, chunk: int = 1 << 20
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    r"""Counts of the distinct ``(context_len + 1)``-grams of word ids in ``[0, base)``.

    Streams over ``docs`` (each an array of ids; ``-1`` marks a word outside the
    vocabulary, and a window containing one is skipped).  A window
    :math:`(x_1,\dots,x_T,z)` is encoded as the integer
    :math:`\sum_t x_t\,b^{T-t+1} + z` with :math:`b` = ``base``; the keys of about ``chunk``
    windows at a time are reduced to (distinct key, count) and merged into the running
    table, so memory stays proportional to the number of distinct windows.

    Returns
    -------
    keys : (K,) int64, increasing
        The distinct encoded windows (decode with :func:`decode_ngrams`).
    counts : (K,) int64
        Their numbers of occurrences.
    """
    T = int(context_len)
    if T < 1:
        raise DataError(f"context_len must be >= 1, got {context_len}")
    if float(base) ** (T + 1) >= 2.0**63:
        raise DataError(f"vocabulary {base} and context length {T} overflow the int64 n-gram keys")
    weights = base ** np.arange(T, -1, -1, dtype=np.int64)  # (T + 1,)
    keys = np.zeros(0, dtype=np.int64)
    counts = np.zeros(0, dtype=np.int64)
    pending: list[NDArray[np.int64]] = []
    n_pending = 0

    def merge() -> None:
        nonlocal keys, counts, pending, n_pending
        if not pending:
            return
        new, c = np.unique(np.concatenate(pending), return_counts=True)
        allk = np.concatenate([keys, new])
        allc = np.concatenate([counts, c])
        keys, inv = np.unique(allk, return_inverse=True)
        counts = np.bincount(inv, weights=allc, minlength=keys.size).astype(np.int64)
        pending, n_pending = [], 0

    for doc in docs:
        ids = np.asarray(doc, dtype=np.int64)
        if ids.size <= T:
            continue
        win = np.lib.stride_tricks.sliding_window_view(ids, T + 1)  # (len - T, T + 1)
        win = win[(win >= 0).all(axis=1)]
        if win.size:
            pending.append(win @ weights)
            n_pending += win.shape[0]
        if n_pending >= chunk:
            merge()
    merge()
    return keys, counts


def decode_ngrams(
    keys: NDArray[np.int64], context_len: int, base: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Inverse of the encoding of :func:`ngram_counts`: contexts (K, T) and next words (K,)."""
    digits = np.empty((keys.size, context_len + 1), dtype=np.int64)
    rest = np.asarray(keys, dtype=np.int64).copy()
    for t in range(context_len, -1, -1):
        digits[:, t] = rest % base
        rest //= base
    return digits[:, :-1], digits[:, -1]


@dataclasses.dataclass(frozen=True)
class _Qualifying:
    """The n-gram table of a corpus over its top words and the contexts that qualify."""

    vocab: NDArray[np.int64]  # (V,) word ids of the vocabulary, most frequent first
    nxt: NDArray[np.int64]  # (K,) next word (vocabulary rank) of each distinct window
    cnt: NDArray[np.int64]  # (K,) its count
    uctx: NDArray[np.int64]  # (C,) encoded distinct contexts
    first: NDArray[np.int64]  # (C,) first row of each context in the table
    n_next: NDArray[np.int64]  # (C,) number of distinct next words of each context
    ok: NDArray[np.int64]  # indices into uctx of the qualifying contexts, most frequent first


def _qualifying(
    corpus: TokenCorpus, vocab_size: int, context_len: int, min_count: int, min_next: int
) -> _Qualifying:
    """Steps 1-3 of :func:`corpus_dataset` (every qualifying context, none dropped)."""
    for label, val, lo in (
        ("context_len", context_len, 1),
        ("min_count", min_count, 1),
        ("min_next", min_next, 1),
    ):
        if int(val) < lo:
            raise DataError(f"{label} must be >= {lo}, got {val}")
    vocab = top_vocabulary(corpus, vocab_size)
    V = vocab.size
    rank = np.full(len(corpus.words), -1, dtype=np.int64)
    rank[vocab] = np.arange(V)
    keys, cnt = ngram_counts((rank[d] for d in corpus.documents()), context_len, V)
    ctx_key, nxt = np.divmod(keys, V)  # keys are sorted, so each context's rows are adjacent
    uctx, first, n_next = np.unique(ctx_key, return_index=True, return_counts=True)
    total = np.add.reduceat(cnt, first) if keys.size else np.zeros(0, np.int64)
    ok = np.flatnonzero((total >= min_count) & (n_next >= min_next))
    ok = ok[np.lexsort((uctx[ok], -total[ok]))]  # by decreasing count, then by key
    return _Qualifying(vocab, nxt, cnt, uctx, first, n_next, ok)


def count_qualifying(
    corpus: TokenCorpus,
    *,
    vocab_size: int = 1000,
    context_len: int = 2,
    min_count: int = 5,
    min_next: int = 2,
) -> int:
    """The number of contexts of :func:`corpus_dataset` with ``max_contexts=0`` (0 if none
    qualifies, where :func:`corpus_dataset` raises): the largest ``m`` the corpus supports."""
    return int(_qualifying(corpus, vocab_size, context_len, min_count, min_next).ok.size)


def corpus_dataset(
    corpus: TokenCorpus,
    *,
    vocab_size: int = 1000,
    context_len: int = 2,
    min_count: int = 5,
    min_next: int = 2,
    max_contexts: int = 0,
) -> ContextDataset:
    r"""Next-token dataset of a whole corpus with observed counts (sparse, any size).

    1. Vocabulary: the ``vocab_size`` most frequent words (:func:`top_vocabulary`); it is
       both the input and the next-token vocabulary.
    2. Count every window of ``context_len`` words followed by a next word, all inside the
       vocabulary and inside one document (:func:`ngram_counts`, streaming).
    3. Keep the contexts seen at least ``min_count`` times with at least ``min_next``
       distinct next words, ordered by decreasing count (ties: by word ids, i.e. by word
       frequency), and the first ``max_contexts`` of them (``0``: all).
    4. Counts are the observed :math:`n_{z,j}` (no resampling, no synonym expansion); next
       words no kept context uses are dropped, so ``V`` is the number of next words used.

    Raises
    ------
    DataError
        If the parameters are out of range or no context qualifies.
    """
    if int(max_contexts) < 0:
        raise DataError(f"max_contexts must be >= 0, got {max_contexts}")
    q = _qualifying(corpus, vocab_size, context_len, min_count, min_next)
    V = q.vocab.size
    ok = q.ok
    if ok.size == 0:
        raise DataError(
            f"{corpus.name}: no {context_len}-word context over the top {V} words occurs "
            f">= {min_count} times with >= {min_next} different next words"
        )
    if max_contexts:
        ok = ok[:max_contexts]
    m = ok.size
    # rows of the kept contexts in the n-gram table
    rows = np.concatenate([np.arange(q.first[c], q.first[c] + q.n_next[c]) for c in ok])
    col = np.repeat(np.arange(m), q.n_next[ok])
    used, z = np.unique(q.nxt[rows], return_inverse=True)
    counts = sp.csc_array((q.cnt[rows], (z.ravel(), col)), shape=(used.size, m))
    contexts, _ = decode_ngrams(q.uctx[ok] * V, context_len, V)
    words = [corpus.words[w] for w in q.vocab]
    desc = (
        f"{corpus.name}: the {m} most frequent {context_len}-word contexts over the top {V} "
        f"words (count >= {min_count}, >= {min_next} distinct next words), observed counts"
    )
    return ContextDataset(
        name=corpus.name,
        contexts=contexts,
        counts=counts,
        input_vocab=words,
        next_vocab=[words[w] for w in used],
        description=desc,
    )


# ------------------------------------------------------------------------------------------
# A plain-text file as a corpus
# ------------------------------------------------------------------------------------------

_BLANK_LINE = re.compile(r"\n(?:[^\S\n]*\n)+")  # one or more blank lines


def split_documents(text: str) -> list[str]:
    """The documents of a plain text: paragraphs separated by blank lines; a text without
    any blank line has one document per line (e.g. the Lee corpus: one article a line).

    Contexts never cross a document boundary (:func:`ngram_counts`), so a hard-wrapped
    book keeps the contexts that run across its line breaks, and a file of one article per
    line does not join the end of one article to the start of the next.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    parts = _BLANK_LINE.split(text) if _BLANK_LINE.search(text) else text.split("\n")
    return [p for p in parts if p.strip()]


def text_corpus(path: str | os.PathLike[str], name: str | None = None) -> TokenCorpus:
    """A UTF-8 text file as a :class:`TokenCorpus`, tokenised like the Wikipedia sample
    (:func:`tokenize`), documents by :func:`split_documents`; ``name`` defaults to the file
    name.  Cached in memory by the file's content.

    Raises
    ------
    DataError
        If the file is missing, unreadable, empty, binary or not UTF-8
        (:func:`ntpcore.core.io.read_utf8_text`), or holds no word.
    """
    file = Path(path)
    text = _read_text(file)
    return _text_corpus(text, name or file.name)


@functools.lru_cache(maxsize=4)
def _text_corpus(text: str, name: str) -> TokenCorpus:
    corpus = TokenCorpus.from_documents(name, (tokenize(d) for d in split_documents(text)))
    if corpus.tokens.size == 0:
        raise DataError(f"{name}: no word in the text (the tokenizer found nothing to count)")
    return corpus
