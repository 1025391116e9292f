r"""What every panel of the linear paper's figures must show, built from the results.

One builder per figure returns a :class:`~ntpcore.figure.sourcedata.Panels`: each panel's
axis scales and every labelled line, band, bar series and image with the exact data it
must draw, derived here from the computed results (never from the arrays the notebook hands
to the plotting calls), so that a curve one sample late, a log axis on a linear quantity,
two swapped labels, a series from another run or dropped colour limits fail the figure
(:func:`ntpcore.figure.provenance.savefig` compares them before anything is written).
"""

from __future__ import annotations

import numpy as np

from ntpcore.figure.sourcedata import Panels
from ntpcore.lin.plots import CONTEXT_NAMES, COS_CORR_LABEL, COS_LABEL

__all__ = [
    "gd_direction",
    "next_token_dists",
    "ngd_adam",
    "reg_path",
    "scale",
    "separability",
    "support_sweep",
    "toy_geometry",
    "toy_solutions",
]

COS_PERP_LABEL = r"$\cos(P_\perp W_k, W^{\mathrm{mm}})$"


def _late(res: dict) -> np.ndarray:
    """The recorded iterations from k = 1 on (the training panels' log axes)."""
    return np.asarray(res["steps"]) >= 1


def _training(
    want: Panels,
    p: tuple[int, int, int, int],
    res: dict,
    entropy: float,
    *,
    name: str = "GD",
    spread: dict | None = None,
    ref: tuple[str, dict] | None = None,
) -> None:
    """The four training panels (a)-(d) at panel indices ``p``."""
    a, b, c, d = p
    keep = _late(res)
    k = np.asarray(res["steps"])[keep]
    want.axes(a, xscale="log").line(a, name, k, np.asarray(res["loss"])[keep])
    want.line(a, r"entropy $\mathcal{H}$", [0.0, 1.0], [entropy, entropy])
    want.axes(b, xscale="log").line(b, name, k, np.asarray(res["norm"])[keep])
    want.axes(c, xscale="log").line(c, COS_LABEL, k, np.asarray(res["cos"])[keep])
    want.line(c, COS_CORR_LABEL, k, np.asarray(res["cos_corr"])[keep])
    want.axes(d, xscale="log", yscale="log").line(d, name, k, np.asarray(res["rel_dist_F"])[keep])
    if spread is not None:
        sk = np.asarray(spread["steps"]) >= 1
        label = f"range over {len(spread['seeds'])} draws"
        for q, key in ((b, "norm"), (c, "cos"), (d, "rel_dist_F")):
            curves = np.asarray(spread[f"{key}_curves"])[:, sk]
            want.band(q, label, np.asarray(spread["steps"])[sk], curves.min(0), curves.max(0))
    if ref is not None:
        label, r = ref
        rk = _late(r)
        steps = np.asarray(r["steps"])[rk]
        for q, key in ((a, "loss"), (b, "norm"), (c, "cos_corr"), (d, "rel_dist_F")):
            want.line(q, label, steps, np.asarray(r[key])[rk])


def _geometry(want: Panels, p: int, H: np.ndarray, W: np.ndarray) -> None:
    """A 2-D geometry panel: the rows of W (stars) and the context embeddings (dots)."""
    want.axes(p)
    for v, w in enumerate(np.asarray(W)):
        want.line(p, rf"$w_{v + 1}$", [w[0]], [w[1]])
    for j, h in enumerate(np.asarray(H).T):
        want.line(p, CONTEXT_NAMES[j], [h[0]], [h[1]])


def display_floor(P: np.ndarray, shown: np.ndarray) -> float:
    """Fig. 3's log-axis floor: a decade at or below every shown positive probability."""
    sub = np.asarray(P)[:, shown]
    return 10.0 ** min(-3, int(np.floor(np.log10(sub[sub > 0].min()))))


def next_token_dists(res: dict) -> Panels:
    """Fig. 3: per shown context, bars of height p - floor from the floor at the in-support
    words, a cross at every off-support word; log probability axis."""
    P, shown = np.asarray(res["P"]), np.asarray(res["shown"])
    floor = display_floor(P, shown)
    want = Panels()
    z = np.arange(P.shape[0], dtype=float)
    for p, j in enumerate(shown):
        col = P[:, j]
        on = col > 0
        want.axes(p, yscale="log")
        want.bars(p, "in support", z[on], col[on] - floor)
        want.line(p, "off support", z[~on], np.zeros(int((~on).sum())))
    return want


def toy_geometry(toy: dict, res: dict, spread: dict) -> Panels:
    """Fig. 1: the four training panels (fig.axes 0-3) and the geometry of W^mm (panel 4);
    in (c) the median and range of the final cos(W_T, W^mm) over the draws."""
    want = Panels()
    _training(want, (0, 1, 2, 3), res, toy["entropy"])
    ce = np.asarray(spread["cos_end"])
    T = float(np.asarray(res["steps"])[-1])
    want.line(2, "median over the draws", [T], [float(np.median(ce))])
    want.line(
        2,
        f"range over {len(spread['seeds'])} draws",
        [T, T],
        [float(ce.min()), float(ce.max())],
    )
    _geometry(want, 4, toy["H"], toy["W_mm"])
    return want


