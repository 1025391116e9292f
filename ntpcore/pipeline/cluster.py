"""The figure runner on a ``dask.distributed`` cluster: ``python -m ntpcore.reproduce
--scheduler tcp://HOST:PORT``.

Each figure is one dask task.  On a worker the task runs the notebook in a child Python
process (papermill, as the local runner does; a process of its own, because the runner sets
the kernel's environment in ``os.environ`` and a worker may run several tasks in threads;
a spare one, started while the previous figure ran, so that its imports cost no time),
in a staging folder ``_build/ntp-<worker pid>-<id>-*`` of the worker's checkout.  It
returns what :func:`ntpcore.pipeline.runner.stage_job` judged (the outcome, the claims) and
the staged files' bytes (figures, sidecar, source data, executed notebook), and removes its
staging folder.  The caller writes those files into its own staging folder and publishes
them exactly as a local run does (:func:`ntpcore.pipeline.runner.settle`: atomically per
file, the sidecar last; a failed figure is kept under ``_build/failed/``), so only the
caller writes ``book/figures``, ``book/executed`` and the run record.  The workers need not
share the caller's file system, except for the computation cache.

What the workers must have, checked before any figure starts (:func:`check_workers`):

* this repository at the same commit (``ntpcore`` importable, the notebooks beside it):
  a sidecar records the commit that computed it;
* the caller's computation cache, ``NTP_CACHE_DIR`` as an absolute path, on a file system
  they share: the caller writes a file there that every worker must see.  The tasks set
  ``NTP_CACHE_DIR`` (and ``NTP_CACHE_LOCK``) in the kernel's environment, whatever the
  workers were started with, so that one figure's training is read by the figures that
  reuse it.  The per-key lock of :mod:`ntpcore.pipeline.cache` is ``flock``: it holds
  between processes of one machine and, on Linux, between machines on NFS (the client maps
  it to NFS byte-range locks); some cluster file systems need it enabled (Lustre: mount
  with ``flock``).

Figures are submitted in the runner's order (:func:`ntpcore.pipeline.runner.order_jobs`),
each when a worker thread is free (:func:`execute`): a worker runs as many figures at once
as it has threads (start workers with ``--nthreads 1`` for one figure per worker; a kernel
computes on one thread).  A worker that dies takes its figure with it:
dask tries the figure on another worker (``distributed.scheduler.allowed-failures``), then
the figure is reported failed like any other.  On Ctrl-C or SIGTERM the caller sets a dask
``Event`` that every task polls: a task then stops its notebook (its kernel is shut down) and
removes its staging folder, and the caller waits for that before it exits.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Any

from tqdm.auto import tqdm

from ntpcore.errors import ParameterError
from ntpcore.pipeline import paths, runner
from ntpcore.pipeline.provenance import git_state

#: ``tcp://HOST:PORT`` or ``tls://HOST:PORT``: HOST a name, an IPv4 address or an IPv6
#: address in brackets.
ADDRESS = re.compile(
    r"^(?P<scheme>tcp|tls)://"
    r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
    r":(?P<port>[0-9]{1,5})$"
)
#: Seconds to wait for the scheduler to answer.
CONNECT_TIMEOUT = 10.0
#: Seconds between a task's looks at the stop event (how soon an interruption reaches it).
POLL_S = 1.0
#: Seconds between two counts of the cluster's threads (workers may join or leave).
REFRESH_S = 5.0
#: Seconds the caller waits, after an interruption, for the tasks to stop and clean up.
STOP_WAIT_S = 60.0
#: Seconds a stopped notebook gets to shut its kernel down before it is killed.
TERM_WAIT_S = 30.0
#: Seconds a worker's spare child process waits for a figure before it exits.
SPARE_IDLE_S = 600.0
#: Files of a task's staging folder that are not the figure's (the job, the verdict, the log).
CONTROL = ".task"


class ClusterError(Exception):
    """Why a run on the cluster cannot start (one line: the scheduler is not reachable, the
    workers run another commit, the cache is not shared)."""


def check_address(address: str) -> str:
    """``address`` if it is a scheduler address ``tcp://HOST:PORT`` (or ``tls://``), else a
    :class:`~ntpcore.errors.ParameterError` saying what is expected."""
    m = ADDRESS.match(address)
    if not m or not 0 < int(m["port"]) < 65536:
        raise ParameterError(
            f"--scheduler expects the address of a dask scheduler, tcp://HOST:PORT (e.g. "
            f"tcp://10.0.0.5:8786, as 'dask scheduler' prints it), got {address!r}"
        )
    return address


def connect(address: str) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address``; a scheduler that does not
    answer within :data:`CONNECT_TIMEOUT` is a :class:`ClusterError`."""
    from distributed import Client

    try:
        return Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        if "Timed out" in str(exc) or isinstance(exc, TimeoutError):
            raise ClusterError(
                f"no dask scheduler answered at {address} within {CONNECT_TIMEOUT:g} s (is "
                f"'dask scheduler' running there, and the port open to this machine?)"
            ) from exc
        raise ClusterError(f"cannot connect to the dask scheduler at {address}: {exc}") from exc


