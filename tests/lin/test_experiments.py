"""The cached experiment functions of the lin notebooks, at toy sizes (cache in tmp)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ntpcore import lin
from ntpcore.lin import experiments as E
from ntpcore.lin.experiments import measures


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "cache"))


def test_cone_threshold_known_values_and_bounds():
    assert E.cone_threshold(2, 1) == 0.5  # Cover
    for V in (3, 5, 10):
        d1 = E.cone_threshold(V, 1, n_samples=50_000)
        assert 1 / V <= d1 <= 0.5  # pairwise-necessary and one-vs-rest-sufficient bounds
    d = [E.cone_threshold(10, S, n_samples=50_000) for S in (1, 2, 3, 6, 9)]
    assert np.all(np.diff(d) > 0) and d[-1] < 1
    # Monte Carlo against the closed form for V = 2 through the generic code path
    g = np.random.default_rng(0).standard_normal((200_000, 2))
    assert abs(np.mean(np.maximum(g[:, 1] - g[:, 0], 0) ** 2) / 2 - 0.5) < 0.01


def test_phase_and_sweep_run_small():
    cfg = E.PhaseConfig(
        n_contexts=8, ratios=(0.2, 1.2), n_trials=3, support_sizes=(1, 3), onehot_vocab_sizes=(2,)
    )
    res = E.run_phase(cfg, progress=False)
    assert res["sep_S1"][-1] == 1 and res["sep_S3"][-1] == 1  # d > m: Lemma 1
    assert res["comp_S3"][-1] == 1
    sw = E.run_sparsity(
        E.SparsityConfig(
            n_contexts=10, dim=12, vocab_size=4, support_sizes=(1, 4), n_steps=200, n_records=10
        )
    )
    assert np.isnan(sw["norm_mm"][-1]) and sw["dim_F"].tolist() == [0, 30]


def test_train_run_is_cached_and_reproducible():
    cfg = E.RunConfig(
        n_contexts=10, dim=12, vocab_size=4, support_size=2, n_steps=200, n_records=10
    )
    a = E.train_run(cfg)
    b = E.train_run(cfg)
    assert np.array_equal(a["norm"], b["norm"]) and a["monotone"]
    assert a["steps"][0] == 0 and a["steps"][-1] == 200


def test_phase_points_run_through_dask_processes_with_the_same_result(tmp_path, monkeypatch):
    cfg = E.PhaseConfig(
        n_contexts=8, ratios=(0.3, 0.6), n_trials=3, support_sizes=(2,), onehot_vocab_sizes=(3,)
    )
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "serial"))
    serial = E.run_phase(cfg, progress=False)
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "parallel"))  # no shared cache hits
    parallel = E.run_phase(cfg, progress=False, n_workers=2)
    for key in ("sep_S2", "comp_S2", "sep_V3"):
        np.testing.assert_array_equal(serial[key], parallel[key])
    assert any((tmp_path / "parallel").rglob("*.json")), "the workers wrote the point cache"


def test_crossing_interpolates_the_first_rise_through_the_level():
    x = np.linspace(0.0, 1.0, 11)
    # a straight line p = x crosses 1/2 at x = 1/2 wherever the grid puts its nodes
    assert np.isclose(E.crossing(x, x), 0.5)
    assert np.isclose(E.crossing(x**2, x), 0.25)  # p = sqrt(x) on the grid x**2: at x = 1/4
    # the crossing of a piecewise-linear p is exact, and only the first rise counts
    p = np.array([0.0, 0.2, 0.8, 0.3, 0.9])
    xs = np.arange(5.0)
    assert np.isclose(E.crossing(xs, p), 1.5)
    assert np.isclose(E.crossing(xs, p, level=0.1), 0.5)
    # a curve that never reaches the level has no crossing
    assert np.isnan(E.crossing(xs, np.full(5, 0.4)))


def test_solution_facts_hold_on_small_synthetic_data_and_catch_a_wrong_w_star(monkeypatch):
    cfg = E.SupportConfig(n_contexts=6, dim=8, vocab_size=5, support_size=3)
    f = E.synthetic_facts(cfg)
    assert f["log_odds_error"] < 1e-10 and f["star_perp_rel"] < 1e-10
    assert f["mm_F_rel"] < 1e-6 and f["inner_rel"] < 1e-8
    assert 1 - 1e-6 <= f["min_margin"] <= 1 + 1e-6 and f["n_active"] >= 1
    assert f["max_spread"] < 1e-6 and f["colsum_rel"] < 1e-6 and f["rowspan_rel"] < 1e-6
    gap, bound = f["gamma_gap"], f["gamma_bound"]
    assert np.all(gap > 0) and np.all(np.diff(gap) < 0) and np.all(gap <= bound)
    # margins are at least 1 and some equal 1: the log-slope tends to -1 [lin, eq. (7)]
    assert abs(np.log(gap[20] / gap[10]) / 10 + 1) < 0.05
    # W* scaled off the log-odds: eq. (4) fails by 5% of the largest log-odds
    original = measures.finite_component
    monkeypatch.setattr(measures, "finite_component", lambda H, P: 1.05 * original(H, P))
    assert E.synthetic_facts(cfg)["log_odds_error"] > 1e-3


def test_genie_points_lie_on_the_sphere_and_lose_to_the_path():
    cfg = E.SupportConfig(n_contexts=6, dim=8, vocab_size=5, support_size=3)
    data = E.synthetic_data(cfg)
    ns = float(np.linalg.norm(lin.finite_component(data.H, data.P)))
    radii = (0.5 * ns, 2 * ns, 4 * ns)
    genie = E.genie_gaps(cfg, radii)
    assert np.isnan(genie[0]) and np.all(genie[1:] > 0) and genie[2] < genie[1]
    path = lin.regularization_path(data.H, data.P, data.pi, radii[1:])
    gaps = [lin.ce_excess_W(w, data.H, data.P, data.pi) for w in path["W"]]
    assert np.all(np.asarray(gaps) <= genie[1:] * (1 + 1e-9))


def test_log_slope_and_decade_change_on_exact_curves():
    k = np.array([0, 1, 10, 100, 1000])
    y = 3.0 * np.log(np.maximum(k, 1)) + 2.0
    assert E.log_slope(k, y, 10, 1000) == pytest.approx(3.0)
    assert E.decade_change(k, k.astype(float) + 1) == pytest.approx(1001 / 101)


def test_median_seed_is_the_median_by_rank():
    assert E.median_seed([3, 4, 5], [0.2, 0.9, 0.5]) == 5
    assert E.median_seed([0, 1, 2, 3], [4.0, 1.0, 3.0, 2.0]) == 3  # lower middle of an even count


def test_toy_seeds_spread_wmm_sees_only_the_supports():
    cfg = E.ToyGDConfig(n_steps=50, n_records=5)
    res = E.run_toy_seeds(cfg, [0, 1, 2], progress=False)
    assert np.ptp(res["norm_mm"]) <= 1e-6 * res["norm_mm"][0]  # Def. 3: supports only
    assert np.ptp(res["norm_star"]) > 0  # W* depends on the probabilities of each draw
    assert res["median_seed"] in (0, 1, 2) and res["loss_monotone"].all()
    one = E.run_toy_gd(E.ToyGDConfig(data_seed=1, n_steps=50, n_records=5))
    assert res["cos_end"][1] == one["cos"][-1]  # the same cached run as a single draw


def test_gd_seeds_spread_is_the_single_runs_and_shows_the_median_draw():
    cfg = E.GDConfig(n_steps=200, n_records=8)
    res = E.run_gd_seeds(cfg, [0, 1, 2], progress=False)
    assert res["cos_curves"].shape == (3, len(res["steps"]))
    one = E.run_gd(replace(cfg, data_seed=2, init_seed=2))  # draw s: data seed s, init seed s
    assert np.array_equal(res["rel_dist_F_curves"][2], one["rel_dist_F"])
    assert np.ptp(res["norm_mm"]) > 0  # new embeddings and supports: W^mm moves with the draw
    # the median draw by the final cosine, by rank
    order = np.argsort(res["cos_end"])
    assert res["median_seed"] == res["seeds"][order[1]]


def test_support_sizes_are_the_same_serially_and_on_a_cluster(cluster):
    """The support sizes of the sparsity sweep are independent runs of the sweep API: a
    ``dask.distributed`` cluster returns the serial sweep exactly, and each size is the single
    cached run of that size."""
    cfg = E.SparsityConfig(
        n_contexts=10, dim=12, vocab_size=4, support_sizes=(1, 2, 4), n_steps=200, n_records=10
    )
    serial = E.run_sparsity(cfg, progress=False)
    clus = E.run_sparsity(cfg, scheduler=cluster, progress=False)
    for key in ("steps", "norm", "gap", "norm_perp", "rel_dist_F", "cos", "norm_mm", "dim_F"):
        np.testing.assert_array_equal(clus[key], serial[key], err_msg=key)
    one = E.train_run(E.run_config(cfg, support_size=2, optimizer="gd"))
    np.testing.assert_array_equal(serial["norm"][1], one["norm"])
    # full supports (S = V): no W^mm, and F is the whole space of centred logits: m (V - 1)
    assert np.isnan(serial["norm_mm"][-1]) and serial["dim_F"][-1] == 10 * 3


def test_optimizers_seeds_share_fig_4s_gd_draws():
    """Fig. 5's GD reference over the draws is Fig. 4's spread (same runs), and NGD's norm
    obeys ||W_k|| <= ||W_0|| + eta k on every draw (each step has length eta)."""
    opt_cfg = E.OptimizersConfig(n_steps=100, n_records=6)
    gd_cfg = E.GDConfig(n_steps=100, n_records=6, lr=opt_cfg.gd_lr)
    spread = E.run_optimizers_seeds(opt_cfg, [0, 1], progress=False)
    gd = E.run_gd_seeds(gd_cfg, [0, 1], progress=False)
    assert np.array_equal(spread["gd"]["cos_curves"], gd["cos_curves"])
    ngd = spread["ngd"]
    bound = ngd["norm_curves"][:, :1] + opt_cfg.ngd_lr * ngd["steps"][None, :]
    assert np.all(ngd["norm_curves"] <= bound + 1e-9)
