"""Reproduce the book's figures: ``python -m ntpcore.reproduce``.

::

    python -m ntpcore.reproduce [--profile paper|quick] [--only ID ...]
                                [--set KEY=VALUE ...] [--jobs N] [--order reuse|registry]
                                [--scheduler tcp://HOST:PORT] [--list]

Every override (registry ``params``, registry ``quick`` and ``--set``) is validated
against the notebook's ``parameters`` cell before any kernel starts.  Each notebook is
executed by papermill into a private staging folder; only when it succeeds are its
executed copy (``book/executed/<id>.ipynb``) and figures (``book/figures/<id>.*``) moved
into place, so a failing notebook leaves no half-written figure.  The error names the
notebook, the cell and the cause.

Every notebook checks the claims its figure illustrates (:mod:`ntpcore.pipeline.claims`).  The
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
(:mod:`ntpcore.pipeline.cluster`): each notebook is executed by papermill on a worker, and
its files come back to be published here as above.  The workers need this commit's checkout
and the computation cache on a file system they share with this machine (``NTP_CACHE_DIR``,
an absolute path; checked before any figure starts).

A run that reproduces registry figures (no ``--set``) and is not interrupted leaves a run
record, ``<figure folder>/runs/<start>-<pid>-<profile>.json``: its elapsed wall time, jobs,
figures and their wall times, the order, whether the computation cache was cold and whether its
per-key lock was on (``NTP_CACHE_LOCK``), commit and machine, and the dask scheduler with its
workers and threads (``null`` for a run on this machine; on a cluster ``jobs`` is the
threads).  The *Performance* page reads the paper profile's elapsed time from these records
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
import re
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nbformat
import yaml
from tqdm.auto import tqdm

from ntpcore.core.io import write_text_atomic
from ntpcore.errors import ParameterError
from ntpcore.pipeline import bookrefs, cache, paths
from ntpcore.pipeline import claims as claims_mod
from ntpcore.pipeline.provenance import git_state
from ntpcore.pipeline.registry import (
    FigureEntry,
    RegistryError,
    load_registry,
    parse_parameters,
    validate_overrides,
)

#: Environment given to every kernel for reproducible numerics.
#: ``NTP_PROGRESS=0``: no progress bar inside a kernel (:mod:`ntpcore.core.progress`).
KERNEL_ENV = {
    "PYTHONHASHSEED": "0",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NTP_PROGRESS": "0",
}
#: Arguments of every kernel: its own log (a warning about TCP transport at each start, and
#: a KeyboardInterrupt logged while a kernel is being shut down) stays out of the runner's
#: output; a kernel that dies is reported by the runner, with the notebook and cell.
KERNEL_ARGS = ["--IPKernelApp.log_level=CRITICAL"]
#: Per-cell time limit (seconds) by profile: a quick-profile cell never legitimately takes
#: minutes, so a hung kernel fails the run instead of stalling CI; paper-profile cells
#: may train for an hour on a CPU and have no limit.
CELL_TIMEOUT = {"quick": 600.0, "paper": None}
#: Display tags copied onto papermill's injected-parameters cell (papermill#731).
INJECTED_TAGS = ("hide-input",)
FAILED_DIR = paths.ROOT / "_build" / "failed"
#: Staging folders are ``_build/<prefix><fig_id>-*``; the prefix carries the runner's pid so
#: an interrupted run removes exactly its own.
STAGING_PREFIX = f"ntp-{os.getpid()}-"


@dataclass(frozen=True)
class Job:
    entry: FigureEntry
    profile: str
    parameters: dict[str, Any]
    adhoc: dict[str, Any] = field(default_factory=dict)
    cell_timeout: float | None = None


#: Every figure must record at least one claim evaluated in the profile it ran in.
REQUIRE_CLAIMS = True


@dataclass(frozen=True)
class Outcome:
    fig_id: str
    ok: bool
    wall_time_s: float
    message: str = ""
    claims: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()  # warnings the kernel printed (echoed on the terminal)

    def claims_summary(self) -> str:
        if not self.claims:
            return "no claims"
        n = claims_mod.tally(list(self.claims))
        text = f"{n['claims']} claims: {n['pass']} hold"
        if n["fail"]:
            text += f", {n['fail']} do not"
        if n["not-evaluated"]:
            text += f", {n['not-evaluated']} not evaluated"
        if n["sanity"]:
            text += f"; {n['sanity']} sanity check(s)"
        return text


def list_text(registry: dict) -> str:
    """The registry as ``--list`` prints it: id, the paper's label, notebook, in aligned
    columns; a figure beyond the paper (label "-" or "—") reads "— (beyond the paper)" or keeps
    what the registry adds in brackets."""

    def label(text: str) -> str:
        text = text.strip()
        if text in ("", "-", "—"):
            return "— (beyond the paper)"
        return "—" + text[1:] if text.startswith("-") else text

    rows = [(fig_id, label(e.paper_label), str(e.notebook)) for fig_id, e in registry.items()]
    w_id = max(len(r[0]) for r in rows)
    w_label = max(len(r[1]) for r in rows)
    head = ("figure", "paper label", "notebook")
    lines = [f"{head[0]:{w_id}s}  {head[1]:{w_label}s}  {head[2]}"]
    lines += [f"{i:{w_id}s}  {lab:{w_label}s}  {nb}" for i, lab, nb in rows]
    return "\n".join(lines)


def parse_set(items: list[str]) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` strings; values are read as YAML (numbers, bools, lists)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ParameterError(f"--set expects KEY=VALUE, got {item!r}")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key.isidentifier():
            raise ParameterError(f"--set: {key!r} is not a valid parameter name")
        value = yaml.safe_load(raw) if raw.strip() else ""
        if isinstance(value, str):  # YAML reads 1e-3, nan and inf as strings
            word = value.strip().lower().lstrip("+")
            if word in ("nan", "inf", "-inf", "infinity", "-infinity"):
                value = float(word)
            else:
                try:
                    value = float(value) if any(c in value for c in ".eE") else int(value)
                except ValueError:
                    pass
        if key in out:
            raise ParameterError(f"--set {key} is given twice")
        out[key] = value
    return out


#: A run longer than this (estimated from the registry's ``resources``) needs --force.
MAX_MINUTES = 24 * 60


def machine_memory_gb() -> float:
    """Physical memory of this machine in GB (10^9 bytes)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9


