"""The figure runner's dask back end: ``python -m ntpcore.reproduce --scheduler tcp://HOST:PORT``.

:func:`execute` runs ``stage(job, folder)`` for every job on the workers of a
``dask.distributed`` cluster, one dask task per job.  On a worker the task runs ``stage`` in
a child Python process (a process of its own, because the runner sets the kernel's
environment in ``os.environ`` and a worker may run several tasks in threads; a spare one,
started while the previous job ran, so that its imports cost no time), in a fresh folder
``_build/ntp-<worker pid>-<name>-*`` of the worker's checkout, and returns what ``stage``
returned with the bytes of every file it left in the folder, which it then removes.  For the
runner ``stage`` is :func:`ntpcore.runner.staging.stage_job` (papermill, the sidecar, the
claims' verdict), and the runner writes the files into its own staging folder and publishes
them exactly as a local run does (all files or none, the sidecar last; a failed figure is
kept under ``_build/failed/``), so only the caller writes ``book/figures``,
``book/executed`` and the run record.  This module does not import the runner (the runner
imports it): ``stage`` travels to the workers by reference.

What the workers must have, checked before any figure starts (:func:`check_workers`):

* this repository's checkout at the same commit (``ntpcore`` importable, the notebooks
  beside it): a sidecar records the commit that computed it.  Restart the workers after the
  checkout changes: a worker keeps the modules it imported;
* the caller's computation cache, ``NTP_CACHE_DIR`` as an absolute path, on a file system
  they share: the caller writes a file there that every worker must see.  The tasks set
  ``NTP_CACHE_DIR`` (and ``NTP_CACHE_LOCK``) in the kernel's environment, whatever the
  workers were started with, so that one figure's training is read by the figures that
  reuse it.  The per-key lock of :mod:`ntpcore.core.cache` is ``flock``: it holds
  between processes of one machine and, on Linux, between machines on NFS (the client maps
  it to NFS byte-range locks); some cluster file systems need it enabled (Lustre: mount
  with ``flock``).

Jobs are submitted in the given order (the runner's :func:`ntpcore.runner.planning.order_jobs`),
each when a worker thread is free: a worker runs as many figures at once as it has threads
(start workers with ``--nthreads 1`` for one figure per worker; a kernel computes on one
thread).  A worker that dies takes its job with it: dask tries it on another worker
(``distributed.scheduler.allowed-failures``), then the runner reports the figure failed like
any other.  On Ctrl-C or SIGTERM the caller sets a dask ``Event`` that every task polls: a
task then stops its child (whose kernel is shut down) and removes its folder, and the caller
waits for that before it exits.
"""

from __future__ import annotations

import importlib
import json
import logging
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

from ntpcore.core import paths
from ntpcore.errors import ParameterError
from ntpcore.figure.provenance import git_state

T = TypeVar("T")

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
    return {
        "root": str(paths.ROOT),
        "checkout": paths.CHECKOUT,
        "sees_cache": Path(marker).exists(),
        **git_state(),
    }


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
        if not state["checkout"]:
            raise ClusterError(
                f"worker {worker} runs ntpcore installed without a checkout ({state['root']}): "
                f"the workers need this repository's checkout, at this commit"
            )
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
    return {
        "address": client.scheduler.address,
        "workers": len(client.nthreads()),
        "threads": _threads(client),
    }


