"""The Performance page's targets table is computed from ``bench.json``: each target shows
the measured values, whether it is met follows from them (at least 10x faster than every
generic backend at equal accuracy; within a time limit), and a target without a
measurement in the file says so."""

from __future__ import annotations

import copy
import importlib.util

import pytest

from ntpcore.core import paths

_spec = importlib.util.spec_from_file_location("ntpbook", paths.BOOK_DIR / "_ext" / "ntpbook.py")
ntpbook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ntpbook)


def _timing(t: float, violation: float = 1e-12, rel_gap: float | None = 1e-9) -> dict:
    out = {"median": t, "min": t, "max": t, "repeats": 3, "status": "ok", "violation": violation}
    return out if rel_gap is None else {**out, "rel_gap": rel_gap}


def _row(problem, dims, n_vars, spec, clarabel, scs, label=""):
    return {
        "problem": problem,
        "title": problem,
        "dims": dims,
        "label": label,
        "n_vars": n_vars,
        "specialised": spec,
        "CLARABEL": clarabel,
        "SCS": scs,
        "reference": "CLARABEL" if clarabel.get("median") else "SCS",
    }


def _paired(ref: float, ours: float, target: float, within: bool = True) -> dict:
    """A paired measurement of ``tools.bench.paired`` (CPU seconds of cold runs)."""

    def t(x: float) -> dict:
        return {"cpu_s": [x] * 3, "median": x, "min": x, "max": x, "repeats": 3}

    stats = {"corr_svm": {"max_diff_final": 2e-5, "tol": 1e-4, "within": within}}
    return {
        "title": "experiment",
        "reference_formulation": "torch autograd, one trial after another",
        "reference": t(ref),
        "ours": t(ours),
        "ratio": ref / ours,
        "target": target,
        "statistics": stats,
        "same_statistics": within,
        "met": ref / ours >= target and within,
    }


TIMEOUT = {"status": "timeout after 120 s", "median": None}
SKIPPED = {"status": "skipped (a smaller size ran out of time/memory)", "median": None}
NOT_RUN = {"status": "not run at these sizes", "median": None}