def _worker_state(marker: str) -> dict[str, Any]:
    """Run on each worker: its checkout, commit, and whether it sees ``marker``."""
    return {"root": str(paths.ROOT), "sees_cache": Path(marker).exists(), **git_state()}


def check_workers(client: Any, cache_dir: Path) -> dict[str, Any]:
    """Check that the workers run this commit and share ``cache_dir``; return the
    scheduler's address, the number of workers and their threads (for the run record).
    Workers that join later are not checked."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    marker = cache_dir / f".shared-{uuid.uuid4().hex}"
    marker.write_text("written by the figure runner to check that the workers share the cache\n")
    try:
        states = client.run(_worker_state, str(marker))
    except Exception as exc:  # noqa: BLE001 - e.g. ntpcore not importable on a worker
        raise ClusterError(
            f"the workers cannot run ntpcore ({type(exc).__name__}: {exc}); they need this "
            f"repository's checkout on their Python path"
        ) from exc
    finally:
        marker.unlink(missing_ok=True)
    mine = git_state()["commit"]
    for worker, state in sorted(states.items()):
        if mine and state["commit"] != mine:
            raise ClusterError(
                f"worker {worker} runs ntpcore at commit {str(state['commit'])[:10]} "
                f"({state['root']}) and this checkout is at {mine[:10]}: the workers must run "
                f"the same commit"
            )
        if not state["sees_cache"]:
            raise ClusterError(
                f"worker {worker} does not share the computation cache {cache_dir} (it cannot "
                f"see a file written there): set NTP_CACHE_DIR to a folder on a file system "
                f"the workers share"
            )
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return {
        "address": client.scheduler.address,
        "workers": len(workers),
        "threads": _threads(client),
    }


def execute(jobs: list[runner.Job], client: Any, env: dict[str, str]) -> list[runner.Outcome]:
    """Run ``jobs`` on the cluster in their order and publish each figure as it comes back;
    like :func:`ntpcore.pipeline.runner.execute`, an interruption raises
    :class:`~ntpcore.pipeline.runner.Interrupted` with the outcomes so far.

    The next figure is submitted when a worker thread is free (the cluster's threads are
    counted again every :data:`REFRESH_S` seconds, so workers that join are used): dask
    would otherwise place every task on a worker at once, by its estimate of their
    durations, which knows nothing of a notebook's, and a worker could sit idle while
    figures wait behind a long training on another.
    """
    from distributed import Event

    run = uuid.uuid4().hex[:12]
    stop = Event(f"ntp-stop-{run}", client=client)
    pending = list(jobs)
    running: dict[Any, runner.Job] = {}
    outcomes: list[runner.Outcome] = []
    bar = tqdm(total=len(jobs), desc="figures", unit="fig", position=0)
    try:
        threads, counted = 0, -REFRESH_S
        while pending or running:
            if time.monotonic() - counted >= REFRESH_S:
                threads, counted = _threads(client), time.monotonic()
            while pending and len(running) < max(threads, 1):
                job = pending.pop(0)
                key = f"ntp-figure-{job.entry.fig_id}-{run}"
                running[client.submit(_task, job, env, stop.name, key=key, pure=False)] = job
            done = [fut for fut in running if fut.done()]
            if not done:
                time.sleep(0.2)
            for fut in done:
                outcomes.append(_collect(fut, running.pop(fut)))
                bar.set_postfix_str(outcomes[-1].fig_id)
                bar.update()
    except BaseException as exc:
        _stop(client, stop, list(running))
        if isinstance(exc, KeyboardInterrupt):
            raise runner.Interrupted(outcomes) from exc
        raise
    finally:
        bar.close()
        runner._remove_staging()
    return outcomes


def _threads(client: Any) -> int:
    """The threads of the cluster's workers now."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return sum(w["nthreads"] for w in workers.values())


