"""The data behind a figure: what each panel plots, saved beside the PNG and checked.

:func:`extract` reads every panel of a matplotlib figure (title, axis labels and scales) and
every series it draws: lines (label, x, y), scatter points (label, offsets) and images (the
array); :func:`ntpcore.figure.provenance.savefig` writes it as ``<fig_id>.data.json``
beside the PNG, so a reader can re-plot or compare a figure without re-running it.

:func:`check_series` compares labelled lines with the computed results they claim to show:
a notebook passes ``series={(panel, label): (x, y)}`` to ``savefig``, and a panel whose line
of that label plots other numbers (two labels swapped, a series from another run, a series
against the wrong axis) raises :class:`FigureDataError`, which fails the run.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from ntpcore.errors import NTPError

__all__ = ["FigureDataError", "check_series", "extract"]

#: arrays larger than this are summarised (shape, min, max) instead of written out
MAX_VALUES = 200_000


class FigureDataError(NTPError):
    """A figure's series does not show the result its label names."""


def _values(a) -> list | dict:
    arr = np.ma.filled(np.ma.asarray(a, dtype=float), np.nan)
    if arr.size > MAX_VALUES:
        return {
            "shape": list(arr.shape),
            "min": float(np.nanmin(arr)),
            "max": float(np.nanmax(arr)),
        }
    return (
        [None if not np.isfinite(v) else float(v) for v in arr.ravel()]
        if arr.ndim <= 1
        else [
            [None if not np.isfinite(v) else float(v) for v in row]
            for row in arr.reshape(arr.shape[0], -1)
        ]
    )


def _label(artist) -> str | None:
    lab = artist.get_label()
    return None if not lab or lab.startswith("_") else lab


def extract(fig: Figure) -> dict:
    """Every panel of ``fig`` and the series it draws (JSON-ready)."""
    panels = []
    for i, ax in enumerate(fig.axes):
        series = []
        for line in ax.get_lines():
            x, y = line.get_data()
            if np.size(x) == 0:
                continue
            series.append({"kind": "line", "label": _label(line), "x": _values(x), "y": _values(y)})
        for coll in ax.collections:
            if isinstance(coll, PathCollection) and len(coll.get_offsets()):
                off = np.asarray(coll.get_offsets())
                series.append(
                    {
                        "kind": "points",
                        "label": _label(coll),
                        "x": _values(off[:, 0]),
                        "y": _values(off[:, 1]),
                    }
                )
        for im in ax.get_images():
            if isinstance(im, AxesImage):
                series.append(
                    {"kind": "image", "label": _label(im), "values": _values(im.get_array())}
                )
        panels.append(
            {
                "panel": i,
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                "xscale": ax.get_xscale(),
                "yscale": ax.get_yscale(),
                "series": series,
            }
        )
    return {"panels": panels}


def check_series(fig: Figure, expected: Mapping[tuple[int, str], tuple]) -> int:
    """Check that panel ``p``'s line labelled ``label`` plots ``(x, y)``; returns how many.

    The line may show a part of the series (e.g. from step one on a log axis): every point it
    plots must be a point of ``(x, y)``, and it must plot at least half of them.
    """
    for (p, label), (x, y) in expected.items():
        if not 0 <= p < len(fig.axes):
            raise FigureDataError(f"panel {p}: the figure has {len(fig.axes)} panels")
        lines = [ln for ln in fig.axes[p].get_lines() if ln.get_label() == label]
        if len(lines) != 1:
            raise FigureDataError(
                f"panel {p} ({fig.axes[p].get_title()!r}): {len(lines)} lines labelled {label!r}"
            )
        lx, ly = (np.asarray(v, dtype=float) for v in lines[0].get_data())
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        where = {float(xv): k for k, xv in enumerate(x)}
        idx = [where.get(float(v)) for v in lx]
        ok = (
            None not in idx
            and len(lx) >= len(x) / 2
            and np.allclose(ly, y[np.asarray(idx, dtype=int)], rtol=1e-9, atol=0.0, equal_nan=True)
        )
        if not ok:
            raise FigureDataError(
                f"panel {p} ({fig.axes[p].get_title()!r}): the line labelled {label!r} does not "
                f"plot the series it names (a swapped label, another run, or another axis?)"
            )
    return len(expected)
