"""Panels: a figure is compared with the results it claims to show, panel by panel."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from ntpcore.figure.sourcedata import (
    FigureDataError,
    Panels,
    bar_centres,
    bar_heights,
    check,
    extract,
)

K = np.arange(1.0, 11.0)
LOSS = 1.0 / K
LO, HI = LOSS * 0.9, LOSS * 1.1
M = np.array([[1.0, -2.0], [0.5, 0.0]])


def _figure(*, shift=False, yscale="log", clim=True, extra=False):
    fig, axes = plt.subplots(1, 3)
    x, y = (K[1:], LOSS[:-1]) if shift else (K, LOSS)
    axes[0].plot(x, y, label="GD")
    axes[0].fill_between(K, LO, HI, label="25-75%")
    axes[0].axhline(0.5, ls="--")  # unlabelled reference line: not a series
    axes[0].set(xscale="log", yscale=yscale)
    axes[1].bar([0, 1, 2], [3.0, 4.0, 5.0], label="p")
    if extra:
        axes[1].plot([0, 1], [0, 1], label="stray")
    im = axes[2].imshow(M, cmap="RdBu_r", **({"vmin": -2, "vmax": 2} if clim else {}))
    fig.colorbar(im, ax=axes[2])
    return fig


def _want():
    want = Panels()
    want.axes(0, xscale="log", yscale="log").line(0, "GD", K, LOSS).band(0, "25-75%", K, LO, HI)
    want.axes(1).bars(1, "p", [0, 1, 2], [3, 4, 5])
    want.axes(2).image(2, M, clim=(-2, 2), cmap="RdBu_r")
    return want


def test_a_figure_that_shows_its_results_passes_and_counts_its_series():
    fig = _figure()
    assert check(fig, _want()) == 4
    data = extract(fig)
    assert len(data["panels"]) == 3  # the colour bar is not a panel
    kinds = {s["kind"] for p in data["panels"] for s in p["series"]}
    assert kinds == {"line", "band", "bars", "image"}
    plt.close("all")


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        ({"shift": True}, "'GD': its x is not the declared one"),
        ({"yscale": "linear"}, "y axis is linear, declared log"),
        ({"clim": False}, "its clim is not the declared one"),
        ({"extra": True}, "draws line 'stray', which is not declared"),
    ],
    ids=["line one sample late", "wrong axis scale", "colour limits dropped", "undeclared"],
)
def test_a_plotting_mistake_fails(mistake, message):
    with pytest.raises(FigureDataError, match=message):
        check(_figure(**mistake), _want())
    plt.close("all")


def test_every_panel_and_every_declared_series_must_be_there():
    want = Panels()
    want.axes(0, xscale="log", yscale="log").line(0, "GD", K, LOSS)
    with pytest.raises(FigureDataError) as err:
        check(_figure(), want)
    assert "the figure has 3 panels" in str(err.value)
    assert "draws band '25-75%'" in str(err.value)
    want = _want().line(1, "Adam", K, LOSS)
    with pytest.raises(FigureDataError, match="0 line\\(s\\) 'Adam' drawn"):
        check(_figure(), want)
    plt.close("all")


def test_offset_and_stacked_bars_are_declared_as_matplotlib_records_them():
    """Bars off the integers (``z - 0.18``, width 0.36) and stacked bars: matplotlib rounds
    their centres and heights; :func:`bar_centres` and :func:`bar_heights` give the same
    values, where the plain ones differ in the last bits."""
    x, w = np.arange(1, 5) - 0.18, 0.36
    lower, upper = np.array([0.1, 0.2, 0.3, 0.4]), np.array([1 / 3, 2 / 3, 0.7, 0.11])
    fig, ax = plt.subplots()
    ax.bar(x, lower, w, label="lower")
    ax.bar(x, upper, w, bottom=lower, label="upper")
    want = Panels()
    want.axes(0).bars(0, "lower", bar_centres(x, w), bar_heights(lower))
    want.bars(0, "upper", bar_centres(x, w), bar_heights(upper, lower))
    assert check(fig, want) == 2
    naive = Panels()
    naive.axes(0).bars(0, "lower", x, lower).bars(0, "upper", x, upper)
    with pytest.raises(FigureDataError, match="x is not the declared one"):
        check(fig, naive)
    plt.close(fig)
