r"""The independent references of the self-attention figures (key ``att``), one per experiment.

Each takes the run's results (its data, initialisations and the objects it used) and
computes what the figure plots a second time, with the independent builds of
:mod:`ntpcore.att.checks.independent` and the torch descents of
:mod:`ntpcore.att.checks.retrace`: the same data, different code.  The checks of
:mod:`ntpcore.att.checks.statements` compare the two.  The references are cached like the
experiments (keyed on the experiment's configuration, which determines its data).
"""

from __future__ import annotations

import warnings

import numpy as np

import ntpcore.att.checks.independent as ind
from ntpcore.att.checks.retrace import descent
from ntpcore.core.cache import cached
from ntpcore.core.optim import log_steps
from ntpcore.errors import InfeasibleError, SolverError

__all__ = [
    "global_reference",
    "local_graphs",
    "local_reference",
    "local_selection",
    "path_reference",
    "path_solve",
    "recorded_steps",
    "scc_masses",
    "statistics_reference",
    "tpg_statistics",
]


def recorded_steps(cfg) -> np.ndarray:
    """The steps a global experiment records: every step of normalized GD, ~200 log-spaced
    steps of plain GD."""
    if cfg.optimizer == "ngd":
        return np.arange(cfg.n_steps + 1)
    return np.unique(log_steps(cfg.n_steps, 200))


