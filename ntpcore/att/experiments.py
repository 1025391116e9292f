r"""Cached experiments of the self-attention paper (key ``att``), one function per notebook.

Every function takes one frozen ``*Config`` whose fields are the notebook's parameter names and
returns a dict of arrays and scalars (cached by :func:`ntpcore.pipeline.cache.cached`).

Speed: the trials of a descent run as **one batched numpy program** (trials on a leading
axis; the W run and the reduced W^fin run side by side) with the closed-form gradients of
:mod:`ntpcore.att.dynamics`; the Graph-SVM uses the exact active-set solver of
:mod:`ntpcore.att.svm` and W^fin a Newton solve.  ``*.__wrapped__(cfg)`` runs uncached
(benchmarks).  Trials that are separate solves (the regularization path, the cvxpy checks
of :func:`global_theory`, the SCC statistics) are a sweep instead: one cached run per trial
or cell through :func:`ntpcore.pipeline.sweep.map_runs`, which takes ``n_workers`` /
``scheduler`` and returns the same numbers however they run.

Randomness: trial ``r`` draws its data, embeddings and initialisation from
``default_rng(SeedSequence(seed).spawn(n_trials)[r])``.  Draws rejected by the graph condition
and infeasible Graph-SVM draws are counted and returned (``n_rejected``, ``n_infeasible``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ntpcore.att.automaton import (
    automaton_predict,
    build_automaton,
    model_output,
    total_variation,
)
from ntpcore.att.data import TOYS, AttDataset, sample_dataset, toy_dataset, unit_embeddings
from ntpcore.att.dynamics import attention_weights, descend, make_problem, run_descent
from ntpcore.att.finite import finite_component, reduced_log_loss, subspaces
from ntpcore.att.linalg import project_onto_spans
from ntpcore.att.priority import (
    cyclic_samples,
    local_token_priority_graphs,
    reduced_position_mask,
    scc_structures,
    select_tokens,
    token_priority_graphs,
)
from ntpcore.att.regpath import regularization_path
from ntpcore.att.svm import graph_svm_from_graphs
from ntpcore.att.verify import theory_report
from ntpcore.core.metrics import cos
from ntpcore.core.optim import log_steps
from ntpcore.errors import DataError, InfeasibleError, NTPError
from ntpcore.pipeline.cache import cached

__all__ = [
    "AttConceptualConfig",
    "AttGlobalConfig",
    "AttLocalConfig",
    "AttRegPathConfig",
    "AttSCCStatsConfig",
    "FeasibleTrial",
    "GlobalTrial",
    "PLAYGROUND_DATASETS",
    "Trial",
    "descend_global",
    "describe_playground",
    "draw_global_trial",
    "global_theory",
    "global_theory_trial",
    "measure_global",
    "model_output_batch",
    "parse_sequence",
    "playground_answer",
    "playground_state",
    "reg_path_trial",
    "run_conceptual",
    "run_global",
    "run_local",
    "run_reg_path",
    "run_scc_stats",
    "sample_feasible_trial",
    "trial_rng",
    "trial_rngs",
]


def trial_rngs(seed: int, n_trials: int) -> list[np.random.Generator]:
    """Independent generators of the trials: ``SeedSequence(seed).spawn(n_trials)``."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n_trials)]


