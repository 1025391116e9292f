"""A template notebook runs where Colab and Binder run it: the package installed from a wheel,
no checkout.

The test builds a wheel from a copy of the package's sources (nothing is written in the
checkout), installs it non-editable into a clean virtual environment (torch first: the local
CPU wheel where pip's configuration has one, else the PyTorch CPU index, as ``make install``
does; then the wheel with the book's pins, no extra; then what runs a notebook, a kernel and
papermill), copies one notebook of each paper into an empty
folder and executes it there with papermill in the quick profile, on a kernel of that
environment.  Each notebook must

* say, in one line, that it is an exploration and where its outputs went, and have written
  them there (beside itself, ``ntp-outputs/<fig_id>/``), claims evaluated and none failed;
* print the golden outputs of the book's quick run (``tests/golden/``, within tolerances):
  the installed package computes what the checkout does;
* write nothing in the checkout, in the installed package's folder or in the home folder
  (the test gives the kernel its own).

Slow (one virtual environment of 1.7 GiB for the three notebooks, removed afterwards; 2 to 6
minutes on 2 shared cores, most of it installing):
``pytest -m slow tests/test_wheel_notebooks.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest

from ntpcore.figure import claims
from ntpcore.runner import launch
from ntpcore.runner.registry import load_registry
from tools.qa import golden

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: one quick notebook of each paper
FIGURES = ["lin-toy-solutions", "geo-datasets", "att-conceptual"]
SOURCES = ["pyproject.toml", "README.md", "LICENSE", "ntpcore"]

pytestmark = pytest.mark.slow


def _run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 1200):
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    """A clean virtual environment with the package installed from a freshly built wheel, a
    kernel of its own, and an environment for the processes it runs (home, caches and temp
    folders under the test's folder; no PYTHONPATH, so the checkout is out of sight)."""
    base = tmp_path_factory.mktemp("wheel")
    home = base / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "NTP_", "JUPYTER", "IPYTHON", "MPL", "VIRTUAL_ENV"))
    }
    env.update(
        HOME=str(home),
        TMPDIR=str(base / "tmp"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_RUNTIME_DIR=str(home / "run"),
        JUPYTER_RUNTIME_DIR=str(home / "run" / "jupyter"),
        PYTHONHASHSEED="0",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    (base / "tmp").mkdir()
    times = {}

    t0 = time.perf_counter()
    src = base / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip"]
    _run([*pip, "wheel", "--quiet", "--no-deps", str(src), "-w", str(base / "dist")], env, base)
    (wheel,) = (base / "dist").glob("ntpcore-*.whl")
    times["wheel"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], env, base)
    py = str(venv / "bin" / "python")
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # torch first, the CPU build: never a resolver's choice (it would pull CUDA wheels)
    local = subprocess.run(
        [py, "-m", "pip", "install", "--quiet", "--dry-run", "--no-index", "--no-deps"]
        + ["torch==2.13.0"],
        env=env,
        capture_output=True,
        timeout=300,
    )
    torch = ["torch==2.13.0"] + ([] if local.returncode == 0 else ["--index-url", CPU_INDEX])
    _run([py, "-m", "pip", "install", "--quiet", *torch], env, base)
    constraints = str(ROOT / "requirements" / "constraints.txt")
    _run([py, "-m", "pip", "install", "--quiet", "-c", constraints, str(wheel)], env, base)
    # what runs the notebook, not the package's: a kernel (Colab's and JupyterLab's Jupyter
    # has one) and papermill to drive it -- the wheel itself has no extra
    _run(
        [py, "-m", "pip", "install", "--quiet", "-c", constraints, "ipykernel", "papermill"],
        env,
        base,
    )
    kernel = f"ntp-wheel-{uuid.uuid4().hex[:8]}"
    _run([py, "-m", "ipykernel", "install", "--sys-prefix", "--name", kernel], env, base)
    times["install"] = time.perf_counter() - t0
    site = _run([py, "-c", "import ntpcore; print(ntpcore.__file__)"], env, base)
    package = Path(site.stdout.strip()).parent
    assert package.is_relative_to(venv), f"ntpcore imported from {package}, not the wheel"

    yield {
        "base": base,
        "py": py,
        "env": env,
        "kernel": kernel,
        "package": package,
        "times": times,
    }
    du = subprocess.run(["du", "-sk", str(venv)], capture_output=True, text=True, check=False)
    size = du.stdout.split()[0] if du.returncode == 0 else "?"
    t0 = time.perf_counter()
    shutil.rmtree(venv, ignore_errors=True)
    times["removal"] = time.perf_counter() - t0
    print(
        f"\nwheel environment: {size} KiB; wheel {times['wheel']:.0f} s, "
        f"install {times['install']:.0f} s; "
        + ", ".join(f"{k} {v:.0f} s" for k, v in times.items() if k not in ("wheel", "install"))
    )


def _explore_state(fig_id: str) -> dict[str, float]:
    """Files of the checkout's explore folder of ``fig_id``, with their modification times."""
    folder = ROOT / "results" / "explore" / fig_id
    return {str(p): p.stat().st_mtime for p in folder.rglob("*") if p.is_file()}


def _stdout(nb: nbformat.NotebookNode) -> str:
    return "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("output_type") == "stream" and o.get("name") == "stdout"
    )


