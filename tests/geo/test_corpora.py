"""A reader's own corpus for the corpus-scale geometry (issue 22): a UTF-8 text file goes
through the Wikipedia sample's pipeline, a corpus too small for the requested sizes is refused
in one line that says what it supports, and a file that cannot be read as UTF-8 text is
refused with the reason.

The counts are checked against plain ``collections.Counter`` loops over the paragraphs of
the text (an independent implementation of the selection), the supported sizes by running
the suggested command's sizes through the same check.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from textutil import write_story

from ntpcore import geo as g
from ntpcore.core import cache
from ntpcore.errors import DataError, ParameterError
from ntpcore.geo import corpora
from ntpcore.geo.experiments import scale as sc
from ntpcore.geo.tables import BUILTIN_CORPORA
from ntpcore.geo.text import split_documents, tokenize
from ntpcore.geo.train import AdamWProtocol


@pytest.fixture
def text_file(tmp_path):
    return write_story(tmp_path / "story.txt", 40)


def _naive_qualifying(text: str, vocab_size: int, T: int, min_count: int, min_next: int):
    """Contexts -> Counter of next words, by loops over the paragraphs (blank-line separated)."""
    docs = [tokenize(p) for p in re.split(r"\n\s*\n", text) if p.strip()]
    freq = Counter(w for d in docs for w in d)
    vocab = set(sorted(freq, key=lambda w: (-freq[w], w))[:vocab_size])
    table: dict[tuple[str, ...], Counter] = {}
    for d in docs:
        for i in range(len(d) - T):
            win = d[i : i + T + 1]
            if all(w in vocab for w in win):
                table.setdefault(tuple(win[:T]), Counter())[win[T]] += 1
    return {
        c: n for c, n in table.items() if sum(n.values()) >= min_count and len(n) >= min_next
    }, freq


def test_documents_are_paragraphs_or_else_lines() -> None:
    assert split_documents("a b\nc d\n\n  \ne f\r\n\r\ng") == ["a b\nc d", "e f", "g"]
    assert split_documents("one article\nanother\n") == ["one article", "another"]
    lee = corpora.load_corpus("lee_background")  # one article a line, no blank line
    assert lee.n_docs == 300


def test_a_text_file_gives_the_wikipedia_pipelines_set(text_file) -> None:
    text = text_file.read_text(encoding="utf-8")
    want, freq = _naive_qualifying(text, 30, 2, 5, 2)
    corpus = corpora.load_corpus(str(text_file))
    assert corpus.name == "story.txt" and corpus.n_docs == 40
    assert corpus.tokens.size == sum(freq.values()) and len(corpus.words) == len(freq)
    ds = corpora.corpus_set(str(text_file), vocab_size=30, context_len=2, min_count=5, min_next=2)
    got = {
        ctx: Counter({ds.next_vocab[z]: int(n) for z, n in enumerate(ds.counts[:, j]) if n})
        for j, ctx in enumerate(tuple(c.split()) for c in ds.context_strings())
    }
    assert got == want
    totals = [sum(got[c].values()) for c in got]
    assert totals == sorted(totals, reverse=True)  # most frequent first


def test_the_scale_experiment_runs_on_a_text_file(text_file, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "cache"))
    cfg = sc.ScaleConfig(
        sc.CorpusConfig(corpus=str(text_file), vocab_size=30),
        AdamWProtocol(dim=8, n_steps=30, lr=1e-2, lr_milestones=(15,), n_records=5),
        m_values=(6, 12),
        svm_tol=1e-6,
    )
    res = sc.run_scale(cfg, progress=False)
    assert res["corpus"] == str(text_file) and res["corpus_label"] == "story.txt"
    assert not res["corpus_default"] and res["corpus_docs"] == 40
    assert np.all(res["gap"] <= 1e-6)
    assert np.all(res["nuc_excess"] >= -1e-6)  # S~ is feasible
    assert np.all(res["rank_mm"] <= res["n_groups"])
    assert res["ce_minus_H"].shape == (2, res["epoch"].size)
    # the cached L^mm is the reference solver's on the same set (two implementations)
    ds = sc.scale_dataset(cfg.data, 6)
    assert g.direction_distance(sc.svm_point(cfg, 6)["L_mm"], g.solve_nuclear_svm(ds.S).L) < 1e-2


def test_the_default_corpus_keeps_the_cache_keys_it_had() -> None:
    """``corpus`` at its default is not part of the key (the data's fingerprint is), and any
    other corpus has keys of its own."""
    wiki = sc.CorpusConfig(vocab_size=200)
    assert "corpus" not in cache._canonical(wiki)
    other = sc.CorpusConfig(corpus="lee_background", vocab_size=200)
    assert cache._canonical(other)["corpus"] == "lee_background"
    assert cache.cache_key("f", wiki) != cache.cache_key("f", other)


def _suggested(message: str) -> dict[str, object]:
    """The ``--set`` options after "run with", read as a shell and the runner read them."""
    from ntpcore.runner.runner import parse_set

    words = shlex.split(message.split("; run with ", 1)[1])
    assert words[::2] == ["--set"] * (len(words) // 2)
    return parse_set(words[1::2])


@pytest.mark.parametrize(
    ("vocab_size", "m_values"),
    [(30, (50, 100, 200, 400)), (500, (5, 10)), (500, (50, 100, 200, 400))],
)
def test_a_corpus_too_small_says_in_one_line_what_it_supports(text_file, vocab_size, m_values):
    text = text_file.read_text(encoding="utf-8")
    _, freq = _naive_qualifying(text, 1, 2, 5, 2)
    n_words = len(freq)
    V = min(vocab_size, n_words)
    q = len(_naive_qualifying(text, V, 2, 5, 2)[0])
    kw = dict(context_len=2, min_count=5, min_next=2)
    with pytest.raises(ParameterError) as info:
        corpora.check_supports(str(text_file), vocab_size=vocab_size, m_values=m_values, **kw)
    msg = str(info.value)
    assert "\n" not in msg
    assert f"{sum(freq.values()):,} tokens" in msg and f"{n_words:,} distinct words" in msg
    assert f"{q:,} 2-word contexts" in msg
    if vocab_size > n_words:
        assert f"vocab_size <= {n_words}" in msg
    fix = _suggested(msg)
    assert fix.get("vocab_size", vocab_size) == V
    ladder = fix.get("m_values", list(m_values))
    assert max(ladder) <= q and ladder == sorted(set(ladder))
    # the suggested sizes are supported
    assert corpora.check_supports(str(text_file), vocab_size=V, m_values=tuple(ladder), **kw) == q


def test_the_experiment_refuses_a_small_corpus_before_any_work(text_file, monkeypatch) -> None:
    import ntpcore.core.sweep as sweep

    def never(*args, **kwargs):
        raise AssertionError("the ladder started")

    monkeypatch.setattr(sweep, "map_runs", never)
    cfg = sc.ScaleConfig(sc.CorpusConfig(corpus=str(text_file), vocab_size=30), m_values=(100, 200))
    with pytest.raises(ParameterError, match=r"fewer than the largest m_values 200"):
        sc.run_scale(cfg, progress=False)


def test_a_corpus_with_too_few_contexts_says_so() -> None:
    with pytest.raises(ParameterError, match=r"crime_and_punishment .* needs at least 3"):
        corpora.check_supports(
            "crime_and_punishment",
            vocab_size=200,
            context_len=2,
            min_count=5,
            min_next=2,
            m_values=(5,),
        )


def test_a_file_that_is_not_utf8_names_the_first_bad_byte(tmp_path) -> None:
    path = tmp_path / "latin.txt"
    head = b"the cat sat on the mat .\n"
    path.write_bytes(head + "le café est noir .\n".encode("latin-1"))
    offset = len(head) + len("le caf")
    with pytest.raises(DataError) as info:
        corpora.load_corpus(str(path))
    msg = str(info.value)
    assert "latin.txt" in msg and "not UTF-8" in msg
    assert f"byte 0xe9 at offset {offset}" in msg and "(line 2)" in msg
    assert "iconv -f latin1 -t utf-8 latin.txt" in msg
    fixed = tmp_path / "latin.utf8.txt"
    fixed.write_text(path.read_bytes().decode("latin-1"), encoding="utf-8")
    assert "café" in corpora.load_corpus(str(fixed)).words


def test_a_missing_empty_binary_or_unreadable_file_is_refused(tmp_path, monkeypatch) -> None:
    with pytest.raises(DataError, match="does not exist"):
        corpora.load_corpus(str(tmp_path / "missing.txt"))
    with pytest.raises(DataError, match="is not a file"):
        corpora.load_corpus(str(tmp_path))
    (tmp_path / "blank.txt").write_text(" \n\n", encoding="utf-8")
    with pytest.raises(DataError, match="empty"):
        corpora.load_corpus(str(tmp_path / "blank.txt"))
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)))
    with pytest.raises(DataError, match="NUL bytes"):
        corpora.load_corpus(str(tmp_path / "blob.bin"))
    (tmp_path / "symbols.txt").write_text("-- ** ## ~~\n", encoding="utf-8")
    with pytest.raises(DataError, match="no word"):
        corpora.load_corpus(str(tmp_path / "symbols.txt"))
    locked = tmp_path / "locked.txt"
    locked.write_text("the cat sat .\n", encoding="utf-8")
    read_bytes = Path.read_bytes

    def denied(self):  # what a file without read permission does (root reads it anyway)
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(DataError, match=r"locked.txt' cannot be read \(Permission denied\)"):
        corpora.load_corpus(str(locked))


def test_the_notebook_offers_the_builtin_corpora_by_name() -> None:
    from ntpcore.core import paths
    from ntpcore.runner import registry

    spec = registry.parse_parameters(paths.ROOT / "notebooks" / "geo_corpus_scale.ipynb")["corpus"]
    assert spec.default == corpora.DEFAULT_CORPUS
    assert sorted(c for c in spec.choices if c != registry.TEXT_FILE) == sorted(BUILTIN_CORPORA)
    assert registry.TEXT_FILE in spec.choices


def test_the_lee_corpus_fits_the_quick_profile_and_not_the_paper_profile() -> None:
    """What the book's page says of the sizes the profiles need."""
    from ntpcore.runner import registry

    entry = registry.load_registry()["geo-corpus-scale"]
    specs = registry.parse_parameters(entry.notebook_path)
    keys = ("vocab_size", "context_len", "min_count", "min_next", "m_values")
    for profile in ("quick", "paper"):
        p = {k: specs[k].default for k in keys} | entry.overrides(profile)
        kw = {k: p[k] for k in keys[:-1]}
        if profile == "quick":
            q = corpora.check_supports("lee_background", m_values=tuple(p["m_values"]), **kw)
            assert q >= max(p["m_values"])
        else:
            with pytest.raises(ParameterError, match="fewer than the largest m_values"):
                corpora.check_supports("lee_background", m_values=tuple(p["m_values"]), **kw)