def _driver(entry: FigureEntry, params: dict[str, Any], key: str) -> str:
    """The parameter an estimate grows with most: halving it lowers ``key`` the most."""
    expr = entry.resources.get(key, "")
    base = entry.estimate(params)[key]
    best, name = 0.0, None
    for p, v in params.items():
        numeric = isinstance(v, int | float) and not isinstance(v, bool)
        if not numeric or not re.search(rf"\b{p}\b", expr):
            continue
        drop = base - entry.estimate({**params, p: v / 2})[key]
        if drop > best:
            best, name = drop, p
    return f"; it grows with {name} (= {params[name]:g} here)" if name else ""


def check_resources(entry: FigureEntry, params: dict[str, Any], force: bool) -> dict[str, float]:
    """Estimate memory and time from the parameters; refuse what this machine cannot do,
    naming the parameter the estimate grows with most."""
    est = entry.estimate(params)
    if force:
        return est
    mem, have = est.get("memory_gb"), machine_memory_gb()
    if mem is not None and mem > 0.8 * have:
        raise ParameterError(
            f"{entry.fig_id}: these parameters need about {mem:.3g} GB of memory and this "
            f"machine has {have:.3g} GB{_driver(entry, params, 'memory_gb')}; lower it, or "
            "pass --force to try anyway"
        )
    minutes = est.get("minutes")
    if minutes is not None and minutes > MAX_MINUTES:
        raise ParameterError(
            f"{entry.fig_id}: these parameters need about {minutes / 60:.3g} hours"
            f"{_driver(entry, params, 'minutes')}; lower it, or pass --force to run anyway"
        )
    return est


