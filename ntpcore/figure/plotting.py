"""Shared plotting helpers: one style, paper-sized figures, log-spaced steps."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

STYLE = Path(__file__).with_name("ntp.mplstyle")

#: Okabe-Ito colour-blind-safe palette (same order as the style's colour cycle).
COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]

#: Figure widths in inches: a paper column and a full text width.
WIDTHS = {"column": 3.4, "full": 7.0}


def use_style() -> None:
    """Activate the project's matplotlib style (call once per notebook)."""
    plt.style.use(STYLE)


def new_figure(
    nrows: int = 1,
    ncols: int = 1,
    width: Literal["column", "full"] | float = "full",
    aspect: float = 0.6,
    **subplots_kw,
) -> tuple[Figure, np.ndarray | plt.Axes]:
    """Create a figure of paper width; ``aspect`` is height / width of the whole figure."""
    w = WIDTHS[width] if isinstance(width, str) else float(width)
    subplots_kw.setdefault("layout", "constrained")
    fig, axes = plt.subplots(nrows, ncols, figsize=(w, w * aspect), **subplots_kw)
    return fig, axes


def whole_decades(ax: plt.Axes) -> tuple[float, float]:
    """Set a log y-axis's limits to the powers of ten around its curves' positive values.

    Matplotlib's own limits follow the data's extremes, so a curve that ends a little lower
    (another CPU's rounding grown by training) rescales the whole panel and moves every other
    curve in it; whole decades keep the panel still.  Returns the limits.
    """
    ys = [np.asarray(ln.get_ydata(), dtype=float) for ln in ax.get_lines()]
    ys = [y[np.isfinite(y) & (y > 0)] for y in ys]
    vals = np.concatenate(ys) if ys else np.empty(0)
    if vals.size == 0:
        raise ValueError("whole_decades: the axes hold no positive finite values")
    lo = 10.0 ** np.floor(np.log10(vals.min()))
    hi = 10.0 ** np.ceil(np.log10(vals.max()))
    if hi <= lo:  # every value is one power of ten
        hi = lo * 10.0
    ax.set_ylim(lo, hi)
    return lo, hi


def bare_maps(axes: np.ndarray, row_labels: list[str]) -> None:
    """Matrix panels without grid or ticks (entries are indices, not values), each row of
    ``axes`` labelled on its left by ``row_labels``."""
    for ax in np.ravel(axes):
        ax.grid(False)
        ax.set_xticks([])
        ax.set_yticks([])
    for row, label in zip(np.atleast_2d(axes), row_labels, strict=True):
        row[0].set_ylabel(label)


def stamp_quick(fig: Figure, strip: float = 0.22) -> None:
    """Write a visible 'QUICK PROFILE' stamp on a figure made with the CI profile.

    The stamp goes into a strip of ``strip`` inches added above the figure, so it never
    covers a title, a label or data: the figure grows by the strip and its content keeps its
    size (a constrained layout is confined below the strip; axes placed by hand are moved
    down and keep their height in inches; a suptitle gets an empty first line for the stamp).
    """
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    w, h = fig.get_size_inches()
    frac = h / (h + strip)
    engine = fig.get_layout_engine()
    fig.set_size_inches(w, h + strip)
    if isinstance(engine, ConstrainedLayoutEngine):
        if fig.get_suptitle():  # the layout puts it at the very top whatever the rect
            fig.suptitle("\n" + fig.get_suptitle())  # its empty first line holds the stamp
        else:
            x0, y0, rw, rh = engine.get().get("rect", (0, 0, 1, 1))
            engine.set(rect=(x0, y0 * frac, rw, rh * frac))
    else:
        for ax in fig.axes:
            p = ax.get_position()
            ax.set_position([p.x0, p.y0 * frac, p.width, p.height * frac])
        for t in fig.texts:
            x, y = t.get_position()
            t.set_position((x, y * frac))
    fig.text(
        0.995,
        1.0 - 0.5 * strip / (h + strip),
        "QUICK PROFILE - reduced settings, not the paper figure",
        ha="right",
        va="center",
        fontsize=7,
        color="#B00000",
        alpha=0.85,
        bbox={
            "facecolor": "white",
            "edgecolor": "#B00000",
            "boxstyle": "round,pad=0.2",
            "alpha": 0.85,
        },
        zorder=100,
    )
