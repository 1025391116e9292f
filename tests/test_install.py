"""Installation: the Makefile's torch step, the pins, environment.yml and a resolver dry run.

The Makefile's install recipe is run for real with a stand-in interpreter that records the
arguments it receives, so the tests see the pip command lines exactly as the shell split
them.  The pins are checked by pip's own resolver against a local folder of stand-in torch
wheels (``--dry-run --no-index``), with the machine's pip configuration switched off.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "requirements" / "constraints.txt"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

FAKE_PYTHON = """#!{python}
import json, os, shutil, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:2] == ["-m", "venv"]:
    (Path(args[2]) / "bin").mkdir(parents=True, exist_ok=True)
    shutil.copy(__file__, Path(args[2]) / "bin" / "python")
elif "--dry-run" in args and "--no-index" in args:
    sys.exit(0 if os.environ.get("FAKE_LOCAL_TORCH") == "1" else 1)
"""


def _pip_env() -> dict[str, str]:
    """The environment without the machine's pip settings (config files, find-links)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run_install(tmp_path: Path, local_torch: bool = False, **make_vars: str) -> list[list[str]]:
    """Run ``make install`` with a recording interpreter; return the calls it received."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    fake = tmp_path / "python3"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable))
    fake.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    env = {**os.environ, "FAKE_LOG": str(log), "FAKE_LOCAL_TORCH": "1" if local_torch else "0"}
    env.pop("MAKEFLAGS", None)
    cmd = ["make", "-s", "-C", str(ROOT), "install", f"VENV={tmp_path / 'venv'}"]
    cmd += [f"PYTHON_SYS={fake}", *(f"{k}={v}" for k, v in make_vars.items())]
    subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, timeout=60)
    return [json.loads(line) for line in log.read_text().splitlines()]


def _torch_install(calls: list[list[str]]) -> list[str]:
    """The pip call that installs torch (not the dry-run probe)."""
    (call,) = [
        c
        for c in calls
        if c[:3] == ["-m", "pip", "install"]
        and "--dry-run" not in c
        and any(a.startswith("torch") for a in c)
    ]
    return call


def test_torch_index_is_its_own_pip_arguments(tmp_path):
    url = "https://download.pytorch.org/whl/cu128"
    call = _torch_install(_run_install(tmp_path, TORCH_INDEX=url))
    assert "torch==2.13.0" in call
    assert call[call.index("--index-url") + 1] == url
    assert call.count("--index-url") == 1


def test_torch_spec_with_options_is_split(tmp_path):
    # The form the workflow used to pass, which pip received as one argument.
    spec = f"torch==2.13.0 --index-url {CPU_INDEX}"
    call = _torch_install(_run_install(tmp_path, TORCH_SPEC=spec))
    assert spec not in call
    assert call[-3:] == ["torch==2.13.0", "--index-url", CPU_INDEX]


def test_default_is_the_local_cpu_wheel_when_pip_has_one(tmp_path):
    call = _torch_install(_run_install(tmp_path, local_torch=True))
    assert call[-1] == "torch==2.13.0"
    assert "--index-url" not in call


@pytest.mark.skipif(platform.system() != "Linux", reason="the CPU index is the Linux default")
def test_default_on_linux_without_a_local_wheel_is_the_cpu_index(tmp_path):
    call = _torch_install(_run_install(tmp_path, local_torch=False))
    assert call[-2:] == ["--index-url", CPU_INDEX]


def test_torchs_files_are_compiled_beside_the_second_install(tmp_path):
    """pip installs torch without compiling it; torch's files are compiled by a process of
    their own while the second pip call runs (which compiles what it installs itself)."""
    calls = _run_install(tmp_path, local_torch=True)
    assert "--no-compile" in _torch_install(calls)
    (rest,) = [c for c in calls if c[:3] == ["-m", "pip", "install"] and "-e" in c]
    assert "--no-compile" not in rest
    (compile_call,) = [c for c in calls if c[0] == "-c" and "compileall" in c[1]]
    assert 'm.files("torch")' in compile_call[1] and "force=True" in compile_call[1]


def _pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[name.lower()] = version
    return pins


def test_constraints_have_exact_pins_without_local_labels():
    pins = _pins()
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.!]*", v) for v in pins.values()), {
        k: v for k, v in pins.items() if not re.fullmatch(r"[0-9][0-9A-Za-z.!]*", v)
    }
    assert pins["torch"] == "2.13.0"
    assert pins["jupyter-book"] == "1.0.4.post1"
    assert "sphinx-mathjax-offline" in pins


def test_environment_yml_agrees_with_pyproject_and_makefile():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = env["dependencies"]
    python = next(d for d in deps if isinstance(d, str) and d.startswith("python="))
    assert pyproject["project"]["requires-python"] == f"=={python.split('=')[1]}.*"
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict))
    torch_dep = next(d for d in pyproject["project"]["dependencies"] if d.startswith("torch"))
    assert torch_dep == f"torch=={_pins()['torch']}"
    assert torch_dep in pip_section
    assert f"--extra-index-url {CPU_INDEX}" in pip_section
    assert f"TORCH_CPU_INDEX := {CPU_INDEX}" in (ROOT / "Makefile").read_text()
    extras = sorted(pyproject["project"]["optional-dependencies"])
    assert f"-e .[{','.join(extras)}]" in pip_section
    assert "-c requirements/constraints.txt" in pip_section
    assert pip_section.index(torch_dep) < pip_section.index(f"-e .[{','.join(extras)}]")


def _fake_wheel(folder: Path, version: str) -> None:
    """A minimal installable wheel named torch with the given version."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"torch-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
    wheel = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    with zipfile.ZipFile(folder / f"torch-{version}-py3-none-any.whl", "w") as whl:
        whl.writestr("torch/__init__.py", "")
        whl.writestr(f"{dist}/METADATA", meta)
        whl.writestr(f"{dist}/WHEEL", wheel)
        whl.writestr(f"{dist}/RECORD", "")


def _resolve(tmp_path: Path, wheels: Path, constraints: Path) -> subprocess.CompletedProcess:
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"]
    cmd += ["--no-index", "--find-links", str(wheels), "-c", str(constraints)]
    cmd += ["--report", str(report), "--quiet", "torch"]
    return subprocess.run(cmd, env=_pip_env(), capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("version", ["2.13.0+cpu", "2.13.0"])
def test_constraints_resolve_with_cpu_and_plain_torch_wheels(tmp_path, version):
    """The CPU index's ``2.13.0+cpu`` and PyPI's (macOS) ``2.13.0`` both satisfy the pins."""
    wheels = tmp_path / "wheels"
    _fake_wheel(wheels, version)
    done = _resolve(tmp_path, wheels, CONSTRAINTS)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert [i["metadata"]["version"] for i in report["install"]] == [version]


def test_a_local_label_pin_is_unresolvable_with_a_plain_wheel(tmp_path):
    """Control: the old ``torch==2.13.0+cpu`` pin fails where only ``2.13.0`` exists."""
    wheels = tmp_path / "wheels"
    _fake_wheel(wheels, "2.13.0")
    old = tmp_path / "old-constraints.txt"
    old.write_text("torch==2.13.0+cpu\n")
    done = _resolve(tmp_path, wheels, old)
    assert done.returncode != 0
    assert "ResolutionImpossible" in done.stderr
