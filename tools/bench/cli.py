"""``make bench`` (``python -m tools.bench``): the project's solvers and trainers against
what a researcher would otherwise run, measured side by side in one run.

::

    python -m tools.bench [--quick] [--max-seconds 600] [--only solvers trainers ...]
    python -m tools.bench --only geo-scaling [--scaling-m 1000 2000 ...] [--scaling-laws ...]

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
geo-scaling (:mod:`tools.bench.scaling`; not in the default run, ``make bench-scaling``)
    Time and peak memory of the nuclear-norm SVM solver against the number of contexts
    (``m`` = 1,000 ... 20,000 at ``V`` = 1,000) on each support law, and the largest ``m``
    one machine certifies in 10 minutes (long: about an hour on one core).

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
from tools.bench.scaling import LAWS as SCALING_LAWS
from tools.bench.scaling import M_VALUES as SCALING_M
from tools.bench.scaling import bench_scaling, merge_sections
from tools.bench.solvers import PROBLEMS, bench_solvers, plot_solvers
from tools.bench.timing import child_blas
from tools.bench.trainers import bench_trainers, gpu_name

BENCH_DIR = paths.RESULTS_DIR / "bench"

BENCH_JSON = BENCH_DIR / "bench.json"


def _ladder_position(row: dict) -> tuple[int, int]:
    """Where a solver row sits in the ladders: problem, then size and law."""
    names = list(PROBLEMS)
    if row["problem"] not in PROBLEMS:
        return len(names), 0
    sizes = PROBLEMS[row["problem"]].sizes
    at = [i for i, s in enumerate(sizes) if s.dims == row["dims"] and s.law == row.get("law", "")]
    return names.index(row["problem"]), at[0] if at else len(sizes)


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
        choices=["solvers", "trainers", "experiments", "pipeline", "geo-scaling"],
        help="sections to run (default: all but geo-scaling)",
    )
    parser.add_argument(
        "--scaling-m",
        nargs="+",
        type=int,
        default=list(SCALING_M),
        help="geo-scaling: the numbers of contexts m (V = 1000)",
    )
    parser.add_argument(
        "--scaling-laws",
        nargs="+",
        default=list(SCALING_LAWS),
        help="geo-scaling: the support laws (tools.bench.solvers.geo_supports)",
    )
    parser.add_argument(
        "--scaling-repeats",
        type=int,
        default=3,
        help="geo-scaling: most runs of one point (more only while they fit in 2 min)",
    )
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    parser.add_argument(
        "--dims",
        nargs="+",
        default=None,
        metavar="K=N,...",
        help="solvers: only the sizes with these dimensions (e.g. V=1000,m=5000); their rows "
        "replace the earlier rows of the same size and law",
    )
    parser.add_argument(
        "--no-generic",
        action="store_true",
        help="solvers: the specialised solvers only (cvxpy recorded as not run)",
    )
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
            # OpenBLAS kernels (AVX-512 or AVX2) and threads of the timed children: they set
            # the solvers' speed
            "blas": child_blas(),
        },
        "versions": versions(),
        "git": git_state(),
        "quick": args.quick,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    sections = (
        "solvers",
        "trainers",
        "experiments",
        "pipeline",
        "runs",
        "solver_time_limit_s",
        "geo_scaling",
    )
    for section in sections:
        if section in previous:
            result[section] = previous[section]  # keep sections not re-run
    t0 = time.perf_counter()

    ran: set[str] = set()  # the sections this run measured
    scaling_only = set(args.only) == {"geo-scaling"}

    def save() -> None:  # after every section, so an interrupted run keeps what it measured
        # sections this run did not measure are taken from the file as it is now (another
        # run may have written them meanwhile); a geo-scaling-only run keeps the file's
        # header (machine, commit, start) too: its own is in its section
        current = json.loads(BENCH_JSON.read_text()) if BENCH_JSON.exists() else {}
        out = dict(current) if scaling_only else dict(result)
        for section in sections:
            source = result if section in ran else current
            if section in source:
                out[section] = source[section]
        if not scaling_only:
            out["bench_wall_time_s"] = time.perf_counter() - t0
        write_text_atomic(BENCH_JSON, json.dumps(out, indent=1, default=float))

    if "solvers" in args.only:
        dims = None
        if args.dims:
            dims = [
                {k: int(v) for k, v in (kv.split("=") for kv in d.split(","))} for d in args.dims
            ]
        rows = bench_solvers(
            args.problems, args.max_seconds, args.quick, dims=dims, generic=not args.no_generic
        )
        result["solver_time_limit_s"] = args.max_seconds
        # keep earlier rows of problems (with --dims: of sizes and laws) not re-run this time
        redone = {(r["problem"], json.dumps(r["dims"]), r.get("law", "")) for r in rows}
        kept = [
            r
            for r in previous.get("solvers", [])
            if (r["problem"] not in args.problems)
            or (
                dims is not None
                and (r["problem"], json.dumps(r["dims"]), r.get("law", "")) not in redone
            )
        ]
        result["solvers"] = sorted(kept + rows, key=_ladder_position)
        ran.update({"solvers", "solver_time_limit_s"})
        plot_solvers(result["solvers"], BENCH_DIR / "solvers.png")
        save()
    if "trainers" in args.only:
        result["trainers"] = bench_trainers(args.quick)
        ran.add("trainers")
        save()
    if "experiments" in args.only:
        result["experiments"] = bench_paired(quick=args.quick, repeats=3)
        ran.add("experiments")
        save()
    if "pipeline" in args.only:
        result["pipeline"] = bench_pipeline()
        result["runs"] = bench_runs()
        ran.update({"pipeline", "runs"})
    if "geo-scaling" in args.only:

        def save_scaling(section: dict[str, Any]) -> None:
            # the points of this run replace the same points of the file's section and keep
            # the others (other laws: runs one after another or side by side add up)
            current = json.loads(BENCH_JSON.read_text()) if BENCH_JSON.exists() else {}
            for key in ("machine", "git", "started"):
                section[key] = result[key]
            result["geo_scaling"] = merge_sections(current.get("geo_scaling"), section)
            ran.add("geo_scaling")
            save()

        save_scaling(
            bench_scaling(
                tuple(args.scaling_m),
                tuple(args.scaling_laws),
                repeats=args.scaling_repeats,
                max_seconds=max(args.max_seconds, 1800.0),
                progress=save_scaling,
            )
        )
    save()
    print(
        f"wrote {BENCH_JSON.relative_to(paths.ROOT)}; rebuild the book (make html) to "
        f"update the Performance page"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