def _stop(client: Any, stop: Any, futures: list[Any]) -> None:
    """Tell every task to stop its notebook and wait until all have ended (a running task
    stops its notebook and removes its staging folder, a task not yet started returns at
    once); then cancel them.  A second Ctrl-C ends the wait."""
    try:
        stop.set()
        deadline = time.monotonic() + STOP_WAIT_S
        while not all(f.done() for f in futures) and time.monotonic() < deadline:
            time.sleep(0.2)
        ended = all(f.done() for f in futures)
    except (KeyboardInterrupt, Exception):  # noqa: BLE001 - stopping anyway
        ended = False
    try:
        client.cancel(futures)
        if ended:  # a task still running must still find the event set
            stop.clear()
    except Exception:  # noqa: BLE001, S110 - the scheduler may be gone
        pass


def _collect(fut: Any, job: runner.Job) -> runner.Outcome:
    """The outcome of one task: its files written into a staging folder of the caller and
    published (or kept as failed) there; a lost worker is a failed figure."""
    fig_id = job.entry.fig_id
    try:
        result = fut.result()
    except Exception as exc:  # noqa: BLE001 - reported as the figure's failure
        return runner.Outcome(fig_id, False, 0.0, _lost(fig_id, exc))
    if result is None:  # the task was stopped (an interruption): nothing to publish
        return runner.Outcome(fig_id, False, 0.0, f"{fig_id}: stopped on the worker")
    staged, files = result
    staging = runner.new_staging(fig_id)
    try:
        for name, data in files.items():
            path = (staging / name).resolve()
            if staging.resolve() not in path.parents:
                raise ValueError(f"a worker returned a file outside the staging folder: {name}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        fig_dir, executed_dir = runner.destinations(job)
        return runner.settle(job, staged, staging, fig_dir, executed_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _lost(fig_id: str, exc: BaseException) -> str:
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        last = getattr(exc.last_worker, "address", exc.last_worker)
        return (
            f"{fig_id}: the dask worker running it died (tried on {exc.allowed_failures + 1} "
            f"worker(s), the last {last}); nothing was published"
        )
    return f"{fig_id}: its task failed on the cluster: {type(exc).__name__}: {exc}"


def _task(job: runner.Job, env: dict[str, str], stop_name: str) -> Any:
    """Run on a worker: ``job``'s notebook in a child process, in a staging folder of the
    worker's checkout.  Returns ``(Staged, {relative path: bytes})``, or ``None`` when the
    stop event was set; the staging folder is removed in every case."""
    from distributed import Event

    fig_id = job.entry.fig_id
    stop = Event(stop_name)
    if stop.is_set():  # the run was interrupted before this figure started
        return None
    staging = runner.new_staging(fig_id)
    control = staging / CONTROL
    control.mkdir()
    proc = None
    try:
        (control / "job.pkl").write_bytes(pickle.dumps(job))
        (control / "env.json").write_text(json.dumps(env))
        proc, log = _take_child()
        with log:
            try:
                assert proc.stdin is not None
                proc.stdin.write(f"{staging}\n".encode())
                proc.stdin.close()
            except OSError:  # the child died before it was given the figure
                proc.wait()
            while proc.poll() is None:
                if stop.wait(timeout=POLL_S):
                    _end(proc)
                    return None
            verdict = control / "staged.pkl"
            if not verdict.exists():
                log.seek(0)
                tail = log.read().decode(errors="replace").strip().splitlines()[-5:]
                raise RuntimeError(
                    f"the process running {fig_id} on the worker ended with code "
                    f"{proc.returncode}" + (": " + " / ".join(tail) if tail else "")
                )
        staged = pickle.loads(verdict.read_bytes())  # noqa: S301 - written by our own child
        shutil.rmtree(control)
        files = {
            str(p.relative_to(staging)): p.read_bytes()
            for p in sorted(staging.rglob("*"))
            if p.is_file()
        }
        return staged, files
    finally:
        if proc is not None and proc.poll() is None:
            _end(proc)
        shutil.rmtree(staging, ignore_errors=True)


#: The worker's spare child process: started while a figure runs, it has imported the
#: runner and papermill (seconds) by the time the next figure needs it.
_spare: tuple[subprocess.Popen, IO[bytes]] | None = None
_spare_lock = threading.Lock()


def _spawn() -> tuple[subprocess.Popen, IO[bytes]]:
    """A child process (``python -m ntpcore.pipeline.cluster``) of this worker, importing
    what a figure needs, then waiting for a staging folder on its stdin; its output goes to
    an anonymous file, read when it fails."""
    python_path = os.pathsep.join(filter(None, [str(paths.ROOT), os.environ.get("PYTHONPATH")]))
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ntpcore.pipeline.cluster"],
        env={**os.environ, "PYTHONPATH": python_path},
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return proc, log


def _take_child() -> tuple[subprocess.Popen, IO[bytes]]:
    """A child process for the next figure: the spare if it is alive, else a new one; a new
    spare is started in either case.  One figure per process: nothing one figure's run
    leaves in a process reaches the next."""
    global _spare
    with _spare_lock:
        taken, _spare = _spare, None
        if taken is None or taken[0].poll() is not None:
            if taken is not None:
                taken[1].close()
            taken = _spawn()
        _spare = _spawn()
    return taken


def _end(proc: subprocess.Popen) -> None:
    """Stop a notebook's process: SIGTERM (it shuts its kernel down), then SIGKILL."""
    proc.terminate()
    try:
        proc.wait(timeout=TERM_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _child() -> int:
    """The child process of :func:`_task`: import what a figure needs, wait for a staging
    folder on stdin (at most :data:`SPARE_IDLE_S`; none when the worker is gone), set the
    run's environment and stage the job found there.  SIGTERM stops it as it stops the
    runner; a child whose worker died stops too and removes the staging folder itself."""
    import select

    signal.signal(signal.SIGTERM, runner._interrupt)
    signal.signal(signal.SIGINT, runner._interrupt)
    parent, orphaned = os.getppid(), threading.Event()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_S)
        orphaned.set()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True).start()
    staging = None
    try:
        import papermill  # noqa: F401 - imported now, while the previous figure runs

        ready, _, _ = select.select([sys.stdin], [], [], SPARE_IDLE_S)
        line = sys.stdin.readline().strip() if ready else ""
        if not line:  # no figure came: idle too long, or the worker is gone
            return 0
        staging = Path(line)
        control = staging / CONTROL
        os.environ.update(json.loads((control / "env.json").read_text()))
        job = pickle.loads((control / "job.pkl").read_bytes())  # noqa: S301 - our own task's
        staged = runner.stage_job(job, staging, progress=False)
        tmp = control / "staged.pkl.tmp"
        tmp.write_bytes(pickle.dumps(staged))
        tmp.replace(control / "staged.pkl")
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        if orphaned.is_set() and staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(_child())
