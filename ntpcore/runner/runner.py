"""Reproduce the book's figures: ``python -m ntpcore.reproduce``.

::

    python -m ntpcore.reproduce [--profile paper|quick] [--only ID ...]
                                [--set KEY=VALUE ...] [--replace] [--jobs N]
                                [--order reuse|registry] [--scheduler tcp://HOST:PORT]
                                [--force] [--list]

Every override (registry ``params``, registry ``quick`` and ``--set``) is validated
against the notebook's ``parameters`` cell before any kernel starts.  Each notebook is
executed by papermill into a private staging folder; only when it succeeds are its
executed copy (``book/executed/<id>.ipynb``) and figures (``book/figures/<id>.*``) moved
into place, all of them or none (a folder that cannot be written leaves the previous files
as they were), so a failing notebook leaves no half-written figure.  The error names the
notebook, the cell and the cause.

Every notebook checks the claims its figure illustrates (:mod:`ntpcore.figure.claims`).  The
runner reads the claims ledger the notebook wrote, puts every claim into the sidecar, and
fails the figure when a claim does not hold: the error names each failed claim (id,
statement, expected vs measured), nothing is published, and the executed copy, the
figure and its sidecar with every claim are kept under ``_build/failed/`` for reading.

Jobs start in the order of :func:`order_jobs`: a figure whose cached computations other
figures read (the registry's ``reuses``, e.g. the real-text transformer) starts first, the
figures that read them start last, and the rest keeps the registry's order in between.  With
``--jobs 2`` the longest training then runs from the first minute in one worker while the
other worker does the figures that need nothing from it, instead of waiting on its lock.
``--order registry`` keeps the registry's order (how runs were ordered before).

With ``--scheduler tcp://HOST:PORT`` the figures run as tasks on the workers of a
``dask.distributed`` cluster, in the same order, as workers free up
(:mod:`ntpcore.runner.cluster`): each notebook is executed by papermill on a worker, and
its files come back to be published here as above.  The workers need this commit's checkout
and the computation cache on a file system they share with this machine (``NTP_CACHE_DIR``,
an absolute path; checked before any figure starts).

A run that reproduces registry figures (no ``--set``) and is not interrupted leaves a run
record, ``<figure folder>/runs/<start>-<pid>-<profile>.json``: its elapsed wall time, jobs,
figures and their wall times, its timeline (which worker ran each figure, from when to when,
in seconds from the start; on a cluster read with the workers' clocks), the order, whether
the computation cache was cold and whether its per-key lock was on (``NTP_CACHE_LOCK``),
commit and machine, and the dask scheduler with its workers and threads (``null`` for a run
on this machine; on a cluster ``jobs`` is the threads).  The *Performance* page reads the
paper profile's elapsed time and timeline from these records
(``make bench`` collects them).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import logging
import os
import platform
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ntpcore.core import cache, paths
from ntpcore.core.io import write_text_atomic
from ntpcore.errors import ParameterError
from ntpcore.figure.provenance import git_state
from ntpcore.runner import kernels
from ntpcore.runner.planning import ORDERS, Job, list_text, order_jobs, parse_set, plan
from ntpcore.runner.registry import (
    RegistryError,
    load_registry,
)
from ntpcore.runner.staging import (
    KERNEL_ENV,
    Outcome,
    relative_to_root,
    remove_staging,
    run_job,
    settle_files,
    stage_on_worker,
)

__all__ = [
    "Interrupted",
    "cache_entries",
    "execute",
    "execute_on_cluster",
    "main",
    "timeline",
    "write_run_record",
]


def _run_in_worker(job: Job) -> Outcome:
    return run_job(job, progress=False, warm=True)


def execute(jobs: list[Job], n_jobs: int = 1) -> list[Outcome]:
    """Run jobs (serially, or in ``n_jobs`` worker processes) with an overall progress bar.

    On an interruption (Ctrl-C, SIGTERM) the outcomes so far are attached to the raised
    :class:`Interrupted`, pending jobs are cancelled and staging folders removed.
    """
    outcomes: list[Outcome] = []
    bar = tqdm(total=len(jobs), desc="figures", unit="fig", position=0)
    try:
        if n_jobs <= 1:
            for job in jobs:
                bar.set_postfix_str(job.entry.fig_id)
                outcomes.append(run_job(job, warm=True))
                bar.update()
        else:
            with concurrent.futures.ProcessPoolExecutor(max_workers=n_jobs) as pool:
                futures = {pool.submit(_run_in_worker, job): job for job in jobs}
                try:
                    for fut in concurrent.futures.as_completed(futures):
                        outcomes.append(fut.result())
                        bar.set_postfix_str(outcomes[-1].fig_id)
                        bar.update()
                except BaseException:
                    for fut in futures:
                        fut.cancel()
                    for proc in list(getattr(pool, "_processes", {}).values()):
                        proc.terminate()
                    raise
    except KeyboardInterrupt as exc:
        raise Interrupted(outcomes) from exc
    finally:
        bar.close()
        kernels.discard()  # the serial run's warm kernel (a worker's ends with the worker)
        remove_staging()
    return outcomes


def execute_on_cluster(jobs: list[Job], client: Any, env: dict[str, str]) -> list[Outcome]:
    """Run jobs on a dask cluster (``--scheduler``, :mod:`ntpcore.runner.cluster`): each
    is staged on a worker (:func:`stage_job`), and its files come back to be published here
    as in a local run (:func:`settle`).  A worker that dies is a failed figure.  Interrupted
    as :func:`execute` is."""
    from ntpcore.runner import cluster

    outcomes: list[Outcome] = []
    bar = tqdm(total=len(jobs), desc="figures", unit="fig", position=0)

    def collect(job: Job, result: Any) -> None:
        fig_id = job.entry.fig_id
        if isinstance(result, BaseException):
            outcomes.append(Outcome(fig_id, False, 0.0, cluster.lost(fig_id, result)))
        else:
            outcomes.append(settle_files(job, *result))
        bar.set_postfix_str(fig_id)
        bar.update()

    try:
        cluster.execute(
            jobs,
            client,
            name=lambda job: job.entry.fig_id,
            stage=stage_on_worker,
            env=env,
            collect=collect,
        )
    except KeyboardInterrupt as exc:
        raise Interrupted(outcomes) from exc
    finally:
        bar.close()
        kernels.discard()  # the serial run's warm kernel (a worker's ends with the worker)
        remove_staging()
    return outcomes


class Interrupted(Exception):
    """The run was interrupted; ``outcomes`` holds the figures finished before."""

    def __init__(self, outcomes: list[Outcome]) -> None:
        super().__init__("interrupted")
        self.outcomes = outcomes


def cache_entries() -> int:
    """Number of stored entries in the computation cache (0: a cold cache)."""
    return sum(1 for _ in paths.cache_dir().glob("*/*.json"))


def timeline(outcomes: list[Outcome], t0: float) -> dict[str, dict[str, Any]]:
    """Where the time went: for each figure that ran, its worker (numbered from 1 in the
    order the workers started their first figure), and its start and end in seconds from
    the start of the run ``t0``."""
    ran = sorted((o for o in outcomes if o.worker), key=lambda o: o.started)
    workers: dict[str, int] = {}
    for o in ran:
        workers.setdefault(o.worker, len(workers) + 1)
    return {
        o.fig_id: {
            "worker": workers[o.worker],
            "start_s": round(o.started - t0, 1),
            "end_s": round(o.started - t0 + o.wall_time_s, 1),
        }
        for o in ran
    }


def write_run_record(
    *,
    started: datetime,
    profile: str,
    n_jobs: int,
    order: str,
    only: list[str] | None,
    entries_at_start: int,
    lock: bool,
    outcomes: list[Outcome],
    wall_time_s: float,
    scheduler: dict[str, Any] | None = None,
) -> Path:
    """Write the run record of one runner call (see the module docstring); returns it."""
    record = {
        "started": started.isoformat(timespec="seconds"),
        "profile": profile,
        "jobs": n_jobs,
        "scheduler": scheduler,
        "order": order,
        "only": only,
        "complete": only is None,
        "wall_time_s": round(wall_time_s, 1),
        "n_ok": sum(o.ok for o in outcomes),
        "failed": [o.fig_id for o in outcomes if not o.ok],
        "figures": {o.fig_id: round(o.wall_time_s, 1) for o in outcomes},
        "timeline": timeline(outcomes, started.timestamp()),
        "cache": {
            "dir": relative_to_root(paths.cache_dir()),
            "entries_at_start": entries_at_start,
            "cold": entries_at_start == 0,
            "lock": lock,
        },
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "kernel_env": KERNEL_ENV,
        "git": git_state(),
    }
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    path = paths.figure_dir() / "runs" / f"{stamp}-{os.getpid()}-{profile}.json"
    write_text_atomic(path, json.dumps(record, indent=1) + "\n")
    return path


def _capped_jobs(n_jobs: int, n_figures: int) -> int:
    """``--jobs``, at most one worker per figure (a note when lowered), with a warning when it
    exceeds this machine's cores (each kernel runs on one thread: more only compete)."""
    if n_jobs > n_figures:
        print(
            f"note: --jobs {n_jobs} lowered to {n_figures}, one worker per figure",
            file=sys.stderr,
        )
        n_jobs = n_figures
    cores = os.cpu_count() or 1
    if n_jobs > cores:
        print(
            f"warning: --jobs {n_jobs} is more than this machine's {cores} CPU core(s): the "
            f"notebooks compete for them, and the run is no faster than with --jobs {cores}",
            file=sys.stderr,
        )
    return n_jobs


