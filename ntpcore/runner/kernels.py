"""One warm kernel per worker: a Jupyter kernel runs a worker's notebooks one after another.

Starting a kernel and importing numpy, scipy, matplotlib and the package takes a few seconds
a notebook: most of a quick figure's time.  So a worker process of the runner (one of the
``--jobs`` workers, or the runner itself with one job) keeps one kernel and hands it to
papermill for each of its notebooks (papermill's ``km`` argument: nbclient then neither
starts nor shuts it down).  Before each notebook the kernel is put back in the state a new
kernel has (:data:`PREPARE`):

* a new user namespace (``%reset -f``: no name of the previous notebook is left), and the
  execution counter back at 1;
* matplotlib's settings as they were right after the kernel's first pyplot figure (see
  :data:`IMPORT`), and no figure open; the warnings filters as they were then, and every
  module's registry of warnings already shown cleared (a warning is shown again, as in a
  new kernel);
* the environment the kernel started with (a variable a notebook set is gone), the
  figure's own environment (its staging folder, ``NTP_FIGURE_DIR``) and working
  directory, and the figure's compute clock (the sidecar's ``compute_wall_time_s``)
  restarted.

What stays is what cannot change a result: the imported modules and the caches of pure
computations.  A kernel is used only in the environment it was started in (a runner call
under another environment, e.g. another cache folder or ``PYTHONPATH``, gets a new one);
a kernel that failed a notebook, died, or ran past a time limit is shut down, and the next
notebook gets a new one.  ``NTP_WARM_KERNEL=0`` gives every notebook a new kernel, as
before; ``tests/runner/test_kernels.py`` checks that both give the same outputs, and that
nothing of one notebook reaches the next.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing.util
import os
from typing import Any

__all__ = ["PREPARE", "discard", "enabled", "kernel_for", "release_clients"]

#: Run once, when the kernel starts, in two executions: pyplot imported and one figure made
#: and closed, then what "a new kernel" looks like after that.  pyplot sets up IPython's
#: inline backend when the first figure is made, and that turns interactive mode on
#: (``rcParams["interactive"]``): captured before, every later notebook ran in
#: non-interactive mode, which lays some figures out a pixel differently from a new kernel.
IMPORT = "import matplotlib.pyplot as _p\n_p.close(_p.figure())\ndel _p"
FIRST = """
import os as _o, sys as _s, types as _t, warnings as _w
import matplotlib as _m, matplotlib.pyplot as _p
_s.modules["_ntp_new_kernel"] = _t.SimpleNamespace(
    rc=dict(_m.rcParams), filters=list(_w.filters), environ=dict(_o.environ)
)
del _o, _s, _t, _w, _m, _p
"""

#: Run before each notebook (``{env}``: the figure's environment, ``{cwd}``: its folder).
PREPARE = """
import os as _o, sys as _s, time as _t, warnings as _w
import matplotlib as _m, matplotlib.pyplot as _p
_p.close("all")
_new = _s.modules["_ntp_new_kernel"]
with _w.catch_warnings():
    _w.simplefilter("ignore")
    _m.rcParams.update(_new.rc)
_w.filters[:] = _new.filters
_w._filters_mutated()
for _mod in list(_s.modules.values()):
    _reg = getattr(_mod, "__warningregistry__", None)
    if isinstance(_reg, dict):
        _reg.clear()
_o.environ.clear()
_o.environ.update(_new.environ)
_o.environ.update({env})
_o.chdir({cwd})
if "ntpcore.figure.provenance" in _s.modules:
    _s.modules["ntpcore.figure.provenance"]._T0 = _t.perf_counter()
get_ipython().run_line_magic("reset", "-f")
get_ipython().execution_count = 1
"""

_kernel: Any = None  # this process's warm kernel (a jupyter_client KernelManager)
_started_in: str = ""  # a digest of the environment it was started in
_clients: list[Any] = []  # the kernel clients made for it since the last release_clients()


#: The KernelManager class new kernels start with; ``None``: jupyter_client's, which starts
#: a new process.  The mutation catalogue's workers set one that forks its kernels from a
#: warm process (``tools.qa.zygote``).
manager_class: Any = None


def _manager() -> Any:
    """A KernelManager (of :data:`manager_class`) that remembers the clients it makes.
    nbclient stops the channels of its client only when it owns the kernel; with ours
    (papermill's ``km``) it leaves them open, so :func:`release_clients` closes them after
    each notebook (else their zmq sockets are closed by the garbage collector, with a
    ResourceWarning, whenever it runs)."""
    from jupyter_client.manager import KernelManager

    class _Remembering(manager_class or KernelManager):
        def client(self, **kwargs: Any) -> Any:
            kc = super().client(**kwargs)
            _clients.append(kc)
            return kc

    return _Remembering(kernel_name="python3")


def release_clients() -> None:
    """Close the channels (and their zmq context) of every client made for the warm kernel
    since the last call: after a notebook, the kernel stays and its clients go."""
    while _clients:
        kc = _clients.pop()
        try:
            kc.stop_channels()
            if getattr(kc, "_created_context", False) and not kc.context.closed:
                kc.context.destroy(linger=0)
        except Exception:  # noqa: BLE001 - a client whose kernel is already gone
            pass


def enabled() -> bool:
    """Whether notebooks share a warm kernel (``NTP_WARM_KERNEL=0`` turns it off)."""
    return os.environ.get("NTP_WARM_KERNEL", "1") != "0"


def _environment_digest(skip: tuple[str, ...]) -> str:
    env = {k: v for k, v in os.environ.items() if k not in skip}
    return hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()


def _run(km: Any, code: str) -> None:
    """Execute ``code`` in ``km``'s kernel, outside its history; raise when it fails."""
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        reply = kc.execute_interactive(
            code, store_history=False, timeout=120, output_hook=lambda msg: None
        )
    finally:
        release_clients()
    if reply["content"].get("status") != "ok":
        raise RuntimeError(
            f"the warm kernel could not be prepared: {reply['content'].get('ename')}: "
            f"{reply['content'].get('evalue')}"
        )


def kernel_for(env: dict[str, str], cwd: str, args: list[str], per_figure: tuple[str, ...]):
    """This process's kernel, prepared for one notebook: the figure's environment ``env``
    (already in ``os.environ``) and folder ``cwd``; started with ``args`` when there is none,
    or none that runs in this environment (the variables ``per_figure`` aside).  ``None``
    when warm kernels are off."""
    global _kernel, _started_in
    if not enabled():
        return None
    digest = _environment_digest(per_figure)
    if _kernel is not None and (digest != _started_in or not _kernel.is_alive()):
        discard()
    if _kernel is None:
        km = _manager()
        km.start_kernel(cwd=cwd, extra_arguments=list(args))
        try:
            _run(km, IMPORT)
            _run(km, FIRST)
        except BaseException:
            km.shutdown_kernel(now=True)
            raise
        _kernel, _started_in = km, digest
        multiprocessing.util.Finalize(None, discard, exitpriority=10)  # a worker's exit
    try:
        _run(_kernel, PREPARE.format(env=repr(dict(env)), cwd=repr(cwd)))
    except BaseException:
        discard()
        raise
    return _kernel


def discard() -> None:
    """Shut this process's warm kernel down (after a failure, and when the run ends)."""
    global _kernel, _started_in
    km, _kernel, _started_in = _kernel, None, ""
    release_clients()
    if km is not None:
        try:
            km.shutdown_kernel(now=True)
        except Exception:  # noqa: BLE001 - a kernel that is already gone
            pass
