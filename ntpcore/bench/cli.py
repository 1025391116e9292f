"""``make bench`` (``python -m ntpcore.bench``): the project's solvers and trainers against
what a researcher would otherwise run, measured side by side in one run.

::

    python -m ntpcore.bench [--quick] [--max-seconds 600] [--only solvers trainers ...]

Sections
--------
One module each (:mod:`ntpcore.bench.solvers`, :mod:`ntpcore.bench.trainers`,
:mod:`ntpcore.bench.paired`, :mod:`ntpcore.bench.pipeline`); this one holds the command line.

solvers
    Each specialised max-margin solver (NTP-SVM, nuclear-norm SVM, Graph-SVM) against the
    straightforward cvxpy formulation with Clarabel and with SCS, on the papers' instance
    sizes and on growing sizes.  Every solve (specialised or generic) runs in a child
    process with a time limit (default 10 minutes), so a solver that runs out of time or
    memory is recorded as such and the ladder stops for it.  Reported: median/min/max
    time, objective, relative objective gap to the Clarabel solution, the worst
    constraint violation, the peak resident memory of the child and, for the nuclear-norm
    SVM, the certified relative duality gap of the specialised solve and the number of
    distinct supports of the instance (its two support laws:
    :func:`ntpcore.bench.solvers.geo_supports`).
trainers
    Steps per second of GD/NGD/Adam on the linear model against a plain numpy loop, and of
    UFM/transformer/LSTM training (this project's formulation: distinct contexts with counts)
    against the per-sample formulation; on CPU, and on a GPU when torch sees one.
experiments
    The published experiments (attention: cyclic TPGs and local convergence; the UFM training)
    against their reference formulations -- the authors' loops re-derived with torch autograd
    (:mod:`ntpcore.bench.reference`) -- each run cold in a child process of its own, reference
    and project alternating, with the ratio of the median CPU times, the target and the
    statistics of both side by side (:mod:`ntpcore.bench.paired`).
pipeline
    Wall time of every registry figure, read from the provenance sidecars of the latest
    paper-profile (``book/figures``) and quick-profile (``_build/test/figures``) runs.

Results go to ``results/bench/bench.json``; the book's *Performance* page reads them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any

from ntpcore.bench.paired import bench_paired
from ntpcore.bench.pipeline import bench_pipeline, bench_runs
from ntpcore.bench.solvers import PROBLEMS, bench_solvers, plot_solvers
from ntpcore.bench.trainers import bench_trainers, gpu_name
from ntpcore.core.io import write_text_atomic
from ntpcore.pipeline import paths
from ntpcore.pipeline.provenance import git_state, versions

BENCH_DIR = paths.RESULTS_DIR / "bench"

BENCH_JSON = BENCH_DIR / "bench.json"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="python -m ntpcore.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the two smallest sizes per solver and short training runs",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=600.0,
        help="time limit of one solve, any solver (default 600)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        default=["solvers", "trainers", "experiments", "pipeline"],
        choices=["solvers", "trainers", "experiments", "pipeline"],
    )
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    args = parser.parse_args(argv)
    previous = json.loads(BENCH_JSON.read_text()) if BENCH_JSON.exists() else {}
    result: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "processor": platform.processor(),
            "gpu": gpu_name(),
        },
        "versions": versions(),
        "git": git_state(),
        "quick": args.quick,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    sections = ("solvers", "trainers", "experiments", "pipeline", "runs", "solver_time_limit_s")
    for section in sections:
        if section in previous:
            result[section] = previous[section]  # keep sections not re-run
    t0 = time.perf_counter()

    def save() -> None:  # after every section, so an interrupted run keeps what it measured
        result["bench_wall_time_s"] = time.perf_counter() - t0
        write_text_atomic(BENCH_JSON, json.dumps(result, indent=1, default=float))

    if "solvers" in args.only:
        rows = bench_solvers(args.problems, args.max_seconds, args.quick)
        result["solver_time_limit_s"] = args.max_seconds
        # keep earlier rows of problems not re-run this time
        kept = [r for r in previous.get("solvers", []) if r["problem"] not in args.problems]
        result["solvers"] = kept + rows
        plot_solvers(result["solvers"], BENCH_DIR / "solvers.png")
        save()
    if "trainers" in args.only:
        result["trainers"] = bench_trainers(args.quick)
        save()
    if "experiments" in args.only:
        result["experiments"] = bench_paired(quick=args.quick, repeats=3)
        save()
    if "pipeline" in args.only:
        result["pipeline"] = bench_pipeline()
        result["runs"] = bench_runs()
    save()
    print(
        f"wrote {BENCH_JSON.relative_to(paths.ROOT)}; rebuild the book (make html) to "
        f"update the Performance page"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
