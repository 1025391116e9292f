"""Baseline images and the reproducibility report (tools.qa.images, .reproducibility)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from ntpcore.geo.models import fused  # noqa: E402
from tools.qa import golden, images, reproducibility  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "book" / "_ext"))


def _plot(path: Path, *, shift: float = 0.0, labels=("GD", "Adam")) -> Path:
    fig, ax = plt.subplots(figsize=(4, 3), dpi=100)
    x = np.linspace(0, 1, 50)
    ax.plot(x, x**2 + shift, label=labels[0])
    ax.plot(x, np.sqrt(x), label=labels[1])
    ax.legend()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return path


# ------------------------------------------------------------------------ images
def test_identical_figures_have_zero_rms_and_a_moved_curve_exceeds_the_floor(tmp_path):
    a = _plot(tmp_path / "a.png")
    assert images.rms(a, _plot(tmp_path / "b.png")) == 0.0
    assert images.rms(a, _plot(tmp_path / "c.png", shift=0.02)) > images.FLOOR
    swapped = _plot(tmp_path / "d.png", labels=("Adam", "GD"))
    assert images.rms(a, swapped) > images.FLOOR


def test_a_png_compared_again_is_not_decoded_again_unless_rewritten(tmp_path):
    """The report compares each figure with several others: a PNG is decoded once while it
    is unchanged, and a rewritten one is read anew (never an older version's pixels)."""
    a, b = _plot(tmp_path / "a.png"), _plot(tmp_path / "b.png", shift=0.02)
    images._decoded.cache_clear()
    first = images.rms(a, b)
    for _ in range(3):
        assert images.rms(a, b) == first and images.rms(b, a) == first
    assert images._decoded.cache_info().misses == 2
    _plot(b, shift=0.0)  # rewritten: now identical to a
    assert images.rms(a, b) == 0.0


def test_image_check_writes_a_diff_and_names_the_figure(tmp_path, monkeypatch):
    base, figs = tmp_path / "base", tmp_path / "figs"
    base.mkdir()
    figs.mkdir()
    monkeypatch.setattr(images, "BASELINE_DIR", base)
    monkeypatch.setattr(images, "TOLERANCES", tmp_path / "images.yml")
    _plot(base / "lin-x.png")
    _plot(figs / "lin-x.png")
    _plot(figs / "lin-new.png")
    (ok, new) = sorted(images.check(figs), key=lambda r: r.fig_id, reverse=True)
    assert ok.ok and ok.rms == 0.0
    assert not new.ok and "no baseline" in new.describe()
    _plot(figs / "lin-x.png", shift=0.05)
    (moved,) = [r for r in images.check(figs) if r.fig_id == "lin-x"]
    assert not moved.ok and moved.diff is not None and moved.diff.exists()
    # a measured tolerance above the RMS lets it pass
    images.set_tolerances({"lin-x": moved.rms}, safety=3.0)
    (within,) = [r for r in images.check(figs) if r.fig_id == "lin-x"]
    assert within.ok and within.tol == pytest.approx(3 * moved.rms, rel=1e-3)
    # a second machine whose figure moves less keeps the first machine's spread
    images.set_tolerances({"lin-x": moved.rms / 10}, safety=3.0, widen_only=True)
    (kept,) = [r for r in images.check(figs) if r.fig_id == "lin-x"]
    assert kept.tol == pytest.approx(3 * moved.rms, rel=1e-3)
    images.set_tolerances({"lin-x": moved.rms / 10}, safety=3.0)
    (replaced,) = [r for r in images.check(figs) if r.fig_id == "lin-x"]
    assert replaced.tol < kept.tol


# ------------------------------------------------------------------------ configurations
def test_a_configuration_needs_the_cpu_flags_of_its_kernels(monkeypatch):
    monkeypatch.setattr(reproducibility.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(reproducibility, "_cpu_flags", lambda: {"sse4_2", "avx", "avx2", "fma"})
    assert reproducibility.CONFIGS["openblas-haswell"].available() is None
    assert "avx512f" in reproducibility.CONFIGS["openblas-skylakex"].available()
    monkeypatch.setattr(reproducibility.platform, "machine", lambda: "aarch64")
    assert "x86-64" in reproducibility.CONFIGS["numpy-baseline"].available()
    assert reproducibility.CONFIGS["threads-2"].available() is None


def test_the_probe_reports_what_a_configuration_selects():
    info = reproducibility.probe({"OPENBLAS_NUM_THREADS": "2"})
    assert info["openblas_threads"] == "2"
    assert info["torch_capability"]
    assert info["torch_products"] == fused.product()  # oneDNN's where torch has it
    assert (
        reproducibility.probe(reproducibility.CONFIGS["mkl-compatible"].env)["torch_products"]
        == "torch"
    )
    if reproducibility.platform.machine() == "x86_64":
        assert reproducibility.probe({"OPENBLAS_CORETYPE": "Nehalem"})["openblas_core"] == "Nehalem"


def _fake_run(name: str, value: str, claim: float, shift: float = 0.0) -> None:
    d = reproducibility.run_dir(name)
    (d / "executed").mkdir(parents=True)
    (d / "figures").mkdir()
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    cell.metadata["tags"] = [golden.TAG]
    line = f"PASS lin-x:r: ratio [lin, Fig. 5]: ours {value} (≤ 1)\nrank = 4\n"
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=line)]
    nb.cells = [cell]
    nbformat.write(nb, d / "executed" / "lin-x.ipynb")
    claims = [{"id": "lin-x:r", "measured": claim, "status": "pass"}]
    (d / "figures" / "lin-x.json").write_text(json.dumps({"claims": claims}))
    _plot(d / "figures" / "lin-x.png", shift=shift)
    meta = {"config": name, "env": {}, "probe": {}, "returncode": 0}
    (d / "config.json").write_text(json.dumps(meta))


