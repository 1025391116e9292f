r"""The checks of the geometry part's worked example (figure ``geo-hand-example``): three
words, three contexts, every object in closed form (:mod:`ntpcore.geo.experiments.hand`).

One function per statement of the figure (``figures.yml``, ``claims:``), each taking what
the run computed and the closed forms the notebook types by hand, and recording its claims
on the figure's ledger (:class:`ntpcore.figure.claims.Ledger`):

* :func:`check_lmm` -- :math:`L^{\mathrm{mm}}=\tilde S`, of nuclear norm :math:`\sqrt2`
  [geo, Sec. 2, nuclear-norm NTP-SVM]: the package's solver and cvxpy (solved here) agree
  with the hand form, and the certificate :math:`G_0` written by hand is dual feasible and
  closes the gap (evaluated here with numpy, not with the package's certificate code);
* :func:`check_closed_forms` -- :math:`L^{\mathrm{in}}` and the balanced factors of
  :math:`L^{\mathrm{mm}}` are the hand forms;
* :func:`check_collapse` -- along the regularization path, contexts 1 and 2 coincide in
  the max-margin subspace while in full their cosine rises slowly and their distance tends
  to :math:`\sqrt{2\log\frac p{1-p}}` [geo, Sec. 2, subspace collapse];
* :func:`check_path_limits` -- :math:`P_F(L_\lambda)\to L^{\mathrm{in}}` and the direction
  of :math:`L_\lambda` approaches that of :math:`L^{\mathrm{mm}}` [geo, Sec. 2, Theorem
  (regularization path)].

The path's measures (cosines, the collapse measure, distances, the finite part, the
direction) are recomputed here from the run's embeddings and logits (:func:`path_measures`),
not read from :func:`ntpcore.geo.subspace_collapse`, :func:`ntpcore.geo.project_F` or
:func:`ntpcore.geo.direction_distance`, which the notebook uses.

:func:`panels` says what every panel of the figure must show.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from ntpcore.figure import claims
from ntpcore.figure.sourcedata import Panels
from ntpcore.geo.checks.convex import DUAL, FACTORS, LIN, PROXY, SVM
from ntpcore.geo.checks.convex_path import PATH
from ntpcore.geo.checks.training import COLLAPSE
from ntpcore.geo.embeddings import subspace_collapse
from ntpcore.geo.svm import nuclear_svm_cvxpy
from ntpcore.geo.svm_problem import polar_certificate

__all__ = [
    "two_margin_gap",
    "GAP",
    "LIGHT",
    "LIMIT",
    "PROJ_COS",
    "RATE",
    "RAW_COS",
    "check_closed_forms",
    "check_collapse",
    "check_lmm",
    "check_path_limits",
    "panels",
    "path_measures",
]

#: largest difference of the specialised solver's L^mm from the hand form (its certificate
#: tolerance, 1e-8; measured: 1e-16) and of the factors derived from it
SOLVER_TOL = 1e-8
#: largest difference of cvxpy's (Clarabel) L^mm from the hand form (measured: 1e-9)
CVXPY_TOL = 1e-7
#: float64 rounding of closed forms evaluated in numpy
EXACT_TOL = 1e-12
#: the path solver's accuracy: the collapse measure and the rank are zero up to it
PATH_TOL = 1e-6
#: the finite part and the distance of contexts 1 and 2 converge like lambda: measured
#: ||P_F(L_lambda) - L^in||_F = 5.7-6.2 lambda and 1 - ||h_1 - h_2||/limit = 4.1 lambda on the
#: whole path; the checks allow RATE lambda, plus the solver's floor
RATE = 10.0
RATE_FLOOR = 1e-8
#: relative tolerance of 1 - cos(h_1, h_2) at the smallest lambda against the two-margin
#: reduction of the path (:func:`two_margin_gap`; measured agreement: 1e-8 at the book's
#: parameters)
RAW_COS_RTOL = 1e-4

#: the matrix panels' colour limits: this many times the largest entry (light colours)
LIGHT = 1.8
#: colour map of the matrix panels
DIVERGING = "RdBu_r"
#: labels of panels (e) and (f)
RAW_COS = r"$\cos(h_1, h_2)$"
PROJ_COS = "in the max-margin subspace"
GAP = r"$\|h_1 - h_2\|$"
LIMIT = r"limit $\sqrt{2\log\frac{p}{1-p}}$"
#: labels of panel (d)
CONTEXTS = ("context 1", "context 2", "context 3")
WORDS = ("word 1", "word 2", "word 3")


# ------------------------------------------------------------------------------------------
# L^mm and its certificate
# ------------------------------------------------------------------------------------------


def check_lmm(
    ledger: claims.Ledger,
    S: NDArray[np.bool_],
    L_mm: NDArray[np.float64],
    L_mm_hand: NDArray[np.float64],
    G0_hand: NDArray[np.float64],
) -> None:
    r""":math:`L^{\mathrm{mm}}` by hand (:math:`=\tilde S`) is the solution of the
    nuclear-norm NTP-SVM of the support ``S``, of nuclear norm :math:`\sqrt2`, certified by
    the hand certificate ``G0_hand`` [geo, Sec. 2, nuclear-norm NTP-SVM; NTP-SVM dual].

    Claims ``lmm-closed-form`` (the package's solver ``L_mm``), ``lmm-cvxpy`` (cvxpy with
    Clarabel, solved here), ``nuclear-norm`` (of ``L_mm``), ``certificate-feasible`` and
    ``certificate-gap`` (``G0_hand``, evaluated here), ``polar-certificate`` (the package's
    polar certificate of :math:`\tilde S`: its largest off-support entry is
    :math:`-1/\sqrt{18}`)."""
    S = np.asarray(S, dtype=bool)
    L_mm = np.asarray(L_mm, dtype=np.float64)
    L_hand = np.asarray(L_mm_hand, dtype=np.float64)
    G = np.asarray(G0_hand, dtype=np.float64)
    ledger.check(
        "lmm-closed-form",
        r"$L^{\mathrm{mm}}$ by hand ($=\tilde S$) equals the specialised solver's "
        r"(largest difference)",
        np.abs(L_mm - L_hand).max(),
        claims.at_most(SOLVER_TOL),
        source=SVM,
        digits=0,
    )
    L_cvx = nuclear_svm_cvxpy(S, solver="CLARABEL").L
    ledger.check(
        "lmm-cvxpy",
        r"$L^{\mathrm{mm}}$ by hand equals cvxpy's with Clarabel (largest difference)",
        np.abs(L_cvx - L_hand).max(),
        claims.at_most(CVXPY_TOL),
        source=SVM,
        digits=0,
    )
    ledger.check(
        "nuclear-norm",
        r"$\|L^{\mathrm{mm}}\|_* = \sqrt 2$ (the solver's value)",
        np.linalg.svd(L_mm, compute_uv=False).sum(),
        claims.close_to(np.sqrt(2.0), atol=SOLVER_TOL),
        source=SVM,
        digits=7,
    )
    off = ~S
    feasible = max(
        np.linalg.svd(G, compute_uv=False)[0] - 1.0,  # operator norm at most one
        np.abs(G.sum(axis=0)).max(),  # zero column sums
        max(0.0, G[off].max()),  # non-positive off the support
    )
    ledger.check(
        "certificate-feasible",
        r"$G_0$ by hand is dual feasible: $\|G_0\|_{op} - 1$, column sums, positive entries "
        r"off the support (largest)",
        feasible,
        claims.at_most(EXACT_TOL),
        source=DUAL,
        digits=0,
    )
    primal = np.linalg.svd(L_hand, compute_uv=False).sum()
    dual = -G[off].sum()  # -<J - S, G_0>
    ledger.check(
        "certificate-gap",
        r"$G_0$ by hand closes the duality gap: $(\|\tilde S\|_* - \mathrm{dual})/\|\tilde S\|_*$",
        abs(primal - dual) / primal,
        claims.at_most(EXACT_TOL),
        source=DUAL,
        digits=0,
    )
    ledger.check(
        "polar-certificate",
        r"the package's polar certificate of $\tilde S$: largest off-support entry "
        r"$= -1/\sqrt{18}$",
        polar_certificate(S)["max_off"],
        claims.close_to(-1.0 / np.sqrt(18.0), atol=EXACT_TOL),
        source=PROXY,
        digits=4,
    )


def check_closed_forms(
    ledger: claims.Ledger,
    L_in: NDArray[np.float64],
    W_mm: NDArray[np.float64],
    H_mm: NDArray[np.float64],
    L_in_hand: NDArray[np.float64],
    W_mm_hand: NDArray[np.float64],
    H_mm_hand: NDArray[np.float64],
) -> None:
    r""":math:`L^{\mathrm{in}}=a(1,-1,0)^\top(1,-1,0)` and the balanced factors
    :math:`W^{\mathrm{mm}}=2^{1/4}\hat u`, :math:`H^{\mathrm{mm}}=2^{1/4}\hat v^\top` are the
    package's (``L_in``; ``W_mm``, ``H_mm`` up to a common sign).  Claims
    ``lin-closed-form``, ``factors-closed-form``."""
    L_in, L_in_hand = np.asarray(L_in, np.float64), np.asarray(L_in_hand, np.float64)
    W, H = np.asarray(W_mm, np.float64), np.asarray(H_mm, np.float64)
    W_hand, H_hand = np.asarray(W_mm_hand, np.float64), np.asarray(H_mm_hand, np.float64)
    ledger.check(
        "lin-closed-form",
        r"$L^{\mathrm{in}}$ by hand equals the package's (largest difference)",
        np.abs(L_in - L_in_hand).max(),
        claims.at_most(EXACT_TOL),
        source=LIN,
        digits=0,
    )
    sign = 1.0 if float(np.sum(H * H_hand)) >= 0 else -1.0  # a factorisation's common sign
    ledger.check(
        "factors-closed-form",
        r"balanced factors by hand: $W^{\mathrm{mm}} = 2^{1/4}\hat u$, "
        r"$H^{\mathrm{mm}} = 2^{1/4}\hat v^\top$ "
        r"(largest difference, up to a common sign)",
        max(np.abs(sign * W - W_hand).max(), np.abs(sign * H - H_hand).max()),
        claims.at_most(SOLVER_TOL),
        source=FACTORS,
        digits=0,
    )


# ------------------------------------------------------------------------------------------
# The regularization path
# ------------------------------------------------------------------------------------------


def path_measures(res: dict[str, Any]) -> dict[str, NDArray[np.float64]]:
    r"""Per :math:`\lambda` of the path (:func:`ntpcore.geo.experiments.run_hand_example`),
    from its embeddings and logits: ``raw_cos`` (:math:`\cos(h_1,h_2)`), ``proj_rel``
    (:math:`\|\Pi_1(h_1-h_2)\|/\|\Pi_1h_1\|`, :math:`\Pi_1` the projector on the top
    right-singular direction of the word embeddings), ``gap`` (:math:`\|h_1-h_2\|`) and
    ``rank`` (the logits' third singular value over the largest)."""
    words = np.asarray(res["words"], dtype=np.float64)
    contexts = np.asarray(res["contexts"], dtype=np.float64)
    h1, h2 = contexts[:, 0], contexts[:, 1]
    raw_cos = np.einsum("kc,kc->k", h1, h2) / np.sqrt(
        np.einsum("kc,kc->k", h1, h1) * np.einsum("kc,kc->k", h2, h2)
    )
    proj_rel = np.empty(len(words))
    for k, (w, c) in enumerate(zip(words, contexts, strict=True)):
        top = np.linalg.svd(w)[2][0]  # the diverging direction of the word embeddings
        proj_rel[k] = abs((c[0] - c[1]) @ top) / abs(c[0] @ top)
    L = np.asarray(res["L"], dtype=np.float64)
    sv = np.linalg.svd(L, compute_uv=False)
    return {
        "raw_cos": raw_cos,
        "proj_rel": proj_rel,
        "gap": np.sqrt(np.einsum("kc,kc->k", h1 - h2, h1 - h2)),
        "rank": sv[:, 2] / sv[:, 0],
    }


def _rate_tol(lam: float) -> float:
    return RATE * lam + RATE_FLOOR


def two_margin_gap(p: float, lam: float) -> float:
    r""":math:`1-\cos(h_1,h_2)` at :math:`\lambda` from a reduction of the path to two
    numbers, computed without the package's path solver: at small :math:`\lambda` the logits
    are :math:`L^{\mathrm{in}}` plus a rank-one part :math:`(1,1,-2)^\top(\beta,\beta,\gamma)`
    with margins :math:`s_1=3\beta` (contexts 1, 2) and :math:`s_3=-3\gamma` (context 3) and
    nuclear norm :math:`\tfrac{\sqrt6}{3}\sqrt{2s_1^2+s_3^2}`; the CE plus :math:`\lambda`
    times it is minimised over :math:`(s_1, s_3)` (Nelder-Mead), and the balanced factors'
    coordinates give the cosine (in-support coordinate squared :math:`a`, max-margin
    coordinate squared :math:`\tfrac{\sqrt6 s_1^2}{3\sqrt{2s_1^2+s_3^2}}`)."""
    from scipy.optimize import minimize

    a = 0.5 * np.log(p / (1 - p))

    def objective(s: NDArray[np.float64]) -> float:
        s1, s3 = s
        ce = 2 * np.log1p(np.exp(-s1) / (2 * np.cosh(a))) + np.log1p(2 * np.exp(-s3))
        return float(ce / 3 + lam * np.sqrt(6) / 3 * np.hypot(np.sqrt(2) * s1, s3))

    s0 = np.log(1 / lam)
    opt = minimize(
        objective,
        [s0, s0],
        method="Nelder-Mead",
        options={"xatol": 1e-12, "fatol": 1e-22, "maxiter": 20_000},
    )
    s1, s3 = opt.x
    y1_sq = np.sqrt(6) * s1**2 / (3 * np.hypot(np.sqrt(2) * s1, s3))
    return float(2 * a / (a + y1_sq))


def check_collapse(ledger: claims.Ledger, res: dict[str, Any], gap_limit_hand: float) -> None:
    r"""Along the path, contexts 1 and 2 (same support, different probabilities) coincide in
    the max-margin subspace at every :math:`\lambda`, while in full their cosine rises
    towards 1 only slowly and their distance tends to :math:`\sqrt{2\log(p/(1-p))}`
    (``gap_limit_hand``) [geo, Sec. 2, subspace collapse].

    Claims ``path-rank-two`` (sanity: the embeddings are two-dimensional), ``collapse-exact``,
    ``raw-cos-rises``, ``raw-cos-below-one`` (two-sided, against :func:`two_margin_gap`) and
    ``gap-limit`` (within :data:`RATE` :math:`\lambda`)."""
    m = path_measures(res)
    lam = float(np.asarray(res["lambdas"])[-1])
    p = float(np.asarray(res["P"])[0, 0])
    ledger.check(
        "path-rank-two",
        r"the path's logits have rank two: third singular value over the largest (largest "
        r"over the path)",
        m["rank"].max(),
        claims.at_most(PATH_TOL),
        source=PATH,
        digits=0,
        sanity=True,
    )
    ledger.check(
        "collapse-exact",
        r"contexts 1 and 2 coincide in the max-margin subspace: "
        r"$\|\Pi_1(h_1 - h_2)\|/\|\Pi_1 h_1\|$ (largest over the path)",
        m["proj_rel"].max(),
        claims.at_most(PATH_TOL),
        source=COLLAPSE,
        digits=0,
    )
    raw = m["raw_cos"]
    ledger.check(
        "raw-cos-rises",
        r"$\cos(h_1, h_2)$ in full rises over the last half of the path",
        bool(np.all(np.diff(raw[len(raw) // 2 :]) > 0)),
        claims.holds(),
        source=COLLAPSE,
    )
    ledger.check(
        "raw-cos-below-one",
        r"$1 - \cos(h_1, h_2)$ in full at the smallest $\lambda$: not collapsed in full, the "
        r"value of the path reduced to two margins",
        1.0 - raw[-1],
        claims.close_to(two_margin_gap(p, lam), rtol=RAW_COS_RTOL),
        source=COLLAPSE,
        digits=4,
    )
    ledger.check(
        "gap-limit",
        r"$\|h_1 - h_2\|$ at the smallest $\lambda$ over its limit $\sqrt{2\log(p/(1-p))}$ by "
        r"hand (to $10\lambda + 10^{-8}$)",
        m["gap"][-1] / gap_limit_hand,
        claims.close_to(1.0, atol=_rate_tol(lam)),
        source=COLLAPSE,
        digits=4,
    )


def check_path_limits(
    ledger: claims.Ledger,
    res: dict[str, Any],
    L_mm_hand: NDArray[np.float64],
    L_in_hand: NDArray[np.float64],
) -> None:
    r""":math:`P_F(L_\lambda)\to L^{\mathrm{in}}` (within :data:`RATE` :math:`\lambda` at the
    smallest :math:`\lambda`) and the direction of :math:`L_\lambda` approaches that of
    :math:`L^{\mathrm{mm}}` monotonically [geo, Sec. 2, Theorem (regularization path)].
    Claims ``finite-part``, ``direction-decreasing``."""
    L = np.asarray(res["L"], dtype=np.float64)
    S = np.asarray(res["P"]) > 0
    lam = float(np.asarray(res["lambdas"])[-1])
    last = L[-1]
    k = S.sum(axis=0)
    centred = np.where(S, last - (last * S).sum(axis=0) / k, 0.0)  # P_F: centre on the support
    ledger.check(
        "finite-part",
        r"$\|P_F(L_\lambda) - L^{\mathrm{in}}\|_F$ at the smallest $\lambda$ "
        r"(at most $10\lambda + 10^{-8}$)",
        np.sqrt(np.sum((centred - np.asarray(L_in_hand)) ** 2)),
        claims.at_most(_rate_tol(lam)),
        source=PATH,
        digits=0,
    )
    unit_mm = np.asarray(L_mm_hand, dtype=np.float64)
    unit_mm = unit_mm / np.sqrt(np.sum(unit_mm**2))
    norms = np.sqrt(np.einsum("kzj,kzj->k", L, L))
    D = L / norms[:, None, None] - unit_mm
    direction = np.sqrt(np.einsum("kzj,kzj->k", D, D))
    ledger.check(
        "direction-decreasing",
        r"$\|L_\lambda/\|L_\lambda\| - L^{\mathrm{mm}}/\|L^{\mathrm{mm}}\|\|$ decreases "
        r"along the path",
        bool(np.all(np.diff(direction) < 0)),
        claims.holds(),
        source=PATH,
    )


# ------------------------------------------------------------------------------------------
# The figure
# ------------------------------------------------------------------------------------------


def panels(
    res: dict[str, Any],
    P: NDArray[np.float64],
    L_mm: NDArray[np.float64],
    L_in: NDArray[np.float64],
    gap_limit_hand: float,
) -> Panels:
    r"""What the figure must show: (a)-(c) the images of ``P``, ``L_mm`` and ``L_in`` with
    the diverging map and colour limits :data:`LIGHT` times their largest entry; (d) every
    context's and every word's path in the plane (in-support, max-margin); (e) the cosine of
    contexts 1 and 2 in full and in the max-margin subspace
    (:func:`ntpcore.geo.subspace_collapse`, as the notebook reports it) and (f) their
    distance with its limit, against :math:`\log_{10}(1/\lambda)`."""
    want = Panels()
    for p, M in enumerate((P, L_mm, L_in)):
        M = np.asarray(M, dtype=np.float64)
        vmax = LIGHT * np.abs(M).max()
        want.axes(p).image(p, M, clim=(-vmax, vmax), cmap=DIVERGING)
    lambdas = np.asarray(res["lambdas"], dtype=np.float64)
    contexts = np.asarray(res["contexts"], dtype=np.float64)
    words = np.asarray(res["words"], dtype=np.float64)
    want.axes(3)
    for j, name in enumerate(CONTEXTS):
        want.line(3, name, contexts[:, j, 0], contexts[:, j, 1])
    for z, name in enumerate(WORDS):
        want.line(3, name, words[:, z, 0], words[:, z, 1])
    x = np.log10(1 / lambdas)
    h1, h2 = contexts[:, 0], contexts[:, 1]
    raw_cos = np.sum(h1 * h2, axis=1) / (np.linalg.norm(h1, axis=1) * np.linalg.norm(h2, axis=1))
    proj_cos = np.array(
        [
            subspace_collapse(w, c.T, [[0, 1]], r=1)["proj_cos"][0]
            for w, c in zip(words, contexts, strict=True)
        ]
    )
    want.axes(4).line(4, RAW_COS, x, raw_cos).line(4, PROJ_COS, x, proj_cos)
    want.axes(5).line(5, GAP, x, np.linalg.norm(h1 - h2, axis=1))
    want.line(5, LIMIT, [0.0, 1.0], [gap_limit_hand, gap_limit_hand])
    return want