BENCH = {
    "machine": {"platform": "Linux-x86_64", "cpus": 2, "processor": "x86_64", "gpu": None},
    "git": {"commit": "0123456789abcdef", "dirty": False},
    "quick": False,
    "started": "2026-11-21 10:00:00",
    "solver_time_limit_s": 120.0,
    "bench_wall_time_s": 3000.0,
    "solvers": [
        # 22.1 / 0.39 = 57x and 9.1 / 0.39 = 23x: both at least 10x
        _row(
            "ntp-svm",
            {"V": 50, "d": 240, "m": 200},
            12000,
            _timing(0.39),
            _timing(22.1, rel_gap=0.0),
            _timing(9.1, violation=9e-6, rel_gap=2e-7),
        ),
        _row("ntp-svm", {"V": 1000, "d": 512, "m": 2000}, 512000, _timing(12.9), TIMEOUT, SKIPPED),
        # a paper size where cvxpy's set-up dominates: 8 ms / 1.5 ms = 5.3x < 10x
        _row(
            "graph-svm",
            {"n": 6, "T": 4, "K": 6, "d": 8},
            64,
            _timing(0.0015),
            _timing(0.008, rel_gap=0.0),
            _timing(0.011, rel_gap=1e-8),
        ),
        _row(
            "graph-svm",
            {"n": 200, "T": 8, "K": 32, "d": 32},
            1024,
            _timing(0.25),
            _timing(35.0, rel_gap=0.0),
            _timing(2.6, rel_gap=1e-8),
        ),
        _row(
            "graph-svm",
            {"n": 1000, "T": 8, "K": 64, "d": 64},
            4096,
            _timing(28.0, rel_gap=None),
            TIMEOUT,
            TIMEOUT,
        ),
        _row(
            "nuclear-svm-scale",
            {"V": 1000, "m": 5000},
            5_000_000,
            {**_timing(45.0, rel_gap=None), "gap": 8.1e-7},
            NOT_RUN,
            TIMEOUT,
        ),
        _row(
            "nuclear-svm-scale",
            {"V": 2000, "m": 10000},
            20_000_000,
            {"status": "timeout after 120 s", "median": None},
            NOT_RUN,
            SKIPPED,
        ),
        # the same sizes with all supports distinct (index 7 and 8)
        {
            **_row(
                "nuclear-svm-scale",
                {"V": 1000, "m": 5000},
                5_000_000,
                {**_timing(52.0, rel_gap=None), "gap": 9.2e-7},
                NOT_RUN,
                SKIPPED,
            ),
            "law": "distinct",
            "distinct_supports": 5000,
        },
        {
            **_row(
                "nuclear-svm-scale",
                {"V": 2000, "m": 10000},
                20_000_000,
                {"status": "skipped (a smaller size ran out of time/memory)", "median": None},
                NOT_RUN,
                SKIPPED,
            ),
            "law": "distinct",
            "distinct_supports": 10000,
        },
        # the other support laws of the 1000 x 5000 target (index 9 to 12)
        *(
            {
                **_row(
                    "nuclear-svm-scale",
                    {"V": 1000, "m": 5000},
                    5_000_000,
                    {**_timing(t, rel_gap=None), "gap": 9.0e-7},
                    NOT_RUN,
                    SKIPPED,
                ),
                "law": law,
                "distinct_supports": n,
            }
            for law, t, n in (
                ("zipf1.1-k4", 30.0, 3626),
                ("zipf1.5-k4", 12.0, 2234),
                ("zipf1.1-k8", 33.0, 4401),
                ("wiki", 40.0, 4900),
            )
        ),
    ],
    "trainers": [
        {
            "group": "linear model (V=10, d=60, m=50)",
            "name": "plain numpy GD loop",
            "steps_per_s": 1000.0,
            "baseline": True,
        },
        {
            "group": "linear model (V=10, d=60, m=50)",
            "name": "ntpcore gd",
            "steps_per_s": 1300.0,
            "ratio_to_baseline": 1.3,
        },
        {
            "group": "synthetic set (m=16, V=30, n=600)",
            "name": "ufm: ntpcore (distinct contexts)",
            "device": "cpu",
            "steps_per_s": 1 / 4.3e-5,
            "ratio_to_baseline": 16.0,
        },
        {
            "group": "synthetic set (m=16, V=30, n=600)",
            "name": "transformer: ntpcore (distinct contexts)",
            "device": "cpu",
            "steps_per_s": 1 / 9.7e-3,
            "ratio_to_baseline": 2.6,
        },
    ],
    "experiments": {
        # cyclic 29.7 / 0.235 = 126x >= 100x; local 57.9 / 0.61 = 95x < 100x; UFM 11x >= 10x
        "att_cyclic": _paired(29.7, 0.235, 100.0),
        "att_local": _paired(57.9, 0.61, 100.0),
        "ufm": _paired(10.5, 0.95, 10.0),
    },
    "pipeline": [{"fig_id": f"fig-{i}", "profile": "quick", "wall_time_s": 4.0} for i in range(32)],
}


def _find(data: dict, start: str) -> list[str]:
    rows = [r for r in ntpbook.performance_targets(data) if r[0].startswith(start)]
    assert len(rows) == 1, start
    return rows[0]


def test_speedup_targets_follow_from_the_measured_ratios():
    row = _find(BENCH, "NTP-SVM $\\ge 10")
    assert row[2] == "yes"
    assert "57×" in row[1] and "23×" in row[1]  # ratios computed from the medians
    slower = copy.deepcopy(BENCH)
    slower["solvers"][0]["SCS"]["median"] = 3.0  # 3.0 / 0.39 < 10: SCS is too close
    assert _find(slower, "NTP-SVM $\\ge 10")[2] == "**no**"
    inaccurate = copy.deepcopy(BENCH)
    inaccurate["solvers"][0]["specialised"]["rel_gap"] = 1e-3  # not equal accuracy
    row = _find(inaccurate, "NTP-SVM $\\ge 10")
    assert row[2] == "**no**" and "accuracy **not** equal" in row[1]


