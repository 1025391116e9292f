"""Tests of the corpus-scale pipeline: the Wikipedia sample and the sparse n-gram counts.

Two independent implementations are compared throughout: the streaming, vectorised
counts of :mod:`ntpcore.geo.text` against plain ``collections.Counter`` loops over the same
tokens.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from ntpcore.errors import DataError
from ntpcore.geo.text import (
    TokenCorpus,
    corpus_dataset,
    decode_ngrams,
    ngram_counts,
    tokenize,
    top_vocabulary,
)
from ntpcore.geo.wiki import wiki_articles, wiki_corpus, wiki_dataset, wiki_path

TEXTS = [
    "the cat sat on the mat . the cat sat on the rug . the dog sat on the mat .",
    "a dog and a cat . the cat and the dog sat . the cat sat on a mat .",
    "on the mat the cat sat , on the rug the dog sat .",
]


@pytest.fixture(scope="module")
def toy() -> TokenCorpus:
    return TokenCorpus.from_documents("toy", (tokenize(t) for t in TEXTS))


def _naive(docs: list[list[str]], vocab: set[str], T: int) -> dict[tuple[str, ...], Counter]:
    table: dict[tuple[str, ...], Counter] = {}
    for doc in docs:
        for i in range(len(doc) - T):
            win = doc[i : i + T + 1]
            if all(w in vocab for w in win):
                table.setdefault(tuple(win[:T]), Counter())[win[T]] += 1
    return table


def test_token_corpus_roundtrip(toy: TokenCorpus) -> None:
    docs = [tokenize(t) for t in TEXTS]
    assert toy.n_docs == 3 and toy.tokens.size == sum(map(len, docs))
    for doc, ids in zip(docs, toy.documents(), strict=True):
        assert [toy.words[i] for i in ids] == doc
    freq = Counter(w for d in docs for w in d)
    assert {toy.words[i]: int(c) for i, c in enumerate(toy.frequencies())} == freq


@pytest.mark.parametrize("T", [1, 2, 3])
@pytest.mark.parametrize("chunk", [1, 5, 1 << 20])
def test_ngram_counts_match_counter(toy: TokenCorpus, T: int, chunk: int) -> None:
    vocab_ids = top_vocabulary(toy, 6)
    V = vocab_ids.size
    rank = np.full(len(toy.words), -1)
    rank[vocab_ids] = np.arange(V)
    keys, counts = ngram_counts((rank[d] for d in toy.documents()), T, V, chunk=chunk)
    assert np.all(np.diff(keys) > 0)
    ctx, nxt = decode_ngrams(keys, T, V)
    words = [toy.words[i] for i in vocab_ids]
    got = Counter()
    for c, z, k in zip(ctx, nxt, counts, strict=True):
        got[(tuple(words[i] for i in c), words[z])] = int(k)
    naive = _naive([tokenize(t) for t in TEXTS], set(words), T)
    want = Counter({(c, z): k for c, ctr in naive.items() for z, k in ctr.items()})
    assert got == want


def test_corpus_dataset_matches_naive_pipeline(toy: TokenCorpus) -> None:
    ds = corpus_dataset(toy, vocab_size=8, context_len=2, min_count=2, min_next=2)
    words = [toy.words[i] for i in top_vocabulary(toy, 8)]
    naive = _naive([tokenize(t) for t in TEXTS], set(words), 2)
    kept = {c: ctr for c, ctr in naive.items() if sum(ctr.values()) >= 2 and len(ctr) >= 2}
    strings = [tuple(s.split(" ")) for s in ds.context_strings()]
    assert set(strings) == set(kept)
    totals = [sum(kept[c].values()) for c in strings]
    assert totals == sorted(totals, reverse=True)  # most frequent first
    for j, c in enumerate(strings):
        col = ds.counts_sparse[:, [j]].toarray().ravel()
        assert {ds.next_vocab[z]: int(k) for z, k in enumerate(col) if k} == dict(kept[c])
    assert set(ds.next_vocab) == {z for c in kept.values() for z in c}  # unused words dropped
    head = corpus_dataset(toy, vocab_size=8, context_len=2, min_count=2, min_next=2, max_contexts=2)
    assert head.context_strings() == ds.context_strings()[:2]


def test_corpus_dataset_errors(toy: TokenCorpus) -> None:
    with pytest.raises(DataError, match="no 2-word context"):
        corpus_dataset(toy, vocab_size=8, context_len=2, min_count=1000)
    with pytest.raises(DataError, match="at least 2 words"):
        corpus_dataset(toy, vocab_size=1)
    with pytest.raises(DataError, match="overflow"):
        ngram_counts([np.arange(5)], 20, 10**4)
    with pytest.raises(DataError, match="doc_starts"):
        TokenCorpus("x", ("a",), np.zeros(3, dtype=np.int64), np.array([0, 2]))


def test_wiki_articles_and_corpus() -> None:
    assert wiki_path().is_file()
    arts = wiki_articles()
    assert len(arts) > 100
    assert not any(t.lstrip().lower().startswith("#redirect") for _, t in arts)
    corpus = wiki_corpus()
    assert corpus.n_docs == len(arts)
    first = tokenize(arts[0][1])
    assert [corpus.words[i] for i in next(corpus.documents())] == first
    assert corpus.tokens.size == sum(len(tokenize(t)) for _, t in arts)
    assert corpus.tokens.size > 400_000  # about ten times the paper's real-text sets


def test_wiki_dataset_scale() -> None:
    ds = wiki_dataset(vocab_size=1000, context_len=2, min_count=5, min_next=2)
    assert ds.m >= 5000 and ds.V >= 990
    assert ds.support_sizes.min() >= 2
    totals = np.asarray(ds.counts_sparse.sum(axis=0)).ravel()
    assert totals.min() >= 5 and np.all(np.diff(totals) <= 0)
    # the sparse statistics agree with the dense definitions
    P = ds.P
    np.testing.assert_allclose(P.sum(axis=0), 1.0, atol=1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        H = -np.sum(ds.pi[None, :] * np.where(P > 0, P * np.log(P), 0.0))
    assert abs(H - ds.entropy) < 1e-10
