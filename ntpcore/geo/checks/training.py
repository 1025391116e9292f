r"""The checks of the geometry paper's trained models [geo, Sec. 3, Figs. 1-3] (key ``geo``).

One function per statement; each records its claims on a figure's ledger
(:class:`ntpcore.figure.claims.Ledger`) with the statement's source in the paper and its
tolerance, and every notebook that illustrates the statement calls it in one line.

**The trained runs are checked against an independent re-implementation**
(:mod:`ntpcore.geo.checks.training_reference`): at a stated epoch (the end of the run for
the UFM and in the quick profile) every plotted quantity must equal the reference's within
the measured tolerances of :data:`~ntpcore.geo.checks.training_reference.TOLERANCES`, which
a faster or slower optimiser fails.

The limits the paper's figures show (CE -> H, :math:`P_F(L)\to L^{\mathrm{in}}`, the geometry
of :math:`L^{\mathrm{mm}}`) need the paper's 30 000 epochs and are claims of the paper
profile; comparisons carry the margins that the theory predicts and the runs show.  The
objects a figure uses (:math:`L^{\mathrm{mm}}`, its factors, :math:`\tilde S`,
:math:`L^{\mathrm{in}}`) are checked by the functions of :mod:`ntpcore.geo.checks.convex`
(:func:`check_objects`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ntpcore.figure import claims
from ntpcore.geo.checks import convex
from ntpcore.geo.checks.training_reference import (
    TOLERANCES,
    curve_values,
    logits_of,
    record_index,
    reference_at,
    relative_distance,
)
from ntpcore.geo.experiments.datasets import DataConfig, load_dataset
from ntpcore.geo.experiments.training import (
    MODEL_LABELS,
    ModelConfig,
    ModelsConfig,
    RunConfig,
    convex_solution,
    run_metrics,
    train_run,
)

__all__ = [
    "check_collapse",
    "check_curves",
    "check_objects",
    "check_runs",
    "check_trained_logits",
]

#: the statements' sources in the paper
PROTOCOL = "[geo, Sec. 3]"
FIG1 = "[geo, Fig. 1]"
FIG2 = {p: f"[geo, Fig. 2({p})]" for p in "abcd"}
COLLAPSE = "[geo, Sec. 2, subspace collapse]"

REIMPL = "independent float64 re-implementation, same data and initial values"
#: the authors' UFM run re-implemented on a synthetic set of the same structure, 30k epochs
AUTHORS_UFM = "re-implementation of the authors' UFM run, a synthetic set of the same structure"
#: the band of the real-text word geometry's known deviation: it lags without collapsing
#: (0.80-0.87 measured); the grid and the labelled maps declare the same deviation
WORD_LAG_BAND = (0.7, 0.9)


def _shown(x: float) -> float:
    """A reference value as the claim line prints it: four significant digits."""
    return float(f"{x:.4g}")


def label(model: str) -> str:
    """The model's name in the book (UFM, Transformer, LSTM)."""
    return MODEL_LABELS[model]


# ------------------------------------------------------------------------------------------
# The objects a figure uses
# ------------------------------------------------------------------------------------------


def check_objects(
    ledger: claims.Ledger,
    data: DataConfig,
    *,
    proxy: bool = False,
    finite_part: bool = False,
) -> None:
    r"""The convex-side objects a figure uses, each checked with code of its own
    (:mod:`ntpcore.geo.checks.convex`): :math:`L^{\mathrm{mm}}` feasible and certified, its
    balanced factors :math:`W^{\mathrm{mm}}`, :math:`H^{\mathrm{mm}}`, and if asked the proxy
    :math:`\tilde S` and the finite part :math:`L^{\mathrm{in}}`, against the supports and
    counts read from the raw training pairs."""
    raw = convex.raw_supports(load_dataset(data))
    cvx = convex_solution(data)
    convex.check_lmm(ledger, raw, cvx["L_mm"])
    convex.check_factors(ledger, cvx["L_mm"], cvx["W_mm"], cvx["H_mm"])
    if proxy:
        convex.check_proxy(ledger, raw, cvx["S_tilde"])
    if finite_part:
        convex.check_finite_part(ledger, raw, cvx["L_in"])


