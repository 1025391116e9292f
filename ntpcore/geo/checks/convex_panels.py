r"""What every panel of the convex figures of the geometry paper must show
(:class:`ntpcore.figure.sourcedata.Panels`), declared from the computed results and not from
the arrays the notebooks hand to the plotting calls: each figure's axis scales, every
labelled line, point set and bar series with its exact data, every image with its colour
limits and colour map.  A notebook passes ``panels=<figure>(res)`` to
:func:`ntpcore.figure.provenance.savefig`, which compares the drawing with it.

Signed matrices are shown with a diverging colour map centred on zero (symmetric limits);
a support matrix with a sequential one on [0, 1].
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ntpcore.figure.sourcedata import Panels

__all__ = ["corpus_scale", "datasets", "proxy_exactness", "reg_path", "support_lmm"]

#: colour maps: a signed matrix, a support (0/1) matrix
DIVERGING, SUPPORT = "RdBu_r", "gray_r"
#: the smallest gap shown on the proxy figure's log axes (exact cases sit on it)
GAP_FLOOR = 1e-9


def support_lmm(res: dict[str, Any]) -> Panels:
    r"""``geo-support-lmm(-text)``: :math:`S`, :math:`L^{\mathrm{mm}}/\|L^{\mathrm{mm}}\|_F`,
    :math:`L^{\mathrm{in}}` (:func:`ntpcore.geo.experiments.run_support_lmm`)."""
    L = np.asarray(res["L_mm"], dtype=np.float64)
    L_hat = L / np.linalg.norm(L)
    L_in = np.asarray(res["L_in"], dtype=np.float64)
    a, b = float(np.abs(L_hat).max()), float(np.abs(L_in).max())
    want = Panels()
    for p in range(3):
        want.axes(p)
    want.image(0, np.asarray(res["S"], dtype=np.float64), clim=(0.0, 1.0), cmap=SUPPORT)
    want.image(1, L_hat, clim=(-a, a), cmap=DIVERGING)
    want.image(2, L_in, clim=(-b, b), cmap=DIVERGING)
    return want


def reg_path(res: dict[str, Any]) -> Panels:
    r"""``geo-reg-path`` (:func:`ntpcore.geo.experiments.run_reg_path`): (a) the in-support
    error and the line :math:`\propto\lambda` through its last point, (b) the loss gap over
    :math:`\lambda\|L^{\mathrm{mm}}\|_*`, (c) the nuclear norm against :math:`\log(1/\lambda)`
    and the line of slope :math:`\|L^{\mathrm{mm}}\|_*` through its last point, (d) the
    direction distances to :math:`L^{\mathrm{mm}}` and :math:`\tilde S` (solved points only:
    for large :math:`\lambda` the optimum is :math:`L=0`)."""
    lam = np.asarray(res["lambdas"], dtype=np.float64)
    pf = np.asarray(res["pf_err"], dtype=np.float64)
    n_mm = float(res["nuc_mm"])
    live = np.asarray(res["nuclear"]) > 0
    lv = lam[live]
    nuc = np.asarray(res["nuclear"], dtype=np.float64)[live]
    x = np.log(1 / lv)
    want = Panels()
    want.axes(0, xscale="log", yscale="log")
    want.line(0, r"$\|P_F(L_\lambda)-L^{\mathrm{in}}\|_F$", lam, pf)
    want.line(0, r"$\propto\lambda$", lam, pf[-1] * lam / lam[-1])
    want.axes(1, xscale="log")
    want.line(
        1,
        r"$(\mathrm{CE}-\mathcal{H})\,/\,\lambda\|L^{\mathrm{mm}}\|_*$",
        lv,
        np.asarray(res["excess"])[live] / (lv * n_mm),
    )
    want.axes(2)
    want.line(2, r"$\|L_\lambda\|_*$", x, nuc)
    want.line(2, r"slope $\|L^{\mathrm{mm}}\|_*$", x, nuc[-1] + n_mm * (x - x[-1]))
    want.axes(3, xscale="log")
    want.line(3, r"to $L^{\mathrm{mm}}$", lv, np.asarray(res["dist_mm"])[live])
    want.line(3, r"to $\tilde S$", lv, np.asarray(res["dist_proxy"])[live])
    return want


def trial_offsets(n_trials: int) -> np.ndarray:
    """Horizontal offsets of the trials of one support size on the proxy figure."""
    return np.linspace(-0.3, 0.3, n_trials) if n_trials > 1 else np.zeros(1)


def certificate_histograms(res: dict[str, Any]) -> dict[str, np.ndarray]:
    r"""Bin centres ``x`` and counts ``G0`` / ``G`` of the off-support entries of the polar
    factor of :math:`\tilde S` and of the optimal certificate (synthetic set), 40 bins from
    the smallest entry to the largest (at least 0.05)."""
    off = np.asarray(res["S_synthetic"]) == 0
    G0, G = np.asarray(res["G0"])[off], np.asarray(res["G"])[off]
    edges = np.linspace(min(G0.min(), G.min()), max(G0.max(), 0.05), 41)
    return {
        "x": 0.5 * (edges[:-1] + edges[1:]),
        "G0": np.histogram(G0, bins=edges)[0].astype(np.float64),
        "G": np.histogram(G, bins=edges)[0].astype(np.float64),
    }


def proxy_exactness(res: dict[str, Any]) -> Panels:
    r"""``geo-proxy-exactness`` (:func:`ntpcore.geo.experiments.run_proxy`): (a) the gap
    :math:`\|\tilde S\|_*/\|L^{\mathrm{mm}}\|_*-1` of every trial (offset by trial), its median
    per support size and the two datasets, (b) the largest off-support entry of the polar
    factor against the gap, (c) histograms (step lines) of the off-support entries of the
    polar factor and of the optimal certificate on the synthetic set."""
    ks = np.asarray(res["support_sizes"], dtype=np.float64)
    gap = np.asarray(res["gap"], dtype=np.float64)
    n_k, n_t = gap.shape
    want = Panels()
    want.axes(0, yscale="log")
    want.points(
        0,
        "random supports",
        (ks[:, None] + trial_offsets(n_t)[None, :]).ravel(),
        np.maximum(gap, GAP_FLOOR).ravel(),
    )
    want.line(0, "median", ks, np.maximum(np.median(gap, axis=1), GAP_FLOOR))
    for name in ("synthetic", "text"):
        want.points(0, f"{name} set", [res[f"mean_k_{name}"]], [res[f"gap_{name}"]])
    want.axes(1, yscale="log")
    want.points(1, "trials", np.asarray(res["max_off"]).ravel(), np.maximum(gap, GAP_FLOOR).ravel())
    h = certificate_histograms(res)
    want.axes(2, yscale="log")
    want.line(2, r"polar factor $G_0$ of $\tilde S$", h["x"], h["G0"])
    want.line(2, r"optimal certificate $G$", h["x"], h["G"])
    return want


def datasets(res: dict[str, Any], group_sizes: np.ndarray, support_sizes: dict) -> Panels:
    r"""``geo-datasets`` (:func:`ntpcore.geo.experiments.run_dataset_stats`): (a) the support
    matrix of the real-text set, (b) its support-group sizes in decreasing order, (c) the
    fraction of contexts per support size of both sets (bars offset by -0.2 and +0.2).
    ``group_sizes`` and ``support_sizes`` (``{name: sizes}``) are read from the raw pairs
    (:func:`ntpcore.geo.checks.convex.raw_supports`), not from the dataset's statistics."""
    sizes = np.sort(np.asarray(group_sizes))[::-1].astype(np.float64)
    kmax = max(int(np.max(k)) for k in support_sizes.values())
    ks = np.arange(1, kmax + 1)
    want = Panels()
    want.axes(0)
    want.image(0, np.asarray(res["S_text"], dtype=np.float64), clim=(0.0, 1.0), cmap=SUPPORT)
    want.axes(1)
    want.bars(1, "contexts per group", np.arange(sizes.size), sizes)
    want.axes(2)
    for name, shift in (("synthetic", -0.2), ("text", 0.2)):
        k = np.asarray(support_sizes[name])
        frac = np.array([np.mean(k == v) for v in ks])
        want.bars(2, name, ks + shift, frac)
    return want


