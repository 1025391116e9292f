r"""Baseline images: the quick-profile figures compared pixel by pixel, within a tolerance.

As in matplotlib's own image tests (and pytest-mpl), a figure is compared with a baseline
PNG by the root-mean-square difference of their pixels (:func:`matplotlib.testing.compare.
calculate_rms`, 0-255 per channel).  The figures are drawn with the project's fixed style
(``ntp.mplstyle``) and matplotlib's bundled DejaVu fonts, so pixels depend only on the data.

``tests/golden/images/<fig_id>.png`` holds the baselines (made by the quick profile on the
machine that last updated them) and ``tests/golden/images.yml`` each figure's tolerance: the
largest RMS difference measured between the floating-point configurations of ``make
reproducibility`` times :data:`tools.qa.printed.SAFETY`, and at least :data:`FLOOR`.
A figure beyond its tolerance fails with a diff image (``<figure dir>/image-diffs/``);
``make golden`` updates the baselines and says which figures moved and by how much.
"""

from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ntpcore.core import paths
from ntpcore.core.io import file_version, write_text_atomic

__all__ = ["BASELINE_DIR", "FLOOR", "ImageResult", "baseline", "check", "rms", "tolerance"]

BASELINE_DIR = paths.ROOT / "tests" / "golden" / "images"
TOLERANCES = paths.ROOT / "tests" / "golden" / "images.yml"
#: The smallest tolerance (RMS, 0-255): anti-aliasing of text and lines can differ by a few
#: grey levels between builds of FreeType and Agg; a curve or label that moves by one pixel
#: gives an RMS of several units on these figures (tests/qa: test_reproducibility).
FLOOR = 0.5


def baseline(fig_id: str) -> Path:
    return BASELINE_DIR / f"{fig_id}.png"


# The last images decoded are kept: the reproducibility report compares each figure of every
# configuration with the first configuration's and with the baseline, which decoded the same
# PNGs up to six times each (26 of its 30 s).
@functools.lru_cache(maxsize=16)
def _decoded(key: tuple[str, str]) -> np.ndarray:
    from PIL import Image

    with Image.open(key[0]) as im:
        return np.asarray(im.convert("RGB"), dtype=np.int16)


#: RMS differences already computed in this process, by the two files' keys
_RMS: dict[tuple, float] = {}


def rms(expected: Path, actual: Path) -> float:
    """RMS pixel difference of two PNGs (``inf`` when their sizes differ)."""
    from matplotlib.testing.compare import calculate_rms

    key = (file_version(expected), file_version(actual))
    if key not in _RMS:
        a, b = _decoded(key[0]), _decoded(key[1])
        _RMS[key] = float("inf") if a.shape != b.shape else float(calculate_rms(a, b))
    return _RMS[key]


@functools.lru_cache(maxsize=4)
def _parsed_tolerances(key: tuple[str, str]) -> dict[str, dict]:
    data = yaml.safe_load(Path(key[0]).read_text()) or {}
    return data.get("figures", {})


def _tolerances() -> dict[str, dict]:
    if not TOLERANCES.exists():
        return {}
    return _parsed_tolerances(file_version(TOLERANCES))


def tolerance(fig_id: str) -> float:
    """The figure's RMS tolerance (``FLOOR`` when none was measured)."""
    entry = _tolerances().get(fig_id) or {}
    return float(entry.get("tol", FLOOR))


@dataclass(frozen=True)
class ImageResult:
    fig_id: str
    rms: float | None  # None: missing image or baseline
    tol: float
    problem: str | None = None
    diff: Path | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None and self.rms is not None and self.rms <= self.tol

    def describe(self) -> str:
        if self.problem:
            return f"{self.fig_id}: {self.problem}"
        text = f"{self.fig_id}: RMS {self.rms:.3g} (tolerance {self.tol:.3g})"
        return text + (f", diff {_rel(self.diff)}" if self.diff else "")


def _rel(p: Path) -> str:
    return str(p.relative_to(paths.ROOT)) if p.is_relative_to(paths.ROOT) else str(p)


def check(figures: Path, *, write_diffs: bool = True) -> list[ImageResult]:
    """Compare every figure in ``figures`` with its baseline (and every baseline with a figure)."""
    from matplotlib.testing.compare import save_diff_image

    out = []
    have = {p.stem for p in figures.glob("*.png")}
    base = {p.stem for p in BASELINE_DIR.glob("*.png")}
    for fig in sorted(have | base):
        tol = tolerance(fig)
        if fig not in base:
            out.append(ImageResult(fig, None, tol, "no baseline image (a new figure?)"))
            continue
        if fig not in have:
            out.append(ImageResult(fig, None, tol, f"no figure in {_rel(figures)}"))
            continue
        value = rms(baseline(fig), figures / f"{fig}.png")
        if not np.isfinite(value):
            out.append(ImageResult(fig, value, tol, "its size differs from the baseline's"))
            continue
        diff = None
        if value > tol and write_diffs:
            diff = figures / "image-diffs" / f"{fig}-diff.png"
            diff.parent.mkdir(parents=True, exist_ok=True)
            save_diff_image(str(baseline(fig)), str(figures / f"{fig}.png"), str(diff))
        out.append(ImageResult(fig, value, tol, None, diff))
    return out


def update(figures: Path) -> tuple[list[ImageResult], list[str]]:
    """Copy the figures in ``figures`` over the baselines; returns what was compared and the
    figures that changed (for :func:`tools.qa.golden_update.update`'s log)."""
    results = check(figures, write_diffs=False)
    BASELINE_DIR.mkdir(parents=True, exist_ok=True)
    changed = []
    for r in results:
        src = figures / f"{r.fig_id}.png"
        if not src.exists():
            continue
        if r.rms is None or r.rms > 0 or r.problem:
            shutil.copyfile(src, baseline(r.fig_id))
            changed.append(r.fig_id)
    return results, changed


def set_tolerances(
    spreads: dict[str, float], safety: float, *, widen_only: bool = False
) -> list[str]:
    """Write ``images.yml`` from measured RMS spreads; returns the tolerances that changed.

    With ``widen_only`` a figure keeps the larger of its recorded spread (measured on earlier
    machines) and the new one.
    """
    old = _tolerances()
    figures = {}
    changed = []
    for fig in sorted(set(old) | set(spreads)):
        before_spread = (old.get(fig) or {}).get("spread", 0.0)
        spread = spreads.get(fig, before_spread)
        if widen_only:
            spread = max(spread, before_spread)
        tol = round(max(safety * spread, FLOOR), 3)
        figures[fig] = {"tol": tol, "spread": round(spread, 4)}
        before = (old.get(fig) or {}).get("tol")
        if before != tol:
            changed.append(f"{fig}: RMS tolerance {before} -> {tol} (spread {spread:.3g})")
    head = (
        "# RMS tolerance of each quick-profile figure against tests/golden/images/<id>.png\n"
        f"# tol = max({safety:g} x spread, {FLOOR}); spread: the largest RMS difference between\n"
        "# the configurations of `make reproducibility` (tools.qa.images).\n"
    )
    write_text_atomic(TOLERANCES, head + yaml.safe_dump({"figures": figures}, sort_keys=True))
    return changed