def trial_rng(seed: int, index: int) -> np.random.Generator:
    """The generator of trial ``index`` alone: ``trial_rngs(seed, n)[index]`` for any
    ``n > index`` (``SeedSequence(seed).spawn`` gives child ``i`` the spawn key ``(i,)``), so a
    trial run on its own draws what it draws in a serial loop."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))


@dataclass(frozen=True)
class Trial:
    """Trial ``index`` of the experiment ``cfg``: one point of a per-trial sweep."""

    cfg: Any  # the experiment's frozen config (with ``seed`` and ``n_trials``)
    index: int


def _trial_sweep(
    run_one, cfg, desc: str, n_workers: int, scheduler: str | None, progress: bool
) -> list[dict]:
    """``run_one(Trial(cfg, r))`` for every trial ``r`` of ``cfg``, in order, through
    :func:`ntpcore.pipeline.sweep.map_runs` (in-process, ``n_workers`` local processes or a
    ``dask.distributed`` scheduler; none of them changes what is computed)."""
    from ntpcore.pipeline.sweep import map_runs

    trials = [Trial(cfg, r) for r in range(cfg.n_trials)]
    return map_runs(
        run_one, trials, n_workers=n_workers, scheduler=scheduler, desc=desc, progress=progress
    )


@dataclass(frozen=True)
class FeasibleTrial:
    """A random dataset whose Graph-SVM is feasible, with its TPGs and W^svm."""

    data: AttDataset  # tokens, labels, embeddings (and draws rejected by the graph condition)
    graphs: list  # the K token-priority graphs G^(k)
    W_svm: np.ndarray  # (d, d) Graph-SVM direction
    n_infeasible: int  # embedding draws discarded because the Graph-SVM was infeasible


def sample_feasible_trial(
    rng: np.random.Generator, n: int, T: int, K: int, d: int, graph: str
) -> FeasibleTrial:
    """Draw a dataset satisfying the graph condition ``graph`` with a feasible Graph-SVM.

    Tokens and labels come from :func:`ntpcore.att.data.sample_dataset`; while the Graph-SVM of
    their TPGs is infeasible (typical only when K > d: dependent embeddings) the embeddings are
    redrawn, and each such draw is counted in ``n_infeasible``.

    Raises
    ------
    InfeasibleError  after 1000 infeasible embedding draws in a row.
    """
    data = sample_dataset(rng, n, T, K, d, graph=graph)
    graphs = token_priority_graphs(data.tokens, data.labels, K)
    for n_inf in range(1000):
        try:
            W_svm = graph_svm_from_graphs(data.E, graphs).W
            return FeasibleTrial(data, graphs, W_svm, n_inf)
        except InfeasibleError:  # counted; a new embedding draw
            data = AttDataset(unit_embeddings(rng, K, d), data.tokens, data.labels, data.n_rejected)
    raise InfeasibleError(f"1000 infeasible embedding draws in a row (K={K}, d={d})")


def _scc_onehot(tokens: np.ndarray, structures) -> np.ndarray:
    """(n, T, K) one-hot of the SCC id in ``G^(k_i)`` of the token at each position."""
    n, T = tokens.shape
    K = structures[0].K
    out = np.zeros((n, T, K))
    for i, seq in enumerate(tokens):
        out[i, np.arange(T), structures[int(seq[-1])].scc[seq]] = 1.0
    return out


# ============================================================================================
# global convergence (acyclic / cyclic TPGs), NGD as in the paper or plain GD as in the theorem
# ============================================================================================
@dataclass(frozen=True)
class AttGlobalConfig:
    """Global-convergence experiment: the paper's acyclic and cyclic TPG figures (NGD), and plain
    GD for the setting of the theorem (book ``att-thm-gd``)."""

    seed: int = 0  # base seed; trial r uses SeedSequence(seed).spawn(n_trials)[r]
    n_trials: int = 10  # independent trials (data, embeddings, init, SVM redrawn)
    n_samples: int = 6  # n: sequences per dataset
    seq_len: int = 4  # T: tokens per sequence (distinct when T <= K)
    vocab_size: int = 6  # K
    dim: int = 8  # d (K <= d: Graph-SVM always feasible)
    graph: str = "cyclic"  # "cyclic" (>= 1 cyclic TPG) | "acyclic" (all TPGs acyclic)
    optimizer: str = "ngd"  # "ngd" (paper's experiments) | "gd" (the theorem)
    step_size: float = 0.01  # eta
    n_steps: int = 4000  # iterations


@dataclass(frozen=True)
class GlobalTrial:
    """One trial of the global experiment: data, initialisation and the theory's limits."""

    E: np.ndarray  # (K, d) embeddings
    tokens: np.ndarray  # (n, T) token ids
    labels: np.ndarray  # (n,)
    W0: np.ndarray  # (d, d) initialisation of the W run
    W_svm: np.ndarray  # (d, d) Graph-SVM direction
    W_fin: np.ndarray  # (d, d) finite component
    B_S: np.ndarray  # (r, d*d) basis of the edge span S
    B_fin: np.ndarray  # (r_fin, d*d) basis of S_fin
    mask: np.ndarray  # (n, T) reduced positions (label's SCC)
    weight: np.ndarray  # (n,) reduced-loss weights: 1/n on cyclic samples, 0 elsewhere
    L_star: float  # L_fin(W^fin) = inf L
    n_cyclic: int  # cyclic samples
    scc_onehot: np.ndarray  # (n, T, K) SCC of each position's token in G^(k_i)
    n_rejected: int  # token/label draws rejected by the graph condition
    n_infeasible: int  # infeasible Graph-SVM embedding draws


def draw_global_trial(rng: np.random.Generator, cfg: AttGlobalConfig) -> GlobalTrial:
    """Draw one trial's data (:func:`sample_feasible_trial`) and W(0), and compute W^svm,
    W^fin, the subspaces, the reduced sequences and L* of the convergence theorem."""
    n, T, K, d = cfg.n_samples, cfg.seq_len, cfg.vocab_size, cfg.dim
    ft = sample_feasible_trial(rng, n, T, K, d, cfg.graph)
    E, tok, lab = ft.data.E, ft.data.tokens, ft.data.labels
    structures = scc_structures(ft.graphs)
    sub = subspaces(E, tok, lab, graphs=ft.graphs)
    W_fin = finite_component(E, tok, lab, graphs=ft.graphs)
    cyc = cyclic_samples(tok, lab, structures)
    # W(0): i.i.d. U(-1/sqrt(d), 1/sqrt(d)), the PyTorch nn.Linear default of the paper.
    W0 = rng.uniform(-1.0, 1.0, (d, d)) / np.sqrt(d)
    return GlobalTrial(
        E=E,
        tokens=tok,
        labels=lab,
        W0=W0,
        W_svm=ft.W_svm,
        W_fin=W_fin,
        B_S=sub.S,
        B_fin=sub.S_fin,
        mask=reduced_position_mask(tok, lab, structures),
        weight=np.where(cyc, 1.0 / n, 0.0),  # reduced loss: cyclic samples, / full n
        L_star=reduced_log_loss(W_fin, E, tok, lab),
        n_cyclic=int(cyc.sum()),
        scc_onehot=_scc_onehot(tok, structures),
        n_rejected=ft.data.n_rejected,
        n_infeasible=ft.n_infeasible,
    )


def _stack(trials: list[GlobalTrial], name: str) -> np.ndarray:
    """Field ``name`` of every trial stacked on a leading trial axis."""
    return np.array([getattr(t, name) for t in trials])


