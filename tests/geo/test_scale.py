"""Tests of the corpus-scale geometry: sparse datasets, the factored embedding correlation and
the cached experiment of ``geo-corpus-scale`` on a small instance."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from ntpcore import geo as g
from ntpcore.errors import DataError
from ntpcore.geo.data import ContextDataset, head_contexts, subset_contexts, support_groups
from ntpcore.geo.experiments import scale as sc
from ntpcore.geo.text import text_dataset
from ntpcore.geo.train import AdamWProtocol


def _random_set(seed: int, V: int = 12, m: int = 30) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 4, size=(V, m)) * (rng.random((V, m)) < 0.3)
    counts[rng.integers(0, V, size=m), np.arange(m)] += 1  # no empty column
    counts[:, 5] = counts[:, 3]  # two contexts with the same support
    contexts = np.stack([np.arange(m) // 7, np.arange(m) % 7], axis=1)
    return contexts, counts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sparse_and_dense_datasets_agree(seed: int) -> None:
    contexts, counts = _random_set(seed)
    voc_in, voc_next = [f"w{i}" for i in range(7)], [f"z{i}" for i in range(counts.shape[0])]
    dense = ContextDataset("d", contexts, counts, voc_in, voc_next)
    sparse = ContextDataset("s", contexts, sp.csr_matrix(counts), voc_in, voc_next)
    np.testing.assert_array_equal(sparse.counts, counts)
    assert sparse.counts.flags["C_CONTIGUOUS"]  # same layout, same rounding as a dense input
    for ds in (dense, sparse):
        c = counts.astype(float)
        P = c / c.sum(axis=0)
        np.testing.assert_allclose(ds.P, P, rtol=0, atol=0)
        np.testing.assert_allclose(ds.pi, c.sum(axis=0) / c.sum(), rtol=0, atol=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            H = -np.nansum(ds.pi * np.where(P > 0, P * np.log(P), 0.0).sum(axis=0))
        assert abs(ds.entropy - H) < 1e-13
        np.testing.assert_array_equal(ds.support_sizes, (counts > 0).sum(axis=0))
        assert ds.n == counts.sum() and ds.n_pairs == np.count_nonzero(counts)
        j, z = ds.samples()
        assert np.all(
            np.bincount(j * counts.shape[0] + z, minlength=counts.size) == counts.T.ravel()
        )
    dense_groups = support_groups(counts > 0)
    for groups in (sparse.support_groups, support_groups(sp.csc_array(counts))):
        assert [gr.tolist() for gr in groups] == [gr.tolist() for gr in dense_groups]
    assert any(3 in gr and 5 in gr for gr in dense_groups)
    with pytest.raises(AttributeError):
        sparse.name = "x"  # type: ignore[misc]
    with pytest.raises(ValueError):
        sparse.counts[0, 0] = 7


def test_sparse_validation() -> None:
    bad = sp.csc_array(np.array([[1, 0], [2, 0]]))
    with pytest.raises(DataError, match="empty support"):
        ContextDataset("x", np.array([[0], [1]]), bad, ("a", "b"), ("u", "v"))
    with pytest.raises(DataError, match="non-negative"):
        ContextDataset(
            "x", np.array([[0]]), sp.csc_array(np.array([[1], [-1]])), ("a",), ("u", "v")
        )


def test_cutting_a_set() -> None:
    ds = text_dataset()
    sub = subset_contexts(ds, 25)
    assert sub.m == 25 and sub.counts.sum(axis=1).min() > 0
    head = head_contexts(ds, 40)
    np.testing.assert_array_equal(head.contexts, ds.contexts[:40])
    used = ds.counts[:, :40].sum(axis=1) > 0
    np.testing.assert_array_equal(head.counts, ds.counts[:, :40][used])
    assert head_contexts(ds, 0) is ds and head_contexts(ds, ds.m) is ds


@pytest.mark.parametrize("seed", [0, 1])
def test_cosine_correlation_matches_the_matrices(seed: int) -> None:
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((40, 5)), rng.standard_normal((40, 9))
    Y[:, :5] += 2 * X  # correlated geometry
    X[7] = 0.0  # a zero embedding (cosine 0 with everything, 0 on the diagonal)
    want = g.offdiag_correlation(g.cosine_matrix(X), g.cosine_matrix(Y))
    assert abs(sc.cosine_correlation(X, Y) - want) < 1e-12
    assert abs(sc.cosine_correlation(Y, Y) - 1.0) < 1e-12
    Q = np.linalg.qr(rng.standard_normal((9, 9)))[0]
    assert abs(sc.cosine_correlation(Y @ Q, Y) - 1.0) < 1e-12  # rotation invariant


def test_scale_experiment_small(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path))
    cfg = sc.ScaleConfig(
        sc.CorpusConfig(vocab_size=60),
        AdamWProtocol(dim=16, n_steps=40, lr=1e-2, lr_milestones=(20,), n_records=6),
        m_values=(12, 24),
        svm_tol=1e-6,
    )
    res = sc.run_scale(cfg)
    assert np.all(res["gap"] <= 1e-6)
    assert np.all(res["nuc_excess"] >= -1e-6)  # S~ is feasible: ||S~||_* >= ||L^mm||_*
    assert np.all(res["rank_mm"] <= res["n_groups"])
    assert np.all(res["rank_mm"] <= np.minimum(res["V"], res["m_values"]))
    assert np.all(res["ce_minus_H"] >= 0) and np.all(res["pf_rel"] >= 0)
    assert np.all(res["ce_minus_H"][:, -1] < res["ce_minus_H"][:, 0])
    # the cached L^mm is the reference solver's (two implementations)
    ds = sc.scale_dataset(cfg.data, 12)
    L_ref = g.solve_nuclear_svm(ds.S, tol=1e-9).L
    L = np.asarray(sc.svm_point(cfg, 12)["L_mm"])
    assert g.direction_distance(L, L_ref) < 1e-2
    with pytest.raises(DataError, match="asked for m"):
        sc.scale_dataset(cfg.data, 10**6)
    with pytest.raises(DataError, match="m_values"):
        sc.ScaleConfig(m_values=(5, 3))


@pytest.mark.long
def test_scale_ladder_is_the_same_serially_and_on_a_cluster(
    tmp_path, monkeypatch: pytest.MonkeyPatch, cluster: str
) -> None:
    """The rungs of the ladder are independent runs of the sweep API: a ``dask.distributed``
    cluster returns the serial ladder exactly, and each rung is the one computed alone."""
    cfg = sc.ScaleConfig(
        sc.CorpusConfig(vocab_size=40),
        AdamWProtocol(dim=8, n_steps=12, lr=1e-2, lr_milestones=(6,), n_records=4),
        m_values=(8, 16),
        svm_tol=1e-6,
    )
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "serial"))
    serial = sc.run_scale(cfg, progress=False)
    clus = sc.run_scale(cfg, scheduler=cluster, progress=False)
    timings = {"svm_seconds", "train_seconds"}
    assert set(clus) == set(serial)
    for key in set(serial) - timings:
        np.testing.assert_array_equal(clus[key], serial[key], err_msg=key)
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "alone"))
    alone = sc.ladder_point(sc.LadderPoint(cfg, 16))  # the last rung computed on its own
    np.testing.assert_array_equal(alone["ufm"]["ce_minus_H"], serial["ce_minus_H"][1])
    assert alone["svm"]["m"] == 16 and np.all(serial["gap"] <= 1e-6)
