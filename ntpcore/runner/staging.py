r"""One figure's notebook run by papermill in a private staging folder, then settled: published
(``book/executed/<id>.ipynb``, ``book/figures/<id>.*``) when it ran and its claims hold, all
files or none (a folder that cannot be written leaves the previous files as they were), kept
for reading under ``_build/failed/`` when they do not, with the error naming the notebook, the
cell and the cause.  The kernels get :data:`KERNEL_ENV` (one thread, a fixed
hash seed, no progress bars).  The same steps serve a local run and a dask worker
(:func:`stage_on_worker`, :mod:`ntpcore.runner.cluster`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from ntpcore.core import paths
from ntpcore.core.io import replace_together
from ntpcore.errors import ParameterError
from ntpcore.figure import claims as claims_mod
from ntpcore.runner import bookrefs, kernels
from ntpcore.runner.planning import Job
from ntpcore.runner.registry import (
    parse_parameters,
)

__all__ = [
    "AFTER",
    "FAILED_DIR",
    "INJECTED_TAGS",
    "KERNEL_ARGS",
    "KERNEL_ENV",
    "KERNEL_START_FAILURES",
    "KERNEL_START_TRIES",
    "Outcome",
    "REQUIRE_CLAIMS",
    "SOLUTION_TAG",
    "STAGING_PREFIX",
    "Staged",
    "VIEW_TAG_PREFIX",
    "WIDGET_MIME",
    "cell_views",
    "destinations",
    "keep_view",
    "new_staging",
    "relative_to_root",
    "remove_staging",
    "run_job",
    "settle",
    "settle_files",
    "stage_job",
    "stage_on_worker",
]


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
#: output; a kernel that dies is reported by the runner, with the notebook and cell.  No
#: input history (a program's kernel has no one to recall it, and a warm kernel, whose
#: counter starts again at each notebook, would find its line numbers taken).
KERNEL_ARGS = ["--IPKernelApp.log_level=CRITICAL", "--HistoryManager.enabled=False"]
#: Display tags copied onto papermill's injected-parameters cell (papermill#731).
INJECTED_TAGS = ("hide-input",)
#: The tag of an exercise's solution cells.  In the book's copy a Markdown solution becomes
#: a drop-down (closed until the reader opens it) and a code solution -- the check of the
#: answer, which runs with the figure -- is hidden behind a button, output included
#: (myst-nb's ``hide-cell``); the template stays a plain notebook for JupyterLab.
SOLUTION_TAG = "solution"
SOLUTION_PROMPTS = {
    "code_prompt_show": "Show the check of this solution",
    "code_prompt_hide": "Hide the check",
}
#: The tags of a cell that belongs to some *views* of a template only (``view-<name>``): a
#: template that draws several figures of one experiment (one parameters cell, the
#: registry's overrides choosing ``view``) marks each view's own cells, which also test
#: ``view`` in their code, so that the template runs as it is in JupyterLab.  A figure's
#: page keeps the cells without such a tag and those of its view (:func:`keep_view`).
VIEW_TAG_PREFIX = "view-"
_SOLUTION_TITLE = re.compile(r"^\*\*(?P<title>Solution[^*\n]*?)\.?\*\*[ \t]*\n?")
FAILED_DIR = paths.ROOT / "_build" / "failed"
#: Staging folders are ``_build/<prefix><fig_id>-*``; the prefix carries the runner's pid so
#: an interrupted run removes exactly its own.
STAGING_PREFIX = f"ntp-{os.getpid()}-"
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
    #: When the notebook started (seconds since the epoch) and which process ran it
    #: (``host:pid``): the run record's timeline of the workers.
    started: float = 0.0
    worker: str = ""

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


def run_job(job: Job, progress: bool = True, warm: bool = False) -> Outcome:
    """Execute one notebook in a staging folder and publish its outputs on success (in this
    process's warm kernel with ``warm``, :mod:`ntpcore.runner.kernels`)."""
    # Resolved before NTP_FIGURE_DIR points at the staging folder.  A run with --set is an
    # exploration: it never replaces the book's figure.
    fig_dir, executed_dir = destinations(job)
    staging = new_staging(job.entry.fig_id)
    try:
        staged = stage_job(job, staging, progress, warm=warm)
        return settle(job, staged, staging, fig_dir, executed_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def destinations(job: Job) -> tuple[Path, Path]:
    """Where ``job``'s figures and executed notebook are published."""
    fig_id = job.entry.fig_id
    if job.adhoc:
        return paths.explore_dir(fig_id), paths.explore_dir(fig_id)
    return paths.figure_dir(), paths.executed_dir()


def stage_job(job: Job, staging: Path, progress: bool = True, warm: bool = False) -> Staged:
    """Execute ``job``'s notebook into ``staging`` (``<fig_id>.ipynb`` and ``figures/``),
    complete its sidecar and executed copy, and judge its claims; publish nothing.  This is
    the part of a figure that runs on a dask worker under ``--scheduler``.  With ``warm``
    the notebook runs in this process's warm kernel (:mod:`ntpcore.runner.kernels`), which
    is shut down when the notebook fails."""
    import papermill

    fig_id = job.entry.fig_id
    fig_stage = staging / "figures"
    executed = staging / f"{fig_id}.ipynb"
    saved_env = {k: os.environ.get(k) for k in (*KERNEL_ENV, "NTP_FIGURE_DIR")}
    os.environ.update(KERNEL_ENV)
    os.environ["NTP_FIGURE_DIR"] = str(fig_stage)
    t0 = time.perf_counter()
    when = {"started": time.time(), "worker": f"{platform.node()}:{os.getpid()}"}
    km = None
    if warm:
        try:
            km = kernels.kernel_for(
                {**KERNEL_ENV, "NTP_FIGURE_DIR": str(fig_stage)},
                str(paths.NOTEBOOK_DIR),
                KERNEL_ARGS,
                per_figure=("NTP_FIGURE_DIR",),
            )
        except Exception:  # noqa: BLE001 - a kernel of its own, started by papermill
            km = None
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
            **({"km": km} if km is not None else {}),
        )
        wall = time.perf_counter() - t0
        sidecar_path = fig_stage / f"{fig_id}.json"
        if not sidecar_path.exists():
            raise RuntimeError(
                f"the notebook ran but saved no figure {fig_id!r}: it must call "
                f"ledger.savefig(fig, cfg, ...) with the ledger of its fig_id parameter "
                f"(or provenance.savefig(fig, fig_id, ...))"
            )
        claims = _read_claims(fig_stage, fig_id)
        _finish_sidecar(sidecar_path, job, wall, claims)
        kernel_warnings = _finish_notebook(executed, job.entry.page_title, _view(job))
        problem = _claims_problem(fig_id, job.profile, claims)
        if problem:
            return Staged(
                Outcome(fig_id, False, wall, problem, claims, kernel_warnings, **when), "claims"
            )
        return Staged(Outcome(fig_id, True, wall, "", claims, kernel_warnings, **when), "publish")
    except BaseException as exc:
        if km is not None:  # its state after a failure is unknown: the next figure gets a new one
            kernels.discard()
        if not isinstance(exc, Exception):
            raise
        wall = time.perf_counter() - t0
        message = _describe_failure(exc, job.entry.notebook, fig_id)
        if isinstance(exc, OSError) and not exc.filename:  # e.g. a full disk
            message += f" (while writing the run's files under {relative_to_root(staging)}/)"
        claims = _read_claims(fig_stage, fig_id) if fig_stage.exists() else ()
        if any(claims_mod.is_blocking(c) for c in claims):
            message += "\n" + _claims_problem(fig_id, job.profile, claims)
        if not executed.exists():
            after = "drop"
        else:
            after = "error" if _parameter_error(exc) is None else "refused"
        return Staged(Outcome(fig_id, False, wall, message, claims, **when), after)
    finally:
        if km is not None:
            kernels.release_clients()  # papermill's client of the warm kernel
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def settle(job: Job, staged: Staged, staging: Path, fig_dir: Path, executed_dir: Path) -> Outcome:
    """Publish a staged run's files (all or none, the sidecar last) or keep them for reading
    under the failed folder; return the outcome with where they went."""
    fig_id = job.entry.fig_id
    fig_stage, executed = staging / "figures", staging / f"{fig_id}.ipynb"
    outcome = staged.outcome
    if staged.after == "publish":
        kept_previous = None
        try:
            if job.adhoc and not job.replace:
                kept_previous = _keep_previous(fig_dir, fig_id)
            _publish(executed, fig_stage, fig_dir, executed_dir, fig_id)
        except OSError as exc:
            if kept_previous is not None:  # links to the files still in place: not needed
                shutil.rmtree(kept_previous, ignore_errors=True)
            failed = relative_to_root(Path(exc.filename)) if exc.filename else "?"
            message = (
                f"{fig_id}: ran and its claims hold, but it could not be published: "
                f"{failed}: {exc.strerror or exc}. Nothing of it was published: "
                f"{relative_to_root(fig_dir)}/ and {relative_to_root(executed_dir)}/ are as "
                f"they were."
            )
            try:
                kept = _keep_failed(executed, fig_stage, fig_id, job.adhoc)
                message += f"\n    its files are kept for reading: {kept}"
            except OSError as keep:
                message += f"\n    its files could not be kept either ({keep})"
            return dataclasses.replace(outcome, ok=False, message=message)
        note = f"explored run: {relative_to_root(fig_dir)}/" if job.adhoc else ""
        if kept_previous is not None:
            note += f" (the previous exploration kept in {relative_to_root(kept_previous)}/)"
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


def _keep_previous(explore: Path, fig_id: str) -> Path | None:
    """Keep the previous exploration of ``fig_id`` (its sidecar, figure files and executed
    copy in ``explore``) in a new ``explore/previous-<n>/``, numbered on from the last one,
    as hard links (copies where links are not supported): the files themselves stay in
    place until the new exploration replaces them.  ``None`` when there is none."""
    if not (explore / f"{fig_id}.json").is_file():
        return None
    files = [p for p in explore.iterdir() if p.is_file() and p.name.startswith(f"{fig_id}.")]
    taken = [
        int(p.name.split("-", 1)[1])
        for p in explore.glob("previous-*")
        if p.name.split("-", 1)[1].isdigit()
    ]
    target = explore / f"previous-{max(taken, default=0) + 1}"
    target.mkdir()
    for f in files:
        try:
            os.link(f, target / f.name)
        except OSError:
            shutil.copy2(f, target / f.name)
    return target


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
            f"figure checks what it illustrates (ntpcore.figure.claims.Ledger)"
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
        return f"{relative_to_root(failed / executed.name)} and {relative_to_root(target)}/"
    return relative_to_root(failed / executed.name)


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


def cell_views(cell) -> frozenset[str]:
    """The views a cell belongs to (its ``view-<name>`` tags; empty: every view)."""
    tags = cell.get("metadata", {}).get("tags", [])
    return frozenset(t[len(VIEW_TAG_PREFIX) :] for t in tags if t.startswith(VIEW_TAG_PREFIX))


def keep_view(nb: nbformat.NotebookNode, view: str | None) -> nbformat.NotebookNode:
    """``nb`` without the cells of other views than ``view`` (``None``: every cell kept)."""
    if view is not None:
        nb.cells = [c for c in nb.cells if not cell_views(c) or view in cell_views(c)]
    return nb


def _view(job: Job) -> str | None:
    """The view a job draws: its ``view`` parameter, or the template's default (``None``
    for a template without one)."""
    if "view" in job.parameters:
        return str(job.parameters["view"])
    spec = parse_parameters(job.entry.notebook_path).get("view")
    return None if spec is None else str(spec.default)


def _finish_notebook(
    nb_path: Path, page_title: str = "", view: str | None = None
) -> tuple[str, ...]:
    """Prepare an executed notebook for the static book; return the warnings it printed.

    Keeps the cells of ``view`` only (:func:`keep_view`), copies the display tags onto
    papermill's injected cell, writes the registry's ``page_title`` (if any) over the notebook's
    title, writes the Markdown's references to the book's statements and pages as links
    (:mod:`ntpcore.runner.bookrefs`; an unknown one is a
    :class:`~ntpcore.runner.bookrefs.BookRefError` that fails the figure), and drops live-widget
    outputs (tqdm progress bars, ipywidgets): without a kernel they cannot render, and the book
    would try to fetch the widget manager from a CDN. Notebooks show a static figure of anything
    a widget displays. Paths under the repository in the kernel's stderr (e.g. a corrupt cache
    entry's warning) are written relative to it, on the page and in the warnings returned, which
    the runner echoes on the terminal.
    """
    nb = keep_view(nbformat.read(nb_path, as_version=4), view)
    root = f"{paths.ROOT}{os.sep}"
    found: list[str] = []
    index, part_keys, page_index = bookrefs.statements(), bookrefs.parts(), bookrefs.pages()
    titled = False
    for k, cell in enumerate(nb.cells):
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags:
            cell.metadata["tags"] = list(dict.fromkeys([*tags, *INJECTED_TAGS]))
        if SOLUTION_TAG in tags:
            _hide_solution(cell)
        if cell.cell_type == "markdown":
            if page_title and not titled and cell.source.startswith("# "):
                _, _, rest = cell.source.partition("\n")
                cell.source = f"# {page_title}" + (f"\n{rest}" if rest else "")
            titled = titled or cell.source.startswith("# ")
            cell.source = bookrefs.link(
                cell.source, index, part_keys, f"{nb_path.stem}, cell {k}", page_index
            )
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


def _hide_solution(cell) -> None:
    """An exercise's solution cell as the book shows it (see :data:`SOLUTION_TAG`)."""
    if cell.cell_type == "code":
        cell.metadata["tags"] = list(dict.fromkeys([*cell.metadata["tags"], "hide-cell"]))
        cell.metadata["mystnb"] = {**cell.metadata.get("mystnb", {}), **SOLUTION_PROMPTS}
        return
    m = _SOLUTION_TITLE.match(cell.source)
    title = m.group("title") if m else "Solution"
    body = cell.source[m.end() :] if m else cell.source
    cell.source = f"::::{{dropdown}} {title}\n{body.strip()}\n::::"


def _publish(
    executed: Path, fig_stage: Path, fig_dir: Path, executed_dir: Path, fig_id: str
) -> None:
    """Move the figure's files and executed copy into place, all or none
    (:func:`ntpcore.core.io.replace_together`): the sidecar goes last, so a sidecar always
    describes the figure files beside it, and a failure leaves the previous ones untouched."""
    files = sorted(
        fig_stage.iterdir(), key=lambda p: (p.suffix == ".json", p.name == f"{fig_id}.json")
    )
    replace_together(
        [(f, fig_dir / f.name) for f in files] + [(executed, executed_dir / f"{fig_id}.ipynb")]
    )


def relative_to_root(path: Path) -> str:
    try:
        return str(path.relative_to(paths.ROOT))
    except ValueError:
        return str(path)


def stage_on_worker(job: Job, staging: Path) -> Staged:
    """:func:`stage_job` in a folder of a dask worker, without a progress bar."""
    (staging / "figures").mkdir(exist_ok=True)
    return stage_job(job, staging, progress=False)


def settle_files(job: Job, staged: Staged, files: dict[str, bytes]) -> Outcome:
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


def remove_staging() -> None:
    for folder in (paths.ROOT / "_build").glob(f"{STAGING_PREFIX}*"):
        shutil.rmtree(folder, ignore_errors=True)
