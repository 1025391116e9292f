r"""Corpora by name or by path, and what a corpus can support [geo, Sec. 3].

The corpus-scale experiment (:mod:`ntpcore.geo.experiments.scale`) runs on any tokenised
corpus (:class:`~ntpcore.geo.text.TokenCorpus`) through one pipeline,
:func:`ntpcore.geo.text.corpus_dataset`.  A corpus is named by a string (:func:`load_corpus`):

* a built-in corpus (:data:`~ntpcore.geo.tables.BUILTIN_CORPORA`, shipped inside the
  gensim wheel, nothing downloaded): ``enwiki-shortened``, the Wikipedia sample of
  :mod:`ntpcore.geo.wiki` (one document per article); ``lee_background``, the Lee news
  corpus (one article a line); ``crime_and_punishment``, a 4 kB Russian excerpt;
* otherwise the path of a UTF-8 text file (:func:`ntpcore.geo.text.text_corpus`: paragraphs
  separated by blank lines are the documents, or lines where there is no blank line).

:func:`check_supports` says, in one line, what a corpus can support when it is too small for
the requested vocabulary size ``V`` or number of contexts ``m``.
"""

from __future__ import annotations

import functools
from pathlib import Path

from ntpcore.errors import ParameterError
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.tables import BUILTIN_CORPORA
from ntpcore.geo.text import (
    TokenCorpus,
    builtin_corpus_path,
    corpus_dataset,
    count_qualifying,
    text_corpus,
)
from ntpcore.geo.wiki import WIKI_NAME, wiki_corpus

#: the corpus of the registry figure ``geo-corpus-scale``
DEFAULT_CORPUS = WIKI_NAME


def is_builtin(source: str) -> bool:
    """Whether ``source`` names a built-in corpus (a path never does: names come first)."""
    return source in BUILTIN_CORPORA


def load_corpus(source: str) -> TokenCorpus:
    """The corpus a string names: a built-in corpus by name, else a UTF-8 text file's path.

    Raises
    ------
    DataError
        If the file is missing, unreadable, empty, not text or not UTF-8, or a built-in
        corpus's package is missing.
    """
    if source == WIKI_NAME:
        return wiki_corpus()
    if is_builtin(source):
        return text_corpus(builtin_corpus_path(source), name=source)
    return text_corpus(Path(source))


def corpus_label(source: str) -> str:
    """How the book names a corpus: the built-in one by name, a file by its file name."""
    if source == WIKI_NAME:
        return "the Wikipedia sample (enwiki-shortened)"
    if is_builtin(source):
        return f"the built-in corpus {source}"
    return Path(source).name


@functools.lru_cache(maxsize=8)
def _dataset(corpus: TokenCorpus, filters: tuple[tuple[str, int], ...]) -> ContextDataset:
    return corpus_dataset(corpus, **dict(filters))


def corpus_set(source: str, **filters: int) -> ContextDataset:
    """``corpus_dataset(load_corpus(source), **filters)``, cached in memory per corpus
    content (the filters of :func:`ntpcore.geo.text.corpus_dataset`)."""
    return _dataset(load_corpus(source), tuple(sorted(filters.items())))


def _ladder(m_values: tuple[int, ...], top: int) -> list[int]:
    """The ladder ``m_values`` scaled down so that its largest rung is ``top`` (rungs >= 3)."""
    scale = top / max(m_values)
    return sorted({max(3, round(m * scale)) for m in m_values} | {top})


def check_supports(
    source: str,
    *,
    vocab_size: int,
    context_len: int,
    min_count: int,
    min_next: int,
    m_values: tuple[int, ...],
) -> int:
    """The number of qualifying contexts of ``source`` at ``vocab_size``, or a one-line
    :class:`ParameterError` saying what the corpus supports when it is too small.

    Too small: ``vocab_size`` above the number of distinct words (tokens include the
    punctuation marks ``. , ! ? ; :``), ``max(m_values)`` above the number of qualifying
    contexts (:func:`ntpcore.geo.text.count_qualifying`), or fewer than 3 of those (the
    embedding geometry needs 3 contexts).  The message gives the corpus's size, what it
    supports, and the ``--set`` options of a run that fits.
    """
    corpus = load_corpus(source)
    n_words = len(corpus.words)
    head = (
        f"{corpus_label(source)} has {corpus.tokens.size:,} tokens in {corpus.n_docs:,} "
        f"document(s) and {n_words:,} distinct words"
    )
    filters = dict(context_len=context_len, min_count=min_count, min_next=min_next)
    what = (
        f"{context_len}-word contexts seen >= {min_count} times with >= {min_next} "
        f"distinct next words"
    )
    V = min(vocab_size, n_words)
    q = count_qualifying(corpus, vocab_size=V, **filters)
    m_max = max(m_values)
    if V == vocab_size and q >= max(m_max, 3):
        return q
    # how many contexts the whole vocabulary would give (if its n-gram keys fit in int64)
    q_all = q
    if V < n_words and float(n_words) ** (context_len + 1) < 2.0**63:
        q_all = count_qualifying(corpus, vocab_size=n_words, **filters)
    more = f" ({q_all:,} with vocab_size={n_words})" if q_all > q else ""
    if V < vocab_size:
        where = f"it supports vocab_size <= {n_words}, not {vocab_size}, and has {q:,} {what}"
    else:
        where = f"at vocab_size={V} it has {q:,} {what}{more}"
    if q < 3:
        raise ParameterError(
            f"{head}: {where}; the figure needs at least 3: use a longer text or lower min_count"
        )
    fix = [f"--set vocab_size={V}"] if V < vocab_size else []
    if m_max > q:
        where += f", fewer than the largest m_values {m_max}"
        fix.append(f"--set 'm_values=[{', '.join(str(m) for m in _ladder(m_values, q))}]'")
    raise ParameterError(f"{head}: {where}; run with {' '.join(fix)}")