def scc_masses(s, tokens, G: ind.Graphs, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """From attention ``s`` (S, n, T): the mean over samples of the largest attention mass on
    one SCC of :math:`G^{(k_i)}` and of the mass on the positions of ``mask`` (S,)."""
    tok = np.asarray(tokens)
    best = np.zeros(s.shape[0])
    for i, seq in enumerate(tok):
        comp = G.comp[seq[-1]][seq]  # (T,) the SCC of each position's token
        onehot = comp[:, None] == np.unique(comp)[None, :]  # (T, c)
        best += (s[:, i] @ onehot).max(axis=-1)
    masked = np.zeros(s.shape[0]) if mask is None else np.sum(s * mask, axis=-1).mean(axis=-1)
    return best / len(tok), masked


@cached
def global_reference(cfg, res: dict) -> dict:
    """The global-convergence curves (:func:`ntpcore.att.experiments.run_global`) of the same
    trials, recomputed: TPGs, SCCs, :math:`W^{\\mathrm{svm}}`, :math:`W^{\\mathrm{fin}}` and
    :math:`S_\\mathrm{fin}` built independently, the W runs and the reduced runs retraced by
    torch autograd at the run's recorded steps, and every metric from its definition.

    Arrays ``(n_trials, S)`` under the run's names, and per trial ``W_svm``, ``W_fin``,
    ``L_star``, ``mask``, ``dim_S_fin``, ``n_cyclic_samples``, ``largest_scc`` (largest SCC of
    any TPG) and ``cyclic_tpgs`` (TPGs with a cycle)."""
    E, tok, lab, W0 = (np.asarray(res[k]) for k in ("E", "tokens", "labels", "W0"))
    B, n, _ = tok.shape
    K, d = E.shape[1:]
    per = {k: [] for k in ("W_svm", "W_fin", "L_star", "mask", "weight", "basis", "G")}
    for b in range(B):
        G = ind.graphs(tok[b], lab[b], K)
        W_fin, L_star = ind.finite_component(E[b], tok[b], lab[b], G)
        mask, cyclic = ind.reduced_data(tok[b], lab[b], G)
        per["G"].append(G)
        per["W_svm"].append(ind.graph_svm(E[b], G))
        per["W_fin"].append(W_fin)
        per["L_star"].append(L_star)
        per["mask"].append(mask)
        per["weight"].append(np.where(cyclic, 1.0 / n, 0.0))
        per["basis"].append(ind.fin_basis(E[b], G))
    steps = recorded_steps(cfg)
    traj = descent(
        np.concatenate([E, E]),
        np.concatenate([tok, tok]),
        np.concatenate([lab, lab]),
        np.concatenate([W0, np.zeros_like(W0)]),
        lr=cfg.lr,
        n_steps=cfg.n_steps,
        normalized=cfg.optimizer == "ngd",
        record=steps,
        mask=np.concatenate([np.ones(tok.shape, bool), np.array(per["mask"])]),
        weight=np.concatenate([np.full((B, n), 1.0 / n), np.array(per["weight"])]),
    )
    keys = ("corr_svm", "corr_full", "proj_corr", "norm_diff", "fin_err", "attn_best")
    keys += ("attn_label", "loss", "loss_gap", "W_norm")
    out = {k: np.zeros((B, len(steps))) for k in keys}
    for b in range(B):
        W, W_red = traj[:, b], traj[:, B + b]
        W_svm, W_fin, basis = per["W_svm"][b], per["W_fin"][b], per["basis"][b]
        svm_sq = float(np.sum(W_svm**2))
        R = float(np.sum((W[-1] - W_fin) * W_svm)) / svm_sq if svm_sq > 0 else 0.0
        P = ind.project(W, basis)
        out["corr_svm"][b] = ind.corr(W, W_svm)
        out["corr_full"][b] = ind.corr(W, W_fin + R * W_svm)
        out["proj_corr"][b] = ind.corr(W - P, W_svm)
        out["norm_diff"][b] = np.linalg.norm(P - W_red, axis=(-2, -1))
        out["fin_err"][b] = np.linalg.norm(P - W_fin, axis=(-2, -1))
        s = ind.attention(W, E[b], tok[b])
        out["attn_best"][b], out["attn_label"][b] = scc_masses(
            s, tok[b], per["G"][b], per["mask"][b]
        )
        out["loss"][b] = ind.log_loss(W, E[b], tok[b], lab[b])
        out["loss_gap"][b] = out["loss"][b] - per["L_star"][b]
        out["W_norm"][b] = np.linalg.norm(W, axis=(-2, -1))
    graphs = per["G"]
    return {
        **out,
        "steps": steps,
        "W_svm": np.array(per["W_svm"]),
        "W_fin": np.array(per["W_fin"]),
        "L_star": np.array(per["L_star"]),
        "mask": np.array(per["mask"]),
        "dim_S_fin": np.array([b.shape[0] for b in per["basis"]]),
        "n_cyclic_samples": np.array([int(np.sum(w > 0)) for w in per["weight"]]),
        "largest_scc": np.array([max(np.bincount(c).max() for c in G.comp) for G in graphs]),
        "cyclic_tpgs": np.array([sum(G.cyclic(k) for k in range(K)) for G in graphs]),
    }


def local_selection(W, E, tokens, K: int, c_thres: float, e_thres: float):
    """The tokens a trained layer ``W`` selects (mass > ``c_thres``) and the ambiguous ones
    (mass in ``(e_thres, c_thres]``), (n, K) each, from its attention by token."""
    s = ind.attention(W, E, tokens)  # (n, T)
    tok = np.asarray(tokens)
    mass = np.stack([np.sum(np.where(tok == j, s, 0.0), axis=1) for j in range(K)], axis=1)
    selected = mass > c_thres
    return selected, (mass > e_thres) & ~selected


def local_graphs(tokens, selected, ambiguous, K: int) -> ind.Graphs:
    """The local TPGs: an edge ``c -> j`` in :math:`G^{(k_i)}` for every selected ``c`` of
    sequence ``i`` and every other of its tokens ``j`` that is not ambiguous."""
    adj = np.zeros((K, K, K), dtype=bool)
    for i, seq in enumerate(np.asarray(tokens)):
        for c in np.flatnonzero(selected[i]):
            others = seq[(seq != c) & ~ambiguous[i][seq]]
            adj[seq[-1], c, others] = True
    return ind.graphs_of(adj)


@cached
def local_reference(cfg, res: dict) -> dict:
    """The local-convergence curves (:func:`ntpcore.att.experiments.run_local`) recomputed on
    the same trials: the global TPGs and Graph-SVM, and from the run's final iterates the
    selected tokens, the local TPGs, their Graph-SVM and cyclic subspace built independently;
    the descents (general head, every loss) and the reduced runs retraced by torch autograd.

    Arrays ``(n_losses, n_trials, S)`` under the run's names; ``W_svm`` (n_trials, d, d),
    ``W_svm_local`` (n_losses, n_trials, d, d), ``n_selection_differs`` (samples whose
    selected or ambiguous tokens differ from the run's)."""
    E, tok, lab, W0 = (np.asarray(res[k]) for k in ("E", "tokens", "labels", "W0"))
    losses = list(cfg.losses)
    nL, (B, n, _), K, d = len(losses), tok.shape, E.shape[1], E.shape[2]
    G = [ind.graphs(tok[b], lab[b], K) for b in range(B)]
    W_svm = np.array([ind.graph_svm(E[b], G[b]) for b in range(B)])
    basis_glob = [ind.fin_basis(E[b], G[b]) for b in range(B)]
    per_loss = [lo for lo in losses for _ in range(B)]
    traj = descent(
        np.concatenate([E] * nL),
        np.concatenate([tok] * nL),
        np.concatenate([lab] * nL),
        np.concatenate([W0] * nL),
        lr=cfg.lr,
        n_steps=cfg.n_steps,
        normalized=True,
        head="general",
        losses=per_loss,
    )
    W_loc = np.zeros((nL, B, d, d))
    basis_loc = [[None] * B for _ in range(nL)]
    masks, weights, differs = [], [], 0
    for a in range(nL):
        m_glob, w_glob, m_loc, w_loc = [], [], [], []
        for b in range(B):
            sel, amb = local_selection(
                res["W_end"][a, b], E[b], tok[b], K, cfg.c_thres, cfg.e_thres
            )
            differs += int(
                np.sum(
                    np.any(sel != res["selected"][a, b], axis=1)
                    | np.any(amb != res["ambiguous"][a, b], axis=1)
                )
            )
            G_loc = local_graphs(tok[b], sel, amb, K)
            try:
                W_loc[a, b] = ind.graph_svm(E[b], G_loc)
            except InfeasibleError:
                W_loc[a, b] = 0.0
            basis_loc[a][b] = ind.fin_basis(E[b], G_loc)
            mask, keep = ind.reduced_data(tok[b], lab[b], G[b])
            m_glob.append(mask)
            w_glob.append(np.where(keep, 1.0 / n, 0.0))
            anchor = np.array([np.flatnonzero(r)[0] for r in sel])  # a selected token
            mask, keep = ind.reduced_data(tok[b], lab[b], G_loc, anchor=anchor)
            m_loc.append(mask)
            w_loc.append(np.where(keep, 1.0 / n, 0.0))
        masks += [np.array(m_glob), np.array(m_loc)]
        weights += [np.array(w_glob), np.array(w_loc)]
    reduced = descent(
        np.concatenate([E] * 2 * nL),
        np.concatenate([tok] * 2 * nL),
        np.concatenate([lab] * 2 * nL),
        np.zeros((2 * nL * B, d, d)),
        lr=cfg.lr,
        n_steps=cfg.n_steps,
        normalized=True,
        mask=np.concatenate(masks),
        weight=np.concatenate(weights),
        head="general",
        losses=[lo for lo in losses for _ in range(2 * B)],
    )
    S = traj.shape[0]
    out = {
        k: np.zeros((nL, B, S))
        for k in ("corr_global", "corr_local", "norm_diff_global", "norm_diff_local")
    }
    for a in range(nL):
        for b in range(B):
            W = traj[:, a * B + b]
            out["corr_global"][a, b] = ind.corr(W, W_svm[b])
            out["corr_local"][a, b] = ind.corr(W, W_loc[a, b])
            red_glob, red_loc = reduced[:, 2 * a * B + b], reduced[:, (2 * a + 1) * B + b]
            for key, basis, red in (
                ("norm_diff_global", basis_glob[b], red_glob),
                ("norm_diff_local", basis_loc[a][b], red_loc),
            ):
                out[key][a, b] = np.linalg.norm(ind.project(W, basis) - red, axis=(-2, -1))
    return {
        **out,
        "steps": np.arange(cfg.n_steps + 1),
        "W_svm": W_svm,
        "W_svm_local": W_loc,
        "n_selection_differs": differs,
    }


#: Clarabel's tolerances for the path, tried in turn until a solve ends "optimal".  At 1e-10
#: the solver can stall at its rounding level: on an AMD EPYC of family 26 one point of the
#: paper profile (trial 0, R = 5) stopped at a gap of 2.4e-9, "AlmostSolved", and at 1e-9 it
#: ended optimal, its objective 3.4e-10 away.  The curves compared with the run agree to 2e-5
#: and are checked to 1e-4 (:mod:`ntpcore.att.checks.path`), far above either tolerance.
PATH_TOLS = (
    {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10, "tol_ktratio": 1e-8},
    {"tol_gap_abs": 1e-9, "tol_gap_rel": 1e-9, "tol_feas": 1e-9, "tol_ktratio": 1e-7},
)


def path_solve(E, tokens, labels, radii) -> np.ndarray:
    r"""The regularization path ``W_R`` (n_radii, d, d) by cvxpy + Clarabel, in coordinates of
    the independent basis of the edge span :math:`S`
    (:func:`~ntpcore.att.checks.independent.edge_basis`; outside :math:`S` the loss is flat,
    so the minimiser lies in it), the
    log-loss at token level: ``log_sum_exp(z + log m) - z_y - log m_y`` over the distinct
    tokens of each sequence, with the scores ``z_j = e_j^T W e_k`` written from ``W`` itself,
    and :math:`\|W\|_F \le R`."""
    import cvxpy as cp

    E = np.asarray(E, dtype=float)
    tok, lab = np.asarray(tokens), np.asarray(labels)
    d = E.shape[1]
    B = ind.edge_basis(E, ind.graphs(tok, lab, E.shape[0]))  # (r, d*d)
    c = cp.Variable(B.shape[0])
    W = cp.reshape(B.T @ c, (d, d), order="C")
    R = cp.Parameter(nonneg=True)
    terms = []
    for seq, y in zip(tok, lab, strict=True):
        toks, counts = np.unique(seq, return_counts=True)
        z = E[toks] @ W @ E[seq[-1]]  # the score of each distinct token
        iy = int(np.flatnonzero(toks == y)[0])
        terms.append(cp.log_sum_exp(z + np.log(counts)) - z[iy] - np.log(counts[iy]))
    prob = cp.Problem(cp.Minimize(cp.sum(cp.hstack(terms)) / len(lab)), [cp.norm(c, 2) <= R])
    out = []
    for r in radii:
        R.value = float(r)
        statuses = []
        for tol in PATH_TOLS:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                prob.solve(solver=cp.CLARABEL, **tol)
            statuses.append(f"{prob.status!r} at tolerance {tol['tol_gap_rel']:g}")
            if prob.status == "optimal":
                break
        else:
            raise SolverError(f"independent regularization path at R = {r}: {', '.join(statuses)}")
        out.append((np.asarray(c.value) @ B).reshape(d, d))
    return np.array(out)


@cached
def path_reference(cfg, res: dict) -> dict:
    """The regularization-path curves (:func:`ntpcore.att.experiments.run_reg_path`) of the
    same datasets, recomputed: the TPGs, :math:`W^{\\mathrm{svm}}`, :math:`W^{\\mathrm{fin}}`,
    :math:`S_\\mathrm{fin}` and the path built independently (:func:`path_solve`).  Arrays
    ``(n_trials, n_radii)`` under the run's names, and ``W_R``, ``W_svm``, ``W_fin``."""
    E, tok, lab = (np.asarray(res[k]) for k in ("E", "tokens", "labels"))
    radii = np.asarray(cfg.radii, dtype=float)
    out = {k: [] for k in ("corr_svm", "fin_err", "W_norm", "W_R", "W_svm", "W_fin")}
    for b in range(len(E)):
        G = ind.graphs(tok[b], lab[b], E.shape[1])
        W_svm = ind.graph_svm(E[b], G)
        W_fin, _ = ind.finite_component(E[b], tok[b], lab[b], G)
        W_R = path_solve(E[b], tok[b], lab[b], radii)
        out["W_R"].append(W_R)
        out["W_svm"].append(W_svm)
        out["W_fin"].append(W_fin)
        out["corr_svm"].append(ind.corr(W_R, W_svm))
        out["fin_err"].append(
            np.linalg.norm(ind.project(W_R, ind.fin_basis(E[b], G)) - W_fin, axis=(-2, -1))
        )
        out["W_norm"].append(np.linalg.norm(W_R, axis=(-2, -1)))
    return {k: np.array(v) for k, v in out.items()}


def tpg_statistics(tokens, labels, K: int) -> dict:
    """The SCC statistics of one dataset's TPGs (the figure's definitions, computed from a
    numpy adjacency and scipy's strong components): over the TPGs with an edge, the mean
    number of SCCs among the touched tokens, the mean largest SCC over the touched tokens and
    the fraction that are one SCC; over the samples, the fractions that are cyclic and whose
    label's SCC holds the whole sequence."""
    tok, lab = np.asarray(tokens), np.asarray(labels)
    adj = np.zeros((K, K, K), dtype=bool)
    for seq, y in zip(tok, lab, strict=True):
        adj[seq[-1], y, seq[seq != y]] = True
    comp = ind.components(adj)
    touched = adj.any(axis=2) | adj.any(axis=1)  # (K, K): token j has an edge in G^(k)
    used = np.flatnonzero(touched.any(axis=1))
    n_sccs, largest = [], []
    for k in used:
        sizes = np.unique(comp[k][touched[k]], return_counts=True)[1]
        n_sccs.append(len(sizes))
        largest.append(sizes.max() / touched[k].sum())
    k_i = tok[:, -1]
    in_label_scc = comp[k_i[:, None], tok] == comp[k_i, lab][:, None]  # (n, T)
    return {
        "n_sccs": float(np.mean(n_sccs)),
        "largest_frac": float(np.mean(largest)),
        "single_scc": float(np.mean(np.array(n_sccs) == 1)),
        "cyclic_frac": float(np.mean(np.any(in_label_scc & (tok != lab[:, None]), axis=1))),
        "pure_comp": float(np.mean(in_label_scc.all(axis=1))),
    }


STATISTICS = ("n_sccs", "largest_frac", "single_scc", "cyclic_frac", "pure_comp")


@cached
def statistics_reference(cfg, res: dict) -> dict:
    """The SCC statistics (:func:`ntpcore.att.experiments.run_scc_stats`) twice more, per
    (T, n) cell and trial: of the run's own datasets (drawn again by the run's generator and
    seeds) by :func:`tpg_statistics`; and of an independent simulation with a generator of
    its own (``rng.choice`` without replacement, labels uniform in the sequence) from another
    seed, ``n_trials`` datasets per cell (``sim_*``)."""
    from ntpcore.att.data import sample_dataset
    from ntpcore.att.experiments.trials import trial_rng

    K = cfg.vocab_size
    shape = (len(cfg.seq_lens), len(cfg.sample_sizes), cfg.n_trials)
    out = {k: np.zeros(shape) for k in STATISTICS}
    sim = {f"sim_{k}": np.zeros(shape) for k in STATISTICS}
    own = np.random.default_rng(np.random.SeedSequence([cfg.trial_seed, 29]))
    for a, T in enumerate(cfg.seq_lens):
        for b, n in enumerate(cfg.sample_sizes):
            rng = trial_rng(cfg.trial_seed, a * len(cfg.sample_sizes) + b)
            for r in range(cfg.n_trials):
                data = sample_dataset(rng, n, T, K, 1, graph="any")
                for k, v in tpg_statistics(data.tokens, data.labels, K).items():
                    out[k][a, b, r] = v
                tok = np.array([own.choice(K, size=T, replace=False) for _ in range(n)])
                lab = tok[np.arange(n), own.integers(0, T, size=n)]
                for k, v in tpg_statistics(tok, lab, K).items():
                    sim[f"sim_{k}"][a, b, r] = v
    return {**out, **sim}


def automaton_of(E, G: ind.Graphs, W_svm, W_fin, last_tokens, sequence, tol: float = 1e-6):
    """Hard retrieval and soft composition (book ``att-prop-automaton``) of one sequence from
    the given objects: ``(retrieved, composition (K,), decided)``; undecided when the top
    score of :math:`W^{\\mathrm{svm}}` spans two SCCs of :math:`G^{(k)}`, when no training
    sequence ends in ``k``, or when an unconstrained token ties or stands alone."""
    E = np.asarray(E, dtype=float)
    seq = np.asarray(sequence, dtype=np.int64)
    k = int(seq[-1])
    V, m = np.unique(seq, return_counts=True)
    score = E[V] @ W_svm @ E[k]
    top = score >= score.max() - tol
    comp = np.zeros(E.shape[0])
    logit = np.log(m[top]) + E[V[top]] @ W_fin @ E[k]
    comp[V[top]] = np.exp(logit - logit.max()) / np.exp(logit - logit.max()).sum()
    touched = G.adj[k].any(axis=0) | G.adj[k].any(axis=1)
    free = ~touched[V[top]]
    decided = (
        k in set(np.asarray(last_tokens).tolist())
        and len(np.unique(G.comp[k][V[top]])) == 1
        and not (free.any() and (top.sum() > 1 or top.all()))
    )
    return tuple(V[top].tolist()), comp, bool(decided)


def model_outputs(W, E, sequences) -> np.ndarray:
    """The identity head's output (attention mass by token) of ``W`` (..., d, d) on each
    sequence: (..., n_sequences, K)."""
    E = np.asarray(E, dtype=float)
    out = []
    for seq in sequences:
        seq = np.asarray(seq, dtype=np.int64)[None]
        s = ind.attention(W, E, seq)[..., 0, :]  # (..., T)
        out.append(np.stack([np.sum(np.where(seq[0] == j, s, 0.0), -1) for j in range(len(E))], -1))
    return np.stack(out, axis=-2)


@cached
def automaton_reference(cfg, state: dict, sequences) -> dict:
    """The automaton figures (the conceptual figure, the playground) recomputed: the TPGs,
    :math:`W^{\\mathrm{svm}}` and :math:`W^{\\mathrm{fin}}` of the training set built
    independently, the retrieval and composition of each of ``sequences`` and of every
    training sequence from them (:func:`automaton_of`), and the trained models retraced by
    torch autograd from their initialisations ``W0_all`` (normalized GD, ``cfg.lr``,
    ``cfg.n_steps``) with their outputs on the sequences (``models`` (n_inits, n_seq, K))
    and their largest total variation from the automaton on the training set."""
    E, tok, lab = (np.asarray(state[k]) for k in ("E", "tokens", "labels"))
    K = E.shape[0]
    G = ind.graphs(tok, lab, K)
    W_svm = ind.graph_svm(E, G)
    W_fin, _ = ind.finite_component(E, tok, lab, G)
    last = tok[:, -1]
    autos = [automaton_of(E, G, W_svm, W_fin, last, s) for s in sequences]
    W0 = np.asarray(state["W0_all"])
    n = len(W0)
    W_end = descent(
        np.repeat(E[None], n, 0),
        np.repeat(tok[None], n, 0),
        np.repeat(lab[None], n, 0),
        W0,
        lr=cfg.lr,
        n_steps=cfg.n_steps,
        normalized=True,
        record=[cfg.n_steps],
    )[0]
    train_auto = np.array([automaton_of(E, G, W_svm, W_fin, last, s)[1] for s in tok])
    train_tv = 0.5 * np.abs(model_outputs(W_end, E, tok) - train_auto[None]).sum(-1).max()
    return {
        "W_svm": W_svm,
        "W_fin": W_fin,
        "scc": G.comp,
        "level": G.level,
        "reach": G.reach,
        "retrieved": [list(a[0]) for a in autos],
        "composition": np.array([a[1] for a in autos]),
        "decided": np.array([a[2] for a in autos]),
        "models": model_outputs(W_end, E, sequences),
        "W_end": W_end,
        "train_tv_max": float(train_tv),
    }
