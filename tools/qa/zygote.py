"""New Jupyter kernels forked from a warm process: the mutation catalogue's kernels.

Each mutation of the catalogue (:mod:`tools.qa.mutations`) runs its figures in a new kernel:
its error is put in place by a ``sitecustomize.py`` when the kernel starts, so no kernel can
serve two mutations.  A new kernel spends about 3 to 4 s starting Python and importing
IPython, ipykernel, numpy, scipy, matplotlib and torch before a notebook computes anything;
for most quick figures that is more than the figure itself.

A *zygote* is a Python process, started once per catalogue worker in the kernels'
environment, that imports those third-party modules and then forks one child for each
kernel asked of it.  The child becomes the kernel a new process would have been:

* the kernel's environment (``os.environ``), working folder and a session of its own;
* ``sys.path`` with the kernel's ``PYTHONPATH`` entries first (the mutation's folder; the
  zygote itself starts without them), as Python's start-up puts them, and then that
  folder's ``sitecustomize`` run, as Python's ``site`` runs it;
* new seeds for the global generators of ``random`` and numpy, as a new process draws;
* ipykernel's launcher with the kernel's arguments (connection file, log level).

The zygote never imports ``ntpcore``: a mutation's ``sitecustomize`` then still runs before
the package is imported, exactly as in a new kernel, and wraps what it wraps in the same
way.  What the child inherits from the zygote is only imported third-party code; it reads
the environment variables that matter at import (thread counts, ``PYTHONHASHSEED``) from
the zygote's, so a zygote serves only kernels whose environment equals its own apart from
``PYTHONPATH`` and the project's ``NTP_*`` variables (read by the package at run time):
another environment gets another zygote.

The catalogue's three controls (mutations that change nothing) must still match every
golden number and baseline image with forked kernels, and ``tests/qa/test_zygote.py``
compares a forked kernel with a new one.  ``NTP_FORK_KERNELS=0`` starts every kernel as a
new process, as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager

__all__ = ["ForkingKernelManager", "enabled", "shutdown"]

#: Imported by the zygote before it forks (each only if it is installed).  Third-party only:
#: never the package under test (see the module's docstring).
WARM_MODULES = (
    "numpy",
    "scipy.linalg",
    "scipy.sparse",
    "scipy.sparse.linalg",
    "scipy.optimize",
    "scipy.special",
    "scipy.stats",
    "torch",
    "matplotlib",
    "matplotlib.pyplot",
    "networkx",
    "tqdm",
    "yaml",
    "IPython",
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
)

#: The checkout: the zygote starts there, where ``tools`` can be imported.
ROOT = Path(__file__).resolve().parents[2]
#: Variables a zygote does not fix: the package reads them when it runs, and the child
#: takes the kernel's own values.
_LATE = ("PYTHONPATH",)
_LATE_PREFIX = "NTP_"
_LAUNCHER = "ipykernel_launcher"


def enabled() -> bool:
    """Whether the catalogue forks its kernels (``NTP_FORK_KERNELS=0`` turns it off)."""
    return os.environ.get("NTP_FORK_KERNELS", "1") != "0"


def _key(env: dict[str, str]) -> str:
    fixed = {k: v for k, v in env.items() if k not in _LATE and not k.startswith(_LATE_PREFIX)}
    return hashlib.sha256(json.dumps(fixed, sort_keys=True).encode()).hexdigest()


class ZygoteError(RuntimeError):
    """The zygote could not fork a kernel (the caller starts a new process instead)."""


# ------------------------------------------------------------------------------------------
# The zygote process
# ------------------------------------------------------------------------------------------


def serve() -> None:
    """The zygote's main loop: import :data:`WARM_MODULES`, say ``ready``, then for each
    request line (JSON: ``argv``, ``env``, ``cwd``) fork a kernel and answer its pid."""
    # As ipykernel's launcher does: the start-up folder is not on the path while importing
    # (the kernel puts '' back itself).
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    # ipykernel sets this when a kernel starts; matplotlib reads it when it is imported.
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    for name in WARM_MODULES:
        try:
            __import__(name)
        except ImportError:
            pass
    # The protocol moves off the standard streams, which the kernels inherit: standard
    # input from /dev/null, standard output to standard error (where a new kernel's would go).
    requests = os.fdopen(os.dup(0), "r")
    answers = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # forked kernels are reaped when they end
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C goes to the worker, not here
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    package = sorted(m for m in sys.modules if m.split(".")[0] == "ntpcore")
    print(
        json.dumps({"ready": True, "threads": threads, "package": package}),
        file=answers,
        flush=True,
    )
    for line in requests:
        try:
            req = json.loads(line)
            argv = list(req["argv"])
            if _LAUNCHER not in argv:
                raise ValueError(f"not an ipykernel command: {argv}")
            pid = os.fork()
        except Exception as exc:  # noqa: BLE001 - answered, the caller starts a process instead
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), file=answers, flush=True)
            continue
        if pid == 0:
            requests.close()
            answers.close()
            _become_kernel(argv[argv.index(_LAUNCHER) + 1 :], req["env"], req["cwd"])
        print(json.dumps({"pid": pid}), file=answers, flush=True)


def _become_kernel(args: list[str], env: dict[str, str], cwd: str) -> None:
    """In the forked child: take the kernel's environment, folder and path, run its
    ``sitecustomize``, then run ipykernel's launcher; never returns."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        # As Python's start-up and site make it: PYTHONPATH's entries first, absolute (an
        # empty one is the working folder), then the rest, without repeats.
        first = []
        for entry in env["PYTHONPATH"].split(os.pathsep) if env.get("PYTHONPATH") else []:
            if os.path.abspath(entry) not in first:
                first.append(os.path.abspath(entry))
        sys.path[:] = first + [p for p in sys.path if p not in first]
        # A new process draws new seeds for the global generators (numpy's from the
        # system's entropy when it is imported): every child drew the zygote's.
        import random

        random.seed()
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        sys.modules.pop("sitecustomize", None)
        try:
            import sitecustomize  # noqa: F401 - run for its effect, as site does
        except ImportError as exc:
            if exc.name != "sitecustomize":
                raise
        import ipykernel_launcher
        from ipykernel import kernelapp

        sys.argv = [ipykernel_launcher.__file__, *args]
        kernelapp.launch_new_instance(argv=args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:  # noqa: BLE001 - the kernel's own failure, printed like a process's
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


# ------------------------------------------------------------------------------------------
# The caller's side: one zygote per environment, and a KernelManager that forks from it
# ------------------------------------------------------------------------------------------


class _Zygote:
    def __init__(self, env: dict[str, str]) -> None:
        self.key = _key(env)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tools.qa import zygote; zygote.serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={k: v for k, v in env.items() if k not in _LATE},
            cwd=str(ROOT),
            text=True,
        )
        hello = self._answer()
        if not hello.get("ready"):
            raise ZygoteError(f"the zygote did not start: {hello}")
        if hello.get("package"):
            self.close()
            raise ZygoteError(f"the zygote imported the package ({hello['package'][0]}, ...)")
        if hello.get("threads", 1) != 1:
            self.close()
            raise ZygoteError(f"the zygote runs {hello['threads']} threads: forking is unsafe")

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise ZygoteError(f"the zygote ended (exit status {self.proc.wait()})")
        return json.loads(line)

    def fork(self, argv: list[str], env: dict[str, str], cwd: str) -> int:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"argv": argv, "env": env, "cwd": cwd}) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise ZygoteError(f"the zygote is gone: {exc}") from exc
        answer = self._answer()
        if "pid" not in answer:
            raise ZygoteError(answer.get("error", str(answer)))
        return int(answer["pid"])

    def close(self) -> None:
        """End the zygote (its end of file) and close both pipes."""
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_zygote: _Zygote | None = None


