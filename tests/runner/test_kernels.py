"""The warm kernel (ntpcore.runner.kernels): a notebook run in a kernel that ran another one
sees what a new kernel shows it, gives the outputs a new kernel gives, and leaves no client
open behind it."""

from __future__ import annotations

import gc
import os

import nbformat
import papermill
import pytest
from nbutil import write_notebook

from ntpcore.runner import kernels, staging

#: The first notebook changes what a kernel holds: a name, matplotlib's settings, an open
#: figure, the warnings filters, a warning already shown, an environment variable.
DIRTY = """\
import os, warnings
import matplotlib.pyplot as plt
left_behind = 42
plt.rcParams["lines.linewidth"] = 9.0
plt.figure()
warnings.simplefilter("ignore")
def warn():
    warnings.warn("shown once per kernel", UserWarning)
warn()
os.environ["NTP_TEST_LEFT_BEHIND"] = "1"
"""

#: The second reports what it sees; a new kernel prints these same lines.
PROBE = """\
import os, warnings
import matplotlib.pyplot as plt
print("names:", sorted(k for k in globals() if not k.startswith("_") and k not in
      {"In", "Out", "exit", "quit", "get_ipython", "open", "os", "warnings", "plt", "marker"}))
print("linewidth:", plt.rcParams["lines.linewidth"])
print("open figures:", plt.get_fignums())
fig = plt.figure()
print("interactive with a figure:", plt.isinteractive())
plt.close(fig)
with warnings.catch_warnings(record=True) as seen:
    warnings.warn("shown once per kernel", UserWarning)
print("warnings shown:", len(seen))
print("figure dir:", os.environ.get("NTP_FIGURE_DIR"))
print("left behind:", os.environ.get("NTP_TEST_LEFT_BEHIND"))
print("marker:", marker)
"""


def _notebook(path, source):
    return write_notebook(path, "marker = 0", source)


def _execute(src, dst, folder, km, marker):
    """Run ``src`` as the runner does (staging's environment and arguments)."""
    env = {**staging.KERNEL_ENV, "NTP_FIGURE_DIR": str(folder)}
    kwargs = {}
    if km is not None:
        kwargs["km"] = km
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        papermill.execute_notebook(
            str(src),
            str(dst),
            parameters={"marker": marker},
            cwd=str(folder),
            kernel_name="python3",
            progress_bar=False,
            log_output=False,
            extra_arguments=staging.KERNEL_ARGS,
            **kwargs,
        )
    finally:
        if km is not None:
            kernels.release_clients()
        os.environ.clear()
        os.environ.update(saved)
    nb = nbformat.read(dst, as_version=4)
    return [o.get("text", "") for c in nb.cells for o in c.get("outputs", [])], [
        c.get("execution_count") for c in nb.cells
    ]


def _warm(folder):
    env = {**staging.KERNEL_ENV, "NTP_FIGURE_DIR": str(folder)}
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        return kernels.kernel_for(env, str(folder), staging.KERNEL_ARGS, ("NTP_FIGURE_DIR",))
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def warm_on(monkeypatch):
    monkeypatch.setenv("NTP_WARM_KERNEL", "1")
    kernels.discard()
    yield
    kernels.discard()
    gc.collect()  # a client left open would warn here (warnings are errors in the tests)


@pytest.mark.long
def test_a_notebook_after_another_sees_a_new_kernel(tmp_path, warm_on):
    dirty = _notebook(tmp_path / "dirty.ipynb", DIRTY)
    probe = _notebook(tmp_path / "probe.ipynb", PROBE)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()

    cold, cold_counts = _execute(probe, tmp_path / "cold.ipynb", b, None, 7)

    km = _warm(a)
    _execute(dirty, tmp_path / "dirty-out.ipynb", a, km, 1)
    pid = km.provisioner.pid if getattr(km, "provisioner", None) else None
    km2 = _warm(b)
    assert km2 is km and (pid is None or km2.provisioner.pid == pid), "the kernel was not reused"
    warm, warm_counts = _execute(probe, tmp_path / "warm.ipynb", b, km2, 7)

    assert warm == cold, f"a warm kernel's outputs differ from a new kernel's:\n{warm}\n{cold}"
    assert warm_counts == cold_counts
    text = "".join(warm)
    assert "names: []" in text and f"figure dir: {b}" in text and "warnings shown: 1" in text
    assert "left behind: None" in text
    assert "NTP_TEST_LEFT_BEHIND" not in os.environ


def test_the_next_notebook_gets_a_new_kernel_after_a_discard(tmp_path, warm_on):
    km = _warm(tmp_path)
    pid = km.provisioner.pid
    kernels.discard()
    assert not km.is_alive()
    km2 = _warm(tmp_path)
    assert km2 is not km and km2.provisioner.pid != pid and km2.is_alive()


def test_another_environment_gets_another_kernel(tmp_path, warm_on, monkeypatch):
    km = _warm(tmp_path)
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "another-cache"))
    km2 = _warm(tmp_path)
    assert km2 is not km and not km.is_alive()


def test_warm_kernels_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_WARM_KERNEL", "0")
    assert not kernels.enabled()
    assert _warm(tmp_path) is None
