r"""The checks of the corpus-scale figure (``geo-corpus-scale``) [geo, Secs. 2-3].

* :func:`check_lmm_ladder` -- at every :math:`m` of the ladder, :math:`L^{\mathrm{mm}}` is
  feasible and certified (the large-vocabulary solver's certificate, made exactly feasible
  here), its balanced factors (which the embedding correlations use) are balanced, and the
  proxy's spectrum is that of :math:`\tilde S` built from the raw pairs;
* :func:`check_proxy_at_scale` -- the proxy at corpus scale: its excess over
  :math:`\|L^{\mathrm{mm}}\|_*` (a known deviation from the paper-size sets) and the ranks;
* :func:`check_ufm_reference` -- the trained UFM is the paper's AdamW run: its initialisation
  is PyTorch's default law, and at the smallest :math:`m` its records equal those of an
  independent re-implementation (torch autograd, ``torch.optim.AdamW`` and ``MultiStepLR``,
  float64) started from the same initialisation, measured by this module's own code;
* :func:`check_ufm_trends` -- the theory's statements on the trained UFM at the smallest
  :math:`m` over the second half of training, each against that reference run.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from ntpcore.figure import claims
from ntpcore.geo.checks.convex import (
    DUAL,
    FACTORS,
    FACTORS_TOL,
    FEASIBLE_TOL,
    GAP_FLOOR,
    PROXY,
    SVM,
    RawSupports,
    certified_dual,
    factor_errors,
    finite_part_of,
    proxy_of,
    raw_entropy,
    raw_supports,
    svm_violation,
)
from ntpcore.geo.embeddings import mm_embeddings
from ntpcore.geo.experiments.scale import ScaleConfig, scale_dataset, svm_point
from ntpcore.geo.train import TrainerConfig, init_ufm_state
from ntpcore.geo.train.protocol import AdamWProtocol

__all__ = [
    "check_lmm_ladder",
    "check_proxy_at_scale",
    "check_ufm_reference",
    "check_ufm_trends",
    "ufm_reference",
]

PATH = "[geo, Sec. 2, Theorem (regularization path)]"
GEOM = "[geo, Sec. 3, Figs. 2-3]"
UFM = "[geo, Sec. 3, NTP-UFM trained with AdamW]"
#: the spectrum of the proxy the figure shows against that of S~ from the raw pairs
SPECTRUM_TOL = 1e-10
#: the records of the trained UFM against the reference run: the figure measures its geometry
#: on float32 snapshots (relative rounding 6e-8), the reference in float64
REFERENCE_RTOL = 1e-4
#: standard deviations allowed between an initial norm and its expectation
INIT_SIGMAS = 5.0


# ------------------------------------------------------------------------------------------
# L^mm, its factors and the proxy at every m
# ------------------------------------------------------------------------------------------


def check_lmm_ladder(ledger: claims.Ledger, cfg: ScaleConfig) -> dict[str, float]:
    r"""At every :math:`m` of the ladder [geo, Sec. 2]: ``lmm-feasible`` (largest violation),
    ``lmm-certified`` (largest relative gap to the certified dual value, at most
    ``cfg.svm_tol``), ``factors-balanced`` (the factors the embedding correlations use) and
    ``proxy-centred`` (the plotted spectrum of :math:`\tilde S` against that of the centred
    support of the raw pairs)."""
    viol, gaps, fact, spec = [], [], [], []
    for m in cfg.m_values:
        raw = raw_supports(scale_dataset(cfg.data, m))
        svm = svm_point(cfg, m)
        L = np.asarray(svm["L_mm"], dtype=np.float64)
        nuc = float(np.linalg.svd(L, compute_uv=False).sum())
        viol.append(svm_violation(L, raw))
        gaps.append((nuc - certified_dual(np.asarray(svm["G"]), raw)) / nuc)
        fact.append(max(factor_errors(L, *mm_embeddings(L)).values()))
        sv = np.linalg.svd(proxy_of(raw), compute_uv=False)
        shown = np.asarray(svm["sv_proxy"], dtype=np.float64)
        spec.append(float(np.abs(shown - sv).max() / sv[0]) if shown.shape == sv.shape else 1.0)
    every = "at every $m$ of the ladder"
    ledger.check(
        "lmm-feasible",
        rf"$L^{{\mathrm{{mm}}}}$ is constant on each support with margin at least 1, {every} "
        "(largest violation, from the raw training pairs)",
        max(viol),
        claims.at_most(FEASIBLE_TOL),
        source=SVM,
        digits=0,
    )
    ledger.check(
        "lmm-certified",
        rf"$L^{{\mathrm{{mm}}}}$ is optimal {every}: relative gap to the value of the solver's "
        r"dual certificate made exactly feasible, at most svm\_tol (largest)",
        max(gaps),
        claims.between(GAP_FLOOR, cfg.svm_tol),
        source=DUAL,
        digits=0,
    )
    ledger.check(
        "factors-balanced",
        rf"the factors $W^{{\mathrm{{mm}}}}, H^{{\mathrm{{mm}}}}$ of the embedding geometry are "
        rf"the balanced factors of $L^{{\mathrm{{mm}}}}$ {every} (largest relative error)",
        max(fact),
        claims.at_most(FACTORS_TOL),
        source=FACTORS,
        digits=0,
    )
    ledger.check(
        "proxy-centred",
        rf"the spectrum shown for $\tilde S$ is that of the centred support of the data {every} "
        "(largest difference over the top singular value)",
        max(spec),
        claims.at_most(SPECTRUM_TOL),
        source=PROXY,
        digits=0,
    )
    return {"violation": max(viol), "gap": max(gaps), "factors": max(fact), "spectrum": max(spec)}


def known_excess(res: dict[str, Any]) -> str:
    r"""Why :math:`\tilde S` is not within 1% of :math:`L^{\mathrm{mm}}` on the ladder of
    ``res`` (the known deviation of ``proxy-excess``), with the numbers of this run."""
    top = 100 * float(np.max(res["nuc_excess"]))
    if res["corpus_default"]:
        return (
            rf"on the Wikipedia sets $\|\tilde S\|_*$ exceeds $\|L^{{\mathrm{{mm}}}}\|_*$ by up to "
            rf"{top:.0f}% (panel b), not by under 1% as on the paper-size sets: with a vocabulary "
            r"of hundreds to a thousand words and sparse supports, $\tilde S$ keeps the full rank "
            r"$\min(V, m)$ while $L^{\mathrm{mm}}$ has a much lower rank (panel c)"
        )
    return (
        rf"on the sets of {res['corpus_label']} $\|\tilde S\|_*$ exceeds "
        rf"$\|L^{{\mathrm{{mm}}}}\|_*$ by up to {top:.0f}% (panel b), not by under 1% as on the "
        r"paper-size sets (the proxy degrades at corpus scale, as on the Wikipedia sample); at "
        rf"the largest $m$, rank $\tilde S$ = {res['rank_proxy'][-1]} against rank "
        rf"$L^{{\mathrm{{mm}}}}$ = {res['rank_mm'][-1]} (panel c)"
    )


def check_proxy_at_scale(ledger: claims.Ledger, res: dict[str, Any]) -> None:
    r"""The proxy at corpus scale [geo, Sec. 2]: ``proxy-excess``, the largest
    :math:`\|\tilde S\|_*/\|L^{\mathrm{mm}}\|_*-1` over the ladder against the paper-size
    sets' "under 1%" (a known deviation, :func:`known_excess`; band: up to 25%, where
    :math:`\tilde S` stays a proxy of the order of :math:`L^{\mathrm{mm}}`, measured up to 14%
    in the paper profile and 7% in the quick one); on the Wikipedia sample (a finding there,
    paper profile) ``rank-below-proxy``: :math:`L^{\mathrm{mm}}` has a lower rank than
    :math:`\tilde S` at every :math:`m` (on sets near the paper's size :math:`\tilde S` can be
    :math:`L^{\mathrm{mm}}` itself, of the same rank)."""
    ledger.check(
        "proxy-excess",
        r"$\tilde S$ is a close proxy of $L^{\mathrm{mm}}$: "
        r"$\|\tilde S\|_*/\|L^{\mathrm{mm}}\|_*-1 \le 1\%$ at every $m$ (largest)",
        float(np.max(res["nuc_excess"])),
        claims.at_most(0.01),
        source=PROXY,
        reference="under 1% (TinyStories extract, m = 403, V = 104)",
        reference_source="the authors' run logs",
        note="the reference is of a different, smaller dataset",
        known_deviation=known_excess(res),
        band=(0.0, 0.25),
    )
    if not res["corpus_default"]:
        print(
            f"NOT CHECKED {ledger.fig_id}:rank-below-proxy on {res['corpus_label']}: a finding "
            "on the Wikipedia sets: on sets near the paper's size S~ can be L^mm itself"
        )
        return
    ledger.check(
        "rank-below-proxy",
        r"$L^{\mathrm{mm}}$ has a lower rank than $\tilde S$ at every $m$",
        bool(np.all(np.asarray(res["rank_mm"]) < np.asarray(res["rank_proxy"]))),
        claims.holds(),
        source="[geo, Sec. 2, low-rank component]",
        profiles=("paper",),
    )


# ------------------------------------------------------------------------------------------
# The trained UFM against an independent re-implementation
# ------------------------------------------------------------------------------------------


def adamw_ufm(
    counts: NDArray[np.float64],
    W0: NDArray[np.float64],
    H0: NDArray[np.float64],
    protocol: AdamWProtocol,
    epochs: tuple[int, ...],
) -> dict[int, tuple[NDArray[np.float64], NDArray[np.float64]]]:
    r"""The UFM :math:`L=WH` trained on the summed loss :math:`\sum_j n_j\mathrm{LSE}(\ell_j)-
    \sum_{z,j}n_{z,j}\ell_{z,j}` with ``torch.optim.AdamW`` (betas (0.9, 0.999), eps 1e-8)
    and ``MultiStepLR``, full batch, in float64 by autograd, from ``(W0, H0)``; returns
    ``{epoch: (W, H)}`` after ``epoch`` steps for each of ``epochs``."""
    N = torch.from_numpy(np.asarray(counts, dtype=np.float64))
    nj = N.sum(dim=0)
    W = torch.tensor(W0, dtype=torch.float64, requires_grad=True)
    H = torch.tensor(H0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.AdamW(
        [W, H], lr=protocol.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=protocol.weight_decay
    )
    sched = torch.optim.lr_scheduler.MultiStepLR(
        opt, milestones=list(protocol.lr_milestones), gamma=protocol.lr_gamma
    )
    out = {}
    for k in range(max(epochs) + 1):
        if k in epochs:
            out[k] = (W.detach().numpy().copy(), H.detach().numpy().copy())
        if k == max(epochs):
            break
        L = W @ H
        loss = (nj * torch.logsumexp(L, dim=0)).sum() - (N * L).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return out


def _cosines(X: NDArray[np.float64]) -> NDArray[np.float64]:
    """Cosine similarities of the rows of ``X`` (a zero row: cosine 0)."""
    n = np.linalg.norm(X, axis=1)
    Y = X / np.where(n > 0, n, 1.0)[:, None]
    return Y @ Y.T


def _offdiag_corr(A: NDArray[np.float64], B: NDArray[np.float64]) -> float:
    mask = ~np.eye(A.shape[0], dtype=bool)
    return float(np.corrcoef(A[mask], B[mask])[0, 1])


@dataclass(frozen=True)
class _Truth:
    """What the metrics of a trained UFM are measured against, from the raw pairs."""

    raw: RawSupports
    L_in: NDArray[np.float64]
    L_mm: NDArray[np.float64]
    S_tilde: NDArray[np.float64]
    cos_W_mm: NDArray[np.float64]
    cos_H_mm: NDArray[np.float64]
    entropy: float


def _truth(raw: RawSupports, L_mm: NDArray[np.float64]) -> _Truth:
    U, s, Vt = np.linalg.svd(L_mm, full_matrices=False)
    r = int(np.sum(s > 1e-6 * max(1.0, s[0])))
    root = np.sqrt(s[:r])
    return _Truth(
        raw,
        finite_part_of(raw),
        L_mm,
        proxy_of(raw),
        _cosines(U[:, :r] * root),
        _cosines((root[:, None] * Vt[:r]).T),
        raw_entropy(raw),
    )


def _direction(A: NDArray[np.float64], B: NDArray[np.float64]) -> float:
    return float(np.linalg.norm(A / np.linalg.norm(A) - B / np.linalg.norm(B)))


def ufm_metrics(W: NDArray[np.float64], H: NDArray[np.float64], t: _Truth) -> dict[str, float]:
    r"""The figure's six measures of a UFM :math:`(W, H)`, by this module's code:
    ``ce_minus_H``, ``pf_rel`` :math:`\|P_F(L)-L^{\mathrm{in}}\|_F/\|L^{\mathrm{in}}\|_F`,
    ``dir_mm`` / ``dir_proxy`` (direction distance of the column-centred
    :math:`L-L^{\mathrm{in}}` to :math:`L^{\mathrm{mm}}` / :math:`\tilde S`), ``corr_H`` /
    ``corr_W`` (off-diagonal correlation of the cosine matrices with those of the balanced
    factors of :math:`L^{\mathrm{mm}}`)."""
    N = t.raw.counts
    nj = N.sum(axis=0)
    L = W @ H
    mx = L.max(axis=0)
    lse = mx + np.log(np.exp(L - mx).sum(axis=0))
    ce = float((nj * lse - (N * L).sum(axis=0)).sum() / nj.sum())
    PF = np.zeros_like(L)
    for j, words in enumerate(t.raw.support):
        col = L[list(words), j]
        PF[list(words), j] = col - col.mean()
    Lc = L - L.mean(axis=0)
    return {
        "ce_minus_H": ce - t.entropy,
        "pf_rel": float(np.linalg.norm(PF - t.L_in) / np.linalg.norm(t.L_in)),
        "dir_mm": _direction(Lc - t.L_in, t.L_mm),
        "dir_proxy": _direction(Lc - t.L_in, t.S_tilde),
        "corr_H": _offdiag_corr(_cosines(H.T), t.cos_H_mm),
        "corr_W": _offdiag_corr(_cosines(W), t.cos_W_mm),
    }


METRICS = ("ce_minus_H", "pf_rel", "dir_mm", "dir_proxy", "corr_H", "corr_W")


@functools.lru_cache(maxsize=2)
def ufm_reference(cfg: ScaleConfig, records: tuple[int, ...]) -> dict[str, Any]:
    r"""The reference run at the smallest :math:`m` of ``cfg``: :func:`adamw_ufm` from the
    figure's initialisation, measured by :func:`ufm_metrics` after each epoch of ``records``;
    also the initial norms ``W0_norm``, ``H0_norm`` and the sizes ``V``, ``m``, ``d``."""
    m = cfg.m_values[0]
    ds = scale_dataset(cfg.data, m)
    raw = raw_supports(ds)
    truth = _truth(raw, np.asarray(svm_point(cfg, m)["L_mm"], dtype=np.float64))
    d = cfg.protocol.dim
    theta = init_ufm_state(ds, TrainerConfig(cfg.protocol, "ufm"))
    W0, H0 = theta[: raw.V * d].reshape(raw.V, d), theta[raw.V * d :].reshape(d, raw.m)
    snaps = adamw_ufm(raw.counts, W0, H0, cfg.protocol, records)
    out: dict[str, Any] = {
        k: np.array([ufm_metrics(*snaps[e], truth)[k] for e in records]) for k in METRICS
    }
    out.update(
        W0_norm=float(np.linalg.norm(W0)),
        H0_norm=float(np.linalg.norm(H0)),
        V=raw.V,
        m=raw.m,
        d=d,
    )
    return out


def _records(cfg: ScaleConfig, res: dict[str, Any]) -> tuple[int, int, int]:
    """The indices of the records the checks read: the first, the one nearest to half of
    training, the last."""
    ep = np.asarray(res["epoch"])
    return 0, int(np.argmin(np.abs(ep - cfg.protocol.n_steps / 2))), len(ep) - 1


def check_ufm_reference(
    ledger: claims.Ledger, cfg: ScaleConfig, res: dict[str, Any]
) -> dict[str, float]:
    r"""The trained UFM is the paper's protocol run [geo, Sec. 3]: ``ufm-init``, its initial
    norms are those of PyTorch's default law (:math:`\|W_0\|_F^2\approx V/3`,
    :math:`\|H_0\|_F^2\approx d/3`, within :data:`INIT_SIGMAS` standard deviations of the
    law); ``ufm-reference``, at the smallest :math:`m` its six measures at the first, middle
    and last records equal those of :func:`ufm_reference` (largest relative difference, at
    most :data:`REFERENCE_RTOL`)."""
    idx = _records(cfg, res)
    ep = np.asarray(res["epoch"])
    ref = ufm_reference(cfg, tuple(int(ep[i]) for i in idx))
    V, m, d = ref["V"], ref["m"], ref["d"]

    # ||X||_F^2 of n entries U(-a, a): mean n a^2/3, relative sd sqrt(0.8 / n); the norm's
    # relative sd is half of it
    def z(norm: float, n: int, a2: float) -> float:
        return abs(norm / np.sqrt(n * a2 / 3.0) - 1.0) / (0.5 * np.sqrt(0.8 / n))

    init = max(z(ref["W0_norm"], V * d, 1.0 / d), z(ref["H0_norm"], d * m, 1.0 / m))
    ledger.check(
        "ufm-init",
        r"the UFM starts from PyTorch's default initialisation: $\|W_0\|_F$ and $\|H_0\|_F$ "
        "against their expectations (largest deviation in standard deviations)",
        init,
        claims.at_most(INIT_SIGMAS),
        source=UFM,
    )
    worst = 0.0
    for k in METRICS:
        ours = np.asarray(res[k])[0, list(idx)]
        worst = max(worst, float(np.max(np.abs(ours - ref[k]) / np.abs(ref[k]))))
    ledger.check(
        "ufm-reference",
        rf"at $m = {cfg.m_values[0]}$ the UFM's records (CE$-\mathcal H$, in-support distance, "
        "directions, embedding correlations; first, middle and last) are those of an "
        "independent re-implementation (torch AdamW, float64) from the same initialisation "
        "(largest relative difference)",
        worst,
        claims.at_most(REFERENCE_RTOL),
        source=UFM,
        digits=0,
    )
    return {"init": init, "reference": worst}


def _around(ref: float, tol: float, *, below: float | None = None, above: float | None = None):
    """``ref +- tol`` cut to the side the theory gives (an empty cut: only ``ref`` itself
    is outside it)."""
    lo, hi = ref - tol, ref + tol
    if above is not None:
        lo = max(lo, above)
    if below is not None:
        hi = min(hi, below)
    return claims.between(lo, hi) if lo <= hi else claims.between(hi, hi)


def check_ufm_trends(
    ledger: claims.Ledger, cfg: ScaleConfig, res: dict[str, Any]
) -> dict[str, float]:
    r"""The theory's statements on the trained UFM [geo, Secs. 2-3], at the smallest
    :math:`m` over training (``ce-falls``: :math:`\mathrm{CE}-\mathcal H` end over start) and
    over its second half (``pf-falls``, ``logits-towards-lmm``: end over middle;
    ``corr-h-rises``, ``corr-w-rises``: end minus middle), each equal to the reference run's
    (:func:`ufm_reference`) within :data:`REFERENCE_RTOL` and on the side the theory gives
    (a ratio below 1, a growth above 0).  The quick profile's short schedule was set on the
    Wikipedia sample: on another corpus it can be too short for the second half to show the
    trend, a known deviation there (band: a ratio up to 1.1, a growth down to -0.05; beyond
    them the run moves against the trend, an error), which the paper profile tests.
    """
    known_short = None
    if not res["corpus_default"] and ledger.profile == "quick":
        known_short = (
            rf"the quick profile's {cfg.protocol.n_steps}-epoch schedule was set so that this "
            rf"holds on the Wikipedia sample; on {res['corpus_label']} it can be too short for "
            "the second half to show the trend, which the paper profile tests"
        )
    first, half, last = _records(cfg, res)
    ep = np.asarray(res["epoch"])
    ref = ufm_reference(cfg, tuple(int(ep[i]) for i in (first, half, last)))
    at = f"at $m = {cfg.m_values[0]}$"
    out = {}
    specs = (
        ("ce-falls", "ce_minus_H", first, "ratio", PATH,
         rf"$\mathrm{{CE}}-\mathcal H$ falls during training {at} (last over first record)"),
        ("pf-falls", "pf_rel", half, "ratio", PATH,
         r"$\|P_F(L)-L^{\mathrm{in}}\|_F$ falls over the second half of training "
         rf"{at} (last over middle record)"),
        ("logits-towards-lmm", "dir_mm", half, "ratio", PATH,
         r"the direction of the centred $L-L^{\mathrm{in}}$ approaches $L^{\mathrm{mm}}$ "
         rf"over the second half {at} (distance, last over middle record)"),
        ("corr-h-rises", "corr_H", half, "growth", GEOM,
         r"the context geometry approaches that of $L^{\mathrm{mm}}$: the correlation of the "
         rf"cosine matrices grows over the second half {at} (last minus middle record)"),
        ("corr-w-rises", "corr_W", half, "growth", GEOM,
         r"the word geometry approaches that of $L^{\mathrm{mm}}$: the correlation of the "
         rf"cosine matrices grows over the second half {at} (last minus middle record)"),
    )  # fmt: skip
    for cid, key, start, kind, source, statement in specs:
        series = np.asarray(res[key])[0]
        i0 = 0 if start == first else 1
        if kind == "ratio":
            ours = float(series[last] / series[start])
            theirs = float(ref[key][2] / ref[key][i0])
            expect = _around(theirs, REFERENCE_RTOL * abs(theirs), below=1.0)
            band = (0.0, 1.1)
        else:
            ours = float(series[last] - series[start])
            theirs = float(ref[key][2] - ref[key][i0])
            expect = _around(theirs, REFERENCE_RTOL * abs(ref[key][2]), above=0.0)
            band = (-0.05, 0.0)
        out[cid] = ours
        ledger.check(
            cid,
            statement + " (equal to the reference run's)",
            ours,
            expect,
            source=source,
            reference=float(f"{theirs:.4g}"),
            reference_source="independent re-implementation (torch AdamW, float64)",
            known_deviation=known_short,
            band=band if known_short else None,
        )
    return out
