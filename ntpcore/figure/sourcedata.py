"""The data behind a figure: what each panel plots, saved beside the PNG and checked.

:func:`extract` reads every panel of a matplotlib figure (title, axis labels, scales and
limits) and everything it draws: lines (label, x, y), bands (``fill_between``: x, lower,
upper), bars (x, height), scatter points (label, offsets) and images (the array, its colour
limits and colour map); :func:`ntpcore.figure.provenance.savefig` writes it as
``<fig_id>.data.json`` beside the PNG, so a reader can re-plot or compare a figure without
re-running it.

:class:`Panels` says what a figure must show, built from the computed results and not from
the drawing code: for every panel its axis scales, and for every labelled line, band, bar
series and point set, and for every image, the exact data it must draw (the same values,
the same length, in the same order) and, for an image, its colour limits (and colour map).
:func:`check` compares the figure with it before anything is written: a series that is not
the result its label names (two labels swapped, a series from another run, one sample late),
a log axis where the quantity is linear, an image whose colour limits were dropped (each
panel then scaled on its own), a panel or a series drawn but not declared, or declared but
not drawn -- each raises :class:`FigureDataError` naming the panel and the series, which
fails the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from ntpcore.errors import NTPError

__all__ = [
    "FigureDataError",
    "Panels",
    "bar_centres",
    "bar_heights",
    "check",
    "check_series",
    "data_axes",
    "extract",
]

#: arrays larger than this are summarised (shape, min, max) instead of written out
MAX_VALUES = 200_000


class FigureDataError(NTPError):
    """A figure does not show the results it says it shows."""


# ----------------------------------------------------------------------------- reading
def data_axes(fig: Figure) -> list:
    """The panels of ``fig`` that show data: every axes but colour bars."""
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def _label(artist) -> str | None:
    lab = artist.get_label()
    return None if not lab or lab.startswith("_") else lab


def _band(coll: PolyCollection) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(x, lower, upper) of a ``fill_between`` band, read from its polygon: matplotlib draws
    it from (x_0, upper_0) along the lower curve, then back along the upper one."""
    verts = [p.vertices for p in coll.get_paths() if len(p.vertices)]
    if len(verts) != 1:
        return None
    v = verts[0]
    n = (len(v) - 3) // 2
    if n < 1 or len(v) != 2 * n + 3:
        return None
    lower = v[1 : n + 1]
    upper = v[n + 2 : 2 * n + 2][::-1]
    if not np.array_equal(lower[:, 0], upper[:, 0]):
        return None
    return lower[:, 0], lower[:, 1], upper[:, 1]


def _bars(bc: BarContainer) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([r.get_x() + r.get_width() / 2 for r in bc.patches], dtype=float)
    h = np.array([r.get_height() for r in bc.patches], dtype=float)
    return x, h


def bar_centres(x, width: float = 0.8) -> np.ndarray:
    """The centres matplotlib records for bars ``ax.bar(x, ..., width)`` (centred): it
    converts the width against the first bar (``(x_0 + width) - x_0``), draws each bar from
    ``x - width/2`` and is read back as that plus ``width/2`` -- the exact values a
    :meth:`Panels.bars` declaration must give."""
    x = np.asarray(x, dtype=float)
    w = (x.flat[0] + width) - x.flat[0] if x.size else float(width)
    return (x - w / 2) + w / 2


def bar_heights(height, bottom=None) -> np.ndarray:
    """The heights matplotlib records for bars ``ax.bar(..., height, bottom=bottom)``: each is
    converted against the first bar's bottom (``(b_0 + h) - b_0``), which rounds the heights
    of stacked bars."""
    h = np.asarray(height, dtype=float)
    if bottom is None:
        return h
    b0 = float(np.asarray(bottom, dtype=float).flat[0])
    return (b0 + h) - b0


