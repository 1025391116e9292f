"""The paper's experiments at full size (they take about a second each thanks to batching): book
att-thm-gd and book att-conj-local, checked on the cached library functions run uncached."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from ntpcore.att import experiments as att

pytestmark = pytest.mark.theory


@pytest.fixture(scope="module")
def cyclic():
    return att.run_global.__wrapped__(att.GlobalConfig())  # n6 T4 K6 d8, NGD .01, 4000


def test_cyclic_experiment(cyclic):
    """book att-thm-gd, cyclic (10 seeds): corr >= 0.975, the two correlations within 0.01, the
    finite part within 0.02, attention on the best SCC >= 0.995, loss near L*."""
    r = cyclic
    c_svm, c_full = r["corr_svm"][:, -1].mean(), r["corr_full"][:, -1].mean()
    assert c_svm >= 0.975
    assert abs(c_svm - c_full) <= 0.01
    assert r["norm_diff"][:, -1].mean() <= 0.02
    assert r["fin_err"][:, -1].mean() <= 0.02
    assert r["attn_best"][:, -1].mean() >= 0.995
    assert np.median(r["loss_gap"][:, -1]) <= 1e-3 and r["loss_gap"][:, -1].max() <= 1e-2
    assert np.all(r["loss_gap"][:, -1] >= -1e-12)  # L* is the infimum
    assert r["perp_drift"].max() <= 1e-10
    assert r["n_infeasible"] == 0
    assert np.all(r["dim_S_fin"] >= 1) and np.all(r["n_cyclic_samples"] >= 2)


def test_acyclic_experiment():
    """book att-thm-gd, acyclic: corr >= 0.985, non-decreasing after tau 200 (slack 1e-3), loss <
    1e-3, attention on the label >= 0.999."""
    r = att.run_global.__wrapped__(
        att.GlobalConfig(n_samples=4, seq_len=6, vocab_size=8, graph="acyclic")
    )
    mc = r["corr_svm"].mean(axis=0)
    assert mc[-1] >= 0.985
    assert np.all(np.diff(mc[200:]) >= -1e-3)
    assert r["loss"][:, -1].mean() < 1e-3
    assert r["attn_label"][:, -1].mean() >= 0.999
    np.testing.assert_array_equal(r["W_fin_norm"], 0.0)


def test_plain_gd():
    """book att-thm-gd with plain GD (eta 0.5 <= 1/L_W): corr increasing and >= 0.97, the finite
    part within 1e-3 of W^fin, and a norm that grows sublinearly."""
    r = att.run_global.__wrapped__(
        att.GlobalConfig(n_trials=3, optimizer="gd", lr=0.5, n_steps=20000)
    )
    mc = r["corr_svm"].mean(axis=0)
    i = np.searchsorted(r["steps"], 10000)
    assert mc[i] >= 0.97 and mc[-1] > mc[i]
    assert r["fin_err"][:, -1].max() <= 1e-3
    # sublinear growth: the norm gained from 1e4 to 2e4 steps is far below that from 0 to 1e4
    nrm = r["W_norm"].mean(axis=0)
    assert nrm[-1] - nrm[i] < 0.2 * (nrm[i] - nrm[0])


def test_local_convergence_experiment():
    """book att-conj-local (statistical, 10 seeds): the local Graph-SVM predicts the direction (corr
    >= 0.97), the global one does not (corr <= 0.9); the local norm difference is not larger than
    the global one (they coincide when every label is selected)."""
    r = att.run_local.__wrapped__(att.LocalConfig())
    for a in range(2):
        assert r["corr_local"][a][:, -1].mean() >= 0.97
        assert r["corr_global"][a][:, -1].mean() <= 0.9
        ng, nl = r["norm_diff_global"][a][:, -1], r["norm_diff_local"][a][:, -1]
        assert np.sum(nl <= ng + 1e-9) >= 8
        assert np.sum(nl < ng - 1e-6) >= 5
    assert r["n_local_infeasible"] == 0


def test_scc_statistics_giant_component(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path))
    r = att.run_scc_stats(
        att.SCCStatsConfig(n_trials=3, vocab_size=10, seq_lens=(3,), sample_sizes=(5, 50, 500)),
        progress=False,
    )
    big = r["largest_frac"].mean(-1)[0]
    assert big[-1] > 0.9 and big[-1] > big[0]
    assert r["pure_comp"].mean(-1)[0, -1] > r["pure_comp"].mean(-1)[0, 0]


def test_conceptual_state_is_exact():
    r = att.run_conceptual.__wrapped__(att.ConceptualConfig(n_inits=2, n_steps=3000))
    np.testing.assert_allclose(r["svm_scores"], [1, 1, 0, 0, -1, -1], atol=1e-9)
    np.testing.assert_allclose(r["composition"][:2], [2 / 3, 1 / 3], atol=1e-12)
    assert r["status"] == "decided" and r["undecided_status"] == "undecided"
    assert r["train_tv_max"] < 0.02


def test_seeds_are_reproducible_and_trials_independent():
    cfg = att.GlobalConfig(n_trials=2, n_steps=50)
    a, b = att.run_global.__wrapped__(cfg), att.run_global.__wrapped__(cfg)
    np.testing.assert_array_equal(a["corr_svm"], b["corr_svm"])
    c = att.run_global.__wrapped__(att.GlobalConfig(n_trials=3, n_steps=50))
    np.testing.assert_array_equal(c["corr_svm"][:2], a["corr_svm"])  # spawned child seeds


@pytest.mark.parametrize("graph", ["cyclic", "acyclic"])
def test_sample_feasible_trial(graph):
    """The draw meets the graph condition, its W^svm is the Graph-SVM of its own data, and
    infeasible draws are counted (none when K <= d)."""
    from ntpcore.att import graph_svm, is_acyclic, scc_structures

    t = att.sample_feasible_trial(np.random.default_rng(3), 6, 4, 6, 8, graph)
    assert is_acyclic(scc_structures(t.graphs)) == (graph == "acyclic")
    np.testing.assert_allclose(
        t.W_svm, graph_svm(t.data.E, t.data.tokens, t.data.labels), atol=1e-10
    )
    assert t.n_infeasible == 0 and t.data.n_rejected >= 0


def test_small_fraction_and_fmt_exact():
    from ntpcore.att.plots import fmt_exact, small_fraction

    assert small_fraction(2 / 3) == Fraction(2, 3) and small_fraction(-1.0) == -1
    assert small_fraction(np.log(2)) is None
    assert fmt_exact(1 / 3, signed=True) == "+1/3" and fmt_exact(np.log(2)) == "0.693"


def test_scc_statistics_are_the_same_serially_on_processes_and_on_a_cluster(
    tmp_path, monkeypatch, cluster
):
    """The (T, n) cells of the SCC statistics are independent runs of the sweep API."""
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "serial"))
    cfg = att.SCCStatsConfig(n_trials=3, vocab_size=8, seq_lens=(3, 4), sample_sizes=(5, 40))
    serial = att.run_scc_stats(cfg, progress=False)
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "procs"))
    procs = att.run_scc_stats(cfg, n_workers=2, progress=False)
    clus = att.run_scc_stats(cfg, scheduler=cluster, progress=False)
    for key in ("n_sccs", "largest_frac", "single_scc", "cyclic_frac", "pure_comp"):
        assert serial[key].shape == (2, 2, 3)
        np.testing.assert_array_equal(procs[key], serial[key])
        np.testing.assert_array_equal(clus[key], serial[key])


def test_trial_rng_is_the_serial_loops_generator():
    """A trial run on its own draws exactly what it draws in a loop over all trials."""
    loop = att.trial_rngs(7, 5)
    for r in (0, 3, 4):
        np.testing.assert_array_equal(att.trial_rng(7, r).random(6), loop[r].random(6))


def test_reg_path_trials_are_the_same_serially_and_on_a_cluster(tmp_path, monkeypatch, cluster):
    """The trials of the regularization path are independent runs of the sweep API; the
    serial sweep is the old loop over ``trial_rngs`` (same draws, same paths)."""
    cfg = att.RegPathConfig(n_trials=2, radii=(1.0, 3.0))
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "serial"))
    serial = att.run_reg_path(cfg, progress=False)
    clus = att.run_reg_path(cfg, scheduler=cluster, progress=False)
    for key in ("corr_svm", "fin_err", "W_norm"):
        assert serial[key].shape == (2, 2)
        np.testing.assert_array_equal(clus[key], serial[key])
    assert (clus["n_rejected"], clus["n_infeasible"]) == (
        serial["n_rejected"],
        serial["n_infeasible"],
    )
    from ntpcore.att.regpath import regularization_path

    for r, rng in enumerate(att.trial_rngs(cfg.trial_seed, cfg.n_trials)):
        ft = att.sample_feasible_trial(
            rng, cfg.n_samples, cfg.seq_len, cfg.vocab_size, cfg.dim, "cyclic"
        )
        WR = regularization_path(ft.data.E, ft.data.tokens, ft.data.labels, np.array(cfg.radii))[
            "W"
        ]
        np.testing.assert_array_equal(np.linalg.norm(WR, axis=(-2, -1)), serial["W_norm"][r])
    # the path's norm is the radius where the constraint is active: ||W_R|| <= R
    assert np.all(serial["W_norm"] <= np.array(cfg.radii) * (1 + 1e-6))


def test_theory_checks_are_the_same_serially_and_on_a_cluster(tmp_path, monkeypatch, cluster):
    """The per-trial theory checks of the global experiment are independent runs of the sweep
    API, on the very draws of the batched :func:`run_global`."""
    cfg = att.GlobalConfig(n_trials=3, n_steps=10)
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "serial"))
    serial = att.global_theory(cfg, progress=False)
    clus = att.global_theory(cfg, scheduler=cluster, progress=False)
    assert set(clus) == set(serial)
    for key in serial:
        assert serial[key].shape == (3,)
        np.testing.assert_array_equal(clus[key], serial[key])
    glob = att.run_global.__wrapped__(cfg)
    np.testing.assert_array_equal(serial["fin_dim_S_fin"], glob["dim_S_fin"])
    assert serial["scc_partition_ok"].all()