def _interrupt(signum: int, frame: Any) -> None:
    """SIGTERM and Ctrl-C: stop the run with the runner's one-line message.

    The kernel client (nbclient) leaves tasks running when it is interrupted: while papermill
    shuts the kernel down, its poll of the kernel's life can find it dead and end in a
    ``DeadKernelError`` that no one awaits any more.  asyncio logs such a task's exception
    when it is garbage-collected, at interpreter exit, after the runner's last line.  After an
    interruption that is expected, so asyncio's log is silenced for the rest of the process.
    """
    logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ntpcore.reproduce",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--profile", default="paper", help="paper (default) or quick")
    parser.add_argument(
        "--only",
        nargs="+",
        action="extend",
        metavar="ID",
        help="figure ids to run (repeatable; default: all)",
    )
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a notebook parameter (repeatable); a run with --set is an "
        "exploration and writes results/explore/<id>/, never the book's figure",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="notebooks run in parallel on this machine (default 1; at most one per figure, "
        "and more than the CPU cores only compete; not with --scheduler)",
    )
    parser.add_argument(
        "--scheduler",
        metavar="tcp://HOST:PORT",
        help="run the figures on the workers of this dask.distributed scheduler (each "
        "notebook on a worker, published here); the workers need this commit's checkout "
        "and the computation cache (NTP_CACHE_DIR, default results/cache) on a file "
        "system they share with this machine",
    )
    parser.add_argument(
        "--order",
        default="reuse",
        metavar="|".join(ORDERS),
        help="reuse (default): figures whose cached computations others read start first, "
        "their readers last; registry: the registry's order",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="run even where the estimated memory or time exceeds what this machine has",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="an exploration (--set) replaces the previous exploration of its figure; by "
        "default the previous one is kept in results/explore/<id>/previous-<n>/",
    )
    parser.add_argument("--list", action="store_true", help="list the registry and exit")
    args = parser.parse_args(argv)
    try:
        registry = load_registry()
        if args.list:
            given = [
                f
                for f, v in (
                    ("--only", args.only),
                    ("--set", args.sets),
                    ("--scheduler", args.scheduler is not None),
                    ("--replace", args.replace),
                )
                if v
            ]
            if (
                given
                or args.profile != "paper"
                or args.jobs not in (None, 1)
                or args.order != "reuse"
            ):
                raise ParameterError("--list takes no other option (it only lists the registry)")
            print(list_text(registry))
            return 0
        if args.scheduler is not None:
            from ntpcore.runner import cluster

            cluster.check_address(args.scheduler)
            if args.jobs is not None:
                raise ParameterError(
                    "--jobs does not apply with --scheduler: the cluster's workers run the "
                    "figures, as many at once as they have threads"
                )
        n_jobs = 1 if args.jobs is None else args.jobs
        if n_jobs < 1:
            raise ParameterError(f"--jobs must be >= 1, got {args.jobs}")
        if args.replace and not args.sets:
            raise ParameterError(
                "--replace applies to explorations (--set): a run without --set always "
                "replaces the book's figure"
            )
        jobs = order_jobs(
            plan(args.only, args.profile, parse_set(args.sets), registry, args.force), args.order
        )
        if args.replace:
            jobs = [dataclasses.replace(job, replace=True) for job in jobs]
        lock = cache.lock_enabled()
    except (ParameterError, RegistryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.scheduler is None:
        n_jobs = _capped_jobs(n_jobs, len(jobs))
    client, scheduler = None, None
    if args.scheduler is not None:
        try:
            client = cluster.connect(args.scheduler)
            scheduler = cluster.check_workers(client, paths.cache_dir())
        except cluster.ClusterError as exc:
            if client is not None:
                client.close()
            print(f"error: {exc}", file=sys.stderr)
            return 2
        n_jobs = scheduler["threads"]
        on = (
            f"on the dask cluster at {args.scheduler} ({scheduler['workers']} worker(s), "
            f"{scheduler['threads']} thread(s))"
        )
    else:
        on = f"jobs={n_jobs}"
    explored = " (explored: --set runs write results/explore/<id>/)" if args.sets else ""
    print(
        f"Reproducing {len(jobs)} figure(s), profile={args.profile}, {on}"
        f"{'' if args.order == 'reuse' else ', registry order'}"
        f"{'' if lock else ', cache lock off (NTP_CACHE_LOCK)'}{explored}"
    )
    record = {
        "started": datetime.now(UTC),
        "profile": args.profile,
        "n_jobs": n_jobs,
        "scheduler": scheduler,
        "order": args.order,
        "only": args.only,
        "entries_at_start": cache_entries(),
        "lock": lock,
    }
    t0 = time.perf_counter()
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if client is None:
            outcomes = execute(jobs, n_jobs)
        else:
            env = {"NTP_CACHE_DIR": str(paths.cache_dir()), "NTP_CACHE_LOCK": "1" if lock else "0"}
            outcomes = execute_on_cluster(jobs, client, env)
    except Interrupted as stop:
        done = [o.fig_id for o in stop.outcomes if o.ok]
        print(
            f"\ninterrupted: {len(done)} of {len(jobs)} figure(s) finished and published"
            f"{' (' + ', '.join(done) + ')' if done else ''}; nothing half-written was kept. "
            f"Run the same command again to resume: cached computations are reused.",
            file=sys.stderr,
        )
        return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if client is not None:
            client.close()
    wall = time.perf_counter() - t0
    saved, record_error = None, None
    if not args.sets:
        try:
            saved = write_run_record(**record, outcomes=outcomes, wall_time_s=wall)
        except OSError as exc:  # e.g. a read-only figure folder: the results still count
            where = relative_to_root(Path(exc.filename)) if exc.filename else ""
            record_error = f"{exc.strerror or exc} ({where})"
    failed = [o for o in outcomes if not o.ok]
    for o in sorted(outcomes, key=lambda o: -o.wall_time_s):
        print(
            f"  {'ok  ' if o.ok else 'FAIL'} {o.fig_id:32s} {o.wall_time_s:7.1f} s   "
            f"{o.claims_summary()}"
        )
    where = (
        "explored runs in "
        + ", ".join(f"{relative_to_root(paths.explore_dir(j.entry.fig_id))}/" for j in jobs)
        if args.sets
        else f"figures in {relative_to_root(paths.figure_dir())}/, "
        f"notebooks in {relative_to_root(paths.executed_dir())}/"
    )
    print(
        f"{len(outcomes) - len(failed)} ok, {len(failed)} failed in {wall:.1f} s; {where}"
        f"{f'; run record {relative_to_root(saved)}' if saved else ''}"
    )
    if record_error:
        print(f"warning: no run record was written: {record_error}", file=sys.stderr)
    for o in outcomes:
        if o.ok and o.message:
            print(f"  {o.fig_id}: {o.message}")
    for o in outcomes:
        for w in o.warnings:
            print(f"warning: {o.fig_id}: {w}", file=sys.stderr)
    for o in failed:
        print(f"error: {o.message}", file=sys.stderr)
    return 1 if failed else 0
