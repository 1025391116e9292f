r"""What each trained-model figure of the geometry paper must draw [geo, Figs. 1-3 and App.].

One function per figure returns its :class:`~ntpcore.figure.sourcedata.Panels`: every panel's
axis scales, every labelled line with the exact data it must plot, every image with its
values, colour limits and colour map -- built here from the computed results (the cached
runs, metrics and convex solutions), never from the arrays a notebook hands to its plotting
calls, so that :func:`ntpcore.figure.provenance.savefig` compares the drawing with the
results and not with itself.  Signed matrices (logits, cosines) are drawn with a diverging
colour map centred at zero, with symmetric limits shared by the panels that are compared.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ntpcore.figure.sourcedata import Panels
from ntpcore.geo.embeddings import cosine_matrix
from ntpcore.geo.experiments.training import (
    MODEL_LABELS,
    EvolutionConfig,
    LabelledConfig,
    ModelsConfig,
    convex_solution,
    nearest_records,
    snapshot,
    train_run,
)

__all__ = [
    "DIVERGING",
    "SUPPORT_CMAP",
    "curve_labels",
    "evolution_panels",
    "geometry_grid_panels",
    "logit_limit",
    "similarity_panels",
    "trained_logits_panels",
    "training_curves_panels",
]

#: the colour map of signed matrices (logits, cosines), centred at 0 by symmetric limits
DIVERGING = "RdBu_r"
#: the colour map of the 0/1 support matrix
SUPPORT_CMAP = "Greys"
#: the percentile of |L| that bounds a snapshot's logit colours (the evolution figure)
SNAPSHOT_PERCENTILE = 99.5


def logit_limit(*mats: np.ndarray) -> float:
    """The symmetric colour limit shared by logit matrices: their largest absolute entry."""
    return max(float(np.abs(M).max()) for M in mats)


def trained_logits_panels(cfg: ModelsConfig, geometry: dict[str, dict[str, Any]]) -> Panels:
    r"""[geo, Fig. 1]: the support matrix (0/1), :math:`L^{\mathrm{mm}}/\|L^{\mathrm{mm}}\|_F`
    (its own symmetric limits), then each model's logits (symmetric limits shared by the
    models).  ``geometry`` is :func:`~ntpcore.geo.experiments.training.final_geometry`."""
    cvx = convex_solution(cfg.data)
    L_mm = cvx["L_mm"] / np.linalg.norm(cvx["L_mm"])
    a_mm = logit_limit(L_mm)
    a = logit_limit(*(geometry[m]["L"] for m in cfg.models))
    want = Panels()
    want.axes(0).image(0, cvx["S"].astype(float), clim=(0.0, 1.0), cmap=SUPPORT_CMAP)
    want.axes(1).image(1, L_mm, clim=(-a_mm, a_mm), cmap=DIVERGING)
    for p, m in enumerate(cfg.models, start=2):
        want.axes(p).image(p, geometry[m]["L"], clim=(-a, a), cmap=DIVERGING)
    return want


def curve_labels(model: str) -> dict[str, str]:
    """The legend labels of one model's lines in the training-curves figure, by quantity."""
    lab = MODEL_LABELS[model]
    return {
        "ce_minus_H": lab,
        "H_norm": f"{lab}: $H$",
        "W_norm": f"{lab}: $W$",
        "pf_dist": lab,
        "sc_H": f"{lab}: $H$",
        "sc_W": f"{lab}: $W$",
    }


#: the quantities of the training-curves panels (a)-(d), and their axis scales
CURVE_PANELS = (
    (("ce_minus_H",), "log"),
    (("H_norm", "W_norm"), "log"),
    (("pf_dist",), "log"),
    (("sc_H", "sc_W"), "linear"),
)