def test_a_target_met_at_some_sizes_only_names_them():
    row = _find(BENCH, "Graph-SVM $\\ge 10")
    assert "**no** at K=6, d=8" in row[2] and "yes at K=d=32" in row[2]
    assert "not measured in this build" in row[1]  # the acyclic size is absent


def test_timed_out_generic_solvers_give_lower_bounds_and_limits_decide_scale_targets():
    scale = _find(BENCH, "NTP-SVM on")
    assert scale[2] == "yes" and "512,000 variables, 43× the anchor" in scale[1]
    assert _find(BENCH, "nuclear-norm SVM $1000")[2] == "yes"
    # past a 120 s limit says nothing about a 10 min target
    assert _find(BENCH, "nuclear-norm SVM $2000")[2].startswith("not measured")
    longer = copy.deepcopy(BENCH)
    for i in (6, 8):
        longer["solvers"][i]["specialised"] = {"status": "timeout after 600 s", "median": None}
    assert _find(longer, "nuclear-norm SVM $2000")[2] == "**no**"
    slow = copy.deepcopy(BENCH)
    slow["solvers"][5]["specialised"] = {**_timing(75.0, rel_gap=None), "gap": 8e-7}
    verdict = _find(slow, "nuclear-norm SVM $1000")[2]
    assert verdict == (
        "**no** (ladder instance); yes (all supports distinct, 1-4 words, Zipf exponent 1.1, "
        "1-4 words, Zipf exponent 1.5, 1-8 words, Zipf exponent 1.1, the Wikipedia sample's "
        "supports)"
    )
    assert _find(BENCH, "Graph-SVM at")[2] == "yes"


def test_the_nuclear_scale_targets_need_a_certified_gap_on_every_instance_law():
    """The 1000 x 5000 target is met when both instances (the ladder's and the one with all
    supports distinct) were solved in time with a recorded certified gap <= 1e-6; a larger gap
    is not met, a missing gap or a missing instance is not measured, and the row names the
    number of distinct supports."""
    row = _find(BENCH, "nuclear-norm SVM $1000")
    assert (
        "all supports distinct (5,000 distinct supports): 52 s [52 s, 52 s] (3 runs), "
        "certified gap 9.2e-07" in row[1]
    )
    assert "ladder instance: 45 s [45 s, 45 s] (3 runs), certified gap 8.1e-07" in row[1]
    loose = copy.deepcopy(BENCH)
    loose["solvers"][7]["specialised"]["gap"] = 2e-6
    verdict = _find(loose, "nuclear-norm SVM $1000")[2]
    assert verdict.startswith("yes (ladder instance, 1-4 words, Zipf exponent 1.1, ")
    assert verdict.endswith("; **no** (all supports distinct)")
    unrecorded = copy.deepcopy(BENCH)
    del unrecorded["solvers"][7]["specialised"]["gap"]
    verdict = _find(unrecorded, "nuclear-norm SVM $1000")[2]
    assert "not measured: the run recorded no certified gap (all supports distinct)" in verdict
    absent = copy.deepcopy(BENCH)
    del absent["solvers"][7]
    row = _find(absent, "nuclear-norm SVM $1000")
    assert "all supports distinct: not measured" in row[1] and "yes (ladder instance, " in row[2]
    assert "5,000 distinct supports" in ntpbook.tables_text(BENCH)
    assert "1-8 words, Zipf exponent 1.1 (4,401 distinct supports): 33 s" in row[1]
    timed = copy.deepcopy(BENCH)  # the CPU time and load of the runs, when recorded
    timed["solvers"][7]["specialised"].update(cpu_times=[41.0, 43.6, 45.8], load_before=7.24)
    assert (
        "52 s [52 s, 52 s] (3 runs), CPU 43.6 s at load 7.2"
        in _find(timed, "nuclear-norm SVM $1000")[1]
    )
    assert "certified gap 9.2e-07" in ntpbook.tables_text(BENCH)


