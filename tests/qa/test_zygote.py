"""Kernels forked from a warm process (tools.qa.zygote), as the mutation catalogue starts them:
a forked kernel shows a notebook what a new kernel shows it, runs a mutation's
sitecustomize before the package is imported, ends when it is shut down, and a kernel still
starts when no zygote can fork it."""

from __future__ import annotations

import gc
import os
import time

import nbformat
import papermill
import pytest
from nbutil import write_notebook

from ntpcore.runner import kernels, staging
from tools.qa import zygote

#: What a notebook could notice about the process it runs in.
PROBE = """\
import os, sys, warnings, random
import matplotlib, matplotlib.pyplot as plt
import numpy as np, torch
import ntpcore.att, ntpcore.geo, ntpcore.lin
print("hash seed:", hash("ntp"))
print("backend:", matplotlib.get_backend())
fig = plt.figure()
print("interactive with a figure:", plt.isinteractive())
plt.close(fig)
print("changed rcParams:", sorted(k for k, v in matplotlib.rcParams.items()
      if k != "backend" and v != matplotlib.rcParamsDefault[k]))
print("warnings filters:", sorted(str((a, getattr(msg, "pattern", msg), c.__name__,
      getattr(m, "pattern", m))) for a, msg, c, m, _ in warnings.filters))
print("torch threads:", torch.get_num_threads())
print("folder:", os.path.basename(os.getcwd()))
print("variables:", os.environ.get("NTP_TEST_VAR"), os.environ.get("OMP_NUM_THREADS"))
print("path:", sys.path)
print("site ran before the package:", os.environ.get("NTP_TEST_SITE"))
print("main:", sys.argv[0].endswith("ipykernel_launcher.py"), sys.argv[1])
print("global draw, numpy:", np.random.random())
print("global draw, random:", random.random())
"""

SITE = """\
import os, sys
os.environ["NTP_TEST_SITE"] = str(not any(m.startswith("ntpcore") for m in sys.modules))
"""


@pytest.fixture
def mutation_env(tmp_path, monkeypatch):
    """The environment the catalogue gives a mutation's kernel: its sitecustomize first on
    PYTHONPATH, and a variable of the project."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("NTP_TEST_VAR", "set")
    for k, v in staging.KERNEL_ENV.items():
        monkeypatch.setenv(k, v)
    yield tmp_path
    kernels.manager_class = None
    kernels.discard()
    gc.collect()


@pytest.fixture(scope="module", autouse=True)
def _one_zygote_for_the_module():
    """The tests of this module share a zygote where their environments agree (a start is
    about 2.5 s: it imports torch); it is stopped after the last."""
    yield
    zygote.shutdown()


def _env():
    """This process's environment but pytest's name of the running test (which would give
    each test a zygote of its own)."""
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


def _probe(folder, forked):
    """The probe's lines, run by papermill in a forked kernel or a new process."""
    src = write_notebook(folder / "probe.ipynb", "x = 0", PROBE)
    dst = folder / f"out-{forked}.ipynb"
    kernels.manager_class = zygote.ForkingKernelManager if forked else None
    km = kernels._manager()
    km.start_kernel(cwd=str(folder), extra_arguments=staging.KERNEL_ARGS)
    try:
        papermill.execute_notebook(
            str(src),
            str(dst),
            cwd=str(folder),
            kernel_name="python3",
            progress_bar=False,
            log_output=False,
            km=km,
        )
    finally:
        kernels.release_clients()
        pid = km.provisioner.pid
        km.shutdown_kernel(now=True)
    nb = nbformat.read(dst, as_version=4)
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", [])), pid


@pytest.mark.long
def test_a_forked_kernel_shows_a_notebook_what_a_new_one_shows(mutation_env):
    new, _ = _probe(mutation_env, forked=False)
    forked, pid = _probe(mutation_env, forked=True)
    again, pid_again = _probe(mutation_env, forked=True)
    assert zygote._zygote is not None and zygote._zygote.proc.pid not in (pid, pid_again)
    assert "site ran before the package: True" in new
    assert _settled(forked) == _settled(new)
    # each global generator is seeded anew in each kernel, as in a new process
    for a, b in zip(_draws(forked), _draws(again), strict=True):
        assert a != b
    # and each forked kernel has ended with its shutdown
    for p in (pid, pid_again):
        _gone(p)


def _gone(pid):
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"the forked kernel {pid} is still running after its shutdown")


def _settled(out):
    return [line for line in out.splitlines() if not line.startswith("global draw")]


def _draws(out):
    return [line for line in out.splitlines() if line.startswith("global draw")]


def test_the_zygote_refuses_what_is_not_a_kernel(mutation_env):
    z = zygote._zygote_for(_env())
    with pytest.raises(zygote.ZygoteError, match="not an ipykernel command"):
        z.fork(["python", "-c", "pass"], _env(), str(mutation_env))
    assert z.proc.poll() is None  # and goes on serving


@pytest.mark.long
def test_a_zygote_serves_one_environment_but_the_late_variables(mutation_env, monkeypatch):
    env = _env()
    first = zygote._zygote_for(env)
    assert zygote._zygote_for({**env, "PYTHONPATH": "/elsewhere", "NTP_CACHE_DIR": "/c"}) is first
    other = zygote._zygote_for({**env, "NTP_TEST_ANOTHER": "1", "SOME_LIBRARY_SETTING": "1"})
    assert other is not first and first.proc.wait(timeout=10) is not None
    zygote.shutdown()  # the next test starts one in the module's environment


def test_a_zygote_with_threads_is_refused(mutation_env):
    """Forking a process that runs threads copies only the forking one (a lock another held
    stays held): here OpenBLAS's pool, which numpy starts when it loads, with two threads."""
    with pytest.raises(zygote.ZygoteError, match="threads: forking is unsafe"):
        zygote._zygote_for({**_env(), "OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2"})


def test_a_kernel_starts_as_a_process_when_the_zygote_cannot_fork(mutation_env, monkeypatch):
    def broken(env):
        raise zygote.ZygoteError("no zygote in this test")

    monkeypatch.setattr(zygote, "_zygote_for", broken)
    out, pid = _probe(mutation_env, forked=True)
    assert "site ran before the package: True" in out
    assert pid is not None
