r"""Checks of the data and the two solutions of the linear paper (Figs. 1-3, Prop. 1).

* :func:`synthetic_set` -- the entropy of App. A.2's set against the paper's 1.445 nats,
  within the spread of our law's draws, and the paper's value as a draw of that law;
* :func:`finite_part` -- :math:`W^\star` of Def. 1 against the independent minimum-norm
  solution of (4);
* :func:`max_margin` -- :math:`W^{\mathrm{mm}}` of Def. 3 (or its norm, where a figure
  measures with it) against the independent cvxpy solve;
* :func:`toy_geometry`, :func:`toy_rows` -- what Figs. 1-2 show of the rows;
* :func:`prop1` -- Prop. 1 along :math:`W^\star + \gamma W^{\mathrm{mm}}`.
"""

from __future__ import annotations

import numpy as np

import ntpcore.lin.checks.reference as ref
from ntpcore.figure import claims
from ntpcore.lin.checks.common import ROUNDOFF, SOLVE_RTOL, SOLVE_SOURCE, fmt, rel_dev
from ntpcore.lin.checks.training import data_of, references
from ntpcore.lin.data import make_synthetic

__all__ = ["finite_part", "max_margin", "prop1", "synthetic_set", "toy_geometry", "toy_rows"]

#: The paper's realisation of App. A.2 and its entropy (nats).
PAPER_ENTROPY = 1.445
#: Draws of our law of App. A.2 whose entropies give the band (seeds 1000, 1001, ...).
LAW_DRAWS = 200


def _entropy(P: np.ndarray, pi: np.ndarray) -> float:
    """Conditional entropy of eq. (3) summed over the raw in-support entries."""
    out = 0.0
    for j in range(P.shape[1]):
        p = P[:, j][P[:, j] > 0]
        out -= pi[j] * float(np.sum(p * np.log(p)))
    return out


def synthetic_set(ledger: claims.Ledger, cfg, res: dict) -> None:
    r"""App. A.2's set has entropy :math:`\mathcal H\approx 1.445` nats: ours against the
    band of our law (mean +- 4 standard deviations over :data:`LAW_DRAWS` draws with the
    same settings), and the paper's value as a draw of our law (its z-score)."""
    data = data_of(cfg)
    ours = _entropy(res["P"], data.pi)
    law = np.array(
        [
            _entropy(d.P, d.pi)
            for d in (
                make_synthetic(
                    cfg.n_contexts,
                    cfg.dim,
                    cfg.vocab_size,
                    cfg.support_size,
                    1000 + s,
                    emb=cfg.emb,
                    prob=cfg.prob,
                )
                for s in range(LAW_DRAWS)
            )
        ]
    )
    mean, sd = float(law.mean()), float(law.std(ddof=1))
    ledger.check(
        "entropy",
        r"entropy $\mathcal H$ of the synthetic set (nats)",
        ours,
        claims.between(mean - 4 * sd, mean + 4 * sd),
        source="[lin, App. A.2]",
        paper=PAPER_ENTROPY,
        paper_source="[lin, App. A.2]",
        reference=fmt(mean),
        reference_source=f"mean over {LAW_DRAWS} draws of the same law; band +- 4 sd",
        digits=4,
    )
    ledger.check(
        "entropy-law",
        r"the paper's $\mathcal H = 1.445$ as a draw of our law: its z-score",
        (PAPER_ENTROPY - mean) / sd,
        claims.close_to(0.0, atol=2.0),
        source="[lin, App. A.2]",
        paper=PAPER_ENTROPY,
        paper_source="[lin, App. A.2]",
        note="in-support probabilities drawn uniformly on the simplex (Dirichlet(1)); "
        "normalised uniform draws would put the paper's value about 6 sd below the mean",
    )


def finite_part(ledger: claims.Ledger, cfg, W_star: np.ndarray) -> None:
    r"""Def. 1: :math:`W^\star` is the unique solution of (4) in F: the figure's against the
    minimum-norm solution over every in-support pair (independent code) on the training set
    of ``cfg``."""
    theirs = references(data_of(cfg))["W_star"]
    ledger.check(
        "w-star",
        r"$W^\star$ against the independent solution of (4) in $\mathcal F$: "
        r"$\|W^\star - W^\star_{\mathrm{ref}}\|/\|W^\star_{\mathrm{ref}}\|$",
        rel_dev(W_star, theirs),
        claims.at_most(SOLVE_RTOL),
        source="[lin, Def. 1, eq. (4)]",
        reference=fmt(float(np.linalg.norm(theirs))) + " (its norm)",
        reference_source=SOLVE_SOURCE["W_star"],
        digits=0,
    )