def test_trainers_attention_and_quick_profile_targets():
    trainers = _find(BENCH, "trainers")
    assert trainers[2] == "UFM yes on CPU, transformer **no** on CPU"
    assert "9.7 ms/epoch" in trainers[1]
    assert _find(BENCH, "GD / NGD")[2].startswith("–")
    att = _find(BENCH, "attention")
    assert "126×" in att[1] and "95×" in att[1] and "same statistics" in att[1]
    assert att[2] == "yes at cyclic; **no** at local convergence"  # 95x < 100x
    ufm = _find(BENCH, "UFM training")
    assert ufm[2] == "yes" and "11×" in ufm[1]
    quick = _find(BENCH, "quick profile")
    assert quick[2] == "yes" and "32 notebooks" in quick[1]  # 32 x 4 s = 128 s <= 5 min
    slow = copy.deepcopy(BENCH)
    slow["pipeline"] = [{"fig_id": "a", "profile": "quick", "wall_time_s": 301.0}]
    assert _find(slow, "quick profile")[2].startswith("**no**")


@pytest.mark.parametrize(
    ("gpu", "text"),
    [(None, "no GPU in this build"), ("NVIDIA H100", "has not timed"), ("absent", "recorded no")],
)
def test_gpu_rows_say_why_they_are_not_measured(gpu, text):
    data = copy.deepcopy(BENCH)
    if gpu == "absent":
        del data["machine"]["gpu"]
    else:
        data["machine"]["gpu"] = gpu
    row = _find(data, "real-text transformer")
    assert row[2] == "not measured" and text in row[1]


def test_a_measurement_absent_from_the_file_says_not_measured():
    empty = {"machine": {"platform": "x", "cpus": 2, "gpu": None}}
    rows = ntpbook.performance_targets(empty)
    for target, measured, met in rows:
        if target.startswith(("real-text", "GD / NGD")):
            continue
        assert measured.startswith(ntpbook.NOT_MEASURED) or ntpbook.NOT_MEASURED in measured
        assert met == ntpbook.NOT_MEASURED, target


def test_the_targets_text_is_a_list_table_with_the_run_and_equal_accuracy():
    text = ntpbook.targets_text(BENCH)
    assert "no GPU" in text and "each solve limited to 2 min" in text
    assert "*Equal accuracy* held" in text
    assert text.count("* - ") == 1 + len(ntpbook.performance_targets(BENCH))
    assert "PERFORMANCE.md" not in text + ntpbook.tables_text(BENCH)


def test_the_peak_memory_of_a_solve_is_stated_when_recorded():
    """The scale targets state memory: a run that recorded its peak resident memory shows it
    beside the time, in the targets row and in the solver table; one that did not shows none."""
    assert "peak" not in _find(BENCH, "nuclear-norm SVM $1000")[1]
    with_mem = copy.deepcopy(BENCH)
    with_mem["solvers"][5]["specialised"]["peak_rss_mb"] = 2560.0
    text = _find(with_mem, "nuclear-norm SVM $1000")[1]
    assert "45 s [45 s, 45 s] (3 runs), certified gap 8.1e-07, peak 2.5 GB" in text
    assert "peak 2.5 GB" in ntpbook.tables_text(with_mem)
    with_mem["solvers"][5]["specialised"]["peak_rss_mb"] = 300.0
    assert "peak 300 MB" in _find(with_mem, "nuclear-norm SVM $1000")[1]


