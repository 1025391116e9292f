"""The shared plotting helpers (ntpcore.figure.plotting)."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib import pyplot as plt  # noqa: E402

from ntpcore.figure import plotting  # noqa: E402


def test_whole_decades_bracket_the_curves_and_ignore_a_small_move():
    fig, ax = plt.subplots()
    x = np.arange(1, 11)
    ax.loglog(x, np.geomspace(2.7, 0.0133, 10))
    ax.loglog(x, np.geomspace(3.0, 0.5, 10))
    assert plotting.whole_decades(ax) == pytest.approx((0.01, 10.0))
    assert ax.get_ylim() == pytest.approx((0.01, 10.0))
    # the same panel where one curve ends 12 % lower (another CPU): the same limits
    ax.get_lines()[0].set_ydata(np.geomspace(2.7, 0.0117, 10))
    assert plotting.whole_decades(ax) == pytest.approx((0.01, 10.0))
    plt.close(fig)


def test_whole_decades_skip_non_positive_values_and_widen_a_single_decade():
    fig, ax = plt.subplots()
    ax.semilogy([1, 2, 3], [0.0, np.nan, 1.0])
    assert plotting.whole_decades(ax) == pytest.approx((1.0, 10.0))
    ax.cla()
    with pytest.raises(ValueError, match="no positive"):
        plotting.whole_decades(ax)
    plt.close(fig)


def test_bare_maps_remove_grid_and_ticks_and_label_each_row():
    fig, axes = plt.subplots(2, 3)
    plotting.bare_maps(axes, ["top", "bottom"])
    for ax in axes.flat:
        assert list(ax.get_xticks()) == [] and list(ax.get_yticks()) == []
        assert not any(line.get_visible() for line in ax.get_xgridlines())
    assert [row[0].get_ylabel() for row in axes] == ["top", "bottom"]
    assert axes[0, 1].get_ylabel() == ""
    with pytest.raises(ValueError):
        plotting.bare_maps(axes, ["only one"])
    plt.close(fig)