def _descend_global(trials: list[GlobalTrial], cfg: AttGlobalConfig, on_chunk=None):
    """:func:`descend_global` as a :class:`ntpcore.att.dynamics.Descent` of the 2B runs (the
    W runs first), with the loss and the attention of the W runs (handed to ``on_chunk`` in
    chunks when given); and the loop's seconds."""
    B = len(trials)
    E, tok, lab = _stack(trials, "E"), _stack(trials, "tokens"), _stack(trials, "labels")
    n, d = tok.shape[1], E.shape[-1]
    P = make_problem(
        np.concatenate([E, E]),
        np.concatenate([tok, tok]),
        np.concatenate([lab, lab]),
        mask=np.concatenate([np.ones_like(tok, bool), _stack(trials, "mask")]),
        sample_weight=np.concatenate([np.full((B, n), 1.0 / n), _stack(trials, "weight")]),
    )
    W0 = np.concatenate([_stack(trials, "W0"), np.zeros((B, d, d))])
    record = None if cfg.optimizer == "ngd" else log_steps(cfg.n_steps, 200)
    t_loop = time.perf_counter()
    res = descend(
        W0,
        P,
        eta=cfg.step_size,
        n_steps=cfg.n_steps,
        normalized=cfg.optimizer == "ngd",
        record=record,
        loss=True,
        attention=True,
        rows=slice(0, B),  # the W runs
        on_chunk=on_chunk,
    )
    return res, time.perf_counter() - t_loop


def descend_global(trials: list[GlobalTrial], cfg: AttGlobalConfig):
    """The W runs (from W(0), full data) and the reduced runs (from 0, reduced data) of all
    trials as one batched descent (NGD, or plain GD recorded at ~200 log-spaced steps).

    Returns
    -------
    steps : (S,);  W, W_red : (S, B, d, d) the full and the reduced runs;
    losses : (S, B) full-data loss of the W runs;  loop_seconds : float.
    """
    res, t_loop = _descend_global(trials, cfg)
    B = len(trials)
    return res.steps, res.W[:, :B], res.W[:, B:], res.loss, t_loop


def _rows(W) -> np.ndarray:
    """A trajectory (S, B, d, d) as trial-major rows (B, S, d*d); a view when ``W`` is the
    transposed trial-major array :func:`ntpcore.att.dynamics.descend` returns."""
    S, B, d, _ = W.shape
    return np.asarray(W, dtype=float).transpose(1, 0, 2, 3).reshape(B, S, d * d)


def _padded_bases(bases) -> np.ndarray:
    """Row-orthonormal bases (r_b, p) stacked into (B, r_max, p), zero rows padding."""
    p = bases[0].shape[1]
    out = np.zeros((len(bases), max([b.shape[0] for b in bases] + [1]), p))
    for i, b in enumerate(bases):
        out[i, : b.shape[0]] = b
    return out


def _complement(B_rows: np.ndarray) -> np.ndarray:
    """Row-orthonormal basis of the orthogonal complement of the row span of ``B_rows``."""
    p = B_rows.shape[1]
    if B_rows.shape[0] == 0:
        return np.eye(p)
    _, _, Vt = np.linalg.svd(B_rows, full_matrices=True)
    return Vt[B_rows.shape[0] :]


def _cos_rows(dot, norm_a, norm_b) -> np.ndarray:
    """:func:`ntpcore.core.metrics.cos` from inner products and norms (0 where a norm is 0)."""
    den = norm_a * norm_b
    return np.divide(dot, den, out=np.zeros(np.broadcast(dot, den).shape), where=den > 0)


