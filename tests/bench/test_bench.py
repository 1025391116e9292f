"""The benchmark harness: timing statistics, generic solves in a child process (with a
time limit), and agreement of the specialised and generic solvers on the smallest
benchmark instance of each problem."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ntpcore.errors import ParameterError
from tools.bench import solvers as bench
from tools.bench.timing import Timing, measure


def test_measure_reports_median_min_max_of_each_run():
    calls = []
    timing, result = measure(lambda: calls.append(1) or len(calls), repeats=3, warmup=2)
    assert len(calls) == 5 and result == 5 and len(timing.times) == 3
    t = Timing((3.0, 1.0, 2.0))
    assert (t.median, t.min, t.max) == (2.0, 1.0, 3.0)
    with pytest.raises(ValueError):
        measure(lambda: None, repeats=0)


def test_generic_solve_in_a_child_process_and_its_time_limit():
    res = bench._run_child("graph-svm", 0, "CLARABEL", timeout=120, repeats=1)
    assert res["status"] == "ok" and res["violation"] <= 1e-6
    prob = bench.PROBLEMS["graph-svm"]
    inst = prob.instance(prob.sizes[0].dims)
    objective, violation = prob.check(inst, prob.fast(inst))
    assert violation <= 1e-9
    assert abs(objective - res["objective"]) <= 1e-6 * res["objective"]
    slow = bench._run_child("graph-svm", 0, "CLARABEL", timeout=0.01, repeats=1)
    assert slow["status"].startswith("timeout") and slow["median"] is None


@pytest.mark.parametrize("name", ["ntp-svm", "nuclear-svm"])
def test_specialised_solvers_are_feasible_on_the_smallest_instance(name):
    prob = bench.PROBLEMS[name]
    inst = prob.make(prob.sizes[0])
    solution, certificate = prob.unpack(prob.fast(inst))
    objective, violation = prob.check(inst, solution)
    assert objective > 0 and violation <= 1e-6
    if name == "nuclear-svm":  # the certificate: a relative duality gap within the solver's tol
        assert 0 <= certificate["gap"] <= 1e-8
        assert abs(certificate["dual_objective"] - objective * (1 - certificate["gap"])) < 1e-9


def test_support_laws_of_the_nuclear_ladder():
    """Both laws are seeded and draw supports of 1..5 words; "patterns" shares at most m/4
    supports among the m contexts, "distinct" gives every context its own support."""
    for law in ("patterns", "distinct"):
        S = bench.geo_supports(300, 1200, law, seed=4)
        np.testing.assert_array_equal(S, bench.geo_supports(300, 1200, law, seed=4))
        k = S.sum(axis=0)
        assert S.shape == (300, 1200) and k.min() >= 1 and k.max() <= 5
        n = len(np.unique(S, axis=1).T)
        assert n == 1200 if law == "distinct" else n <= 300
    # the word frequencies follow the Zipf law: the most frequent word is in far more supports
    S = bench.geo_supports(300, 1200, "distinct", seed=4)
    assert S[0].sum() > 10 * S[150:].sum(axis=1).mean()
    with pytest.raises(ParameterError, match="law must be"):
        bench.geo_supports(30, 20, "zipf")
    with pytest.raises(ParameterError, match="distinct supports"):
        bench.geo_supports(3, 10, "distinct")  # 3 words have 6 supports of 1..2 words


def test_a_nuclear_solve_records_its_certified_gap_and_the_distinct_supports():
    """The child of an all-distinct rung records the certified gap of the solve, and the row
    the number of distinct supports (every column)."""
    prob = bench.PROBLEMS["nuclear-svm-scale"]
    index = next(i for i, s in enumerate(prob.sizes) if s.law == "distinct")
    size = prob.sizes[index]
    res = bench._run_child("nuclear-svm-scale", index, "specialised", timeout=300, repeats=1)
    assert res["status"] == "ok" and 0 <= res["gap"] <= 1e-6 and res["violation"] <= 1e-9
    assert res["reduced_shape"][1] == size.dims["m"]
    assert all(v.endswith(", 1 thread") for v in res["blas"].values())  # timed on one thread
    assert prob.describe(prob.make(size))["distinct_supports"] == size.dims["m"]


def test_the_bench_collects_the_runners_records_oldest_first(tmp_path, monkeypatch):
    from tools.bench import figure_runs as pipeline

    monkeypatch.setattr(pipeline.paths, "FIGURE_DIR", tmp_path / "figures")
    monkeypatch.setattr(pipeline.paths, "ROOT", tmp_path)
    for folder, started in (
        ("figures/runs", "2026-11-24"),
        ("_build/test/figures/runs", "2026-11-23"),
    ):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / f"{started}.json").write_text(json.dumps({"started": started}))
    runs = pipeline.bench_runs()
    assert [r["started"] for r in runs] == ["2026-11-23", "2026-11-24"]
    assert [r["record"] for r in runs] == ["2026-11-23.json", "2026-11-24.json"]


def test_paired_bench_ratio_of_medians_and_statistics_within_tolerance(monkeypatch):
    """bench_case alternates the two sides, reports the ratio of the median CPU times and
    meets a target only with every statistic within its tolerance."""
    import numpy as np

    from tools.bench import paired

    def run(ref_shift, ref_times, ours_times):
        times = {"reference": iter(ref_times), "ours": iter(ours_times)}
        order = []

        def fake_child(case, side, quick, out, timeout):
            order.append(side)
            stats = {k: np.full((2, 5), 0.9) for k in paired.CASES[case].stats}
            if side == "reference":
                stats["corr_svm"][:, -1] += ref_shift
            np.savez(out, **stats)
            t = next(times[side])
            return {"cpu_s": t, "wall_s": 2 * t}

        monkeypatch.setattr(paired, "_run_child", fake_child)
        res = paired.bench_case("att_cyclic", quick=True, repeats=3)
        assert order == ["reference", "ours"] * 3  # interleaved
        return res

    res = run(5e-5, [30.0, 32.0, 31.0], [0.3, 0.2, 0.25])
    assert res["ratio"] == pytest.approx(31.0 / 0.25) and res["target"] == 100.0
    assert res["same_statistics"] and res["met"]
    assert res["statistics"]["corr_svm"]["max_diff_final"] == pytest.approx(5e-5)
    differ = run(2e-4, [30.0, 32.0, 31.0], [0.3, 0.2, 0.25])  # beyond the 1e-4 tolerance
    assert not differ["same_statistics"] and not differ["met"]
    slow = run(0.0, [30.0, 32.0, 31.0], [0.5, 0.4, 0.45])  # 31 / 0.45 < 100
    assert slow["same_statistics"] and not slow["met"]


@pytest.mark.parametrize("side", ["ours", "reference"])
def test_paired_children_time_a_cold_call_and_save_its_statistics(side, tmp_path, monkeypatch):
    import numpy as np

    from ntpcore.att.experiments import GlobalConfig
    from tools.bench import paired

    monkeypatch.setattr(paired, "_config", lambda case, quick: GlobalConfig(n_trials=1, n_steps=20))
    out = tmp_path / "stats.npz"
    timing = paired.child("att_cyclic", side, True, str(out))
    assert timing["cpu_s"] > 0 and timing["wall_s"] > 0
    stats = dict(np.load(out))
    assert set(stats) == set(paired.CASES["att_cyclic"].stats)
    assert stats["corr_svm"].shape == (1, 21)


def test_zipf_and_corpus_laws_of_the_nuclear_ladder():
    """The Zipf laws: seeded, supports of 1..K words drawn independently (repeats allowed),
    a larger exponent concentrating them on fewer words; the corpus law: the Wikipedia
    sample's m most frequent contexts, the same supports whatever the seed."""
    for law, k in (("zipf1.1-k4", 4), ("zipf1.5-k4", 4), ("zipf1.1-k8", 8)):
        S = bench.geo_supports(300, 1200, law, seed=4)
        np.testing.assert_array_equal(S, bench.geo_supports(300, 1200, law, seed=4))
        sizes = S.sum(axis=0)
        assert S.shape == (300, 1200) and sizes.min() >= 1 and sizes.max() == k
        assert len(np.unique(S, axis=1).T) < 1200  # independent draws repeat short supports
    steep = bench.geo_supports(300, 1200, "zipf1.5-k4", seed=4)
    flat = bench.geo_supports(300, 1200, "zipf1.1-k4", seed=4)
    assert (steep.sum(axis=1) > 0).sum() < (flat.sum(axis=1) > 0).sum()
    S = bench.geo_supports(1000, 400, "wiki", seed=0)
    assert S.shape[1] == 400 and S.shape[0] <= 1000 and S.any(axis=0).all()
    np.testing.assert_array_equal(S, bench.geo_supports(1000, 400, "wiki", seed=7))


