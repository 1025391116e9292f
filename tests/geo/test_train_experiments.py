"""Cached training experiments (ntpcore.geo.experiments.training): keys, subsets, resumption."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ntpcore.errors import DataError
from ntpcore.geo import train as gt
from ntpcore.geo.data import subset_contexts
from ntpcore.geo.experiments import convex as cx
from ntpcore.geo.experiments import training as ex
from ntpcore.geo.experiments.datasets import DataConfig, load_dataset
from ntpcore.geo.synthetic import synthetic_dataset

TINY = {"n_steps": 30, "lr": 1e-3, "lr_milestones": (20,), "n_records": 6, "dim": 16}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_subset_keeps_whole_groups_in_order() -> None:
    ds = synthetic_dataset(seed=0)
    sub = subset_contexts(ds, 6)
    assert sub.m == 6
    assert sub.counts.sum(axis=1).min() > 0  # unused next words dropped
    rows = {tuple(r) for r in ds.contexts.tolist()}
    assert all(tuple(r) in rows for r in sub.contexts.tolist())
    # the synthetic set opens with a same-support pair: it survives the subset
    assert any(len(g) == 2 for g in sub.support_groups)
    assert subset_contexts(ds, 0) is ds and subset_contexts(ds, 99) is ds


PROTOCOL = gt.AdamWProtocol(**TINY)


def test_configs_validate_and_share_runs() -> None:
    setup = ex.ModelsConfig(protocol=PROTOCOL, models=("ufm", "lstm"))
    run = setup.run("lstm")
    assert isinstance(run, ex.RunConfig) and run.trainer.model == "lstm"
    assert run.trainer.protocol.n_steps == 30 and run.data == setup.data
    evo = ex.EvolutionConfig(protocol=PROTOCOL, model="lstm", snapshot_steps=(0, 10))
    assert evo.run() == run  # figure configs share the training run
    assert ex.LabelledConfig(protocol=PROTOCOL, model="lstm").run() == run
    with pytest.raises(DataError):
        DataConfig(dataset="tinystories")
    with pytest.raises(DataError):
        ex.ModelsConfig(models=("gpt",))
    with pytest.raises(DataError):
        ex.LabelledConfig(which="both")


def test_configurations_are_composed_of_the_dataset_and_the_protocol() -> None:
    """The protocol is declared once (:class:`AdamWProtocol`) and every training
    configuration holds it as a part, with the dataset: a run is built from them, never by
    copying fields from one configuration into another."""
    parts = {"data": DataConfig, "protocol": gt.AdamWProtocol}
    for cls, own in (
        (ex.ModelsConfig, {"models"}),
        (ex.EvolutionConfig, {"model", "snapshot_steps"}),
        (ex.LabelledConfig, {"model", "which"}),
    ):
        fields = {f.name: f.type for f in dataclasses.fields(cls)}
        assert set(fields) == set(parts) | own, cls
    hints = {f.name: f.type for f in dataclasses.fields(ex.RunConfig)}
    assert set(hints) == {"data", "trainer"}
    assert {f.name for f in dataclasses.fields(gt.TrainerConfig)} == {
        "protocol", "model", "tf_layers", "tf_heads", "lstm_layers", "lstm_bias", "dtype"
    }  # fmt: skip
    with pytest.raises(DataError):
        gt.AdamWProtocol(lr=0.0)
    run = ex.ModelsConfig(protocol=PROTOCOL, models=("transformer",)).run("transformer")
    assert run.trainer.protocol is PROTOCOL and run.trainer.protocol.lr_milestones == (20,)


def test_a_training_run_loads_its_dataset_once(cache, monkeypatch) -> None:
    loads = []
    real = ex.load_dataset
    monkeypatch.setattr(ex, "load_dataset", lambda data: loads.append(data) or real(data))
    run = ex.RunConfig(trainer=gt.TrainerConfig(PROTOCOL, "ufm"))
    ex.train_run(run)
    assert len(loads) == 1
    ex.run_metrics(run)
    assert len(loads) == 2  # one more call, one more load
    setup = ex.ModelsConfig(protocol=PROTOCOL, models=("ufm", "lstm"))
    loads.clear()
    ex.training_curves(setup)
    assert len(loads) == 1  # every model of a figure: one load of their dataset
    loads.clear()
    ex.final_geometry(setup)
    assert len(loads) == 1


def test_one_loader_respects_max_contexts() -> None:
    full = load_dataset(DataConfig("synthetic", 0))
    assert full.m == synthetic_dataset(seed=0).m
    cut = load_dataset(DataConfig("synthetic", 0, max_contexts=5))
    assert cut.m == 5
    # the convex experiments read their data through the same loader
    assert load_dataset(cx.SupportLmmConfig(max_contexts=5)).m == 5
    assert load_dataset(cx.RegPathConfig(max_contexts=5)).m == 5
    with pytest.raises(DataError):
        DataConfig(max_contexts=-1)


def test_fingerprint_tracks_the_data() -> None:
    a, b = synthetic_dataset(seed=0), synthetic_dataset(seed=1)
    assert ex.data_fingerprint(a) == ex.data_fingerprint(synthetic_dataset(seed=0))
    assert ex.data_fingerprint(a) != ex.data_fingerprint(b)


def test_train_run_is_cached_and_metrics_are_sane(cache) -> None:
    run = ex.RunConfig(trainer=gt.TrainerConfig(PROTOCOL, "ufm"))
    first = ex.train_run(run)
    again = ex.train_run(run)
    np.testing.assert_array_equal(first["W_final"], again["W_final"])
    assert list(cache.glob("*._train_run/*.npz"))
    assert not list((cache / ex.CHECKPOINT_DIR).glob("*"))  # no checkpoint left behind
    met = ex.run_metrics(run)
    assert met["epoch"].tolist() == first["epoch"].tolist()
    for key in ("sc_H", "sc_W", "dir_Lmm"):
        assert np.all(np.isfinite(met[key]))
    assert np.all(np.abs(met["sc_H"]) <= 1 + 1e-9)
    cvx = ex.convex_solution(run.data)
    assert cvx["L_mm"].shape == (cvx["V"], cvx["m"])
    # identical supports => identical L_mm columns and H_mm columns (book: ``geo-def-collapse``)
    for g in synthetic_dataset(seed=0).support_groups:
        if len(g) > 1:
            np.testing.assert_allclose(cvx["L_mm"][:, g[1]], cvx["L_mm"][:, g[0]], atol=1e-6)


def test_figure_helpers(cache) -> None:
    setup = ex.ModelsConfig(protocol=PROTOCOL, models=("ufm",))
    geo = ex.final_geometry(setup)
    assert set(geo) == {"ufm", "mm", "S_tilde"}
    m, V = geo["mm"]["cos_H"].shape[0], geo["mm"]["cos_W"].shape[0]
    assert geo["ufm"]["L"].shape == (V, m)
    np.testing.assert_allclose(np.diag(geo["ufm"]["cos_H"]), 1.0)
    res = ex.train_run(setup.run("ufm"))
    idx = ex.nearest_records(res, (0, 10, 30))
    assert res["epoch"][idx].tolist() == [0, 10, 30]
    assert ex.snapshot(res, idx[-1])["L"].shape == (V, m)


def test_a_notebook_that_waits_for_a_shared_run_computes_its_references_meanwhile(
    cache, monkeypatch
) -> None:
    """With the transformer in another process's hands, the UFM is trained, then the
    reference runs of both are computed (the one another process is computing is left to
    it), then the transformer is read: the order of a ``--jobs 2`` run's second notebook."""
    from ntpcore.geo.checks import training_reference as tr

    assert ex.WHILE_WAITING["reference runs"] is tr.prefetch_references  # registered
    setup = ex.ModelsConfig(protocol=gt.AdamWProtocol(**TINY), models=("ufm", "transformer"))
    runs = [setup.run(m) for m in setup.models]
    log = []
    busy = {"transformer"}  # another process trains the transformer

    def train(key, ds):
        log.append(("train", key.run.trainer.model))
        return {"model": key.run.trainer.model}

    def reference(key, ds):
        log.append(("reference", key.run.trainer.model))
        return {}

    train.in_flight = lambda key: key.run.trainer.model in busy
    reference.in_flight = lambda key: key.run.trainer.model == "ufm" and "ufm-ref" in busy
    monkeypatch.setattr(ex, "_train_run", train)
    monkeypatch.setattr(tr, "_reference_training", reference)
    assert [r["model"] for r in ex.train_runs(runs)] == ["ufm", "transformer"]
    assert log == [
        ("train", "ufm"),
        ("reference", "ufm"),
        ("reference", "transformer"),
        ("train", "transformer"),
    ]
    # a reference another process is computing is not computed here
    log.clear()
    busy.add("ufm-ref")
    ex.train_runs(runs)
    assert log == [("train", "ufm"), ("reference", "transformer"), ("train", "transformer")]
    # nothing in flight: no references before the checks ask for them
    log.clear()
    busy.clear()
    ex.train_runs(runs)
    assert log == [("train", "ufm"), ("train", "transformer")]