def plan(
    ids: list[str] | None,
    profile: str,
    adhoc: dict[str, Any],
    registry: dict[str, FigureEntry],
    force: bool = False,
) -> list[Job]:
    """Build and validate all jobs; raises before anything runs."""
    if profile not in ("paper", "quick"):
        raise ParameterError(f"--profile must be 'paper' or 'quick', got {profile!r}")
    reserved = sorted({"fig_id", "profile"} & set(adhoc))
    if reserved:
        raise ParameterError(
            f"--set {reserved[0]}=... is not allowed: the runner sets fig_id from --only and "
            f"profile from --profile"
        )
    selected = list(dict.fromkeys(ids)) if ids else list(registry)
    unknown = [i for i in selected if i not in registry]
    if unknown:
        raise ParameterError(f"unknown figure id(s) {unknown}; see --list")
    jobs = []
    for fig_id in selected:
        entry = registry[fig_id]
        if not entry.notebook_path.exists():
            raise RegistryError(f"{fig_id}: notebook {entry.notebook} does not exist")
        specs = parse_parameters(entry.notebook_path)
        for required in ("fig_id", "profile"):
            if required not in specs:
                raise RegistryError(f"{entry.notebook}: parameters cell must declare {required!r}")
        # file paths come back absolute: a registry path from the repository root, a --set
        # path from the directory the command runs in (the kernel runs in notebooks/)
        registry_params = validate_overrides(
            specs, entry.params, "registry params", fig_id, paths.ROOT
        )
        if profile == "quick":
            registry_params |= validate_overrides(
                specs, entry.quick, "registry quick", fig_id, paths.ROOT
            )
        given = validate_overrides(specs, adhoc, "--set", fig_id)
        params = {**registry_params, **given, "fig_id": fig_id, "profile": profile}
        check_resources(entry, {k: s.default for k, s in specs.items()} | params, force)
        jobs.append(Job(entry, profile, params, given, CELL_TIMEOUT[profile]))
    return jobs


#: Job orders of ``--order``: ``reuse`` (default, see :func:`order_jobs`), ``registry``.
ORDERS = ("reuse", "registry")


def order_jobs(jobs: list[Job], how: str = "reuse") -> list[Job]:
    """The order in which ``jobs`` start.

    ``reuse``: first the figures whose cached results another selected figure reuses (they
    compute them), then the figures that reuse nothing, then the figures that reuse a
    selected figure's results; the given order is kept within each group.  Results never
    depend on the order (every computation is keyed by its parameters in the cache); only
    the wall time of a parallel run does.  ``registry``: the given order.
    """
    if how not in ORDERS:
        raise ParameterError(f"--order must be one of {list(ORDERS)}, got {how!r}")
    if how == "registry":
        return list(jobs)
    selected = {job.entry.fig_id for job in jobs}
    reused = {other for job in jobs for other in job.entry.reuses}

    def group(job: Job) -> int:
        if job.entry.fig_id in reused:
            return 0
        return 2 if selected & set(job.entry.reuses) else 1

    return sorted(jobs, key=group)


def _parameter_error(exc: BaseException) -> str | None:
    """The message of a :class:`~ntpcore.errors.ParameterError` a notebook raised: a
    parameter that only the notebook can check (e.g. a corpus too small for the requested
    sizes), or ``None`` for any other failure."""
    import papermill.exceptions as pmx

    if isinstance(exc, pmx.PapermillExecutionError) and exc.ename == ParameterError.__name__:
        return str(exc.evalue)
    return None


def _describe_failure(exc: BaseException, nb_name: str, fig_id: str = "") -> str:
    """What went wrong, for the terminal: a parameter the notebook refused is one line (its
    message, which says what the parameters may be); any other failure names the notebook,
    the cell and the exception."""
    import papermill.exceptions as pmx

    refused = _parameter_error(exc)
    if refused is not None:
        return f"{fig_id or nb_name}: {refused}"
    if isinstance(exc, pmx.PapermillExecutionError):
        first = (exc.source or "").strip().splitlines()
        return (
            f"{nb_name}: cell {exc.cell_index} of the executed copy (0-based, counting "
            f"papermill's injected cell; execution count {exc.exec_count}) raised "
            f"{exc.ename}: {exc.evalue}\n    first line of the cell: {first[0] if first else ''}"
        )
    return f"{nb_name}: {type(exc).__name__}: {exc}"