def test_agreement_with_scs_is_judged_at_every_size_scs_finished():
    """The scale solver must agree with SCS (the bench's relative objective gap within 1e-6)
    wherever SCS finished; sizes where SCS did not finish are counted, not judged."""
    data = copy.deepcopy(BENCH)
    small = _row(
        "nuclear-svm-scale",
        {"V": 60, "m": 150},
        9000,
        {**_timing(0.05, rel_gap=5.6e-7), "objective": 94.600070},
        NOT_RUN,
        {**_timing(7.0), "objective": 94.600017},
    )
    data["solvers"].insert(5, small)
    row = _find(data, "nuclear-norm SVM at vocabulary scale")
    assert row[2] == "yes" and "V=60, m=150: 5.6e-07" in row[1]
    assert "(8 larger sizes: SCS did not finish)" in row[1]
    data["solvers"][5]["specialised"]["rel_gap"] = 1.1e-4  # not equal accuracy
    assert _find(data, "nuclear-norm SVM at vocabulary scale")[2] == "**no**"
    assert _find(BENCH, "nuclear-norm SVM at vocabulary scale")[1].startswith("not measured")


LOCK = "paper profile from a cold cache: a computation"
ORDER = "paper profile from a cold cache: the figures whose trained models"


def _run(
    profile,
    wall,
    *,
    cold=True,
    lock=True,
    complete=True,
    failed=(),
    started="2026-11-23",
    order=None,
):
    run = {
        "started": started,
        "profile": profile,
        "jobs": 2,
        "complete": complete,
        "failed": list(failed),
        "n_ok": 33,
        "wall_time_s": wall,
        "cache": {"cold": cold, "lock": lock, "entries_at_start": 0 if cold else 9},
        "machine": {"cpus": 2},
        "figures": {},
        "git": {"commit": "abcdef1234567", "dirty": False},
    }
    if order is not None:  # records from before --order have no order (registry order)
        run["order"] = order
    return run


def test_the_lock_target_compares_two_cold_complete_paper_runs():
    assert _find(BENCH, LOCK)[2] == ntpbook.NOT_MEASURED
    data = copy.deepcopy(BENCH)
    data["runs"] = [
        _run("paper", 8000.0, lock=False),
        _run("paper", 100.0, lock=False, cold=False),  # a warm re-run says nothing
        _run("paper", 50.0, lock=False, complete=False),  # nor does a part of the book
        _run("paper", 60.0, lock=False, failed=["x"]),  # nor a run with failures
        _run("paper", 6200.0, lock=True),
    ]
    row = _find(data, LOCK)
    assert "without the lock: 133 min" in row[1] and "with the lock: 103 min" in row[1]
    assert row[2] == "yes: 30 min less"
    elsewhere = _run("paper", 9000.0, lock=True, started="2026-11-24")
    elsewhere["machine"]["cpus"] = 16
    data["runs"].append(elsewhere)
    assert _find(data, LOCK)[2].startswith("not comparable")
    data["runs"].append(_run("paper", 8100.0, lock=True, started="2026-11-25"))  # newest
    assert _find(data, LOCK)[2] == "**no**: 100 s more"
    data["runs"] = data["runs"][-1:]
    row = _find(data, LOCK)
    assert "without the lock: not measured" in row[1]
    assert row[2] == "not measured (both runs are needed)"


def test_the_lock_and_order_targets_compare_runs_that_differ_in_one_thing_only():
    assert _find(BENCH, ORDER)[2] == ntpbook.NOT_MEASURED
    data = copy.deepcopy(BENCH)
    data["runs"] = [
        _run("paper", 7597.4, lock=False),  # before --order: the registry's order
        _run("paper", 6078.1, lock=True),
        _run("paper", 5000.0, lock=True, started="2026-11-24", order="reuse"),
    ]
    # the lock row compares two runs in the registry's order, not the newer reordered run
    assert _find(data, LOCK)[2] == "yes: 25.3 min less"
    row = _find(data, ORDER)
    assert "registry order: 101 min" in row[1] and "reuse first: 83.3 min" in row[1]
    assert row[2] == "yes: 18 min less"
    data["runs"].append(_run("paper", 4000.0, lock=False, started="2026-11-25", order="reuse"))
    # a newer run without the lock in the new order is compared with the reordered run
    assert _find(data, LOCK)[2] == "**no**: 16.7 min more"
    data["runs"] = data["runs"][:1] + data["runs"][2:3]  # lock off, and reordered lock on
    assert _find(data, LOCK)[2] == "not measured (both runs are needed)"
    assert _find(data, ORDER)[2] == "not measured (both runs are needed)"