# ------------------------------------------------------------------------------------------
# The trained runs against the reference
# ------------------------------------------------------------------------------------------


def runs_of(cfg: ModelsConfig | ModelConfig) -> dict[str, RunConfig]:
    """The run of every model of ``cfg``, by model name."""
    if isinstance(cfg, ModelsConfig):
        return {m: cfg.run(m) for m in cfg.models}
    return {cfg.model: cfg.run()}


def check_runs(ledger: claims.Ledger, cfg: ModelsConfig | ModelConfig) -> None:
    r"""The trained models a figure shows are the paper's protocol [geo, Sec. 3]: for each,
    one claim ``<model>-run``, the relative distance of its logits at the checked epoch
    (:func:`reference_at`; the end of the quick runs) to the reference run's."""
    for name, run in runs_of(cfg).items():
        res = train_run(run)
        k, ref = reference_at(run)
        i = record_index(res, k)
        theirs = logits_of(ref["W"][-1], ref["H"][-1], ref["b"][-1])
        if k == run.trainer.protocol.n_steps:  # the final weights, float64
            dist = relative_distance(
                logits_of(res["W_final"], res["H_final"], res["b_final"]), theirs
            )
        elif i is not None:
            dist = relative_distance(logits_of(res["W"][i], res["H"][i], res["b"][i]), theirs)
        else:  # the run has no record at the epoch its configuration names
            dist = float("nan")
        tol = TOLERANCES[name].logits
        ledger.check(
            f"{name}-run",
            rf"{label(name)}: the logits $L = WH$ at epoch {k} are those of the paper's "
            r"protocol redone independently (relative distance)",
            dist,
            claims.at_most(tol),
            source=PROTOCOL,
            digits=0,
            note=f"reference: {REIMPL}; tolerance {tol:g} (module docstring)",
        )


