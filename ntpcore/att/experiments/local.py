r"""Local convergence with the nonconvex general head (key ``att``, book
``att-conj-local``): the trained W against the Graph-SVM of the local TPGs of the tokens the
attention selects, for the CE and squared losses, as one batched run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ntpcore.att.descent import run_descent
from ntpcore.att.dynamics import attention_weights, make_problem
from ntpcore.att.experiments.measures import cos_rows, padded_bases, trial_rows
from ntpcore.att.experiments.trials import (
    DataConfig,
    DescentSteps,
    sample_feasible_trial,
    trial_rngs,
)
from ntpcore.att.finite import subspaces
from ntpcore.att.priority import (
    local_token_priority_graphs,
    reduced_position_mask,
    scc_structures,
    select_tokens,
)
from ntpcore.att.svm import solve_graph_svm
from ntpcore.core.cache import cached
from ntpcore.errors import DataError, InfeasibleError

__all__ = ["LocalConfig", "run_local"]


# ============================================================================================
# local convergence with the general head (CE / squared loss), book att-conj-local
# ============================================================================================
@dataclass(frozen=True)
class LocalConfig(DescentSteps, DataConfig):
    """Local convergence with the nonconvex general head (book ``att-conj-local``); the same
    datasets and initialisations serve every loss (paired runs)."""

    n_samples: int = 4  # n
    seq_len: int = 6  # T
    vocab_size: int = 8  # K
    lr: float = 0.1  # eta (normalized GD)
    n_steps: int = 2000  # iterations
    losses: tuple = ("ce", "squared")  # losses of the general head
    c_thres: float = 1e-2  # selected tokens: attention mass > c_thres
    e_thres: float = 9e-3  # ambiguous tokens: e_thres < mass <= c_thres (left out of local TPGs)


def _reduced_inputs(tok, lab, graphs, n, anchor=None):
    """Reduced masks and weights: positions in the SCC of ``anchor`` (label by default)."""
    structures = scc_structures(graphs)
    anchor = lab if anchor is None else anchor
    mask = reduced_position_mask(tok, anchor, structures)
    keep = np.array([len(np.unique(seq[m])) > 1 for seq, m in zip(tok, mask, strict=True)])
    return mask, np.where(keep, 1.0 / n, 0.0)


@cached
def run_local(cfg: LocalConfig) -> dict:
    """NGD with the general head ``u = E X^T s`` for each loss, then global vs local Graph-SVM.

    Pass 1: W(τ) for every (loss, trial) in one batch.  From the final attention, selected and
    ambiguous tokens (:func:`ntpcore.att.priority.select_tokens`) give the local TPGs, the local
    Graph-SVM and the local S_fin.
    Pass 2 (one batch, every loss): the reduced runs from 0 with the same loss/head, on the
    global reduced data (label's SCC in the data TPG) and on the local reduced data (SCC of the
    selected tokens in the local TPG; label = true label).  Arrays are ``(n_losses, n_trials,
    S)``;
    ``dim_S_fin_local`` ``(n_losses, n_trials)`` is the dimension of the local cyclic subspace
    (0 when every sequence selects a single token: the local norm difference is then 0).  For
    the checks: the trials' data ``E``, ``tokens``, ``labels``, ``W0``, the global ``W_svm``,
    and per loss and trial ``W_svm_local``, the final iterate ``W_end`` and the ``selected``
    and ``ambiguous`` tokens (n, K).

    The trials are not a sweep of :func:`ntpcore.core.sweep.map_runs`: each pass is one
    batched numpy program over every (loss, trial), in which a step of all runs costs about
    what one run's step costs alone.
    """
    for lo in cfg.losses:
        if lo not in ("ce", "squared"):
            raise DataError(f"losses must be 'ce' or 'squared', got {lo!r}")
    t0 = time.perf_counter()
    n, T, K, d = cfg.n_samples, cfg.seq_len, cfg.vocab_size, cfg.dim
    nL, B = len(cfg.losses), cfg.n_trials
    trials, n_rej, n_inf = [], 0, 0
    for rng in trial_rngs(cfg.trial_seed, B):
        ft = sample_feasible_trial(rng, n, T, K, d, "cyclic")
        n_rej += ft.data.n_rejected
        n_inf += ft.n_infeasible
        W0 = rng.uniform(-1.0, 1.0, (d, d)) / np.sqrt(d)
        trials.append((ft.data, ft.graphs, ft.W_svm, W0))
    E = np.array([t[0].E for t in trials])
    tok = np.array([t[0].tokens for t in trials])
    lab = np.array([t[0].labels for t in trials])
    W0 = np.array([t[3] for t in trials])

    def batch(losses, copies, mask=None, weight=None):
        """``copies`` of the trials' data, the problems of copy c with loss ``losses[c]``."""
        Ec, tc, lc = (np.concatenate([x] * copies) for x in (E, tok, lab))
        per_problem = [lo for lo in losses for _ in range(B)]
        return make_problem(
            Ec, tc, lc, head="general", loss=per_problem, mask=mask, sample_weight=weight
        )

    # Pass 1: W runs, all losses and trials, one batch (one copy of the data per loss).
    t_loop = 0.0
    P1 = batch(cfg.losses, nL)
    ta = time.perf_counter()
    steps, tr = run_descent(np.concatenate([W0] * nL), P1, eta=cfg.lr, n_steps=cfg.n_steps)
    t_loop += time.perf_counter() - ta
    s_end_all = attention_weights(tr[-1], P1)  # (nL B, n, T)
    # Local structures from the final attention.
    res = {
        k: np.zeros((nL, B, len(steps)))
        for k in ("corr_global", "corr_local", "norm_diff_global", "norm_diff_local")
    }
    label_selected = np.zeros((nL, B))
    selected = np.zeros((nL, B, n, K), bool)
    ambiguous = np.zeros((nL, B, n, K), bool)
    dim_local = np.zeros((nL, B), int)
    n_ambiguous = np.zeros((nL, B), int)
    n_local_infeasible = 0
    local = []  # per loss: local W^svm, local and global S_fin bases
    masks, weights = [], []  # per loss: global then local reduced data
    for a in range(nL):
        s_end = s_end_all[a * B : (a + 1) * B]  # (B, n, T)
        Wsvm_loc, Bfin_loc, Bfin_glob, mg_l, wg_l, ml_l, wl_l = [], [], [], [], [], [], []
        for b, (data, graphs, _, _) in enumerate(trials):
            sel, amb = select_tokens(
                data.tokens, s_end[b], K, c_thres=cfg.c_thres, e_thres=cfg.e_thres
            )
            selected[a, b], ambiguous[a, b] = sel, amb
            label_selected[a, b] = np.mean(sel[np.arange(n), data.labels])
            n_ambiguous[a, b] = int(amb.any(axis=1).sum())
            g_loc = local_token_priority_graphs(data.tokens, sel, amb, K)
            try:
                Wsvm_loc.append(solve_graph_svm(data.E, g_loc).W)
            except InfeasibleError:
                n_local_infeasible += 1
                Wsvm_loc.append(np.zeros((d, d)))
            Bfin_loc.append(subspaces(data.E, None, None, graphs=g_loc).S_fin)
            dim_local[a, b] = Bfin_loc[-1].shape[0]
            Bfin_glob.append(subspaces(data.E, None, None, graphs=graphs).S_fin)
            anchor = np.array([np.flatnonzero(r)[0] for r in sel])  # a selected token
            mg, wg = _reduced_inputs(data.tokens, data.labels, graphs, n)
            ml, wl = _reduced_inputs(data.tokens, data.labels, g_loc, n, anchor)
            for store, x in zip((mg_l, wg_l, ml_l, wl_l), (mg, wg, ml, wl), strict=True):
                store.append(x)
        local.append((Wsvm_loc, Bfin_loc, Bfin_glob))
        masks += [np.array(mg_l), np.array(ml_l)]
        weights += [np.array(wg_l), np.array(wl_l)]
    # Pass 2: the reduced runs (global and local, every loss) from W = 0, one batch.
    P2 = batch(
        [lo for lo in cfg.losses for _ in range(2)],
        2 * nL,
        np.concatenate(masks),
        np.concatenate(weights),
    )
    ta = time.perf_counter()
    _, tr2_all = run_descent(np.zeros((2 * nL * B, d, d)), P2, eta=cfg.lr, n_steps=cfg.n_steps)
    t_loop += time.perf_counter() - ta
    for a in range(nL):
        W = tr[:, a * B : (a + 1) * B]  # (S, B, d, d)
        tr2 = tr2_all[:, 2 * a * B : 2 * (a + 1) * B]  # global, then local reduced runs
        Wsvm_loc, Bfin_loc, Bfin_glob = local[a]
        # metrics on trial-major rows (B, S, d*d); the reduced runs lie in their S_fin, so
        # ||Π W - W_red|| is the distance of the coordinates in the basis
        Wb, Wr = trial_rows(W), trial_rows(tr2)
        W_norm = np.sqrt(np.einsum("bsp,bsp->bs", Wb, Wb))
        for key, V in (("corr_global", [t[2] for t in trials]), ("corr_local", Wsvm_loc)):
            v = np.array(V).reshape(B, -1)
            dot = np.matmul(Wb, v[:, :, None])[..., 0]
            res[key][a] = cos_rows(dot, W_norm, np.linalg.norm(v, axis=-1)[:, None])
        for key, bases, red in (
            ("norm_diff_global", Bfin_glob, Wr[:B]),
            ("norm_diff_local", Bfin_loc, Wr[B:]),
        ):
            BT = padded_bases(bases).transpose(0, 2, 1)
            diff = np.matmul(Wb, BT) - np.matmul(red, BT)
            res[key][a] = np.sqrt((diff * diff) @ np.ones(BT.shape[-1]))
    return {
        "steps": steps,
        **res,
        # the trials' data and the objects the run used, for the checks (ntpcore.att.checks)
        "E": E,
        "tokens": tok,
        "labels": lab,
        "W0": W0,
        "W_svm": np.array([t[2] for t in trials]),
        "W_svm_local": np.array([local[a][0] for a in range(nL)]),  # (n_losses, B, d, d)
        "W_end": tr[-1].reshape(nL, B, d, d),  # the final iterates the selection reads
        "selected": selected,  # (n_losses, B, n, K) the selected tokens
        "ambiguous": ambiguous,  # (n_losses, B, n, K)
        "label_selected": label_selected,
        "dim_S_fin_local": dim_local,
        "n_ambiguous": n_ambiguous,
        "n_rejected": int(n_rej),
        "n_infeasible": int(n_inf),
        "n_local_infeasible": int(n_local_infeasible),
        "loop_seconds": float(t_loop),
        "compute_seconds": float(time.perf_counter() - t0),
    }