def test_the_quick_target_reads_the_elapsed_time_of_a_whole_run_when_recorded():
    data = copy.deepcopy(BENCH)
    data["runs"] = [_run("quick", 250.0, cold=False)]
    row = _find(data, "quick profile")
    assert row[2] == "yes" and row[1].startswith("elapsed 4.17 min (33 figures, `--jobs 2`")
    data["runs"] = [_run("quick", 320.0, cold=False)]
    assert _find(data, "quick profile")[2] == "**no**"


def test_the_gpu_row_quotes_the_cpu_time_of_a_cold_run_never_of_a_cached_rerun():
    data = copy.deepcopy(BENCH)
    data["pipeline"] = [
        {"fig_id": "geo-training-curves-text", "profile": "paper", "wall_time_s": 13.2}
    ]
    assert "13.2 s" not in _find(data, "real-text transformer")[1]  # a warm re-run's sidecar
    warm = _run("paper", 30.0, cold=False)
    warm["figures"] = {"geo-trained-logits-text": 12.0}
    cold = _run("paper", 6078.1)
    cold["figures"] = {"geo-trained-logits-text": 4820.4}
    data["runs"] = [cold, warm]
    row = _find(data, "real-text transformer")
    assert "took 80.3 min in the cold-cache paper-profile run" in row[1] and "12 s" not in row[1]
    # a newer run without the lock trained that model twice side by side: not quoted
    contended = _run("paper", 7597.4, lock=False, started="2026-11-24")
    contended["figures"] = {"geo-trained-logits-text": 4980.0}
    data["runs"].append(contended)
    assert "took 80.3 min" in _find(data, "real-text transformer")[1]


def test_paired_targets_need_the_ratio_and_the_same_statistics():
    """A ratio above the target with a statistic beyond its tolerance is not met; a
    bench.json with the old comparison (typed times, no pairs) measures nothing."""
    differ = copy.deepcopy(BENCH)
    differ["experiments"]["ufm"] = _paired(10.5, 0.5, 10.0, within=False)
    row = _find(differ, "UFM training")
    assert row[2] == "**no**" and "statistics **differ**: corr_svm" in row[1]
    old = copy.deepcopy(BENCH)
    old["experiments"] = {"att_cyclic": {**_timing(0.69), "speedup_vs_authors": 81.0}}
    assert _find(old, "attention")[2].startswith("not measured")
    assert _find(old, "UFM training")[2].startswith("not measured")
    tables = ntpbook.tables_text(BENCH)
    assert "Published experiments against their reference formulations" in tables
    assert "126×" in tables and "(target 100×)" in tables


PAPER45 = "paper profile from a cold cache (`make notebooks`"


def test_the_45_minute_target_reads_the_newest_cold_two_core_run_and_quotes_the_one_before():
    assert _find(BENCH, PAPER45)[2] == ntpbook.NOT_MEASURED
    data = copy.deepcopy(BENCH)
    data["runs"] = [_run("paper", 4823.0, order="reuse")]
    row = _find(data, PAPER45)
    assert row[2] == "**no**" and "this run: 80.4 min" in row[1]
    assert "the previous one: no earlier record in this build" in row[1]
    data["runs"].append(_run("paper", 2700.0, started="2026-11-27", order="reuse"))
    row = _find(data, PAPER45)
    assert row[2] == "yes" and row[1].startswith("this run: 45 min")
    assert "the previous one: 80.4 min" in row[1]
    sixteen = _run("paper", 600.0, started="2026-11-28", order="reuse")
    sixteen["machine"]["cpus"] = 16  # another machine: not the 2-core target
    data["runs"].append(sixteen)
    data["runs"].append(_run("paper", 50.0, started="2026-11-29", failed=["x"]))
    assert _find(data, PAPER45)[1].startswith("this run: 45 min")
    data["runs"].append(_run("paper", 2701.0, started="2026-11-30"))
    assert _find(data, PAPER45)[2] == "**no**"


