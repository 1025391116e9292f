"""Golden outputs: nbval compares the tagged cells with reference text that is not the run's
own, so a printed number that moves fails the tests with a readable diff."""

from __future__ import annotations

import subprocess
import sys

import nbformat
import pytest

from ntpcore.pipeline import golden


def _executed(path, value: str):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    check = nbformat.v4.new_code_cell(f"x = {value}\nprint(f'key number: {{x:.3g}}')")
    check.metadata["tags"] = [golden.TAG]
    check.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"key number: {value}\n")]
    other = nbformat.v4.new_code_cell("print('not compared')")
    nb.cells = [nbformat.v4.new_code_cell("import math"), check, other]
    nbformat.write(nb, path)
    return path


def test_render_and_parse_round_trip():
    texts = ["PASS a: ...\nkey 1.23\n", "", "line\n"]
    assert golden.parse(golden.render("lin-x", texts)) == texts


def test_inject_refuses_a_golden_file_that_does_not_fit(tmp_path):
    nb = nbformat.read(_executed(tmp_path / "lin-x.ipynb", "0.5"), as_version=4)
    with pytest.raises(golden.GoldenError, match="1 tagged cells but 2 golden outputs"):
        golden.inject(nb, ["a\n", "b\n"], "lin-x")


def _nbval(path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-o",
            "addopts=",
            "-p",
            "no:cacheprovider",
            "--nbval-lax",
            "--nbval-current-env",
            "-q",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_nbval_fails_when_a_key_number_drifts_from_the_golden_output(tmp_path):
    executed = tmp_path / "executed"
    executed.mkdir()
    _executed(executed / "lin-x.ipynb", "0.5")
    gdir = tmp_path / "golden"
    golden.update(executed, gdir)
    assert "key number: 0.5" in (gdir / "lin-x.txt").read_text()
    # the same notebook against its golden file passes ...
    golden.inject_all(executed, tmp_path / "ok", gdir)
    ok = _nbval(tmp_path / "ok")
    assert ok.returncode == 0, ok.stdout
    # ... and a notebook whose number moved fails against the same golden file
    _executed(executed / "lin-x.ipynb", "0.51")
    golden.inject_all(executed, tmp_path / "drift", gdir)
    drift = _nbval(tmp_path / "drift")
    assert drift.returncode != 0
    assert "key number: 0.5" in drift.stdout and "key number: 0.51" in drift.stdout


def test_a_figure_without_golden_outputs_is_an_error(tmp_path):
    executed = tmp_path / "executed"
    executed.mkdir()
    _executed(executed / "lin-x.ipynb", "0.5")
    with pytest.raises(golden.GoldenError, match="no golden outputs for lin-x"):
        golden.inject_all(executed, tmp_path / "out", tmp_path / "empty")
