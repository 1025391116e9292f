"""The benchmark harness: timing statistics, generic solves in a child process (with a
time limit), and agreement of the specialised and generic solvers on the smallest
benchmark instance of each problem."""

from __future__ import annotations

import json

import pytest

from ntpcore.bench import solvers as bench
from ntpcore.bench.timing import Timing, measure


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
    inst = prob.instance(prob.sizes[0].dims)
    objective, violation = prob.check(inst, prob.fast(inst))
    assert objective > 0 and violation <= 1e-6


def test_the_bench_collects_the_runners_records_oldest_first(tmp_path, monkeypatch):
    from ntpcore.bench import solvers

    monkeypatch.setattr(solvers.paths, "FIGURE_DIR", tmp_path / "figures")
    monkeypatch.setattr(solvers.paths, "ROOT", tmp_path)
    for folder, started in (
        ("figures/runs", "2026-11-24"),
        ("_build/test/figures/runs", "2026-11-23"),
    ):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / f"{started}.json").write_text(json.dumps({"started": started}))
    runs = solvers.bench_runs()
    assert [r["started"] for r in runs] == ["2026-11-23", "2026-11-24"]
    assert [r["record"] for r in runs] == ["2026-11-23.json", "2026-11-24.json"]
