"""Benchmarks of the self-attention part (key ``att``) against the authors' run times (the
performance page of the book, ``book/att/experiments.md``).

* ``cyclic``: the cyclic experiment (n=6, T=4, K=6, d=8, NGD lr 0.01, 4000 steps, 10 trials,
  W and W^fin runs + Graph-SVM per trial), batched numpy with closed-form gradients;
* ``local``: the local-convergence experiment (lr 0.1, 2000 steps, 10 trials), both losses;
* ``graph_svm``: the specialised Graph-SVM solver against cvxpy + Clarabel (default settings)
  on the experiment's random datasets, with the accuracy of each;
* ``baseline``: the same cyclic protocol written the usual way — torch autograd, one trial
  after another, cvxpy for the Graph-SVM — timed on a few trials and scaled to 10, so the
  speed-up can also be read on the same machine.

Run ``python -m ntpcore.bench.att`` (prints a JSON summary).
"""

from __future__ import annotations

import json
import time

import numpy as np

from ntpcore.bench.timing import measure

#: The authors' times on a CI-like machine, seconds (reported in ``book/att/experiments.md``).
AUTHORS_SECONDS = {"cyclic": 56.0, "local": 31.0}


def bench_cyclic(repeats: int = 3) -> dict:
    from ntpcore.att.experiments import AttGlobalConfig, run_global

    timing, res = measure(lambda: run_global.__wrapped__(AttGlobalConfig()), repeats=repeats)
    return {
        **timing.as_dict(),
        "speedup_vs_authors": AUTHORS_SECONDS["cyclic"] / timing.median,
        "corr_svm_final": float(res["corr_svm"][:, -1].mean()),
        "corr_svm_final_std": float(res["corr_svm"][:, -1].std()),
        "loop_seconds": float(res["loop_seconds"]),
    }


def bench_local(repeats: int = 3) -> dict:
    from ntpcore.att.experiments import AttLocalConfig, run_local

    out = {}
    for losses in (("ce",), ("squared",), ("ce", "squared")):
        cfg = AttLocalConfig(losses=losses)
        timing, res = measure(lambda cfg=cfg: run_local.__wrapped__(cfg), repeats=repeats)
        out["+".join(losses)] = {
            **timing.as_dict(),
            "speedup_vs_authors_per_loss": AUTHORS_SECONDS["local"] * len(losses) / timing.median,
            "corr_local_final": res["corr_local"][:, :, -1].mean(axis=1).tolist(),
            "corr_global_final": res["corr_global"][:, :, -1].mean(axis=1).tolist(),
        }
    return out


def bench_graph_svm(n_sets: int = 40, seed: int = 0) -> dict:
    """Specialised solver vs cvxpy/Clarabel (default settings) on random cyclic sets."""
    import cvxpy as cp

    from ntpcore.att.data import sample_dataset
    from ntpcore.att.priority import token_priority_graphs
    from ntpcore.att.svm import graph_svm_constraints, graph_svm_from_graphs

    rng = np.random.default_rng(seed)
    t_ours, t_cvx, obj_rel, viol_ours, viol_cvx, sol_rel = [], [], [], [], [], []
    for _ in range(n_sets):
        data = sample_dataset(rng, 6, 4, 6, 8, graph="cyclic")
        t0 = time.perf_counter()
        graphs = token_priority_graphs(data.tokens, data.labels, data.K)
        W = graph_svm_from_graphs(data.E, graphs).W
        t_ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        graphs = token_priority_graphs(data.tokens, data.labels, data.K)
        A_eq, A_in, _ = graph_svm_constraints(data.E, graphs)
        w = cp.Variable(64)
        cons = [A_in @ w >= 1] + ([A_eq @ w == 0] if A_eq.shape[0] else [])
        cp.Problem(cp.Minimize(cp.norm(w, 2)), cons).solve(solver=cp.CLARABEL)
        t_cvx.append(time.perf_counter() - t0)
        wc = np.asarray(w.value)
        wo = W.ravel()
        obj_rel.append(abs(np.linalg.norm(wc) - np.linalg.norm(wo)) / np.linalg.norm(wo))
        sol_rel.append(np.linalg.norm(wc - wo) / np.linalg.norm(wo))
        for ww, store in ((wo, viol_ours), (wc, viol_cvx)):
            v = max(float(np.max(1 - A_in @ ww)), float(np.max(np.abs(A_eq @ ww), initial=0)), 0)
            store.append(v)
    med_o, med_c = float(np.median(t_ours)), float(np.median(t_cvx))
    return {
        "n_sets": n_sets,
        "median_seconds_specialised": med_o,
        "median_seconds_cvxpy_clarabel": med_c,
        "speedup": med_c / med_o,
        "max_objective_rel_diff": float(np.max(obj_rel)),
        "max_solution_rel_diff": float(np.max(sol_rel)),
        "max_violation_specialised": float(np.max(viol_ours)),
        "max_violation_cvxpy": float(np.max(viol_cvx)),
    }


def baseline_cyclic_torch(n_trials: int = 2, n_steps: int = 4000) -> dict:
    """The cyclic protocol the usual way (torch autograd, trials in sequence, cvxpy SVM)."""
    import torch

    from ntpcore.att.experiments import sample_feasible_trial, trial_rngs
    from ntpcore.att.oracle import OneLayerAttention, attention_loss
    from ntpcore.att.priority import reduced_position_mask, scc_structures
    from ntpcore.att.svm import graph_svm_cvxpy

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    for rng in trial_rngs(0, n_trials):
        trial = sample_feasible_trial(rng, 6, 4, 6, 8, "cyclic")
        data, graphs = trial.data, trial.graphs
        graph_svm_cvxpy(data.E, data.tokens, data.labels, tight=False)
        tok = torch.as_tensor(data.tokens)
        lab = torch.as_tensor(data.labels)
        mask = torch.as_tensor(
            reduced_position_mask(data.tokens, data.labels, scc_structures(graphs))
        )
        for reduced in (False, True):
            model = OneLayerAttention(data.E, init="zero" if reduced else "uniform")
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            record = []
            for _ in range(n_steps):
                opt.zero_grad()
                X = model.E[tok]
                scores = torch.einsum("ntd,de,ne->nt", X, model.W, X[:, -1])
                if reduced:
                    scores = scores.masked_fill(~mask, -torch.inf)
                attn = torch.softmax(scores, -1)
                out = torch.zeros(tok.shape[0], 6, dtype=attn.dtype).scatter_add(1, tok, attn)
                loss = attention_loss(out, lab, head="identity", loss="log")
                loss.backward()
                with torch.no_grad():
                    model.W.grad /= model.W.grad.norm() + 1e-12
                opt.step()
                record.append(model.W.detach().clone())
    per_trial = (time.perf_counter() - t0) / n_trials
    return {
        "trials_timed": n_trials,
        "seconds_per_trial": per_trial,
        "seconds_for_10_trials": 10 * per_trial,
    }


def main() -> None:
    out = {
        "cyclic": bench_cyclic(),
        "local": bench_local(),
        "graph_svm": bench_graph_svm(),
        "baseline_torch_sequential": baseline_cyclic_torch(),
    }
    out["cyclic"]["speedup_vs_same_machine_baseline"] = (
        out["baseline_torch_sequential"]["seconds_for_10_trials"] / out["cyclic"]["median"]
    )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