def max_margin(
    ledger: claims.Ledger,
    cfg,
    *,
    W_mm: np.ndarray | None = None,
    norm_mm: float | None = None,
) -> None:
    r"""Def. 3: the figure's :math:`W^{\mathrm{mm}}` (``W_mm``), or the norm it measured
    with (``norm_mm``, where the run keeps only that), against the independent solve on the
    training set of ``cfg``."""
    theirs = references(data_of(cfg))["W_mm"]
    norm = float(np.linalg.norm(theirs))
    if W_mm is not None:
        ledger.check(
            "w-mm",
            r"$W^{\mathrm{mm}}$ against the independent NTP-SVM solve $W_{\mathrm{ref}}$: "
            r"$\|W^{\mathrm{mm}} - W_{\mathrm{ref}}\|/\|W_{\mathrm{ref}}\|$",
            rel_dev(W_mm, theirs),
            claims.at_most(SOLVE_RTOL),
            source="[lin, Def. 3]",
            reference=fmt(norm) + " (its norm)",
            reference_source=SOLVE_SOURCE["W_mm"],
            digits=0,
        )
    if norm_mm is not None:
        ledger.check(
            "norm-mm",
            r"$\|W^{\mathrm{mm}}\|$ (the inverse of the NTP-margin)",
            norm_mm,
            claims.close_to(norm, rtol=SOLVE_RTOL),
            source="[lin, Def. 3]",
            reference=fmt(norm),
            reference_source=SOLVE_SOURCE["W_mm"],
        )


def toy_geometry(ledger: claims.Ledger, toy: dict) -> None:
    r"""Fig. 1: "w_3 (almost) aligns with :math:`\bar h_A`", and the length of
    :math:`W^{\mathrm{mm}}`, against an independent re-implementation of the toy with the
    same embeddings (unit vectors at 10, 100 and 260 degrees)."""
    W, H = np.asarray(toy["W_mm"]), np.asarray(toy["H"])
    angle = np.degrees(np.arccos(W[2] @ H[:, 0] / (np.linalg.norm(W[2]) * np.linalg.norm(H[:, 0]))))
    ledger.check(
        "w3-along-a",
        r"angle between $w_3$ and $\bar h_A$ (degrees)",
        float(angle),
        claims.close_to(9.68, atol=0.02),
        source="[lin, Fig. 1]",
        reference="9.68 (w_3 = (2.301, 0.013))",
        reference_source="independent re-implementation of the toy (angles 10, 100, 260 degrees)",
    )
    ledger.check(
        "norm-mm-toy",
        r"$\|W^{\mathrm{mm}}\|$ of the toy",
        float(np.linalg.norm(W)),
        claims.close_to(6.479, atol=0.001),
        source="[lin, Fig. 1]",
        reference="6.479",
        reference_source="independent re-implementation of the toy (angles 10, 100, 260 degrees)",
        digits=4,
    )


def toy_rows(ledger: claims.Ledger, toy: dict) -> None:
    r"""Figs. 1-2: words 1 and 5 follow the same contexts (B and C), so their rows coincide
    in :math:`W^{\mathrm{mm}}` (which sees only the supports) and differ in
    :math:`W^\star`, whose difference :math:`w_1 - w_5` is fixed by the two log-odds
    :math:`\log(\hat p_{j,1}/\hat p_{j,5})`, j = B, C (eq. (4) in d = 2)."""
    W_mm, W_star = np.asarray(toy["W_mm"]), np.asarray(toy["W_star"])
    H, P = np.asarray(toy["H"]), np.asarray(toy["P"])
    ledger.check(
        "w1-equals-w5",
        r"$\|w_1 - w_5\|/\|W^{\mathrm{mm}}\|$ in $W^{\mathrm{mm}}$ (same contexts)",
        float(np.linalg.norm(W_mm[0] - W_mm[4]) / np.linalg.norm(W_mm)),
        claims.at_most(1e-6),
        source="[lin, Fig. 2, middle]",
        digits=0,
    )
    both = [j for j in range(P.shape[1]) if P[0, j] > 0 and P[4, j] > 0]
    diff = np.linalg.solve(H[:, both].T, np.log(P[0, both] / P[4, both]))
    ledger.check(
        "w1-minus-w5-star",
        r"$\|w_1 - w_5\|$ in $W^\star$ (different probabilities)",
        float(np.linalg.norm(W_star[0] - W_star[4])),
        claims.close_to(float(np.linalg.norm(diff)), rtol=ROUNDOFF),
        source="[lin, Fig. 2, right]",
        reference=fmt(float(np.linalg.norm(diff))),
        reference_source="solved from the log-odds of words 1 and 5 after contexts B and C",
    )


def prop1(ledger: claims.Ledger, cfg, W_star: np.ndarray, W_mm: np.ndarray) -> None:
    r"""Prop. 1 and eq. (7): along :math:`W^\star + \gamma W^{\mathrm{mm}}` the loss reaches
    :math:`\mathcal H` like :math:`e^{-\gamma}` (the active margins are 1): the slope of
    :math:`\log(\mathrm{CE} - \mathcal H)` in :math:`\gamma` on [10, 20], the excess loss
    summed term by term by the independent code, on the training set of ``cfg``."""
    data = data_of(cfg)
    gap = [ref.excess_loss(W_star + g * W_mm, data.H, data.P, data.pi) for g in (10.0, 20.0)]
    ledger.check(
        "prop1-rate",
        r"slope of $\log(\mathrm{CE} - \mathcal H)$ in $\gamma$ along "
        r"$W^\star + \gamma W^{\mathrm{mm}}$, $\gamma \in [10, 20]$",
        float(np.log(gap[1] / gap[0]) / 10.0),
        claims.close_to(-1.0, atol=0.01),
        source="[lin, Prop. 1, eq. (7)]",
        note="the margins above 1 and the second-order term of log(1 + x) move it by less "
        "than 0.005 on the toy and the A.2 set (measured 2026-11-28)",
    )