def _zygote_for(env: dict[str, str]) -> _Zygote:
    global _zygote
    if _zygote is not None and (_zygote.key != _key(env) or _zygote.proc.poll() is not None):
        shutdown()
    if _zygote is None:
        _zygote = _Zygote(env)
    return _zygote


def shutdown() -> None:
    """Stop this process's zygote (its kernels are independent processes)."""
    global _zygote
    z, _zygote = _zygote, None
    if z is not None:
        z.close()


class _Forked:
    """What jupyter_client's local provisioner needs of a ``Popen``, for a forked kernel.
    The zygote reaps it, so its exit status is not known: 0 once it has ended."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self.returncode = 0
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
            time.sleep(0.02)
        return self.returncode or 0

    def send_signal(self, signum: int) -> None:
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkingKernelManager(KernelManager):
    """A KernelManager whose kernels are forked from this process's zygote; a new process,
    as jupyter_client starts it, when the zygote cannot fork one."""

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        env = dict(kw.get("env") or os.environ)
        cwd = str(kw.get("cwd") or os.getcwd())
        try:
            pid = _zygote_for(env).fork(list(kernel_cmd), env, cwd)
        except (ZygoteError, OSError, ValueError) as exc:
            shutdown()
            message = f"zygote: {exc}; this kernel starts as a new process"
            print(message, file=sys.__stderr__, flush=True)
            await super()._async_launch_kernel(kernel_cmd, **kw)
            return
        prov = self.provisioner
        assert prov is not None
        prov.process = _Forked(pid)  # type: ignore[attr-defined]
        prov.pid = pid  # type: ignore[attr-defined]
        prov.pgid = pid  # type: ignore[attr-defined] - the child leads its own session
        prov.cwd = cwd  # type: ignore[attr-defined]
        self._reconcile_connection_info(prov.connection_info)