class _GlobalMeter:
    """The metrics of :func:`run_global`, accumulated over consecutive recorded steps (all at
    once, or chunk by chunk as :func:`ntpcore.att.dynamics.descend` hands them over).

    Everything is a product of the trial-major rows (B, c, d*d) with fixed vectors and bases:
    projections in coordinates of the bases (``S_fin``; an orthonormal basis of the complement
    of ``S`` for the frozen part, no cancellation), and the correlation with
    ``W^fin + R W^svm`` from the inner products with both, ``R`` being fitted at the end.
    """

    def __init__(self, trials: list[GlobalTrial], S: int):
        self.trials = trials
        B = len(trials)
        Wsvm, Wfin = _stack(trials, "W_svm"), _stack(trials, "W_fin")
        p = Wsvm.shape[-1] ** 2
        self.wsvm, self.wfin = Wsvm.reshape(B, p), Wfin.reshape(B, p)
        self.svm_sq = np.sum(self.wsvm**2, axis=-1)
        self.targets = np.stack([self.wsvm, self.wfin], axis=-1)  # (B, p, 2)
        Bfin = _padded_bases([t.B_fin for t in trials])  # (B, r, p)
        self.BfinT = Bfin.transpose(0, 2, 1)
        self.ones_r = np.ones(Bfin.shape[1])
        self.c_fin = np.matmul(Bfin, self.wfin[:, :, None]).transpose(0, 2, 1)  # (B, 1, r)
        self.svm_fin = np.matmul(Bfin, self.wsvm[:, :, None])  # (B, r, 1): coords of Π W^svm
        self.perpT = _padded_bases([_complement(t.B_S) for t in trials]).transpose(0, 2, 1)
        self.cp0 = None  # coordinates of Π_S⊥ W(0)
        onehot = _stack(trials, "scc_onehot")  # (B, n, T, K): position -> SCC of its token
        n, T, K = onehot.shape[1:]
        # columns (SCC c, sample i) then (label SCC of sample i): mass (B, c, K n + n)
        to_scc = (onehot[:, :, :, :, None] * np.eye(n)[:, None, None, :]).reshape(B, n * T, K * n)
        to_lab = (_stack(trials, "mask")[:, :, :, None] * np.eye(n)[:, None, :]).reshape(
            B, n * T, n
        )
        self.to_mass = np.concatenate([to_scc, to_lab], axis=-1)
        self.nK, self.K, self.n = n * K, K, n
        self.mean_n = np.full(n, 1.0 / n)
        keys = ("W_norm", "dot_svm", "dot_fin", "proj_corr", "norm_diff", "fin_err")
        keys += ("perp_drift", "attn_best", "attn_label", "loss")
        self.out = {k: np.empty((B, S)) for k in keys}
        self.pos = 0

    def add(self, Wb, Wr, loss, s_rows) -> None:
        """Steps ``pos .. pos + c``: rows of the W runs ``Wb`` and of the reduced runs ``Wr``
        (B, c, d*d), the loss (B, c) and the attention rows (B, c, n T) of the W runs."""
        o, c = self.out, Wb.shape[1]
        at = slice(self.pos, self.pos + c)
        W_norm = np.sqrt(np.einsum("bsp,bsp->bs", Wb, Wb))
        dots = np.matmul(Wb, self.targets)  # (B, c, 2): <W, W^svm>, <W, W^fin>
        o["W_norm"][:, at], o["dot_svm"][:, at], o["dot_fin"][:, at] = (
            W_norm,
            *dots.transpose(2, 0, 1),
        )
        # Π_Sfin in coordinates: ||Π W - W_red|| = ||c - c_red|| (W_red and W^fin lie in
        # S_fin); W - Π W by Pythagoras: <W^svm, W - ΠW>, ||W - ΠW||^2 = ||W||^2 - ||c||^2
        cW, c_red = np.matmul(Wb, self.BfinT), np.matmul(Wr, self.BfinT)  # (B, c, r)
        perp_sq = np.maximum(W_norm**2 - (cW * cW) @ self.ones_r, 0.0)
        proj_dot = dots[..., 0] - np.matmul(cW, self.svm_fin)[..., 0]
        o["proj_corr"][:, at] = _cos_rows(proj_dot, np.sqrt(self.svm_sq)[:, None], np.sqrt(perp_sq))
        diff = cW - c_red
        o["norm_diff"][:, at] = np.sqrt((diff * diff) @ self.ones_r)
        diff = cW - self.c_fin
        o["fin_err"][:, at] = np.sqrt((diff * diff) @ self.ones_r)
        cp = np.matmul(Wb, self.perpT)  # Π_S⊥ W(τ) in coordinates of a basis of S⊥
        if self.cp0 is None:
            self.cp0 = cp[:, :1].copy()
        cp -= self.cp0
        o["perp_drift"][:, at] = np.sqrt(np.einsum("bsq,bsq->bs", cp, cp))
        mass = np.matmul(s_rows, self.to_mass)  # (B, c, K n + n)
        n = self.n
        best = mass[..., :n].copy()
        for k in range(1, self.K):  # largest mass over the SCCs, one SCC block at a time
            np.maximum(best, mass[..., k * n : (k + 1) * n], out=best)
        o["attn_best"][:, at] = best @ self.mean_n  # mean over samples
        o["attn_label"][:, at] = mass[..., self.nK :] @ self.mean_n
        o["loss"][:, at] = loss
        self.pos += c

    def result(self) -> dict:
        o, trials = {k: v[:, : self.pos] for k, v in self.out.items()}, self.trials
        svm_sq = self.svm_sq
        R = np.divide(
            o["dot_svm"][:, -1] - np.sum(self.wfin * self.wsvm, axis=-1),
            svm_sq,
            out=np.zeros(len(trials)),
            where=svm_sq > 0,
        )
        full = self.wfin + R[:, None] * self.wsvm
        dot_full = o["dot_fin"] + R[:, None] * o["dot_svm"]
        W_norm, svm_norm = o["W_norm"], np.sqrt(svm_sq)
        Lstar = _stack(trials, "L_star")
        return {
            "corr_svm": _cos_rows(o["dot_svm"], W_norm, svm_norm[:, None]),
            "corr_full": _cos_rows(dot_full, W_norm, np.linalg.norm(full, axis=-1)[:, None]),
            "proj_corr": o["proj_corr"],
            "norm_diff": o["norm_diff"],
            "fin_err": o["fin_err"],
            "attn_best": o["attn_best"],
            "attn_label": o["attn_label"],
            "loss": o["loss"],
            "loss_gap": o["loss"] - Lstar[:, None],
            "W_norm": W_norm,
            "perp_drift": o["perp_drift"],
            "L_star": Lstar,
            "R": R,
            "W_svm_norm": svm_norm,
            "W_fin_norm": np.linalg.norm(self.wfin, axis=-1),
            "n_cyclic_samples": _stack(trials, "n_cyclic"),
            "dim_S_fin": np.array([t.B_fin.shape[0] for t in trials]),
        }

    def add_chunk(self, chunk) -> None:
        """A chunk of :func:`_descend_global` (the W runs first, then the reduced runs)."""
        B = len(self.trials)
        W, att = chunk.W, chunk.attention  # (c, 2B, d, d), (c, B, n, T)
        c = W.shape[0]
        s_rows = att.transpose(1, 0, 2, 3).reshape(B, c, -1)
        self.add(_rows(W[:, :B]), _rows(W[:, B:]), chunk.loss.T, s_rows)


def measure_global(trials: list[GlobalTrial], W, W_red, loss, attention=None) -> dict:
    """Metrics of :func:`run_global` from the trajectories (S, B, d, d), vectorised over steps
    and trials (:class:`_GlobalMeter`).

    ``attention`` (S, B, n, T): the attention of the W runs at the recorded steps, when the
    descent recorded it (else computed from ``W``).
    """
    if attention is None:
        P_full = make_problem(
            _stack(trials, "E"), _stack(trials, "tokens"), _stack(trials, "labels")
        )
        attention = attention_weights(W, P_full)  # (S, B, n, T)
    S, B = attention.shape[:2]
    meter = _GlobalMeter(trials, S)
    s_rows = np.asarray(attention).transpose(1, 0, 2, 3).reshape(B, S, -1)
    meter.add(_rows(W), _rows(W_red), np.asarray(loss).T, s_rows)
    return meter.result()