def check_curves(
    ledger: claims.Ledger, cfg: ModelsConfig, curves: dict[str, dict[str, Any]]
) -> None:
    r"""Training follows the regularization-path theorem with training time as
    :math:`1/\lambda` [geo, Fig. 2 (a)-(d)] (book: ``geo-thm-path``).

    For each model, the four panels' quantities at the checked epoch equal the reference
    run's (two-sided, :data:`TOLERANCES`): ``<model>-ce`` (a) :math:`\mathrm{CE}-\mathcal H`,
    ``<model>-norms`` (b) :math:`\|W_k\|_F`, :math:`\|H_k\|_F`, ``<model>-finite-part`` (c)
    :math:`\|P_F(L_k)-L^{\mathrm{in}}\|_F`, ``<model>-geometry`` (d) the structural
    correlations with the :math:`L^{\mathrm{mm}}` geometry and the same-support cosines; and
    ``<model>-measures``, the other measures of the book's tables and the parameter count.  In
    the paper profile, the limits after 30 000 epochs: ``<model>-ce-to-entropy`` (CE - H
    between 1e-8, float32's floor, and 1e-4, where the paper's curves end),
    ``<model>-finite-part-converges`` (a fall by at least 100), ``<model>-norms-grow`` (by at
    least 10% from epoch 1000), ``<model>-sc-h`` and
    ``<model>-sc-w`` (at least 0.9).  The real-text runs have two known deviations (the
    LSTM's finite part, the word geometry), with the bands they stay in.
    """
    raw = convex.raw_supports(load_dataset(cfg.data))
    L_mm = convex_solution(cfg.data)["L_mm"]
    for name, c in curves.items():
        k, ref = reference_at(cfg.run(name))
        i = record_index(c, k)  # None: no record at the configured epoch (a run cut short)
        r = curve_values(ref["W"][-1], ref["H"][-1], ref["b"][-1], raw, L_mm)
        tol, lab = TOLERANCES[name], label(name)
        ours = {q: float("nan") if i is None else float(c[q][i]) for q in r}
        ledger.check(
            f"{name}-ce",
            rf"{lab}: (a) $\mathrm{{CE}} - \mathcal H$ at epoch {k} is the reference run's",
            ours["ce_minus_H"],
            claims.close_to(r["ce_minus_H"], rtol=tol.ce),
            source=FIG2["a"],
            reference=_shown(r["ce_minus_H"]),
            reference_source=REIMPL,
        )
        dev = max(abs(ours[q] / r[q] - 1.0) for q in ("W_norm", "H_norm"))
        ledger.check(
            f"{name}-norms",
            rf"{lab}: (b) $\|W_k\|_F$ and $\|H_k\|_F$ at epoch {k} are the reference run's "
            "(larger relative deviation)",
            dev,
            claims.at_most(tol.norms),
            source=FIG2["b"],
            digits=0,
            note=f"ours {ours['W_norm']:.6g}, {ours['H_norm']:.6g}; reference "
            f"{r['W_norm']:.6g}, {r['H_norm']:.6g} ({REIMPL})",
        )
        ledger.check(
            f"{name}-finite-part",
            rf"{lab}: (c) $\|P_F(L_k) - L^{{\mathrm{{in}}}}\|_F$ at epoch {k} is the reference "
            "run's",
            ours["pf_dist"],
            claims.close_to(r["pf_dist"], rtol=tol.pf),
            source=FIG2["c"],
            reference=_shown(r["pf_dist"]),
            reference_source=REIMPL,
        )
        geo_keys = [
            q for q in ("sc_H", "sc_W", "collapse_raw", "collapse_proj") if np.isfinite(r[q])
        ]
        ledger.check(
            f"{name}-geometry",
            rf"{lab}: (d) structural correlations with the $L^{{\mathrm{{mm}}}}$ geometry and "
            f"same-support cosines at epoch {k} are the reference run's (largest difference)",
            max(abs(ours[q] - r[q]) for q in geo_keys),
            claims.at_most(tol.geometry),
            source=FIG2["d"],
            digits=0,
            note="ours "
            + ", ".join(f"{q} {ours[q]:.4f}" for q in geo_keys)
            + "; reference "
            + ", ".join(f"{r[q]:.4f}" for q in geo_keys),
        )
        table = (
            "L_norm",
            "od_H",
            "od_W",
            "sc_W_centered",
            "dir_Lmm",
            "dir_Lmm_centered",
            "dir_S_tilde",
        )
        diff = [abs(ours[q] / r[q] - 1.0) if q == "L_norm" else abs(ours[q] - r[q]) for q in table]
        same_size = int(c["n_params"]) == int(ref["n_params"])
        ledger.check(
            f"{name}-measures",
            rf"{lab}: the other measures of the book's tables ($\|L_k\|_F$, off-diagonal "
            r"correlations, centred $W$, directions to $L^{\mathrm{mm}}$) at epoch "
            f"{k}, and the number of parameters, are the reference run's (largest difference)",
            max((d for d in diff if np.isfinite(d)), default=float("nan"))
            if same_size
            else float("nan"),
            claims.at_most(tol.logits),
            source=PROTOCOL,
            digits=0,
            note=f"{int(c['n_params']):,} parameters, reference {int(ref['n_params']):,}",
        )
        _limits(ledger, name, c, cfg.data.dataset)