def test_collect_measures_spreads_digits_and_checks_every_run(tmp_path, monkeypatch):
    monkeypatch.setattr(reproducibility, "RUNS", tmp_path / "repro")
    base = tmp_path / "base"
    base.mkdir()
    monkeypatch.setattr(images, "BASELINE_DIR", base)
    monkeypatch.setattr(images, "TOLERANCES", tmp_path / "images.yml")
    gdir = tmp_path / "golden"
    gdir.mkdir()
    (gdir / "lin-x.txt").write_text(
        golden.render(
            "lin-x", ["PASS lin-x:r: ratio [lin, Fig. 5]: ours ⟦0.0175 ± 0.0001⟧ (≤ 1)\nrank = 4\n"]
        )
    )
    _fake_run("native", "0.0175", 0.017512345678)
    _fake_run("threads-2", "0.0174", 0.017412345678, shift=0.01)
    _plot(base / "lin-x.png")
    col = reproducibility.collect(["native", "threads-2"], gdir)
    (num,) = [r for k, r in col.printed.items() if k == "lin-x/1/1/1"]
    assert num["spread"] == pytest.approx(1e-4) and num["tol"] == pytest.approx(1e-4)
    assert col.printed["lin-x/1/2/0"]["spread"] == 0.0  # the rank
    assert col.claims["lin-x:r"]["digits"] == pytest.approx(-np.log10(1e-4 / 0.017512345678))
    assert col.images["lin-x"]["spread"] > 0
    assert col.checks["native"]["golden_ok"] and col.checks["native"]["images_ok"]
    assert col.checks["threads-2"]["golden_ok"]  # one unit in the last digit: within
    assert not col.checks["threads-2"]["images_ok"]  # the curve moved beyond the floor
    assert any("suggested 0.0003" in s for s in reproducibility.suggestions(col))
    report = reproducibility.write_report(col, tmp_path / "report.json")
    data = json.loads(report.read_text())
    # the book page renders every part from the report
    import ntpmachines

    for part in ("configs", "claims", "least", "printed", "images"):
        assert ntpmachines.page_text(data, part)
    assert "`native`" in ntpmachines.page_text(data, "configs")
    assert "0.0174 – 0.0175" in ntpmachines.page_text(data, "printed")


def test_a_joined_configuration_sets_each_parts_environment_and_needs_what_they_need():
    c = reproducibility.CONFIGS
    joined = c["haswell-threads-2"]
    assert joined.env == {**c["openblas-haswell"].env, **c["threads-2"].env}
    assert set(joined.requires) == set(c["openblas-haswell"].requires)
    assert c["no-compiled-mkl"].env == {**c["numpy-kernels"].env, **c["mkl-compatible"].env}
    with pytest.raises(ValueError, match="OPENBLAS_CORETYPE differently"):
        reproducibility._joined("two-cores", "?", "openblas-haswell", "openblas-sandybridge")