def toy_solutions(toy: dict) -> Panels:
    """Fig. 2: the probabilities (off-support entries blank; colour limits 0 and 1), the rows
    of W^mm and the rows of W*."""
    P = np.asarray(toy["P"])
    want = Panels()
    want.axes(0).image(0, np.where(P.T > 0, P.T, np.nan), clim=(0.0, 1.0), cmap="viridis")
    _geometry(want, 1, toy["H"], toy["W_mm"])
    _geometry(want, 2, toy["H"], toy["W_star"])
    return want


def gd_direction(res: dict, spread: dict) -> Panels:
    """Fig. 4: the four training panels with the draws' ranges and cos(P_perp W_k, W^mm)."""
    want = Panels()
    _training(want, (0, 1, 2, 3), res, res["entropy"], spread=spread)
    keep = _late(res)
    want.line(2, COS_PERP_LABEL, np.asarray(res["steps"])[keep], np.asarray(res["cos_perp"])[keep])
    return want


def ngd_adam(runs: dict, spreads: dict, gd_label: str) -> Panels:
    """Fig. 5: NGD (columns 1-2) and Adam (columns 3-4), four panels each, the GD run in
    every panel; fig.axes are row-major over the 2 x 4 grid."""
    want = Panels()
    for name, key, p in (("NGD", "ngd", (0, 1, 4, 5)), ("Adam", "adam", (2, 3, 6, 7))):
        _training(
            want,
            p,
            runs[key],
            runs["gd"]["entropy"],
            name=name,
            spread=spreads[key],
            ref=(gd_label, runs["gd"]),
        )
    return want


def reg_path(res: dict) -> Panels:
    """The path (markers at the radii) and GD against the norm: cosines, finite part, gap."""
    keep = _late({"steps": res["gd_steps"]})
    gn = np.asarray(res["gd_norm"])[keep]
    B = np.asarray(res["radii"])
    want = Panels()
    want.axes(0, xscale="log")
    want.line(0, r"GD $W_k$", gn, np.asarray(res["gd_cos"])[keep])
    want.line(0, r"path $\widehat W_B$", B, res["path_cos"])
    want.line(0, r"GD $W_k - W^\star$", gn, np.asarray(res["gd_cos_corr"])[keep])
    want.line(0, r"path $\widehat W_B - W^\star$", B, res["path_cos_corr"])
    for p, key in ((1, "rel_dist_F"), (2, "gap")):
        want.axes(p, xscale="log", yscale="log")
        want.line(p, "GD", gn, np.asarray(res[f"gd_{key}"])[keep])
        want.line(p, "path", B, res[f"path_{key}"])
    return want


def separability(cfg, res: dict) -> Panels:
    """The phase diagram: separable fractions (a) for V = vocab_size, (b) one-hot, with
    Cover's curve for V = 2; (c) compatible fractions for S > 1."""
    x = np.asarray(res["ratio"])
    want = Panels()
    want.axes(0).axes(1).axes(2)
    for S in cfg.support_sizes:
        want.line(0, f"$S = {S}$", x, res[f"sep_S{S}"])
        if S > 1:
            want.line(2, f"$S = {S}$", x, res[f"comp_S{S}"])
    want.line(0, "Lemma 1: $d = m$", [1.0, 1.0], [0.0, 1.0])
    for V in cfg.onehot_vocab_sizes:
        want.line(1, f"$V = {V}$", x, res[f"sep_V{V}"])
    if 2 in cfg.onehot_vocab_sizes:
        want.line(1, "Cover, $V = 2$", x, res["cover_V2"])
    return want


def support_sweep(cfg, res: dict) -> Panels:
    """The sweep: (a) norms, (b) loss gaps (floored at 1e-16 for the log axis) per S, (c) the
    two components' norms against S and (its twin axis, panel 3) dim F / (m(V - 1))."""
    keep = _late(res)
    k = np.asarray(res["steps"])[keep]
    Ss = np.asarray(res["support_sizes"])
    want = Panels()
    want.axes(0, xscale="log").axes(1, xscale="log", yscale="log").axes(2).axes(3)
    for i, S in enumerate(Ss):
        want.line(0, f"$S = {S}$", k, np.asarray(res["norm"])[i, keep])
        want.line(1, f"$S = {S}$", k, np.maximum(np.asarray(res["gap"])[i, keep], 1e-16))
    want.line(2, r"$\|W^{\mathrm{mm}}\|$", Ss, res["norm_mm"])
    want.line(2, r"$\|W^\star\|$", Ss, res["norm_star"])
    frac = np.asarray(res["dim_F"]) / (cfg.n_contexts * (cfg.vocab_size - 1))
    want.line(3, r"$\dim\mathcal{F} / (m(V-1))$", Ss, frac)
    return want


def scale(res: dict) -> Panels:
    """Theorem 2 at scale: the two cosines, and the finite part on a log axis."""
    keep = _late(res)
    k = np.asarray(res["steps"])[keep]
    want = Panels()
    want.axes(0, xscale="log").line(0, COS_LABEL, k, np.asarray(res["cos"])[keep])
    want.line(0, COS_CORR_LABEL, k, np.asarray(res["cos_corr"])[keep])
    want.axes(1, xscale="log", yscale="log")
    want.line(
        1,
        r"$\|P_{\mathcal{F}}(W_k) - W^\star\| / \|W^\star\|$",
        k,
        np.asarray(res["rel_dist_F"])[keep],
    )
    return want