#: What jupyter_client raises when a kernel process ends before it answers its first request
#: (seen on a loaded machine, when kernels of several processes start at once): no cell ran,
#: so the start is tried again.
KERNEL_START_FAILURES = ("Kernel died before replying to kernel_info", "Kernel didn't respond")
KERNEL_START_TRIES = 3


def _execute(execute, fig_id: str, *args, **kwargs) -> None:
    """``execute(*args, **kwargs)`` (papermill), tried again when the kernel fails to start."""
    for attempt in range(1, KERNEL_START_TRIES + 1):
        try:
            execute(*args, **kwargs)
            return
        except RuntimeError as exc:
            if attempt == KERNEL_START_TRIES or not any(
                s in str(exc) for s in KERNEL_START_FAILURES
            ):
                raise
            print(
                f"note: the kernel of {fig_id} did not start ({exc}); starting it again",
                file=sys.stderr,
                flush=True,
            )


#: What happens to a staged run's files: published, kept under the failed folder with the
#: failed claims named (``claims``), kept with the traceback's location named (``error``),
#: kept silently (``refused``: a parameter the notebook refused stays one line), or dropped.
AFTER = ("publish", "claims", "error", "refused", "drop")


@dataclass(frozen=True)
class Staged:
    """A notebook run in a staging folder, not yet published: its outcome (the message
    without where its files were kept) and what :func:`settle` does with its files."""

    outcome: Outcome
    after: str


