"""``make bench`` (``python -m tools.bench``): the project's solvers and trainers against
what a researcher would otherwise run, measured side by side in one run.

::

    python -m tools.bench [--quick] [--max-seconds 600] [--only solvers trainers ...]

Sections
--------
One module each; what each measures and reports is in its docstring, this one holds the
command line.

solvers (:mod:`tools.bench.solvers`)
    The specialised max-margin solvers against cvxpy with Clarabel and with SCS, rung by
    rung, each solve in a child process with a time limit.
trainers (:mod:`tools.bench.trainers`)
    Steps per second of the project's trainers against a plain loop or the per-sample
    formulation; on CPU, and on a GPU when torch sees one.
experiments (:mod:`tools.bench.paired`)
    The published experiments against their reference formulations
    (:mod:`tools.bench.reference`), cold, alternating, with the statistics of both.
pipeline (:mod:`tools.bench.figure_runs`)
    Wall time of every figure and the runner's records of whole runs.

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

from ntpcore.att import compiled as att_compiled
from ntpcore.core import paths
from ntpcore.core.io import write_text_atomic
from ntpcore.figure.provenance import git_state, versions
from ntpcore.geo.train.numpy_ufm import adamw_kernel
from tools.bench.figure_runs import bench_pipeline, bench_runs
from tools.bench.paired import bench_paired
from tools.bench.solvers import PROBLEMS, bench_solvers, plot_solvers
from tools.bench.trainers import bench_trainers, gpu_name

BENCH_DIR = paths.RESULTS_DIR / "bench"

BENCH_JSON = BENCH_DIR / "bench.json"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench",
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
            # the attention experiments' steps: compiled extension, or numpy and why
            "att_steps": "compiled"
            if att_compiled.available()
            else att_compiled.unavailable_reason(),
            "ufm_adamw": adamw_kernel(),  # compiled, torch or numpy
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
