r"""The checks of the objects a self-attention figure uses (key ``att``): its data and their
TPGs and SCCs (book ``att-def-tpg``, ``att-def-scc``), the Graph-SVM :math:`W^{\mathrm{svm}}`
(``att-def-graph-svm``) and the finite component :math:`W^{\mathrm{fin}}` (``att-def-wfin``),
each against its independent build (:mod:`ntpcore.att.checks.independent`), in every figure
that plots or measures it.

A run's results ``res`` hold, per trial, the data (``E``, ``tokens``, ``labels``) and the
objects it used (``W_svm``, ``W_fin``, ...); the reference ``ref``
(:mod:`ntpcore.att.checks.references`) their independent builds.

Tolerances: the solvers' accuracy (cvxpy + Clarabel at tight tolerances: 1e-6 relative for
:math:`W^{\mathrm{svm}}`, 1e-7 on its margins; Newton on both sides: 1e-8 for
:math:`W^{\mathrm{fin}}`).
"""

from __future__ import annotations

import numpy as np

import ntpcore.att.checks.independent as ind
from ntpcore.figure import claims

__all__ = [
    "DEFS",
    "coarse",
    "FIN",
    "SVM",
    "finite_component",
    "graph_svm",
    "sccs",
    "seed_tolerance",
    "trials",
]

DEFS = "[att, TPG and SCC definitions]"
SVM = "[att, Graph-SVM definition]"
FIN = "[att, finite component W^fin]"


def coarse(tol: float, grid: float = 0.005) -> float:
    """A tolerance rounded up to the ``grid``: printed in a claim's comparison, it is then the
    same on every machine (the spread it comes from moves in its last digits)."""
    return float(np.ceil(tol / grid - 1e-9) * grid)


def seed_tolerance(values, n_paper: int = 10, reading: float = 0.01) -> float:
    """Tolerance of our mean over trials against a mean the paper reads off a plot: 3 standard
    errors of the difference (our trials' standard deviation for both, the paper's
    ``n_paper`` trials) plus ``reading``, the precision of reading the plot (:func:`coarse`)."""
    v = np.asarray(values, dtype=float)
    return coarse(3.0 * v.std() * np.sqrt(1.0 / v.size + 1.0 / n_paper) + reading)


def trials(d: dict, *keys: str) -> list[np.ndarray]:
    """The arrays ``d[key]`` with a leading trial axis: a single dataset's (``E`` of shape
    (K, d)) get one."""
    single = np.ndim(d["E"]) == 2 if "E" in d else np.ndim(d["W_svm"]) == 2
    return [np.asarray(d[k])[None] if single else np.asarray(d[k]) for k in keys]


def sccs(ledger, res: dict, ref: dict, cfg) -> None:
    """The data the run drew and the SCC structure it used: the paper's sampling protocol on
    the raw sequences, and the SCCs against an independent build from them."""
    tok, lab = np.asarray(res["tokens"]), np.asarray(res["labels"])
    distinct = np.array([[len(np.unique(s)) for s in t] for t in tok])
    off_protocol = (distinct != min(cfg.seq_len, cfg.vocab_size)) | ~np.any(
        tok == lab[..., None], axis=-1
    )
    ledger.check(
        "data-protocol",
        f"every sequence holds {min(cfg.seq_len, cfg.vocab_size)} distinct tokens and its "
        "label (the paper's sampling): sequences that do not",
        float(off_protocol.sum()),
        claims.at_most(0),
        source="[att, experiments: data]",
        digits=1,
    )
    differ = (
        (np.asarray(res["dim_S_fin"]) != ref["dim_S_fin"])
        | (np.asarray(res["n_cyclic_samples"]) != ref["n_cyclic_samples"])
        | np.any(np.asarray(res["mask"]) != ref["mask"], axis=(1, 2))
    )
    acyclic = cfg.graph == "acyclic"
    wrong = (ref["largest_scc"] > 1) if acyclic else (ref["cyclic_tpgs"] == 0)
    cond = "every TPG acyclic" if acyclic else "at least one TPG with a cycle"
    ledger.check(
        "sccs-independent",
        r"the SCCs behind the run (its reduced sequences, cyclic samples and "
        r"$\dim S_{\mathrm{fin}}$) equal an independent build from the raw sequences (numpy "
        f"adjacency, scipy strong components), and every trial has {cond}: trials that differ",
        float(np.sum(differ | wrong)),
        claims.at_most(0),
        source=DEFS,
        digits=1,
    )


def graph_svm(ledger, res: dict, ref: dict) -> None:
    r"""The run's :math:`W^{\mathrm{svm}}` certified on the independently built constraints and
    equal to their cvxpy solution."""
    E, tok, lab, W = trials(res, "E", "tokens", "labels", "W_svm")
    worst_margin, worst_eq, n_eq = 0.0, 0.0, 0
    for b in range(len(E)):
        A_eq, A_in = ind.constraint_rows(E[b], ind.graphs(tok[b], lab[b], E.shape[1]))
        w = W[b].ravel()
        if A_in.shape[0]:
            worst_margin = max(worst_margin, abs(float((A_in @ w).min()) - 1.0))
        if A_eq.shape[0]:
            worst_eq, n_eq = max(worst_eq, float(np.abs(A_eq @ w).max())), n_eq + len(A_eq)
    ledger.check(
        "svm-margins",
        r"$(e_i - e_j)^\top W^{\mathrm{svm}} e_k \geq 1$ on every edge between SCCs, with equality "
        r"on the closest (the margin is active): largest deviation of the smallest margin from 1",
        worst_margin,
        claims.at_most(1e-7),
        source=SVM,
        digits=0,
    )
    if n_eq:
        ledger.check(
            "svm-equalities",
            r"$(e_i - e_j)^\top W^{\mathrm{svm}} e_k = 0$ on every edge inside an SCC (largest "
            "violation)",
            worst_eq,
            claims.at_most(1e-8),
            source=SVM,
            digits=0,
        )
    (W_ref,) = trials(ref, "W_svm")
    rel = np.linalg.norm(W - W_ref, axis=(1, 2)) / np.maximum(np.linalg.norm(W_ref, axis=(1, 2)), 1)
    ledger.check(
        "svm-independent",
        r"$W^{\mathrm{svm}}$ equals the cvxpy solution of the constraints built independently "
        "(largest relative difference)",
        float(rel.max()),
        claims.at_most(1e-6),
        source=SVM,
        digits=0,
    )


def finite_component(ledger, res: dict, ref: dict) -> None:
    r"""The run's :math:`W^{\mathrm{fin}}` and :math:`L_\star` against the independent Newton
    solve of the reduced loss (torch autograd) on the independent :math:`S_\mathrm{fin}`."""
    diff = np.linalg.norm(trials(res, "W_fin")[0] - trials(ref, "W_fin")[0], axis=(1, 2))
    if "L_star" in res:
        diff = np.maximum(diff, np.abs(np.asarray(res["L_star"]) - ref["L_star"]))
    ledger.check(
        "wfin-independent",
        r"$W^{\mathrm{fin}}$ (and $L_\star = L_{\mathrm{fin}}(W^{\mathrm{fin}})$) equal an "
        r"independent minimisation of the reduced loss on $S_{\mathrm{fin}}$ (torch autograd, "
        r"Newton): largest $\|\Delta W^{\mathrm{fin}}\|_F$ or $|\Delta L_\star|$",
        float(diff.max()),
        claims.at_most(1e-8),
        source=FIN,
        digits=0,
    )