def new_staging(fig_id: str) -> Path:
    """A private staging folder ``_build/<STAGING_PREFIX><fig_id>-*`` with ``figures/``."""
    (paths.ROOT / "_build").mkdir(exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{fig_id}-", dir=paths.ROOT / "_build"))
    (staging / "figures").mkdir()
    return staging


def run_job(job: Job, progress: bool = True) -> Outcome:
    """Execute one notebook in a staging folder and publish its outputs on success."""
    # Resolved before NTP_FIGURE_DIR points at the staging folder.  A run with --set is an
    # exploration: it never replaces the book's figure.
    fig_dir, executed_dir = destinations(job)
    staging = new_staging(job.entry.fig_id)
    try:
        return settle(job, stage_job(job, staging, progress), staging, fig_dir, executed_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def destinations(job: Job) -> tuple[Path, Path]:
    """Where ``job``'s figures and executed notebook are published."""
    fig_id = job.entry.fig_id
    if job.adhoc:
        return paths.explore_dir(fig_id), paths.explore_dir(fig_id)
    return paths.figure_dir(), paths.executed_dir()


def stage_job(job: Job, staging: Path, progress: bool = True) -> Staged:
    """Execute ``job``'s notebook into ``staging`` (``<fig_id>.ipynb`` and ``figures/``),
    complete its sidecar and executed copy, and judge its claims; publish nothing.  This is
    the part of a figure that runs on a dask worker under ``--scheduler``."""
    import papermill

    fig_id = job.entry.fig_id
    fig_stage = staging / "figures"
    executed = staging / f"{fig_id}.ipynb"
    saved_env = {k: os.environ.get(k) for k in (*KERNEL_ENV, "NTP_FIGURE_DIR")}
    os.environ.update(KERNEL_ENV)
    os.environ["NTP_FIGURE_DIR"] = str(fig_stage)
    t0 = time.perf_counter()
    try:
        _execute(
            papermill.execute_notebook,
            fig_id,
            str(job.entry.notebook_path),
            str(executed),
            parameters=job.parameters,
            cwd=str(paths.NOTEBOOK_DIR),
            kernel_name="python3",
            execution_timeout=job.cell_timeout,
            progress_bar=progress,
            log_output=False,
            extra_arguments=KERNEL_ARGS,
        )
        wall = time.perf_counter() - t0
        sidecar_path = fig_stage / f"{fig_id}.json"
        if not sidecar_path.exists():
            raise RuntimeError(
                f"the notebook ran but saved no figure {fig_id!r}: it must call "
                f"provenance.savefig(fig, fig_id, ...) with the fig_id parameter"
            )
        claims = _read_claims(fig_stage, fig_id)
        _finish_sidecar(sidecar_path, job, wall, claims)
        kernel_warnings = _finish_notebook(executed)
        problem = _claims_problem(fig_id, job.profile, claims)
        if problem:
            return Staged(Outcome(fig_id, False, wall, problem, claims, kernel_warnings), "claims")
        return Staged(Outcome(fig_id, True, wall, "", claims, kernel_warnings), "publish")
    except Exception as exc:  # noqa: BLE001 - reported, with the cause, to the user
        wall = time.perf_counter() - t0
        message = _describe_failure(exc, job.entry.notebook, fig_id)
        claims = _read_claims(fig_stage, fig_id) if fig_stage.exists() else ()
        if any(claims_mod.is_blocking(c) for c in claims):
            message += "\n" + _claims_problem(fig_id, job.profile, claims)
        if not executed.exists():
            after = "drop"
        else:
            after = "error" if _parameter_error(exc) is None else "refused"
        return Staged(Outcome(fig_id, False, wall, message, claims), after)
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def settle(job: Job, staged: Staged, staging: Path, fig_dir: Path, executed_dir: Path) -> Outcome:
    """Publish a staged run's files (atomically per file, the sidecar last) or keep them
    for reading under the failed folder; return the outcome with where they went."""
    fig_id = job.entry.fig_id
    fig_stage, executed = staging / "figures", staging / f"{fig_id}.ipynb"
    outcome = staged.outcome
    if staged.after == "publish":
        try:
            _publish(executed, fig_stage, fig_dir, executed_dir, fig_id)
        except Exception as exc:  # noqa: BLE001 - reported, with the cause, to the user
            message = _describe_failure(exc, job.entry.notebook, fig_id)
            if executed.exists():
                kept = _keep_failed(executed, fig_stage, fig_id, job.adhoc)
                message += f"\n    executed copy with the traceback: {kept}"
            return dataclasses.replace(outcome, ok=False, message=message)
        note = f"explored run: {_rel(fig_dir)}/" if job.adhoc else ""
        return dataclasses.replace(outcome, message=note)
    if staged.after == "drop":
        return outcome
    kept = _keep_failed(executed, fig_stage, fig_id, job.adhoc)
    if staged.after == "claims":
        return dataclasses.replace(
            outcome, message=f"{outcome.message}\n    kept for reading: {kept}"
        )
    if staged.after == "error":
        return dataclasses.replace(
            outcome, message=f"{outcome.message}\n    executed copy with the traceback: {kept}"
        )
    return outcome


def _read_claims(fig_stage: Path, fig_id: str) -> tuple[dict[str, Any], ...]:
    """The claims the notebook's ledger wrote (the ledger file is then dropped)."""
    path = fig_stage / f"{fig_id}.claims.json"
    if not path.exists():
        return ()
    claims = tuple(claims_mod.load_claims(path))
    path.unlink()
    return claims


def _claims_problem(fig_id: str, profile: str, claims: tuple[dict[str, Any], ...]) -> str:
    """Why the figure may not be published ("" when its claims allow it)."""
    failed = [c for c in claims if claims_mod.is_blocking(c)]
    if failed:
        lines = [f"{fig_id}: {len(failed)} claim(s) do not hold:"]
        for c in failed:
            lines.append(
                f"    {c['id']}: {c['statement']} {c['source']}: "
                f"expected {c['expect']}, measured {c['shown']}"
            )
        return "\n".join(lines)
    if REQUIRE_CLAIMS and not any(c["status"] != "not-evaluated" for c in claims):
        return (
            f"{fig_id}: the notebook evaluated no claim in the {profile} profile; every "
            f"figure checks what it illustrates (ntpcore.pipeline.claims.Ledger)"
        )
    return ""


def _keep_failed(executed: Path, fig_stage: Path, fig_id: str, adhoc: bool = False) -> str:
    """Move a failed run's executed copy and figure files under FAILED_DIR (or
    ``$NTP_FAILED_DIR``, set by the mutation runs); a failed exploration (``--set``) under
    ``results/explore/<id>/failed/``, never beside the registry's failed runs.  Return where."""
    failed = paths.explore_dir(fig_id) / "failed" if adhoc else paths.failed_dir(FAILED_DIR)
    failed.mkdir(parents=True, exist_ok=True)
    if executed.exists():
        shutil.move(executed, failed / executed.name)
    if fig_stage.exists() and any(fig_stage.iterdir()):
        target = failed / fig_id
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(fig_stage, target)
        return f"{_rel(failed / executed.name)} and {_rel(target)}/"
    return _rel(failed / executed.name)


def _finish_sidecar(
    path: Path, job: Job, wall: float, claims: tuple[dict[str, Any], ...] = ()
) -> None:
    sidecar = json.loads(path.read_text())
    entry = job.entry
    if claims:
        sidecar["claims"] = list(claims)
    sidecar.update(
        paper=entry.paper,
        paper_label=entry.paper_label,
        title=entry.title,
        claim=entry.claim_text,
        statements=[{"says": st.says, "checked_by": list(st.checked_by)} for st in entry.claims],
        shown=entry.shown,
        notebook=entry.notebook,
        executed=f"book/executed/{entry.fig_id}.ipynb",
        overrides={"registry": entry.overrides(job.profile), "adhoc": job.adhoc},
        parameters={
            **{k: spec.default for k, spec in parse_parameters(entry.notebook_path).items()},
            **job.parameters,
        },
        notebook_wall_time_s=round(wall, 2),
        explored=bool(job.adhoc),
    )
    path.write_text(json.dumps(sidecar, indent=2, sort_keys=True))


WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


_WARNING = re.compile(r"^(?:.*?:\d+: )?(\w*Warning): (.+)$")


def _finish_notebook(nb_path: Path) -> tuple[str, ...]:
    """Prepare an executed notebook for the static book; return the warnings it printed.

    Copies the display tags onto papermill's injected cell, writes the Markdown's references
    to the book's statements as links (:mod:`ntpcore.pipeline.bookrefs`; an unknown one is a
    :class:`~ntpcore.pipeline.bookrefs.BookRefError` that fails the figure), and drops
    live-widget outputs (tqdm progress bars, ipywidgets): without a kernel they cannot
    render, and the book would try to fetch the widget manager from a CDN.  Notebooks show
    a static figure of anything a widget displays.  Paths under the repository in the
    kernel's stderr (e.g. a corrupt cache entry's warning) are written relative to it, on
    the page and in the warnings returned, which the runner echoes on the terminal.
    """
    nb = nbformat.read(nb_path, as_version=4)
    root = f"{paths.ROOT}{os.sep}"
    found: list[str] = []
    index, part_keys = bookrefs.statements(), bookrefs.parts()
    for k, cell in enumerate(nb.cells):
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags:
            cell.metadata["tags"] = list(dict.fromkeys([*tags, *INJECTED_TAGS]))
        if cell.cell_type == "markdown":
            cell.source = bookrefs.link(cell.source, index, part_keys, f"{nb_path.stem}, cell {k}")
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if WIDGET_MIME not in o.get("data", {})]
            for out in cell.outputs:
                if out.get("output_type") == "stream" and out.get("name") == "stderr":
                    out.text = out.text.replace(root, "")
                    for line in out.text.splitlines():
                        m = _WARNING.match(line.strip())
                        if m:
                            found.append(f"{m.group(1)}: {m.group(2)}")
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, nb_path)
    return tuple(dict.fromkeys(found))


