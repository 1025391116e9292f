"""The checks of the trained-model figures (ntpcore.geo.checks.training*): the independent
re-implementation redoes every model's run, tells a faster or slower optimiser apart, and
the checks fail on wrong results; what mathematics or the construction guarantees (and the
figures' ledgers no longer claim) is asserted here."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from matplotlib import pyplot as plt

from ntpcore.figure import claims
from ntpcore.figure.sourcedata import FigureDataError, check
from ntpcore.geo import train as gt
from ntpcore.geo.checks import convex, training, training_maps, training_panels
from ntpcore.geo.checks import training_reference as tr
from ntpcore.geo.embeddings import cosine_matrix, mm_embeddings
from ntpcore.geo.experiments import training as ex
from ntpcore.geo.experiments.datasets import DataConfig, load_dataset

TINY = gt.AdamWProtocol(n_steps=30, lr=2e-3, lr_milestones=(20,), n_records=6, dim=24)
DATA = DataConfig("synthetic")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path / "figures"))
    return tmp_path


def _deviations(res: dict, ref: dict, raw, L_mm) -> dict[str, float]:
    r = tr.curve_values(ref["W"][-1], ref["H"][-1], ref["b"][-1], raw, L_mm)
    ours = tr.curve_values(res["W_final"], res["H_final"], res["b_final"], raw, L_mm)
    return {q: abs(ours[q] / r[q] - 1.0) for q in ("ce_minus_H", "W_norm", "H_norm", "pf_dist")}


@pytest.mark.parametrize("model", ["ufm", "transformer", "lstm"])
def test_the_reference_redoes_the_run_and_tells_another_learning_rate_apart(cache, model):
    run = ex.RunConfig(DATA, gt.TrainerConfig(TINY, model))
    res = ex.train_run(run)
    k, ref = tr.reference_at(run)
    assert k == TINY.n_steps
    assert ref["epoch"].tolist() == [e for e in res["epoch"].tolist() if e <= k]
    raw = convex.raw_supports(load_dataset(DATA))
    L_mm = ex.convex_solution(DATA)["L_mm"]
    tol = tr.TOLERANCES[model]
    dev = _deviations(res, ref, raw, L_mm)
    assert dev["ce_minus_H"] <= tol.ce / 10 and dev["pf_dist"] <= tol.pf / 10, dev
    assert max(dev["W_norm"], dev["H_norm"]) <= tol.norms / 10, dev
    # a learning rate 5% off is outside the tolerances
    fast = dataclasses.replace(run.trainer, protocol=dataclasses.replace(TINY, lr=1.05 * TINY.lr))
    other = gt.train_model(load_dataset(DATA), fast, progress=False)
    dev = _deviations(other, ref, raw, L_mm)
    assert dev["ce_minus_H"] > tol.ce and max(dev["W_norm"], dev["H_norm"]) > tol.norms, dev


def test_the_independent_measures_agree_with_the_package(cache):
    run = ex.RunConfig(DATA, gt.TrainerConfig(TINY, "ufm"))
    res, met = ex.train_run(run), ex.run_metrics(run)
    raw = convex.raw_supports(load_dataset(DATA))
    cvx = ex.convex_solution(DATA)
    v = tr.curve_values(res["W_final"], res["H_final"], res["b_final"], raw, cvx["L_mm"])
    for q in ("ce_minus_H", "W_norm", "H_norm", "pf_dist"):  # recorded from the float64 weights
        assert v[q] == pytest.approx(float(res[q][-1]), rel=1e-9), q
    v = tr.curve_values(res["W"][-1], res["H"][-1], res["b"][-1], raw, cvx["L_mm"])
    for q in ("sc_H", "sc_W", "collapse_raw", "collapse_proj"):
        assert v[q] == pytest.approx(float(met[q][-1]), abs=1e-9), q
    cW, cH, r = tr.mm_cosines(cvx["L_mm"])
    W_mm, H_mm = mm_embeddings(cvx["L_mm"])
    assert r == W_mm.shape[1] == cvx["rank_mm"]
    np.testing.assert_allclose(cW, cosine_matrix(W_mm), atol=1e-9)
    np.testing.assert_allclose(cH, cosine_matrix(H_mm.T), atol=1e-9)


def test_cosine_maps_are_symmetric_with_a_unit_diagonal():
    X = np.random.default_rng(0).standard_normal((12, 5))
    C = cosine_matrix(X)
    np.testing.assert_allclose(C, C.T, atol=1e-15)
    np.testing.assert_allclose(np.diag(C), 1.0, atol=1e-15)
    np.testing.assert_allclose(C, tr.cosines(X), atol=1e-12)


def test_snapshots_are_taken_at_increasing_epochs():
    res = {"epoch": gt.record_epochs(30000, 60)}
    idx = ex.nearest_records(res, (0, 10, 100, 26000))
    assert np.all(np.diff(res["epoch"][idx]) > 0)


def _ledger(fig_id: str = "geo-test") -> claims.Ledger:
    return claims.Ledger(fig_id, "quick", defer=True)


def _status(ledger: claims.Ledger) -> dict[str, str]:
    return {c.id.split(":")[1]: c.status for c in ledger.claims}


def test_the_run_checks_fail_on_a_run_that_is_not_the_protocol(cache, monkeypatch):
    cfg = ex.ModelsConfig(DATA, TINY, models=("ufm",))
    ledger = _ledger()
    training.check_runs(ledger, cfg)
    curves = ex.training_curves(cfg)
    training.check_curves(ledger, cfg, curves)
    assert set(_status(ledger).values()) == {"pass", "not-evaluated"}
    # the final weights one part in a thousand off: the run check fails
    true = ex.train_run

    def off(run):
        res = dict(true(run))
        res["W_final"] = 1.001 * res["W_final"]
        return res

    monkeypatch.setattr(training, "train_run", off)
    ledger = _ledger()
    training.check_runs(ledger, cfg)
    assert _status(ledger)["ufm-run"] == "fail"
    # a run cut short (half its epochs): no record at the configured end, and other weights
    half = ex.RunConfig(DATA, gt.TrainerConfig(dataclasses.replace(TINY, n_steps=15), "ufm"))
    monkeypatch.setattr(training, "train_run", lambda run: true(half))
    ledger = _ledger()
    training.check_runs(ledger, cfg)
    training.check_curves(ledger, cfg, {"ufm": {**true(half), **ex.run_metrics(half)}})
    status = _status(ledger)
    assert status["ufm-run"] == status["ufm-ce"] == status["ufm-norms"] == "fail"
    # a curve recorded one sample late: the curve checks fail
    late = {"ufm": {**curves["ufm"]}}
    for q in ("ce_minus_H", "pf_dist", "sc_H"):
        late["ufm"][q] = np.concatenate([curves["ufm"][q][:1], curves["ufm"][q][:-1]])
    ledger = _ledger()
    training.check_curves(ledger, cfg, late)
    status = _status(ledger)
    assert status["ufm-ce"] == status["ufm-finite-part"] == status["ufm-geometry"] == "fail"


def test_the_collapse_check_fails_when_the_projection_is_skipped(cache, monkeypatch):
    cfg = ex.ModelsConfig(DATA, TINY, models=("ufm",))
    true = ex.run_metrics

    def unprojected(run):
        met = dict(true(run))
        met["collapse_proj"] = met["collapse_raw"]
        return met

    monkeypatch.setattr(training, "run_metrics", unprojected)
    ledger = _ledger()
    training.check_collapse(ledger, cfg)
    assert _status(ledger)["ufm-collapse"] == "fail"


def test_the_map_checks_fail_on_a_map_of_other_embeddings(cache):
    cfg = ex.ModelsConfig(DATA, TINY, models=("ufm",))
    geometry = ex.final_geometry(cfg)
    ledger = _ledger()
    training_maps.check_geometry(ledger, cfg, geometry)
    assert _status(ledger)["shown-cosines"] == "pass"
    swapped = {**geometry, "S_tilde": geometry["mm"]}  # the proxy's map replaced by L_mm's
    ledger = _ledger()
    training_maps.check_geometry(ledger, cfg, swapped)
    assert _status(ledger)["shown-cosines"] == "fail"


def test_the_panels_of_the_curves_catch_a_late_line_and_a_log_axis(cache):
    cfg = ex.ModelsConfig(DATA, TINY, models=("ufm",))
    curves = ex.training_curves(cfg)
    want = training_panels.training_curves_panels(curves)

    def draw(shift: int = 0, yscale_d: str = "linear"):
        fig, axes = plt.subplots(2, 2)
        c, lab = curves["ufm"], training_panels.curve_labels("ufm")
        x = c["epoch"] + 1.0
        axes[0, 0].loglog(x, np.roll(c["ce_minus_H"], shift), label=lab["ce_minus_H"])
        axes[0, 1].loglog(x, c["H_norm"], label=lab["H_norm"])
        axes[0, 1].loglog(x, c["W_norm"], label=lab["W_norm"])
        axes[1, 0].loglog(x, c["pf_dist"], label=lab["pf_dist"])
        axes[1, 1].semilogx(x, c["sc_H"], label=lab["sc_H"])
        axes[1, 1].semilogx(x, c["sc_W"], label=lab["sc_W"])
        axes[1, 1].set_yscale(yscale_d)
        return fig

    assert check(draw(), want) == 6
    for bad in (draw(shift=1), draw(yscale_d="log")):
        with pytest.raises(FigureDataError):
            check(bad, want)
    plt.close("all")


def test_the_table_measures_agree_with_the_package(cache):
    run = ex.RunConfig(DATA, gt.TrainerConfig(TINY, "ufm"))
    res, met = ex.train_run(run), ex.run_metrics(run)
    raw = convex.raw_supports(load_dataset(DATA))
    v = tr.curve_values(
        res["W"][-1], res["H"][-1], res["b"][-1], raw, ex.convex_solution(DATA)["L_mm"]
    )
    for q in ("od_H", "od_W", "sc_W_centered", "dir_Lmm", "dir_Lmm_centered", "dir_S_tilde"):
        assert v[q] == pytest.approx(float(met[q][-1]), abs=1e-9), q
    assert v["L_norm"] == pytest.approx(float(res["L_norm"][-1]), rel=1e-6)
    k, ref = tr.reference_at(run)
    assert int(ref["n_params"]) == int(res["n_params"])


def test_the_grid_declares_the_real_text_word_geometry_a_known_deviation(cache):
    """The word geometry of the real-text runs lags (the known deviation of the curves and
    the labelled maps): the grid's word-geometry claims carry it with its band on real text,
    its context-geometry claims and the synthetic set's claims do not."""
    for data, deviates in ((DataConfig("text", max_contexts=24), True), (DATA, False)):
        cfg = ex.ModelsConfig(data, TINY, models=("ufm",))
        ledger = claims.Ledger("geo-test", "paper", defer=True)
        training_maps.check_geometry(ledger, cfg, ex.final_geometry(cfg))
        found = {c.id.split(":")[1]: c for c in ledger.claims}
        word, context = found["ufm-word-geometry"], found["ufm-context-geometry"]
        assert bool(word.known_deviation) is deviates and word.measured is not None
        assert (word.band is not None) is deviates
        assert not context.known_deviation and context.band is None
