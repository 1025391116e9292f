"""Tests of the next-token datasets (paper ``geo``; book: *Datasets*)."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore.errors import DataError
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.synthetic import synthetic_dataset
from ntpcore.geo.text import builtin_corpus_path, text_dataset


@pytest.fixture(scope="module")
def synth() -> ContextDataset:
    return synthetic_dataset(seed=0)


@pytest.fixture(scope="module")
def lee() -> ContextDataset:
    return text_dataset()


def test_synthetic_structure(synth: ContextDataset) -> None:
    assert (synth.m, synth.T) == (16, 5)
    assert 26 <= synth.V <= 34
    assert np.all(synth.support_sizes == 3)
    groups = synth.support_groups
    assert len(groups) == 14
    assert sorted(len(g) for g in groups).count(2) == 2
    assert synth.counts.max() <= 4 and synth.counts[synth.S].min() >= 1


@pytest.mark.parametrize("name", ["synth", "lee"])
def test_soft_labels_and_entropy(name: str, request: pytest.FixtureRequest) -> None:
    ds: ContextDataset = request.getfixturevalue(name)
    P, pi = ds.P, ds.pi
    assert P.shape == (ds.V, ds.m) and pi.shape == (ds.m,)
    np.testing.assert_allclose(P.sum(axis=0), 1.0, atol=1e-14)
    assert abs(pi.sum() - 1.0) < 1e-14
    np.testing.assert_array_equal(ds.S, P > 0)
    # entropy two ways: average of -log p(z|x) over the n samples vs the formula
    j, z = ds.samples()
    assert j.shape == (ds.n,)
    per_sample = -np.log(P[z, j]).mean()
    assert abs(per_sample - ds.entropy) < 1e-12
    # every group really shares one support, and distinct groups differ
    S = ds.S
    reps = [S[:, g[0]] for g in ds.support_groups]
    for g, r in zip(ds.support_groups, reps, strict=True):
        assert np.all(S[:, g] == r[:, None])
    assert len({r.tobytes() for r in reps}) == len(reps)


def test_synthetic_reproducible() -> None:
    a, b = synthetic_dataset(3), synthetic_dataset(3)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert a.next_vocab == b.next_vocab


def test_text_dataset_shape(lee: ContextDataset) -> None:
    assert lee.m >= 100 and 50 <= lee.V <= 200
    assert lee.n_original < lee.m  # synonym expansion created variants
    assert len(lee.support_groups) <= lee.n_original
    assert builtin_corpus_path().is_file()


def test_local_file(tmp_path) -> None:
    text = "the cat sat on the mat . " * 3 + "the cat sat on the rug . the cat sat on the bed ."
    f = tmp_path / "tiny.txt"
    f.write_text(text, encoding="utf-8")
    ds = text_dataset(f, expand=False, counts="observed", top_k=5)
    j = ds.context_strings().index("the cat sat on the")
    words = {ds.next_vocab[z]: int(c) for z, c in enumerate(ds.counts[:, j]) if c}
    assert words == {"mat": 3, "rug": 1, "bed": 1}


def test_bad_inputs(tmp_path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    with pytest.raises(DataError, match="empty"):
        text_dataset(empty)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(DataError, match="not text"):
        text_dataset(binary)
    with pytest.raises(DataError, match="does not exist"):
        text_dataset(tmp_path / "missing.txt")
    with pytest.raises(DataError, match="empty support"):
        ContextDataset(
            "x", np.array([[0], [1]]), np.array([[1, 0], [2, 0]]), ("a", "b"), ("u", "v")
        )
    with pytest.raises(DataError, match="columns"):
        ContextDataset("x", np.array([[0]]), np.array([[1, 1], [2, 0]]), ("a",), ("u", "v"))