def _limits(ledger: claims.Ledger, name: str, c: dict[str, Any], dataset: str) -> None:
    """The paper profile's limits of one model (see :func:`check_curves`)."""
    lab, n = label(name), int(c["epoch"][-1])
    ref_ufm = name == "ufm" and dataset == "synthetic"
    text = dataset == "text"
    pf = np.asarray(c["pf_dist"])
    ledger.check(
        f"{name}-ce-to-entropy",
        rf"{lab}: (a) $\mathrm{{CE}} \to \mathcal H$: $\mathrm{{CE}} - \mathcal H$ after 30 000 "
        "epochs, between float32's floor and the end of the paper's curves",
        float(c["ce_minus_H"][-1]),
        claims.between(1e-8, 1e-4),
        source=FIG2["a"],
        profiles=("paper",),
        digits=2,
        reference=1.4e-5 if ref_ufm else None,
        reference_source=AUTHORS_UFM if ref_ufm else None,
    )
    lstm_text = name == "lstm" and text
    ledger.check(
        f"{name}-finite-part-converges",
        rf"{lab}: (c) $P_F(L_k) \to L^{{\mathrm{{in}}}}$: $\|P_F(L_k) - L^{{\mathrm{{in}}}}\|_F$ "
        "after 30 000 epochs over its start (at most 1/100)",
        float(pf[-1] / pf[0]),
        claims.at_most(1e-2),
        source=FIG2["c"],
        profiles=("paper",),
        digits=2,
        reference=1e-4 / 3.2 if ref_ufm else None,
        reference_source=AUTHORS_UFM + ": 3.2 to 1e-4" if ref_ufm else None,
        known_deviation=(
            f"the LSTM's in-support logits have not converged on real text (Lee corpus) "
            f"after {n:,} epochs: ||P_F(L) - L_in|| falls from {pf[0]:.3g} to {pf[-1]:.3g}, "
            "where the paper's curves reach about 1e-3; band: a fall by at least 20 "
            "(measured 19.9 -> 0.439 on 2026-11-23), slower than the paper's, not stalled"
        )
        if lstm_text
        else None,
        band=(0.0, 0.05) if lstm_text else None,
    )
    i = int(np.searchsorted(c["epoch"], 1000, side="right")) - 1
    grow = min(float(c[q][-1] / c[q][i]) for q in ("W_norm", "H_norm"))
    ledger.check(
        f"{name}-norms-grow",
        rf"{lab}: (b) $\|W_k\|_F$ and $\|H_k\|_F$ keep growing: from epoch 1000 to 30 000 "
        "(the smaller ratio)",
        grow,
        claims.at_least(1.1),
        source=FIG2["b"],
        profiles=("paper",),
        note="the logits' norm grows like log k (1.3 to 1.8 times from epoch 1000 to 10 000 in "
        "the authors' logs), the factors' like its square root",
    )
    ledger.check(
        f"{name}-sc-h",
        rf"{lab}: (d) the context geometry reaches $H^{{\mathrm{{mm}}}}$'s: structural "
        "correlation after 30 000 epochs",
        float(c["sc_H"][-1]),
        claims.at_least(0.9),
        source=FIG2["d"],
        profiles=("paper",),
        reference=0.97 if ref_ufm else None,
        reference_source=AUTHORS_UFM if ref_ufm else None,
    )
    ledger.check(
        f"{name}-sc-w",
        rf"{lab}: (d) the word geometry reaches $W^{{\mathrm{{mm}}}}$'s: structural "
        "correlation after 30 000 epochs",
        float(c["sc_W"][-1]),
        claims.at_least(0.9),
        source=FIG2["d"],
        profiles=("paper",),
        reference=0.97 if ref_ufm else None,
        reference_source=AUTHORS_UFM if ref_ufm else None,
        known_deviation=(
            f"on real text (Lee corpus) the word geometry lags the context geometry after "
            f"{n:,} epochs: structural correlation of W {c['sc_W'][-1]:.2f} "
            f"({c['sc_W_centered'][-1]:.2f} with the mean word embedding removed), where the "
            "paper's curves reach about 0.9-0.97; band: it lags (0.80-0.87 measured on "
            "2026-11-23) without collapsing"
        )
        if text
        else None,
        band=WORD_LAG_BAND if text else None,
    )


# ------------------------------------------------------------------------------------------
# Subspace collapse
# ------------------------------------------------------------------------------------------

#: the projection onto the top-r right-singular subspace of W removes at least this share of
#: the same-support pairs' distance to collapse (1 - cosine) at the end of a run: measured
#: (1 - projected) / (1 - raw) = 0.05-0.17 (UFM), 0.14-0.31 (transformer), 0.60-0.70 (LSTM)
#: after the quick profile; 0.06 after 30k epochs in the authors' UFM run re-implemented
COLLAPSE_RATIO = 0.8