def _publish(
    executed: Path, fig_stage: Path, fig_dir: Path, executed_dir: Path, fig_id: str
) -> None:
    fig_dir.mkdir(parents=True, exist_ok=True)
    executed_dir.mkdir(parents=True, exist_ok=True)
    # On one file system shutil.move is a rename, atomic per file.  The sidecar goes last, so a
    # sidecar always describes the figure files beside it.
    for f in sorted(
        fig_stage.iterdir(), key=lambda p: (p.suffix == ".json", p.name == f"{fig_id}.json")
    ):
        shutil.move(f, fig_dir / f.name)
    shutil.move(executed, executed_dir / f"{fig_id}.ipynb")


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(paths.ROOT))
    except ValueError:
        return str(path)


def _run_in_worker(job: Job) -> Outcome:
    return run_job(job, progress=False)


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
                outcomes.append(run_job(job))
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
        _remove_staging()
    return outcomes


def execute_on_cluster(jobs: list[Job], client: Any, env: dict[str, str]) -> list[Outcome]:
    """Run jobs on a dask cluster (``--scheduler``, :mod:`ntpcore.pipeline.cluster`): each
    is staged on a worker (:func:`stage_job`), and its files come back to be published here
    as in a local run (:func:`settle`).  A worker that dies is a failed figure.  Interrupted
    as :func:`execute` is."""
    from ntpcore.pipeline import cluster

    outcomes: list[Outcome] = []
    bar = tqdm(total=len(jobs), desc="figures", unit="fig", position=0)

    def collect(job: Job, result: Any) -> None:
        fig_id = job.entry.fig_id
        if isinstance(result, BaseException):
            outcomes.append(Outcome(fig_id, False, 0.0, cluster.lost(fig_id, result)))
        else:
            outcomes.append(_settle_files(job, *result))
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
        _remove_staging()
    return outcomes


