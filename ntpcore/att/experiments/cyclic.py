r"""The global-convergence experiments of the self-attention paper (key ``att``): the
acyclic and cyclic TPG figures under normalized GD and plain GD in the setting of the GD
convergence theorem (book ``att-thm-gd``).

The trials of a descent run as one batched numpy program (trials on a leading axis; the W run
and the reduced W^fin run side by side) with the closed-form gradients of
:mod:`ntpcore.att.dynamics` and the loops of :mod:`ntpcore.att.descent`; the Graph-SVM uses the
exact active-set solver of :mod:`ntpcore.att.svm` and W^fin a Newton solve.  The cvxpy checks
of :func:`global_theory` are a sweep of cached per-trial runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ntpcore.att.descent import descend
from ntpcore.att.dynamics import attention_weights, make_problem
from ntpcore.att.experiments.measures import cos_rows, padded_bases, trial_rows
from ntpcore.att.experiments.trials import (
    DataConfig,
    DescentSteps,
    Trial,
    sample_feasible_trial,
    scc_onehot,
    trial_rng,
    trial_rngs,
    trial_sweep,
)
from ntpcore.att.finite import finite_component, reduced_log_loss, subspaces
from ntpcore.att.priority import (
    cyclic_samples,
    reduced_position_mask,
    scc_structures,
)
from ntpcore.att.verify import theory_report
from ntpcore.core.cache import cached
from ntpcore.core.optim import log_steps
from ntpcore.errors import DataError

__all__ = [
    "GlobalConfig",
    "GlobalTrial",
    "descend_global",
    "draw_global_trial",
    "global_theory",
    "global_theory_trial",
    "measure_global",
    "run_global",
]


# ============================================================================================
# global convergence (acyclic / cyclic TPGs), NGD as in the paper or plain GD as in the theorem
# ============================================================================================
@dataclass(frozen=True)
class GlobalConfig(DescentSteps, DataConfig):
    """Global-convergence experiment: the paper's acyclic and cyclic TPG figures (NGD), and plain
    GD for the setting of the theorem (book ``att-thm-gd``)."""

    graph: str = "cyclic"  # "cyclic" (>= 1 cyclic TPG) | "acyclic" (all TPGs acyclic)
    optimizer: str = "ngd"  # "ngd" (paper's experiments) | "gd" (the theorem)


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


def draw_global_trial(rng: np.random.Generator, cfg: GlobalConfig) -> GlobalTrial:
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
        scc_onehot=scc_onehot(tok, structures),
        n_rejected=ft.data.n_rejected,
        n_infeasible=ft.n_infeasible,
    )


def _stack(trials: list[GlobalTrial], name: str) -> np.ndarray:
    """Field ``name`` of every trial stacked on a leading trial axis."""
    return np.array([getattr(t, name) for t in trials])


def _descend_global(trials: list[GlobalTrial], cfg: GlobalConfig, on_chunk=None):
    """:func:`descend_global` as a :class:`ntpcore.att.descent.Descent` of the 2B runs (the
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
        eta=cfg.lr,
        n_steps=cfg.n_steps,
        normalized=cfg.optimizer == "ngd",
        record=record,
        loss=True,
        attention=True,
        rows=slice(0, B),  # the W runs
        on_chunk=on_chunk,
    )
    return res, time.perf_counter() - t_loop


def descend_global(trials: list[GlobalTrial], cfg: GlobalConfig):
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


def _complement(B_rows: np.ndarray) -> np.ndarray:
    """Row-orthonormal basis of the orthogonal complement of the row span of ``B_rows``."""
    p = B_rows.shape[1]
    if B_rows.shape[0] == 0:
        return np.eye(p)
    _, _, Vt = np.linalg.svd(B_rows, full_matrices=True)
    return Vt[B_rows.shape[0] :]


