r"""A real corpus at scale: the English Wikipedia sample shipped inside gensim [geo, Sec. 3].

The paper checks its geometry on sets of at most :math:`V\le104` words and :math:`m\le403`
contexts.  This module supplies a corpus large enough to build next-token sets of thousands
of distinct contexts over a vocabulary of a thousand or more words: the shortened English
Wikipedia dump that the gensim wheel carries as test data (``enwiki-latest-pages-articles1
.xml-p000000010p000030302-shortened.bz2``; nothing is downloaded).

* :func:`wiki_path` -- where the dump lies inside the installed gensim;
* :func:`wiki_articles` -- its articles as plain text: pages of the main namespace
  (gensim's ``extract_pages``), wiki markup stripped (``filter_wiki``), redirects dropped;
* :func:`wiki_corpus` -- the articles tokenised (:func:`ntpcore.geo.text.tokenize`) into a
  :class:`~ntpcore.geo.text.TokenCorpus`, one document per article.  Extraction takes
  seconds, so the token arrays are cached on disk (:func:`ntpcore.core.cache.cached`,
  keyed by the dump's SHA-256) and in memory;
* :func:`wiki_dataset` -- a next-token set over it by
  :func:`ntpcore.geo.text.corpus_dataset`: the top-``vocab_size`` words, contexts of
  ``context_len`` words seen at least ``min_count`` times with at least ``min_next``
  distinct next words, the ``max_contexts`` most frequent, observed counts
  :math:`n_{z,j}` held sparse.
"""

from __future__ import annotations

import bz2
import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ntpcore.core.cache import cached
from ntpcore.errors import DataError
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.text import TokenCorpus, builtin_corpus_path, corpus_dataset, tokenize

#: the dump inside the gensim package (its test data), a key of ``BUILTIN_CORPORA``
WIKI_NAME = "enwiki-shortened"


def wiki_path() -> Path:
    """Path of the shortened English Wikipedia dump inside the installed gensim wheel.

    Raises
    ------
    DataError
        If gensim is not installed or does not ship the file.
    """
    return builtin_corpus_path(WIKI_NAME)


def _is_redirect(text: str) -> bool:
    return text.lstrip().lower().startswith("#redirect")


def wiki_articles(path: str | os.PathLike[str] | None = None) -> list[tuple[str, str]]:
    """(title, plain text) of the articles of a Wikipedia XML dump (bz2), redirects dropped.

    ``path`` defaults to :func:`wiki_path`.  Pages of the main namespace only; wiki markup
    is removed by gensim's ``filter_wiki``.
    """
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki

    file = wiki_path() if path is None else Path(path)
    if not file.is_file():
        raise DataError(f"Wikipedia dump {str(file)!r} does not exist or is not a file")
    out = []
    with bz2.open(file, "rb") as fh:
        for title, text, _ in extract_pages(fh, filter_namespaces=("0",)):
            if not _is_redirect(text):
                out.append((str(title), filter_wiki(text)))
    if not out:
        raise DataError(f"{file.name}: no article (only redirects or other namespaces)")
    return out


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file (hex), the cache key of its extraction."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class _ExtractKey:
    """What the cached extraction depends on: the dump's content."""

    sha256: str


@cached
def _extract(key: _ExtractKey) -> dict[str, object]:
    path = wiki_path()
    if file_sha256(path) != key.sha256:
        raise DataError(f"{path.name} changed while it was being read")
    arts = wiki_articles(path)
    corpus = TokenCorpus.from_documents(WIKI_NAME, (tokenize(text) for _, text in arts))
    return {
        "words": np.array(corpus.words, dtype=str),
        "tokens": corpus.tokens.astype(np.int32),
        "doc_starts": corpus.doc_starts,
        "titles": np.array([t for t, _ in arts], dtype=str),
    }


@functools.lru_cache(maxsize=1)
def wiki_corpus() -> TokenCorpus:
    """The tokenised Wikipedia sample, one document per article (cached on disk)."""
    res = _extract(_ExtractKey(file_sha256(wiki_path())))
    return TokenCorpus(
        WIKI_NAME,
        tuple(str(w) for w in res["words"]),
        np.asarray(res["tokens"], dtype=np.int64),
        np.asarray(res["doc_starts"], dtype=np.int64),
    )


@functools.lru_cache(maxsize=4)
def wiki_dataset(**filters: int) -> ContextDataset:
    """Next-token set of the Wikipedia sample: ``corpus_dataset(wiki_corpus(), **filters)``
    (filters ``vocab_size``, ``context_len``, ``min_count``, ``min_next``, ``max_contexts``:
    see :func:`ntpcore.geo.text.corpus_dataset`)."""
    return corpus_dataset(wiki_corpus(), **filters)