def test_the_timeline_lists_each_workers_figures_and_the_previous_runs_wall_times():
    assert "No complete cold-cache paper-profile run with a timeline" in ntpbook.timeline_text(
        BENCH
    )
    before = _run("paper", 4823.0)
    before["figures"] = {"a": 4790.0, "b": 100.0}
    now = _run("paper", 2600.0, started="2026-11-27")
    now["figures"] = {"a": 2590.0, "b": 60.0, "c": 300.0}
    now["timeline"] = {
        "a": {"worker": 1, "start_s": 0.4, "end_s": 2590.4},
        "c": {"worker": 2, "start_s": 60.5, "end_s": 360.5},
        "b": {"worker": 2, "start_s": 0.5, "end_s": 60.5},
    }
    warm = _run("paper", 30.0, cold=False, started="2026-11-28")  # not a cold run: ignored
    warm["timeline"] = {"a": {"worker": 1, "start_s": 0.0, "end_s": 30.0}}
    assert "holds no record of a cold run before it" in ntpbook.timeline_text(
        {**BENCH, "runs": [now]}
    )
    text = ntpbook.timeline_text({**BENCH, "runs": [before, now, warm]})
    assert "worker 1: 1 figure, busy 43.2 min of 43.3 min" in text
    assert "worker 2: 2 figures, busy 6 min of 43.3 min, its last figure ended at 6.01 min" in text
    body = text[text.index(":::{list-table}") :]
    assert body.index("`a`") < body.index("`b`") < body.index("`c`")  # by worker, then start
    assert "in the cold run before it, 80.4 min (33 figures" in text
    assert "run before" in body and "79.8 min" in body
    assert "* - 2\n  - `c`\n  - 60.5 s\n  - 6.01 min\n  - 5 min\n  - –" in body


def test_the_scaling_table_and_the_largest_m_row():
    """The geo-scaling section: one row per m, one column per law (median [min, max], CPU
    time, peak memory, iterations, reduced size; a point not run says why), the largest m
    in 10 minutes marked as extrapolated, and the targets row reading the same fits."""
    assert "not measured" in _find(BENCH, "nuclear-norm SVM: the largest")[1]
    point = {
        "median": 31.0,
        "min": 30.0,
        "max": 33.0,
        "repeats": 3,
        "times": [30.0, 31.0, 33.0],
        "cpu_times": [29.0, 30.5, 30.0],
        "peak_rss_mb": 1800.0,
        "iterations": 78,
        "reduced_shape": [977, 5000],
        "status": "ok",
    }
    data = copy.deepcopy(BENCH)
    data["geo_scaling"] = {
        "V": 1000,
        "tol": 1e-6,
        "started": "2026-11-28 12:00:00",
        "rows": [
            {"law": "distinct", "V": 1000, "m": 5000, "specialised": point},
            {
                "law": "wiki",
                "V": 1000,
                "m": 10000,
                "specialised": {"status": "the corpus has 5,794 qualifying contexts"},
            },
        ],
        "growth": {
            "distinct": {
                "time_exponent": 1.31,
                "iterations_max": 146,
                "memory_mb_per_1000": 310.0,
                "largest_m": 41000,
                "limited_by": "time",
                "extrapolated": True,
            }
        },
    }
    text = ntpbook.tables_text(data)
    assert "time and memory against the number of contexts (V = 1,000)" in text
    assert "31 s [30 s, 33 s], 3 runs, CPU 30 s, peak 1.8 GB, 78 it., 977×5,000 reduced" in text
    assert "the corpus has 5,794 qualifying contexts" in text
    assert "m ≈ 41,000 (extrapolated from the measured points: CPU time per iteration" in text
    assert "∝ m^1.31 (fitted 1.31 through the two largest points), times 146 iterations" in text
    row = _find(data, "nuclear-norm SVM: the largest")
    assert "all supports distinct: m ≈ 41,000 (extrapolated" in row[1]
    assert row[2] == "– (no target)"