class _GlobalMeter:
    """The metrics of :func:`run_global`, accumulated over consecutive recorded steps (all at
    once, or chunk by chunk as :func:`ntpcore.att.descent.descend` hands them over).

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
        Bfin = padded_bases([t.B_fin for t in trials])  # (B, r, p)
        self.BfinT = Bfin.transpose(0, 2, 1)
        self.ones_r = np.ones(Bfin.shape[1])
        self.c_fin = np.matmul(Bfin, self.wfin[:, :, None]).transpose(0, 2, 1)  # (B, 1, r)
        self.svm_fin = np.matmul(Bfin, self.wsvm[:, :, None])  # (B, r, 1): coords of Π W^svm
        self.perpT = padded_bases([_complement(t.B_S) for t in trials]).transpose(0, 2, 1)
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
        o["proj_corr"][:, at] = cos_rows(proj_dot, np.sqrt(self.svm_sq)[:, None], np.sqrt(perp_sq))
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
            "corr_svm": cos_rows(o["dot_svm"], W_norm, svm_norm[:, None]),
            "corr_full": cos_rows(dot_full, W_norm, np.linalg.norm(full, axis=-1)[:, None]),
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
        self.add(trial_rows(W[:, :B]), trial_rows(W[:, B:]), chunk.loss.T, s_rows)


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
    meter.add(trial_rows(W), trial_rows(W_red), np.asarray(loss).T, s_rows)
    return meter.result()


@cached
def run_global(cfg: GlobalConfig) -> dict:
    """W(τ) from a random init and the reduced W^fin(τ) run from 0, all trials batched.

    Metrics per trial and recorded step (arrays ``(n_trials, S)``):
    ``corr_svm`` = cos(W, W^svm); ``corr_full`` = cos(W, W^fin + R W^svm) with
    R = <W(end) - W^fin, W^svm>/||W^svm||^2 fitted at the last iterate; ``proj_corr`` =
    cos(W^svm, W - Π_Sfin W); ``norm_diff`` = ||Π_Sfin W(τ) - W_fin(τ)|| (time-aligned reduced
    run, as in the paper); ``fin_err`` = ||Π_Sfin W(τ) - W^fin|| (to the exact limit);
    ``attn_best`` = mean over samples of the largest attention mass on one SCC of G^(k_i);
    ``attn_label`` = mean attention mass on the label's SCC; ``loss`` and ``loss_gap`` = L - L*;
    ``W_norm``; ``perp_drift`` = ||Π_S⊥ W(τ) - Π_S⊥ W(0)||.
    NGD records every step, GD ~200 log-spaced steps.  Per trial, for the checks: the data
    ``E``, ``tokens``, ``labels``, the initialisation ``W0``, ``W_svm``, ``W_fin`` and the
    reduced positions ``mask``.

    The trials are not a sweep of :func:`ntpcore.core.sweep.map_runs`: they are one
    batched numpy program (:func:`descend_global`, trials on a leading axis), in which each
    step of all trials costs about what one trial's step costs alone.
    """
    if cfg.optimizer not in ("ngd", "gd"):
        raise DataError(f"optimizer must be 'ngd' or 'gd', got {cfg.optimizer!r}")
    t0 = time.perf_counter()
    trials = [draw_global_trial(rng, cfg) for rng in trial_rngs(cfg.trial_seed, cfg.n_trials)]
    S = cfg.n_steps + 1 if cfg.optimizer == "ngd" else len(np.unique(log_steps(cfg.n_steps, 200)))
    meter = _GlobalMeter(trials, S)
    res, t_loop = _descend_global(trials, cfg, on_chunk=meter.add_chunk)
    return {
        "steps": res.steps,
        **meter.result(),
        # the trials' data and the theory's objects, for the checks (ntpcore.att.checks)
        **{k: _stack(trials, k) for k in ("E", "tokens", "labels", "W0", "W_svm", "W_fin", "mask")},
        "n_rejected": int(sum(t.n_rejected for t in trials)),
        "n_infeasible": int(sum(t.n_infeasible for t in trials)),
        "loop_seconds": float(t_loop),
        "compute_seconds": float(time.perf_counter() - t0),
    }


@cached
def global_theory_trial(trial: Trial) -> dict:
    """:func:`ntpcore.att.verify.theory_report` of one trial (an independent run)."""
    t = draw_global_trial(trial_rng(trial.cfg.trial_seed, trial.index), trial.cfg)
    return theory_report(t.E, t.tokens, t.labels, t.W_svm, t.W_fin)


def global_theory(
    cfg: GlobalConfig,
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
    :func:`ntpcore.core.sweep.map_runs`, in-process by default, on ``n_workers`` local
    processes or on a ``dask.distributed`` scheduler.  How they run does not change what
    they compute, so neither is part of ``cfg`` or of any cache key.
    """
    reports = trial_sweep(global_theory_trial, cfg, "theory checks", n_workers, scheduler, progress)
    return {key: np.array([r[key] for r in reports]) for key in reports[0]}