def corpus_scale(res: dict[str, Any]) -> Panels:
    r"""``geo-corpus-scale`` (:func:`ntpcore.geo.experiments.run_scale`): (a) the singular
    spectra :math:`\sigma_i/\sigma_1` of :math:`L^{\mathrm{mm}}` and :math:`\tilde S` per
    :math:`m`, (b) the proxy gap, (c) the ranks against :math:`\min(V,m)`, (d)-(h) the trained
    UFM's curves per :math:`m` from the first epoch on."""
    ms = np.asarray(res["m_values"], dtype=np.float64)
    ep = np.asarray(res["epoch"], dtype=np.float64)[1:]
    want = Panels()
    want.axes(0, xscale="log", yscale="log")
    for i, m in enumerate(res["m_values"]):
        for key, what in (("sv_mm", r"$L^{\mathrm{mm}}$"), ("sv_proxy", r"$\tilde S$")):
            s = np.asarray(res[key][i], dtype=np.float64)
            s = s[np.isfinite(s)]
            want.line(0, f"{what}, $m={m}$", np.arange(1, s.size + 1), s / s[0])
    want.axes(1, xscale="log", yscale="log")
    want.line(1, r"$\|\hat L^{\mathrm{mm}}-\hat S\|_F$", ms, res["dist_proxy"])
    want.line(1, r"$\|\tilde S\|_*/\|L^{\mathrm{mm}}\|_*-1$", ms, res["nuc_excess"])
    want.axes(2, xscale="log")
    want.line(2, r"rank $L^{\mathrm{mm}}$", ms, res["rank_mm"])
    want.line(2, r"rank $\tilde S$", ms, res["rank_proxy"])
    want.line(2, r"$\min(V, m)$", ms, np.minimum(ms, res["V"]))
    panels = (
        ("ce_minus_H", "log", ""),
        ("pf_rel", "log", ""),
        ("dir_mm", "log", "to $L^{\\mathrm{mm}}$, "),
        ("corr_H", "log", ""),
        ("corr_W", "log", ""),
    )
    for p, (key, xscale, prefix) in enumerate(panels, start=3):
        want.axes(p, xscale=xscale, yscale="log" if key == "ce_minus_H" else "linear")
        for i, m in enumerate(res["m_values"]):
            want.line(p, f"{prefix}$m={m}$", ep, np.asarray(res[key])[i, 1:])
            if key == "dir_mm":
                want.line(p, f"to $\\tilde S$, $m={m}$", ep, np.asarray(res["dir_proxy"])[i, 1:])
    return want