def execute(
    jobs: Sequence[T],
    client: Any,
    *,
    name: Callable[[T], str],
    stage: Callable[[T, Path], Any],
    env: dict[str, str],
    collect: Callable[[T, Any], None],
) -> None:
    """Run ``stage(job, folder)`` for every job on the cluster, in the order of ``jobs``, and
    call ``collect(job, result)`` here as each comes back: ``result`` is ``(stage's value,
    {path relative to the folder: bytes})``, or the exception that lost the job (e.g.
    ``distributed.KilledWorker``).  ``stage`` must be a module-level function (it is
    pickled by reference); ``env`` is set in its process; ``name`` names a job's folder
    and task.  A ``KeyboardInterrupt`` stops every task and is raised again.

    The next job is submitted when a worker thread is free (the cluster's threads are
    counted again every :data:`REFRESH_S` seconds, so workers that join are used): dask
    would otherwise place every task on a worker at once, by its estimate of their
    durations, which knows nothing of a notebook's, and a worker could sit idle while
    figures wait behind a long training on another.
    """
    from distributed import Event

    run = uuid.uuid4().hex[:12]
    stop = Event(f"ntp-stop-{run}", client=client)
    pending = list(jobs)
    running: dict[Any, T] = {}
    try:
        threads, counted = 0, -REFRESH_S
        while pending or running:
            if time.monotonic() - counted >= REFRESH_S:
                threads, counted = _threads(client), time.monotonic()
            while pending and len(running) < max(threads, 1):
                job = pending.pop(0)
                key = f"ntp-figure-{name(job)}-{run}"
                fut = client.submit(
                    _task, stage, job, name(job), env, stop.name, key=key, pure=False
                )
                running[fut] = job
            done = [fut for fut in running if fut.done()]
            if not done:
                time.sleep(0.2)
            for fut in done:
                job = running.pop(fut)
                try:
                    result = fut.result()
                except Exception as exc:  # noqa: BLE001 - the job's failure, for collect
                    result = exc
                if result is not None:  # None: stopped on the worker
                    collect(job, result)
    except BaseException:
        _stop(client, stop, list(running))
        raise


def lost(fig_id: str, exc: BaseException) -> str:
    """What to say of a figure whose task ended in ``exc`` (a worker that died, ...)."""
    from distributed import KilledWorker

    if isinstance(exc, KilledWorker):
        last = getattr(exc.last_worker, "address", exc.last_worker)
        return (
            f"{fig_id}: the dask worker running it died (tried on {exc.allowed_failures + 1} "
            f"worker(s), the last {last}); nothing was published"
        )
    return f"{fig_id}: its task failed on the cluster: {type(exc).__name__}: {exc}"


def _threads(client: Any) -> int:
    """The threads of the cluster's workers now (asked of the scheduler: the client's cached
    copy of its state can list a worker before its threads)."""
    return sum(client.nthreads().values())


def _stop(client: Any, stop: Any, futures: list[Any]) -> None:
    """Tell every task to stop its child and wait until all have ended (a running task
    stops its child and removes its folder, a task not yet started returns at once); then
    cancel them.  A second Ctrl-C ends the wait."""
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


def _folder(name: str) -> Path:
    """A fresh folder ``_build/ntp-<pid>-<name>-*`` of this checkout (the runner's staging
    folders are named alike)."""
    (paths.ROOT / "_build").mkdir(exist_ok=True)
    prefix = f"ntp-{os.getpid()}-{name}-"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=paths.ROOT / "_build"))


def _task(stage: Callable, job: Any, name: str, env: dict[str, str], stop_name: str) -> Any:
    """Run on a worker: ``stage(job, folder)`` in a child process, in a fresh folder of the
    worker's checkout.  Returns ``(value, {relative path: bytes})``, or ``None`` when the
    stop event was set; the folder is removed in every case."""
    from distributed import Event

    stop = Event(stop_name)
    if stop.is_set():  # the run was interrupted before this job started
        return None
    folder = _folder(name)
    control = folder / CONTROL
    control.mkdir()
    proc = None
    try:
        (control / "job.pkl").write_bytes(pickle.dumps((stage, job)))
        (control / "env.json").write_text(json.dumps(env))
        proc, log = _take_child(stage.__module__)
        with log:
            try:
                assert proc.stdin is not None
                proc.stdin.write(f"{folder}\n".encode())
                proc.stdin.close()
            except OSError:  # the child died before it was given the job
                proc.wait()
            while proc.poll() is None:
                if stop.wait(timeout=POLL_S):
                    _end(proc)
                    return None
            verdict = control / "value.pkl"
            if not verdict.exists():
                log.seek(0)
                tail = log.read().decode(errors="replace").strip().splitlines()[-5:]
                raise RuntimeError(
                    f"the process running {name} on the worker ended with code "
                    f"{proc.returncode}" + (": " + " / ".join(tail) if tail else "")
                )
        value = pickle.loads(verdict.read_bytes())  # noqa: S301 - written by our own child
        shutil.rmtree(control)
        files = {
            str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }
        return value, files
    finally:
        if proc is not None and proc.poll() is None:
            _end(proc)
        shutil.rmtree(folder, ignore_errors=True)