def check_collapse(ledger: claims.Ledger, cfg: ModelsConfig) -> None:
    r"""Subspace collapse [geo, Sec. 2] (book: ``geo-def-collapse``): contexts with the same
    support share their :math:`L^{\mathrm{mm}}` column, so their embeddings collapse within
    the span of the diverging word directions, not in full.  One claim per model,
    ``<model>-collapse``: the remaining distance to collapse of the projected cosine over the
    raw one, :math:`(1-\cos(\Pi_rh_j,\Pi_rh_{j'}))/(1-\cos(h_j,h_{j'}))` (means over the
    pairs, last epoch), at most :data:`COLLAPSE_RATIO` (1 when the projection does
    nothing).  No claim without same-support pairs."""
    for name, run in runs_of(cfg).items():
        mt = run_metrics(run)
        raw, proj = float(mt["collapse_raw"][-1]), float(mt["collapse_proj"][-1])
        if not np.isfinite(raw):
            continue
        ledger.check(
            f"{name}-collapse",
            rf"{label(name)}: same-support contexts collapse in the subspace of $W$: their "
            r"projected cosine's distance to 1 over the raw cosine's (last epoch)",
            (1.0 - proj) / (1.0 - raw),
            claims.at_most(COLLAPSE_RATIO),
            source=COLLAPSE,
            reference=0.0625 if name == "ufm" else None,
            reference_source=f"{AUTHORS_UFM}: raw 0.84, projected 0.99" if name == "ufm" else None,
            note=f"raw {raw:.4f}, projected {proj:.4f}",
        )


# ------------------------------------------------------------------------------------------
# Fig. 1: trained logits copy the support pattern
# ------------------------------------------------------------------------------------------


def _same_other(L: NDArray[np.float64], groups: tuple[tuple[int, ...], ...]) -> tuple[float, float]:
    """Mean Pearson correlation of logit columns within support groups and across them."""
    C = np.corrcoef(L.T)
    gid = np.empty(L.shape[1], dtype=int)
    for g, members in enumerate(groups):
        gid[list(members)] = g
    same = (gid[:, None] == gid[None, :]) & ~np.eye(len(gid), dtype=bool)
    other = gid[:, None] != gid[None, :]
    return (float(C[same].mean()) if same.any() else np.nan), float(C[other].mean())


def check_trained_logits(
    ledger: claims.Ledger, cfg: ModelsConfig, geometry: dict[str, dict[str, NDArray]]
) -> None:
    r"""Trained logits are a large-scale copy of :math:`L^{\mathrm{mm}}` [geo, Fig. 1]:
    per model, ``<model>-corr-lmm`` (Pearson correlation of the entries with
    :math:`L^{\mathrm{mm}}`, at least 0.85: the finite part is orthogonal to
    :math:`L^{\mathrm{mm}}` and bounded, so the limit is 1; 0.89 is the lowest after the
    paper's 30k epochs, 0.93 after the quick profile), ``<model>-support-on-top`` (every
    context's support words carry its largest logits) and ``<model>-same-support-alike``
    (columns of same-support contexts correlate more than other columns by at least 0.8 of
    the range [-2, 2]; a support-blind model gives about 0).  ``geometry`` holds the logits
    ``L`` the figure shows; supports and groups are read from the raw training pairs."""
    raw = convex.raw_supports(load_dataset(cfg.data))
    L_mm, S = convex_solution(cfg.data)["L_mm"], raw.S
    for name in cfg.models:
        L, lab = geometry[name]["L"], label(name)
        ledger.check(
            f"{name}-corr-lmm",
            rf"{lab}: the trained logits are a copy of $L^{{\mathrm{{mm}}}}$ (Pearson "
            "correlation of the entries)",
            float(np.corrcoef(L.ravel(), L_mm.ravel())[0, 1]),
            claims.at_least(0.85),
            source=FIG1,
        )
        k = S.sum(axis=0)
        on_top = [
            set(np.argsort(-L[:, j], kind="stable")[: k[j]].tolist()) == set(raw.support[j])
            for j in range(L.shape[1])
        ]
        ledger.check(
            f"{name}-support-on-top",
            rf"{lab}: in every context the support words carry the largest trained logits "
            "(fraction of contexts)",
            float(np.mean(on_top)),
            claims.at_least(1.0),
            source=FIG1,
        )
        same, other = _same_other(L, raw.groups)
        if np.isfinite(same):
            ledger.check(
                f"{name}-same-support-alike",
                rf"{lab}: logit columns of same-support contexts correlate more than others "
                "(mean correlation, same minus other)",
                same - other,
                claims.at_least(0.8),
                source=FIG1,
                note=f"same {same:.3f}, other {other:.3f}; 0.89 the lowest after 30k epochs",
            )