def _drawn(ax) -> dict[tuple[str, str | None], list[dict[str, np.ndarray]]]:
    """What a panel draws, by (kind, label): every line, band, bar series, point set and
    image (unlabelled lines, bands and points are left out: reference lines and shading)."""
    out: dict[tuple[str, str | None], list[dict[str, np.ndarray]]] = {}

    def add(kind: str, label: str | None, **arrays: Any) -> None:
        out.setdefault((kind, label), []).append(arrays)

    for line in ax.get_lines():
        x, y = line.get_data()
        if np.size(x) and _label(line):
            add("line", _label(line), x=np.asarray(x, float), y=np.asarray(y, float))
    for coll in ax.collections:
        if isinstance(coll, PathCollection) and len(coll.get_offsets()) and _label(coll):
            off = np.asarray(coll.get_offsets(), dtype=float)
            add("points", _label(coll), x=off[:, 0], y=off[:, 1])
        elif isinstance(coll, PolyCollection) and _label(coll):
            band = _band(coll)
            if band is not None:
                add("band", _label(coll), x=band[0], lower=band[1], upper=band[2])
    for bc in ax.containers:
        if isinstance(bc, BarContainer) and _label(bc):
            x, h = _bars(bc)
            add("bars", _label(bc), x=x, height=h)
    for im in ax.get_images():
        if isinstance(im, AxesImage):
            add(
                "image",
                _label(im),
                values=np.ma.filled(np.ma.asarray(im.get_array(), dtype=float), np.nan),
                clim=np.asarray(im.get_clim(), dtype=float),
                cmap=im.get_cmap().name,
            )
    return out


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


def extract(fig: Figure) -> dict:
    """Every panel of ``fig`` and what it draws (JSON-ready)."""
    panels = []
    for i, ax in enumerate(data_axes(fig)):
        series = []
        for line in ax.get_lines():
            x, y = line.get_data()
            if np.size(x) == 0:
                continue
            series.append({"kind": "line", "label": _label(line), "x": _values(x), "y": _values(y)})
        for (kind, label), items in _drawn(ax).items():
            if kind == "line":
                continue
            for arrays in items:
                entry: dict[str, Any] = {"kind": kind, "label": label}
                for key, value in arrays.items():
                    entry[key] = value if isinstance(value, str) else _values(value)
                series.append(entry)
        panels.append(
            {
                "panel": i,
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                "xscale": ax.get_xscale(),
                "yscale": ax.get_yscale(),
                "xlim": [float(v) for v in ax.get_xlim()],
                "ylim": [float(v) for v in ax.get_ylim()],
                "series": series,
            }
        )
    return {"panels": panels}


# ----------------------------------------------------------------------------- expecting
@dataclass
class _Panel:
    xscale: str = "linear"
    yscale: str = "linear"
    series: dict[tuple[str, str | None], dict[str, Any]] = field(default_factory=dict)