#: The worker's spare child process: started while a figure runs, it has imported the
#: runner and papermill (seconds) by the time the next figure needs it.
_spare: tuple[subprocess.Popen, IO[bytes]] | None = None
_spare_lock = threading.Lock()


def _spawn(warm: str) -> tuple[subprocess.Popen, IO[bytes]]:
    """A child process (``python -m ntpcore.runner.cluster``) of this worker, importing
    the module ``warm`` (the one that defines the jobs' ``stage``), then waiting for a folder
    on its stdin; its output goes to an anonymous file, read when it fails."""
    python_path = os.pathsep.join(filter(None, [str(paths.ROOT), os.environ.get("PYTHONPATH")]))
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ntpcore.runner.cluster", warm],
        env={**os.environ, "PYTHONPATH": python_path},
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return proc, log


def _take_child(warm: str) -> tuple[subprocess.Popen, IO[bytes]]:
    """A child process for the next figure: the spare if it is alive, else a new one; a new
    spare is started in either case.  One figure per process: nothing one figure's run
    leaves in a process reaches the next."""
    global _spare
    with _spare_lock:
        taken, _spare = _spare, None
        if taken is None or taken[0].poll() is not None:
            if taken is not None:
                taken[1].close()
            taken = _spawn(warm)
        _spare = _spawn(warm)
    return taken


def _end(proc: subprocess.Popen) -> None:
    """Stop a notebook's process: SIGTERM (it shuts its kernel down), then SIGKILL."""
    proc.terminate()
    try:
        proc.wait(timeout=TERM_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _interrupt(signum: int, frame: Any) -> None:
    """SIGTERM in a child: stop as the runner stops (:func:`ntpcore.runner.runner._interrupt`:
    a ``KeyboardInterrupt``, and asyncio's log of the kernel client's late errors silenced)."""
    logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)
    raise KeyboardInterrupt


def _child(warm: str) -> int:
    """The child process of :func:`_task`: import ``warm`` (what a job needs), wait for a folder
    on stdin (at most :data:`SPARE_IDLE_S`; none when the worker is gone), set the run's
    environment and run the job found there.  SIGTERM stops it as it stops the runner; a
    child whose worker died stops too and removes the folder itself."""
    import select

    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    parent, orphaned = os.getppid(), threading.Event()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_S)
        orphaned.set()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True).start()
    folder = None
    try:
        importlib.import_module(warm)  # now, while the worker's current job runs
        import papermill  # noqa: F401 - what the runner's stage imports first

        ready, _, _ = select.select([sys.stdin], [], [], SPARE_IDLE_S)
        line = sys.stdin.readline().strip() if ready else ""
        if not line:  # no job came: idle too long, or the worker is gone
            return 0
        folder = Path(line)
        control = folder / CONTROL
        os.environ.update(json.loads((control / "env.json").read_text()))
        stage, job = pickle.loads((control / "job.pkl").read_bytes())  # noqa: S301 - our task's
        value = stage(job, folder)
        tmp = control / "value.pkl.tmp"
        tmp.write_bytes(pickle.dumps(value))
        tmp.replace(control / "value.pkl")
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        if orphaned.is_set() and folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