@cached
def run_global(cfg: AttGlobalConfig) -> dict:
    """W(τ) from a random init and the reduced W^fin(τ) run from 0, all trials batched.

    Metrics per trial and recorded step (arrays ``(n_trials, S)``):
    ``corr_svm`` = cos(W, W^svm); ``corr_full`` = cos(W, W^fin + R W^svm) with
    R = <W(end) - W^fin, W^svm>/||W^svm||^2 fitted at the last iterate; ``proj_corr`` =
    cos(W^svm, W - Π_Sfin W); ``norm_diff`` = ||Π_Sfin W(τ) - W_fin(τ)|| (time-aligned reduced
    run, as in the paper); ``fin_err`` = ||Π_Sfin W(τ) - W^fin|| (to the exact limit);
    ``attn_best`` = mean over samples of the largest attention mass on one SCC of G^(k_i);
    ``attn_label`` = mean attention mass on the label's SCC; ``loss`` and ``loss_gap`` = L - L*;
    ``W_norm``; ``perp_drift`` = ||Π_S⊥ W(τ) - Π_S⊥ W(0)||.
    NGD records every step, GD ~200 log-spaced steps.

    The trials are not a sweep of :func:`ntpcore.pipeline.sweep.map_runs`: they are one
    batched numpy program (:func:`descend_global`, trials on a leading axis), in which each
    step of all trials costs about what one trial's step costs alone.
    """
    if cfg.optimizer not in ("ngd", "gd"):
        raise DataError(f"optimizer must be 'ngd' or 'gd', got {cfg.optimizer!r}")
    t0 = time.perf_counter()
    trials = [draw_global_trial(rng, cfg) for rng in trial_rngs(cfg.seed, cfg.n_trials)]
    S = cfg.n_steps + 1 if cfg.optimizer == "ngd" else len(np.unique(log_steps(cfg.n_steps, 200)))
    meter = _GlobalMeter(trials, S)
    res, t_loop = _descend_global(trials, cfg, on_chunk=meter.add_chunk)
    return {
        "steps": res.steps,
        **meter.result(),
        "n_rejected": int(sum(t.n_rejected for t in trials)),
        "n_infeasible": int(sum(t.n_infeasible for t in trials)),
        "loop_seconds": float(t_loop),
        "compute_seconds": float(time.perf_counter() - t0),
    }


@cached
def global_theory_trial(trial: Trial) -> dict:
    """:func:`ntpcore.att.verify.theory_report` of one trial (an independent run)."""
    t = draw_global_trial(trial_rng(trial.cfg.seed, trial.index), trial.cfg)
    return theory_report(t.E, t.tokens, t.labels, t.W_svm, t.W_fin)


def global_theory(
    cfg: AttGlobalConfig,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
    progress: bool = True,
) -> dict:
    """The paper's definitions checked on the trials of :func:`run_global` (same draws):
    :func:`ntpcore.att.verify.theory_report` of every trial, as arrays ``(n_trials,)`` under
    the same keys (SCC decomposition, Graph-SVM constraints over every TPG edge and the cvxpy
    reference, stationarity/uniqueness of W^fin and its cvxpy reference).

    The trials are independent runs (per-trial cached by :func:`global_theory_trial`; the
    cvxpy references are separate solves, not one batch): they go through
    :func:`ntpcore.pipeline.sweep.map_runs`, in-process by default, on ``n_workers`` local
    processes or on a ``dask.distributed`` scheduler.  How they run does not change what
    they compute, so neither is part of ``cfg`` or of any cache key.
    """
    reports = _trial_sweep(
        global_theory_trial, cfg, "theory checks", n_workers, scheduler, progress
    )
    return {key: np.array([r[key] for r in reports]) for key in reports[0]}