def training_curves_panels(curves: dict[str, dict[str, Any]]) -> Panels:
    r"""[geo, Fig. 2 (a)-(d)]: against epoch + 1 on a log axis, (a) :math:`\mathrm{CE}-\mathcal
    H`, (b) :math:`\|H_k\|_F` and :math:`\|W_k\|_F`, (c) :math:`\|P_F(L_k)-L^{\mathrm{in}}\|_F`
    (log y), (d) the structural correlations of :math:`H` and :math:`W` (linear y), one line
    per model and quantity.  ``curves`` is
    :func:`~ntpcore.geo.experiments.training.training_curves`."""
    want = Panels()
    for p, (quantities, yscale) in enumerate(CURVE_PANELS):
        want.axes(p, xscale="log", yscale=yscale)
        for model, c in curves.items():
            labels = curve_labels(model)
            x = np.asarray(c["epoch"], dtype=float) + 1.0
            for q in quantities:
                want.line(p, labels[q], x, np.asarray(c[q], dtype=float))
    return want


def geometry_grid_panels(cfg: ModelsConfig, geometry: dict[str, dict[str, Any]]) -> Panels:
    r"""[geo, Fig. 3]: a 3 x (models + 2) grid of images, panels numbered row by row; rows:
    context cosines, word cosines (limits [-1, 1]), logits -- the models' with limits shared
    by the models, :math:`L^{\mathrm{mm}}` and :math:`\tilde S` with limits shared by the
    two; columns: the models, ``"mm"`` and ``"S_tilde"``."""
    cvx = convex_solution(cfg.data)
    cols = [*cfg.models, "mm", "S_tilde"]
    a = logit_limit(*(geometry[m]["L"] for m in cfg.models))
    a_c = logit_limit(cvx["L_mm"], cvx["S_tilde"])
    logits = {**{m: geometry[m]["L"] for m in cfg.models}, "mm": cvx["L_mm"]}
    logits["S_tilde"] = cvx["S_tilde"]
    want = Panels()
    n = len(cols)
    for c, name in enumerate(cols):
        want.axes(c).image(c, geometry[name]["cos_H"], clim=(-1.0, 1.0), cmap=DIVERGING)
        want.axes(n + c).image(n + c, geometry[name]["cos_W"], clim=(-1.0, 1.0), cmap=DIVERGING)
        lim = a if name in cfg.models else a_c
        want.axes(2 * n + c).image(2 * n + c, logits[name], clim=(-lim, lim), cmap=DIVERGING)
    return want


def similarity_panels(cfg: LabelledConfig) -> Panels:
    """[geo, App., labelled maps]: one image, the cosine similarities of the run's final word
    embeddings (rows of ``W``) or context embeddings (columns of ``H``), limits [-1, 1]."""
    res = train_run(cfg.run())
    X = res["W_final"] if cfg.which == "words" else res["H_final"].T
    return Panels().axes(0).image(0, cosine_matrix(X), clim=(-1.0, 1.0), cmap=DIVERGING)


def evolution_panels(cfg: EvolutionConfig) -> Panels:
    r"""[geo, App., evolution figure]: a 3 x (snapshots + 1) grid, panels numbered row by row;
    rows: context cosines, word cosines (limits [-1, 1]), logits (each panel's symmetric
    limits at the :data:`SNAPSHOT_PERCENTILE` percentile of its absolute entries: the scale
    grows a hundredfold, the pattern is what is compared); the last column is the geometry
    predicted by :math:`L^{\mathrm{mm}}`."""
    res = train_run(cfg.run())
    cvx = convex_solution(cfg.data)
    shots = [snapshot(res, i) for i in nearest_records(res, cfg.snapshot_steps)]
    shots.append(
        {
            "cos_H": cosine_matrix(cvx["H_mm"].T),
            "cos_W": cosine_matrix(cvx["W_mm"]),
            "L": cvx["L_mm"],
        }
    )
    n = len(shots)
    want = Panels()
    for c, s in enumerate(shots):
        want.axes(c).image(c, s["cos_H"], clim=(-1.0, 1.0), cmap=DIVERGING)
        want.axes(n + c).image(n + c, s["cos_W"], clim=(-1.0, 1.0), cmap=DIVERGING)
        lim = float(np.percentile(np.abs(s["L"]), SNAPSHOT_PERCENTILE))
        want.axes(2 * n + c).image(2 * n + c, s["L"], clim=(-lim, lim), cmap=DIVERGING)
    return want