class Panels:
    """What each panel of a figure must show, declared from the computed results.

    Build it beside the plot (or in the paper's ``checks`` module), from the results the
    figure claims to show -- never from the arrays handed to the plotting calls, or the check
    would compare the drawing with itself::

        want = Panels()
        want.axes(0, xscale="log", yscale="log")
        want.line(0, "GD", x=res["steps"][1:], y=res["loss"][1:] - H)
        want.image(1, L_mm, clim=(-a, a), cmap="RdBu_r")
        provenance.savefig(fig, fig_id, cfg, profile=profile, panels=want)

    Every panel that shows data must be declared (:meth:`axes`), and in each every labelled
    line, band, bar series and point set, and every image.
    """

    def __init__(self) -> None:
        self._panels: dict[int, _Panel] = {}

    def axes(self, p: int, *, xscale: str = "linear", yscale: str = "linear") -> Panels:
        """Declare panel ``p`` (0-based, colour bars not counted) and its axis scales."""
        if p in self._panels:
            raise FigureDataError(f"panel {p} declared twice")
        self._panels[p] = _Panel(xscale, yscale)
        return self

    def _add(self, p: int, kind: str, label: str | None, **arrays: Any) -> Panels:
        if p not in self._panels:
            raise FigureDataError(f"panel {p}: declare its axes first (Panels.axes)")
        key = (kind, label)
        if key in self._panels[p].series:
            raise FigureDataError(f"panel {p}: {kind} {label!r} declared twice")
        self._panels[p].series[key] = {
            k: v if isinstance(v, str) or v is None else np.asarray(v, dtype=float)
            for k, v in arrays.items()
        }
        return self

    def line(self, p: int, label: str, x, y) -> Panels:
        """A labelled line drawing exactly ``(x, y)``."""
        return self._add(p, "line", label, x=x, y=y)

    def band(self, p: int, label: str, x, lower, upper) -> Panels:
        """A labelled ``fill_between`` band: ``lower`` and ``upper`` over ``x``."""
        return self._add(p, "band", label, x=x, lower=lower, upper=upper)

    def bars(self, p: int, label: str, x, height) -> Panels:
        """A labelled bar series: bars centred at ``x`` of heights ``height``."""
        return self._add(p, "bars", label, x=x, height=height)

    def points(self, p: int, label: str, x, y) -> Panels:
        """A labelled scatter of the points ``(x, y)``."""
        return self._add(p, "points", label, x=x, y=y)

    def image(
        self, p: int, values, *, clim: tuple[float, float], cmap: str | None = None, label=None
    ) -> Panels:
        """An image of ``values`` with colour limits ``clim`` (and colour map ``cmap``)."""
        return self._add(p, "image", label, values=values, clim=clim, cmap=cmap)

    @property
    def n_series(self) -> int:
        return sum(len(pn.series) for pn in self._panels.values())


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


def check(fig: Figure, want: Panels) -> int:
    """Compare ``fig`` with what ``want`` declares; returns the number of series checked and
    raises :class:`FigureDataError` listing every difference."""
    problems: list[str] = []
    axes = data_axes(fig)
    if set(want._panels) != set(range(len(axes))):
        problems.append(
            f"the figure has {len(axes)} panels; declared: {sorted(want._panels)} "
            f"(every panel showing data is declared, colour bars left out)"
        )
    for p, ax in enumerate(axes):
        spec = want._panels.get(p)
        if spec is None:
            continue
        name = f"panel {p} ({ax.get_title() or ax.get_ylabel()!r})"
        for axis, scale in (("x", spec.xscale), ("y", spec.yscale)):
            drawn = getattr(ax, f"get_{axis}scale")()
            if drawn != scale:
                problems.append(f"{name}: {axis} axis is {drawn}, declared {scale}")
        drawn = _drawn(ax)
        for key in sorted(set(drawn) - set(spec.series), key=str):
            problems.append(f"{name}: draws {key[0]} {key[1]!r}, which is not declared")
        for key, arrays in spec.series.items():
            kind, label = key
            found = drawn.get(key, [])
            if len(found) != 1:
                problems.append(f"{name}: {len(found)} {kind}(s) {label!r} drawn, 1 declared")
                continue
            got = found[0]
            for k, v in arrays.items():
                if v is None:
                    continue
                if isinstance(v, str):
                    if got[k] != v:
                        problems.append(f"{name}: {kind} {label!r} {k} {got[k]!r}, declared {v!r}")
                elif not _same(np.asarray(got[k], dtype=float), v):
                    problems.append(
                        f"{name}: {kind} {label!r}: its {k} is not the declared one "
                        f"({np.shape(got[k])} vs {v.shape}; a swapped label, another run, "
                        f"a shifted series, or dropped colour limits?)"
                    )
    if problems:
        raise FigureDataError("the figure does not show what it says:\n  " + "\n  ".join(problems))
    return want.n_series


def check_series(fig: Figure, expected: dict[tuple[int, str], tuple]) -> int:
    """Check that panel ``p``'s line labelled ``label`` plots ``(x, y)``; returns how many.
    (Superseded by :class:`Panels`, which checks every series exactly.)

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