def stage_on_worker(job: Job, staging: Path) -> Staged:
    """:func:`stage_job` in a folder of a dask worker, without a progress bar."""
    (staging / "figures").mkdir(exist_ok=True)
    return stage_job(job, staging, progress=False)


def _settle_files(job: Job, staged: Staged, files: dict[str, bytes]) -> Outcome:
    """Write the files a worker staged into a staging folder here, then :func:`settle`."""
    staging = new_staging(job.entry.fig_id)
    try:
        root = staging.resolve()
        for name, data in files.items():
            path = (staging / name).resolve()
            if root not in path.parents:
                raise ValueError(f"a worker returned a file outside its staging folder: {name}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return settle(job, staged, staging, *destinations(job))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class Interrupted(Exception):
    """The run was interrupted; ``outcomes`` holds the figures finished before."""

    def __init__(self, outcomes: list[Outcome]) -> None:
        super().__init__("interrupted")
        self.outcomes = outcomes


def _remove_staging() -> None:
    for folder in (paths.ROOT / "_build").glob(f"{STAGING_PREFIX}*"):
        shutil.rmtree(folder, ignore_errors=True)


def cache_entries() -> int:
    """Number of stored entries in the computation cache (0: a cold cache)."""
    return sum(1 for _ in paths.cache_dir().glob("*/*.json"))


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
        "cache": {
            "dir": _rel(paths.cache_dir()),
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
        help="notebooks run in parallel on this machine (default 1; not with --scheduler)",
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
            from ntpcore.pipeline import cluster

            cluster.check_address(args.scheduler)
            if args.jobs is not None:
                raise ParameterError(
                    "--jobs does not apply with --scheduler: the cluster's workers run the "
                    "figures, as many at once as they have threads"
                )
        n_jobs = 1 if args.jobs is None else args.jobs
        if n_jobs < 1:
            raise ParameterError(f"--jobs must be >= 1, got {args.jobs}")
        jobs = order_jobs(
            plan(args.only, args.profile, parse_set(args.sets), registry, args.force), args.order
        )
        lock = cache.lock_enabled()
    except (ParameterError, RegistryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
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
            record_error = (
                f"{exc.strerror or exc} ({_rel(Path(exc.filename)) if exc.filename else ''})"
            )
    failed = [o for o in outcomes if not o.ok]
    for o in sorted(outcomes, key=lambda o: -o.wall_time_s):
        print(
            f"  {'ok  ' if o.ok else 'FAIL'} {o.fig_id:32s} {o.wall_time_s:7.1f} s   "
            f"{o.claims_summary()}"
        )
    where = (
        "explored runs in " + ", ".join(f"{_rel(paths.explore_dir(j.entry.fig_id))}/" for j in jobs)
        if args.sets
        else f"figures in {_rel(paths.figure_dir())}/, notebooks in {_rel(paths.executed_dir())}/"
    )
    print(
        f"{len(outcomes) - len(failed)} ok, {len(failed)} failed in {wall:.1f} s; {where}"
        f"{f'; run record {_rel(saved)}' if saved else ''}"
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


if __name__ == "__main__":
    sys.exit(main())