def test_scaling_point_in_a_child_and_the_growth_fit():
    """One point of the geo-scaling section in a child process (certified gap, reduced size,
    peak memory, CPU times), and the fits: t = c m^b through the two largest points, memory
    linear in m, the largest m within the budget extrapolated unless a point reached it."""
    from tools.bench import scaling

    res = scaling._run_child("zipf1.1-k4", 40, 120, 2, 60.0, 300.0)
    assert res["status"] == "ok" and 0 <= res["gap"] <= 1e-6 and res["violation"] <= 1e-9
    assert res["repeats"] == 2 and len(res["cpu_times"]) == 2 and res["peak_rss_mb"] > 0
    assert res["shape"] == [40, 120] and res["reduced_shape"][1] <= 120
    assert all(v.endswith(", 1 thread") for v in res["blas"].values())  # timed on one thread

    def row(law, m, t, mb, its=10):
        spec = {"median": 2 * t, "cpu_times": [t], "peak_rss_mb": mb, "iterations": its}
        return {"law": law, "m": m, "specialised": spec}

    rows = [row("a", 1000, 1.0, 200.0), row("a", 2000, 3.0, 300.0), row("a", 4000, 12.0, 500.0)]
    fit = scaling.growth(rows, budget_s=600.0, memory_gb=24.0)["a"]
    # CPU time (not the wall time) per iteration: 0.3 s -> 1.2 s for twice m
    assert fit["time_exponent"] == pytest.approx(2.0) and fit["iterations_max"] == 10
    assert fit["memory_mb_per_1000"] == pytest.approx(100.0, rel=0.05)
    assert fit["extrapolated"] and fit["limited_by"] == "time"
    assert fit["largest_m"] == int(4000 * (600 / 12) ** 0.5)
    rows.append(row("a", 8000, 700.0, 900.0, its=5))  # past the budget: measured
    fewer = scaling.growth(rows[:2] + [row("a", 4000, 6.0, 500.0, its=5)])["a"]
    assert fewer["iterations_max"] == 10  # the most iterations seen, not the last point's
    # 1.2 s an iteration at m = 4000, growing as m^2, times 10 iterations: 600 s at
    assert fewer["largest_m"] == int(4000 * (600 / (1.2 * 10)) ** 0.5)
    pts = [row("a", 2000, 3.0, 300.0), row("a", 4000, 3.6, 500.0)]
    flat = scaling.growth(pts, memory_gb=1000.0)["a"]
    assert flat["time_exponent"] < 1 and flat["time_exponent_used"] == 1.0  # never sublinear
    assert flat["largest_m"] == int(4000 * 600 / (0.36 * 10))
    fit = scaling.growth(rows, budget_s=600.0, memory_gb=24.0)["a"]
    assert fit == {**fit, "largest_m": 4000, "extrapolated": False}
    small = scaling.growth(rows[:3], budget_s=600.0, memory_gb=1.0)["a"]  # 1 GB: memory binds
    assert small["extrapolated"] and small["limited_by"] == "memory"
    assert 8000 < small["largest_m"] < 10000  # (1024 MB - 100 MB) / (0.1 MB per context)


