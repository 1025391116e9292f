r"""Plotting helpers of the linear-paper notebooks (2-D geometry, training panels).

:func:`draw_geometry` draws the picture of [lin, Figs. 1-2]: context embeddings
:math:`\bar h_j` and the rows :math:`w_v` of a decoder (W^mm of Def. 3 or W* of Def. 1)
in d = 2, where :math:`(e_z - e_v)^\top W\bar h_j = (w_z - w_v)^\top\bar h_j` makes the
margins of (6b) visible as projections; :func:`draw_training` the panels of Figs. 4-5
(CE - H, norm growth of Lemma 2, alignment and convergence on F of Theorem 2);
:func:`draw_next_token_dist` one column :math:`\hat p_j` of Fig. 3 on a log axis, so that
every in-support word (:math:`\hat p_{j,z} > 0`) is visible however small its probability.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes

from ntpcore.figure.plotting import COLORS

__all__ = [
    "CONTEXT_NAMES",
    "COS_CORR_LABEL",
    "COS_LABEL",
    "draw_geometry",
    "draw_next_token_dist",
    "draw_prob_heatmap",
    "draw_training",
    "support_label",
]

CONTEXT_NAMES = ("A", "B", "C")
#: Labels of the two cosines of Theorem 2 (the panels and their checks name them alike).
COS_LABEL = r"$\cos(W_k, W^{\mathrm{mm}})$"
COS_CORR_LABEL = r"$\cos(W_k - W^\star, W^{\mathrm{mm}})$"
#: Word colours for the toy (5 words), colour-blind safe.
WORD_COLORS = [COLORS[0], COLORS[1], COLORS[2], COLORS[3], COLORS[4]]


def support_label(S_col: np.ndarray) -> str:
    """1-based in-support word ids of one context, e.g. '234' (the paper's labels)."""
    return "".join(str(v + 1) for v in np.flatnonzero(S_col))


def _place_labels(anchors: np.ndarray, obstacles: np.ndarray, span: float) -> np.ndarray:
    """Greedy label positions: each label near its anchor, clear of points and earlier labels.

    A label goes at distance ``0.1 * span`` from its anchor, radially outward (away from the
    origin) when that spot is free, else in the free direction nearest to it (36 candidates),
    else at 1.7 times that distance, else at the least crowded candidate;
    "free" means at least ``0.09 * span`` from every obstacle point and placed label in a
    metric that shrinks horizontal distances to 35% (labels are wider than tall).
    """
    r, clear = 0.1 * span, 0.09 * span
    scale = np.array([0.35, 1.0])
    turns = np.radians([0] + [sign * t for t in range(10, 190, 10) for sign in (1, -1)])
    placed: list[np.ndarray] = []
    for a in anchors:
        base = np.arctan2(a[1], a[0]) if np.linalg.norm(a) > 1e-9 else np.pi / 2
        others = np.vstack([obstacles, *placed])
        best, best_gap = a, -np.inf
        for rad, ang in [(rad, ang) for rad in (r, 1.7 * r) for ang in base + turns]:
            q = a + rad * np.array([np.cos(ang), np.sin(ang)])
            gap = float(np.min(np.linalg.norm((others - q) * scale, axis=1)))
            if gap >= clear:
                best = q
                break
            if gap > best_gap:
                best, best_gap = q, gap
        placed.append(best)
    return np.array(placed)


def draw_geometry(
    ax: Axes,
    H: np.ndarray,
    W: np.ndarray,
    S: np.ndarray,
    *,
    normals: bool = True,
    names: Sequence[str] = CONTEXT_NAMES,
    title: str | None = None,
) -> None:
    """Context embeddings (black dots labelled by ``names``, annotated 'A: 234' = name and
    support) and the rows of W (stars labelled ``$w_v$``).

    Rows that coincide (to 1e-6) share one label, e.g. ``w1 = w5``.  Labels are placed next
    to their points, clear of the other points and labels; the axes are equal-scaled and fit
    the points and labels (not a square around them), as in [lin, Figs. 1-2].
    """
    V = W.shape[0]
    pts = np.vstack([W, H.T, np.zeros((1, 2))])
    span = float(np.ptp(pts, axis=0).max())
    labels: list[tuple[np.ndarray, str, str, dict]] = []
    labelled: list[int] = []
    for v in range(V):
        c = WORD_COLORS[v % len(WORD_COLORS)]
        w = W[v]
        ax.annotate("", xy=w, xytext=(0, 0), arrowprops={"arrowstyle": "-", "color": c, "lw": 1.2})
        ax.plot(*w, marker="*", ms=9, color=c, zorder=3, label=rf"$w_{v + 1}$")
        if normals and np.linalg.norm(w) > 0:
            n = np.array([-w[1], w[0]]) / np.linalg.norm(w)
            ax.plot(
                [-3 * span * n[0], 3 * span * n[0]],
                [-3 * span * n[1], 3 * span * n[1]],
                color=c,
                lw=0.7,
                ls="--",
                alpha=0.7,
            )
        if any(np.allclose(W[u], w, atol=1e-6) for u in labelled):
            continue
        same = [u for u in range(V) if np.allclose(W[u], w, atol=1e-6)]
        labelled.append(v)
        text = " = ".join(rf"$w_{u + 1}$" for u in same)
        labels.append((w, text, c, {"fontsize": 8}))
    for j in range(H.shape[1]):
        h = H[:, j]
        ax.plot(*h, "o", color="black", ms=6, zorder=4, label=names[j])
        text = f"{names[j]}: {support_label(S[:, j])}"
        labels.append((h, text, "black", {"fontsize": 8, "fontweight": "bold"}))
    along = np.linspace(0.15, 1.0, 7)[:, None, None] * W[None]  # points on the row segments
    at = _place_labels(np.array([a for a, *_ in labels]), np.vstack([pts, *along]), span)
    for (a, text, c, kw), q in zip(labels, at, strict=True):
        ax.annotate(
            text,
            a,
            xytext=q,
            textcoords="data",
            color=c,
            ha="center",
            va="center",
            arrowprops={"arrowstyle": "-", "color": c, "lw": 0.5, "alpha": 0.6, "shrinkB": 4},
            zorder=5,
            **kw,
        )
    box = np.vstack([pts, at])
    pad = 0.12 * span
    ax.axhline(0, color="grey", lw=0.4)
    ax.axvline(0, color="grey", lw=0.4)
    ax.set_xlim(box[:, 0].min() - pad, box[:, 0].max() + pad)
    ax.set_ylim(box[:, 1].min() - pad, box[:, 1].max() + pad)
    ax.set_aspect("equal", adjustable="box")
    ax.set(xlabel=r"$x_1$", ylabel=r"$x_2$")  # the plane of the 2-D embeddings
    if title:
        ax.set_title(title)


def draw_prob_heatmap(ax: Axes, P: np.ndarray, names: Sequence[str] = CONTEXT_NAMES):
    """P as contexts x words; off-support entries black.  Returns the image (colorbar)."""
    Pm = np.ma.masked_where(P.T <= 0, P.T)
    cmap = plt.get_cmap("viridis").with_extremes(bad="black")
    im = ax.imshow(Pm, cmap=cmap, vmin=0, vmax=1, aspect="auto")
    m, V = P.shape[1], P.shape[0]
    ax.set_xticks(range(V), [str(v + 1) for v in range(V)])
    ax.set_yticks(range(m), list(names)[:m])
    ax.set_xlabel("Words")
    ax.set_ylabel("Contexts")
    ax.grid(False)
    for j in range(m):
        for v in range(V):
            if P[v, j] > 0:
                ax.text(
                    v,
                    j,
                    f"{P[v, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if P[v, j] < 0.6 else "black",
                )
    return im


def draw_next_token_dist(
    ax: Axes, p: np.ndarray, floor: float, *, color: str = COLORS[0], off_color: str = "#999999"
) -> None:
    """One next-token distribution over all V words on a log axis from ``floor`` to 1.

    In-support words (p_z > 0, the support S_j of [lin, Sec. 2]) get a bar from ``floor``
    up to p_z, so even a p_z a decade above ``floor`` is a visible bar; off-support words
    (p_z = 0, which no log axis can show) get a grey cross on the bottom edge and a grey
    tick label.  ``floor`` must lie below the smallest positive entry drawn.
    """
    p = np.asarray(p, dtype=float)
    z = np.arange(p.size)
    on = p > 0
    if np.any(p[on] <= floor):
        raise ValueError(f"floor {floor} is not below the smallest in-support p {p[on].min()}")
    ax.bar(z[on], p[on] - floor, bottom=floor, color=color, width=0.7, label="in support")
    ax.plot(
        z[~on],
        np.zeros(int((~on).sum())),
        "x",
        color=off_color,
        ms=5,
        mew=1.2,
        transform=ax.get_xaxis_transform(),
        clip_on=False,
        zorder=3,
        label="off support",
    )
    ax.set_yscale("log")
    ax.set_ylim(floor, 1.0)
    ax.set_xlim(-0.6, p.size - 0.4)
    ax.set_xticks(z, [str(v + 1) for v in z])
    for tick, inside in zip(ax.get_xticklabels(), on, strict=True):
        if not inside:
            tick.set_color(off_color)
    ax.grid(False, axis="x")


def _from_step_one(res: dict) -> dict:
    """The recorded arrays without k = 0 (log-scaled iteration axes)."""
    keep = np.asarray(res["steps"]) >= 1
    return {
        k: (np.asarray(v)[keep] if isinstance(v, np.ndarray) and v.shape[:1] == keep.shape else v)
        for k, v in res.items()
    }


def draw_training(
    axes: np.ndarray,
    res: dict,
    H_ent: float,
    *,
    color: str = COLORS[0],
    name: str = "GD",
    titles: bool = True,
    ref: dict | None = None,
    ref_label: str = "GD",
    legend: bool = True,
    spread: dict | None = None,
) -> None:
    """The four panels of Figs. 1 (right), 4 and 5 on a 2 x 2 array of axes.

    (a) CE(W_k) with the entropy bound H, (b) ||W_k||, (c) cos(W_k, W^mm) and the corrected
    cos(W_k - W*, W^mm), (d) ||P_F(W_k) - W*|| / ||W*||, from k = 1 on (log-scaled
    iterations).  Every line is labelled: the run's curves by ``name`` (the cosines by what
    they measure), the entropy by H.  ``ref`` overlays a reference run (labelled
    ``ref_label``) in every panel, its corrected cosine in (c).  ``spread`` (the output of a
    seed spread such as :func:`ntpcore.lin.experiments.run_gd_seeds`) shades the range over
    the draws behind the shown run in (b), (c) (the raw cosine) and (d).
    """
    a, b, c, d = axes.flat
    if spread is not None:
        keep = np.asarray(spread["steps"]) >= 1
        n_draws = len(spread["seeds"])
        for ax, key in ((b, "norm"), (c, "cos"), (d, "rel_dist_F")):
            curves = spread[f"{key}_curves"][:, keep]
            ax.fill_between(
                spread["steps"][keep],
                curves.min(axis=0),
                curves.max(axis=0),
                color=color,
                alpha=0.18,
                lw=0,
                label=f"range over {n_draws} draws",
            )
    if ref is not None:
        r = _from_step_one(ref)
        kw = {"color": "#999999", "lw": 1.0, "ls": ":", "label": ref_label}
        a.plot(r["steps"], r["loss"], **kw)
        b.plot(r["steps"], r["norm"], **kw)
        c.plot(r["steps"], r["cos_corr"], **kw)
        d.plot(r["steps"], r["rel_dist_F"], **kw)
    res = _from_step_one(res)
    k = res["steps"]
    a.plot(k, res["loss"], color=color, label=name)
    a.axhline(H_ent, color="black", ls="--", lw=0.8, label=r"entropy $\mathcal{H}$")
    a.set(xscale="log", xlabel=r"iteration $k$", ylabel=r"CE$(W_k)$")
    b.plot(k, res["norm"], color=color, label=name)
    b.set(xscale="log", xlabel=r"iteration $k$", ylabel=r"$\|W_k\|_F$")
    c.plot(k, res["cos"], color=color, label=COS_LABEL)
    c.plot(k, res["cos_corr"], color=color, ls="--", label=COS_CORR_LABEL)
    low = min(-0.05, float(np.min(res["cos"])), float(np.min(res["cos_corr"])))
    c.set(
        xscale="log",
        xlabel=r"iteration $k$",
        ylabel=r"correlation with $W^{\mathrm{mm}}$",
        ylim=(low - (0.65 if legend else 0.0), 1.05),  # room for the legend below the data
        yticks=[0.0, 0.5, 1.0],
    )
    d.plot(k, res["rel_dist_F"], color=color, label=name)
    d.set(
        xscale="log",
        yscale="log",
        xlabel=r"iteration $k$",
        ylabel=r"$\|P_{\mathcal{F}}W_k - W^\star\| / \|W^\star\|$",
    )
    if legend:
        a.legend(loc="upper right")
        c.legend(loc="lower right")
    if titles:
        a.set_title("(a) loss vs entropy bound")
        b.set_title("(b) norm growth")
        c.set_title(r"(c) direction on $\mathcal{F}^\perp$")
        d.set_title(r"(d) finite part on $\mathcal{F}$")