@pytest.mark.parametrize("fig_id", FIGURES)
def test_a_template_runs_from_its_own_folder_with_only_the_wheel_installed(wheel_env, fig_id):
    entry = load_registry()[fig_id]
    folder = wheel_env["base"] / "notebooks" / fig_id
    folder.mkdir(parents=True)
    notebook = folder / Path(entry.notebook).name
    shutil.copy2(ROOT / entry.notebook, notebook)
    executed = folder / f"{fig_id}.executed.ipynb"
    params = {**entry.overrides("quick"), "fig_id": fig_id, "profile": "quick"}
    before = _explore_state(fig_id)

    t0 = time.perf_counter()
    cmd = [wheel_env["py"], "-m", "papermill", notebook.name, executed.name]
    cmd += ["-k", wheel_env["kernel"], "-y", json.dumps(params), "--no-progress-bar"]
    _run(cmd, wheel_env["env"], folder, timeout=900)
    wheel_env["times"][fig_id] = time.perf_counter() - t0

    nb = nbformat.read(executed, as_version=4)
    install = [c for c in nb.cells if launch.INSTALL_TAG in c.metadata.get("tags", [])]
    assert len(install) == 1 and install[0].outputs == []  # importable: it did nothing
    out = folder / "ntp-outputs" / fig_id
    said = [x for x in _stdout(nb).splitlines() if x.startswith("Exploration")]
    assert said == [said[0]] and f"{out}/" in said[0], said  # one line, naming the folder
    assert "installed, no checkout" in said[0]
    for suffix in (".png", ".json", ".data.json", ".claims.json"):
        assert (out / f"{fig_id}{suffix}").is_file(), f"{fig_id}{suffix} not in {out}"
    assert not (out / f"{fig_id}.pdf").exists()  # the quick profile makes no PDF
    ledger = claims.load_claims(out / f"{fig_id}.claims.json")
    assert any(c["status"] == "pass" and not c.get("sanity") for c in ledger), ledger
    assert not [c["id"] for c in ledger if claims.is_blocking(c)]
    sidecar = json.loads((out / f"{fig_id}.json").read_text())
    assert sidecar["profile"] == "quick" and sidecar["git"]["commit"] is None

    comparison = golden.compare(fig_id, golden.read_golden(fig_id), golden.extract(nb))
    assert comparison.ok, "\n".join(d.describe() for d in comparison.differences)

    # nothing outside the test's folder: not in the checkout, not beside the installed package
    assert _explore_state(fig_id) == before
    site = wheel_env["package"].parent
    assert not [p for p in ("results", "_build", "ntp-outputs") if (site / p).exists()]
    assert {p.name for p in folder.iterdir()} == {notebook.name, executed.name, "ntp-outputs"}