def test_bench_blas_info_names_the_kernels():
    from tools.bench.timing import blas_info

    info = blas_info()
    assert set(info) <= {"numpy", "scipy"}
    assert all("thread" in v for v in info.values())


def test_timed_children_run_their_blas_on_one_thread(monkeypatch):
    """What the book states ("on one thread"): a timed child's BLAS has one thread, even when
    the parent's environment would give it every core."""
    from tools.bench.timing import blas_info, child_blas

    if not blas_info():
        pytest.skip("numpy and scipy do not use the wheels' OpenBLAS here")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    info = child_blas()
    assert set(info) == {"numpy", "scipy"}
    assert all(v.endswith(", 1 thread") for v in info.values()), info


def test_scaling_runs_of_different_laws_add_up():
    """A geo-scaling run replaces the points it measured and keeps the others, so runs of
    different laws (one after another, or side by side) make one table, fits recomputed."""
    from tools.bench.scaling import merge_sections

    def sec(*pts):
        rows = [
            {"law": law, "m": m, "specialised": {"median": t, "peak_rss_mb": 100.0 + m / 10}}
            for law, m, t in pts
        ]
        return {"V": 1000, "tol": 1e-6, "rows": rows, "growth": {}}

    a = sec(("distinct", 1000, 1.0), ("distinct", 2000, 4.0))
    b = sec(("zipf1.1-k4", 1000, 0.5), ("zipf1.1-k4", 2000, 1.0), ("distinct", 2000, 3.0))
    merged = merge_sections(a, b)
    assert [(r["law"], r["m"]) for r in merged["rows"]] == [
        ("distinct", 1000),
        ("distinct", 2000),
        ("zipf1.1-k4", 1000),
        ("zipf1.1-k4", 2000),
    ]
    assert merged["rows"][1]["specialised"]["median"] == 3.0  # the newer point
    assert set(merged["growth"]) == {"distinct", "zipf1.1-k4"}
    assert merge_sections(None, b) == b and merge_sections({**a, "V": 500}, b) == b