# ============================================================================================
# local convergence with the general head (CE / squared loss), book att-conj-local
# ============================================================================================
@dataclass(frozen=True)
class AttLocalConfig:
    """Local convergence with the nonconvex general head (book ``att-conj-local``)."""

    seed: int = 0  # base seed (the same datasets and inits serve every loss: paired runs)
    n_trials: int = 10  # independent trials
    n_samples: int = 4  # n
    seq_len: int = 6  # T
    vocab_size: int = 8  # K
    dim: int = 8  # d
    losses: tuple = ("ce", "squared")  # losses of the general head
    step_size: float = 0.1  # eta (normalized GD)
    n_steps: int = 2000  # iterations
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
def run_local(cfg: AttLocalConfig) -> dict:
    """NGD with the general head ``u = E X^T s`` for each loss, then global vs local Graph-SVM.

    Pass 1: W(τ) for every (loss, trial) in one batch.  From the final attention, selected and
    ambiguous tokens (:func:`ntpcore.att.priority.select_tokens`) give the local TPGs, the local
    Graph-SVM and the local S_fin.
    Pass 2 (one batch, every loss): the reduced runs from 0 with the same loss/head, on the
    global reduced data (label's SCC in the data TPG) and on the local reduced data (SCC of the
    selected tokens in the local TPG; label = true label).  Arrays are ``(n_losses, n_trials,
    S)``;
    ``dim_S_fin_local`` ``(n_losses, n_trials)`` is the dimension of the local cyclic subspace
    (0 when every sequence selects a single token: the local norm difference is then 0).

    The trials are not a sweep of :func:`ntpcore.pipeline.sweep.map_runs`: each pass is one
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
    for rng in trial_rngs(cfg.seed, B):
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
    steps, tr = run_descent(np.concatenate([W0] * nL), P1, eta=cfg.step_size, n_steps=cfg.n_steps)
    t_loop += time.perf_counter() - ta
    s_end_all = attention_weights(tr[-1], P1)  # (nL B, n, T)
    # Local structures from the final attention.
    res = {
        k: np.zeros((nL, B, len(steps)))
        for k in ("corr_global", "corr_local", "norm_diff_global", "norm_diff_local")
    }
    label_selected = np.zeros((nL, B))
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
            label_selected[a, b] = np.mean(sel[np.arange(n), data.labels])
            n_ambiguous[a, b] = int(amb.any(axis=1).sum())
            g_loc = local_token_priority_graphs(data.tokens, sel, amb, K)
            try:
                Wsvm_loc.append(graph_svm_from_graphs(data.E, g_loc).W)
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
    _, tr2_all = run_descent(
        np.zeros((2 * nL * B, d, d)), P2, eta=cfg.step_size, n_steps=cfg.n_steps
    )
    t_loop += time.perf_counter() - ta
    for a in range(nL):
        W = tr[:, a * B : (a + 1) * B]  # (S, B, d, d)
        tr2 = tr2_all[:, 2 * a * B : 2 * (a + 1) * B]  # global, then local reduced runs
        Wsvm_loc, Bfin_loc, Bfin_glob = local[a]
        # metrics on trial-major rows (B, S, d*d); the reduced runs lie in their S_fin, so
        # ||Π W - W_red|| is the distance of the coordinates in the basis
        Wb, Wr = _rows(W), _rows(tr2)
        W_norm = np.sqrt(np.einsum("bsp,bsp->bs", Wb, Wb))
        for key, V in (("corr_global", [t[2] for t in trials]), ("corr_local", Wsvm_loc)):
            v = np.array(V).reshape(B, -1)
            dot = np.matmul(Wb, v[:, :, None])[..., 0]
            res[key][a] = _cos_rows(dot, W_norm, np.linalg.norm(v, axis=-1)[:, None])
        for key, bases, red in (
            ("norm_diff_global", Bfin_glob, Wr[:B]),
            ("norm_diff_local", Bfin_loc, Wr[B:]),
        ):
            BT = _padded_bases(bases).transpose(0, 2, 1)
            diff = np.matmul(Wb, BT) - np.matmul(red, BT)
            res[key][a] = np.sqrt((diff * diff) @ np.ones(BT.shape[-1]))
    return {
        "steps": steps,
        **res,
        "label_selected": label_selected,
        "dim_S_fin_local": dim_local,
        "n_ambiguous": n_ambiguous,
        "n_rejected": int(n_rej),
        "n_infeasible": int(n_inf),
        "n_local_infeasible": int(n_local_infeasible),
        "loop_seconds": float(t_loop),
        "compute_seconds": float(time.perf_counter() - t0),
    }


# ============================================================================================
# regularization path (book att-thm-regpath)
# ============================================================================================
@dataclass(frozen=True)
class AttRegPathConfig:
    """Regularization path W_R = argmin_{||W|| <= R} L(W) on cyclic data (book
    ``att-thm-regpath``)."""

    seed: int = 0  # base seed
    n_trials: int = 10  # independent datasets
    n_samples: int = 6  # n
    seq_len: int = 4  # T
    vocab_size: int = 6  # K
    dim: int = 8  # d
    radii: tuple = (
        0.5,
        1.0,
        2.0,
        3.0,
        5.0,
        10.0,
        20.0,
        30.0,
    )  # R grid (<= 30: beyond, the solver stalls)


@cached
def reg_path_trial(trial: Trial) -> dict:
    """The path of one cyclic dataset (an independent run): cos(W_R, W^svm),
    ||Π_Sfin W_R - W^fin|| and ||W_R|| along the radii, and the rejected / infeasible draws."""
    cfg = trial.cfg
    ft = sample_feasible_trial(
        trial_rng(cfg.seed, trial.index),
        cfg.n_samples,
        cfg.seq_len,
        cfg.vocab_size,
        cfg.dim,
        "cyclic",
    )
    data, graphs, W_svm = ft.data, ft.graphs, ft.W_svm
    W_fin = finite_component(data.E, data.tokens, data.labels, graphs=graphs)
    B_fin = subspaces(data.E, data.tokens, data.labels, graphs=graphs).S_fin
    WR = regularization_path(data.E, data.tokens, data.labels, np.asarray(cfg.radii, float))
    return {
        "corr_svm": cos(WR, W_svm),
        "fin_err": np.linalg.norm(
            project_onto_spans(WR[:, None], [B_fin])[:, 0] - W_fin, axis=(-2, -1)
        ),
        "W_norm": np.linalg.norm(WR, axis=(-2, -1)),
        "n_rejected": int(data.n_rejected),
        "n_infeasible": int(ft.n_infeasible),
    }


def run_reg_path(
    cfg: AttRegPathConfig,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
    progress: bool = True,
) -> dict:
    """cos(W_R, W^svm), ||Π_Sfin W_R - W^fin|| and ||W_R|| along R (cvxpy + Clarabel).

    The trials are independent runs (per-trial cached by :func:`reg_path_trial`; each path is
    a sequence of conic solves, not one batch): they go through
    :func:`ntpcore.pipeline.sweep.map_runs`, in-process by default, on ``n_workers`` local
    processes or on a ``dask.distributed`` scheduler.  How they run does not change what
    they compute, so neither is part of ``cfg`` or of any cache key.
    """
    t0 = time.perf_counter()
    results = _trial_sweep(
        reg_path_trial, cfg, "regularization paths", n_workers, scheduler, progress
    )
    return {
        "radii": np.asarray(cfg.radii, float),
        **{k: np.stack([r[k] for r in results]) for k in ("corr_svm", "fin_err", "W_norm")},
        "n_rejected": int(sum(r["n_rejected"] for r in results)),
        "n_infeasible": int(sum(r["n_infeasible"] for r in results)),
        "compute_seconds": float(time.perf_counter() - t0),
    }


# ============================================================================================
# SCC statistics of random data (beyond the paper)
# ============================================================================================
@dataclass(frozen=True)
class AttSCCStatsConfig:
    """SCC statistics of random TPGs versus the number of samples n and the length T."""

    seed: int = 0  # base seed
    n_trials: int = 20  # datasets per (n, T)
    vocab_size: int = 20  # K
    seq_lens: tuple = (3, 5, 8)  # T values
    sample_sizes: tuple = (5, 10, 20, 50, 100, 200, 500, 1000, 2000)  # n values


_SCC_STATS = ("n_sccs", "largest_frac", "single_scc", "cyclic_frac", "pure_comp")


@dataclass(frozen=True)
class SCCCellConfig:
    """One (T, n) cell of the SCC statistics: ``n_trials`` datasets drawn from the generator
    ``SeedSequence(seed).spawn(...)[index]`` (the same stream as a serial loop would use)."""

    seed: int
    index: int
    seq_len: int
    n_samples: int
    vocab_size: int
    n_trials: int


@cached
def scc_cell(cell: SCCCellConfig) -> dict:
    """The statistics of one cell, one value per trial: an independent run of the sweep."""
    rng = trial_rng(cell.seed, cell.index)
    K, T, n = cell.vocab_size, cell.seq_len, cell.n_samples
    out = {k: np.zeros(cell.n_trials) for k in _SCC_STATS}
    for r in range(cell.n_trials):
        data = sample_dataset(rng, n, T, K, 1, graph="any")
        st = scc_structures(token_priority_graphs(data.tokens, data.labels, K))
        used = [s for s in st if s.touched.any()]
        n_scc = [len(np.unique(s.scc[s.touched])) for s in used]
        big = [np.bincount(s.scc[s.touched]).max() / s.touched.sum() for s in used]
        out["n_sccs"][r] = np.mean(n_scc)
        out["largest_frac"][r] = np.mean(big)
        out["single_scc"][r] = np.mean(np.array(n_scc) == 1)
        out["cyclic_frac"][r] = cyclic_samples(data.tokens, data.labels, st).mean()
        mask = reduced_position_mask(data.tokens, data.labels, st)
        out["pure_comp"][r] = mask.all(axis=1).mean()
    return out


def run_scc_stats(
    cfg: AttSCCStatsConfig,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
    progress: bool = True,
) -> dict:
    """Per (T, n), averaged over trials and over the TPGs that have edges:
    ``n_sccs`` (SCCs among touched tokens), ``largest_frac`` (largest SCC / touched tokens),
    ``single_scc`` (fraction of TPGs that are one SCC: W^svm e_k = 0 there), and per sample
    ``cyclic_frac`` (label's SCC holds another token) and ``pure_comp`` (label's SCC holds every
    token of the sequence: no hard retrieval left, pure soft composition).

    The (T, n) cells are independent runs (per-cell cached) with their own generators: they go
    through :func:`ntpcore.pipeline.sweep.map_runs`, in-process by default, on ``n_workers``
    local processes or on a ``dask.distributed`` scheduler.  How they run does not change
    what they compute, so neither is part of ``cfg`` or of any cache key.
    """
    from ntpcore.pipeline.sweep import map_runs

    t0 = time.perf_counter()
    cells = [
        SCCCellConfig(cfg.seed, a * len(cfg.sample_sizes) + b, T, n, cfg.vocab_size, cfg.n_trials)
        for a, T in enumerate(cfg.seq_lens)
        for b, n in enumerate(cfg.sample_sizes)
    ]
    results = map_runs(
        scc_cell,
        cells,
        n_workers=n_workers,
        scheduler=scheduler,
        desc="SCC statistics",
        progress=progress,
    )
    shape = (len(cfg.seq_lens), len(cfg.sample_sizes), cfg.n_trials)
    stats = {k: np.stack([r[k] for r in results]).reshape(shape) for k in _SCC_STATS}
    return {
        "seq_lens": np.array(cfg.seq_lens),
        "sample_sizes": np.array(cfg.sample_sizes),
        **stats,
        "compute_seconds": float(time.perf_counter() - t0),
    }


# ============================================================================================
# conceptual figure and the automaton playground (book att-prop-automaton)
# ============================================================================================
@dataclass(frozen=True)
class AttConceptualConfig:
    """Exact toy of the conceptual figure: TPG, SCCs, priority levels, retrieval, composition."""

    toy: str = "conceptual"  # a key of ntpcore.att.data.TOYS
    test_sequence: tuple = (0, 1, 4, 5)  # a test sequence (last entry = last token)
    undecided_sequence: tuple = (4, 5)  # a sequence whose retrieval the theory leaves open
    n_inits: int = 4  # random initialisations of the trained models
    n_steps: int = 6000  # NGD steps of the trained models
    step_size: float = 0.01  # NGD step size
    seed: int = 0  # base seed of the initialisations


@cached
def run_conceptual(cfg: AttConceptualConfig) -> dict:
    """W^svm, W^fin, SCCs and levels of the toy; the automaton on two test inputs next to
    models trained from ``n_inits`` random initialisations (one batch).

    The initialisations are not a sweep of :func:`ntpcore.pipeline.sweep.map_runs`: they
    train as one batched numpy program, in which a step of all models costs about what one
    model's step costs alone.
    """
    data = toy_dataset(cfg.toy)
    out = _automaton_state(
        data, cfg.test_sequence, cfg.n_steps, cfg.step_size, cfg.seed, n_inits=cfg.n_inits
    )
    auto = build_automaton(data.E, data.tokens, data.labels)
    und = automaton_predict(auto, cfg.undecided_sequence)
    out.update(
        {
            "undecided_sequence": np.array(cfg.undecided_sequence),
            "undecided_composition": und.composition,
            "undecided_status": und.status,
            "undecided_notes": " | ".join(und.notes),
            "undecided_models": model_output_batch(out["W_all"], data.E, cfg.undecided_sequence),
        }
    )
    return out


def model_output_batch(Ws, E, sequence) -> np.ndarray:
    """f_W(X) (n_models, K) of several trained weight matrices on one sequence."""
    return np.array([model_output(W, E, [sequence])[0] for W in Ws])


def _automaton_state(
    data: AttDataset, test_sequence, n_steps, step_size, seed, n_inits: int = 1
) -> dict:
    E, tok, lab = data.E, data.tokens, data.labels
    K, d = E.shape
    auto = build_automaton(E, tok, lab)
    out = automaton_predict(auto, test_sequence)  # validates the sequence first
    k = out.k
    st = auto.structures[k]
    W0 = np.array([r.uniform(-1.0, 1.0, (d, d)) / np.sqrt(d) for r in trial_rngs(seed, n_inits)])
    P = make_problem(
        np.repeat(E[None], n_inits, 0),
        np.repeat(tok[None], n_inits, 0),
        np.repeat(lab[None], n_inits, 0),
    )
    _, tr = run_descent(W0, P, eta=step_size, n_steps=n_steps, record=[n_steps])
    W_all = tr[-1]  # (n_inits, d, d)
    auto_train = np.array([automaton_predict(auto, s).composition for s in tok])
    train_tv = max(
        0.5 * np.abs(model_output(W, E, tok) - auto_train).sum(axis=1).max() for W in W_all
    )
    return {
        "E": E,
        "tokens": tok,
        "labels": lab,
        "k": k,
        "W_svm": auto.W_svm,
        "W_fin": auto.W_fin,
        "W": W_all[0],
        "W_all": W_all,
        "svm_scores": E @ auto.W_svm @ E[k],
        "fin_scores": E @ auto.W_fin @ E[k],
        "scc": st.scc,
        "level": st.level,
        "touched": st.touched,
        "reach": st.reach,
        "test_sequence": np.array(test_sequence),
        "retrieved": np.array(out.retrieved),
        "composition": out.composition,
        "model": model_output(W_all[0], E, [test_sequence])[0],
        "models": model_output_batch(W_all, E, test_sequence),
        "status": out.status,
        "notes": " | ".join(out.notes),
        "margin": out.margin,
        "train_tv_max": float(train_tv),
    }


def playground_state(
    dataset: str, test_sequence, *, n_steps: int = 3000, step_size: float = 0.01, seed: int = 0
) -> dict:
    """State shown by the automaton playground (uncached; cheap).

    ``dataset``: a toy name of :data:`ntpcore.att.data.TOYS`, or ``"random-<seed>"`` for a random
    cyclic dataset (n=6, T=4, K=6, d=8).
    """
    if dataset.startswith("random-"):
        rng = np.random.default_rng(int(dataset.split("-", 1)[1]))
        data = sample_dataset(rng, 6, 4, 6, 8, graph="cyclic")
    else:
        data = toy_dataset(dataset)
    return _automaton_state(data, tuple(int(t) for t in test_sequence), n_steps, step_size, seed)


#: Datasets offered by the playground: the exact toys and ten random cyclic sets.
PLAYGROUND_DATASETS = tuple(sorted(TOYS)) + tuple(f"random-{s}" for s in range(10))


def parse_sequence(text: str) -> tuple[int, ...]:
    """Token ids typed as text (commas and/or spaces); DataError with the reason otherwise."""
    parts = str(text).replace(",", " ").split()
    if not parts:
        raise DataError("the sequence is empty: type token ids separated by commas or spaces")
    bad = [p for p in parts if not p.lstrip("-").isdigit()]
    if bad:
        raise DataError(f"{bad[0]!r} is not a token id: type integers separated by commas")
    return tuple(int(p) for p in parts)


def playground_answer(
    dataset: str, text: str, *, n_steps: int = 3000, step_size: float = 0.01, seed: int = 0
) -> tuple[dict | None, str]:
    """What the playground shows for a dataset name and a typed sequence.

    Returns ``(state, description)`` (:func:`playground_state`, :func:`describe_playground`)
    when the input can be evaluated, and ``(None, reason)`` with a one-line reason otherwise
    (unknown dataset, empty or non-numeric text, token ids outside the vocabulary).
    """
    try:
        if dataset.startswith("random-") and not dataset[7:].isdigit():
            raise DataError(f"dataset {dataset!r}: use random-SEED with an integer SEED")
        seq = parse_sequence(text)
        state = playground_state(dataset, seq, n_steps=n_steps, step_size=step_size, seed=seed)
    except NTPError as exc:
        return None, str(exc).splitlines()[0]
    return state, describe_playground(state)


def describe_playground(state: dict) -> str:
    """Text summary of a :func:`playground_state`: retrieval status and margin, the W^svm scores
    of the tokens of X, automaton and model outputs, their total variation, and the warnings."""
    seq = state["test_sequence"].tolist()
    lines = [
        f"X = {seq}, last token k = {state['k']}: retrieval {state['status']}, "
        f"retrieved {state['retrieved'].tolist()}, margin {state['margin']:.3g}",
        f"  W_svm scores: { {int(j): round(float(state['svm_scores'][j]), 3) for j in set(seq)} }",
        f"  automaton: {np.round(state['composition'], 3).tolist()}",
        f"  model    : {np.round(state['model'], 3).tolist()}",
        f"  TV(model, automaton) = {total_variation(state['model'], state['composition']):.3f}",
    ]
    lines += [f"  warning: {note}" for note in filter(None, state["notes"].split(" | "))]
    return "\n".join(lines)
