"""Benchmarks of the self-attention part (key ``att``).

* :func:`bench_cyclic`, :func:`bench_local`: the cyclic and local-convergence experiments
  against their reference formulations, cold, in pairs (:mod:`tools.bench.paired`; the
  reference, the authors' loops re-derived with torch autograd, is
  :mod:`tools.bench.reference`);
* :func:`bench_graph_svm`: the specialised Graph-SVM solver against cvxpy + Clarabel (default
  settings) on the experiment's random datasets, with the accuracy of each.

Run ``python -m tools.bench.att`` (prints a JSON summary).
"""

from __future__ import annotations

import json
import time

import numpy as np

#: The authors' times for their notebooks on a CI-like machine, seconds (for context only:
#: the benchmark times the reference formulation in the same run).
AUTHORS_SECONDS = {"cyclic": 56.0, "local": 31.0}


def bench_cyclic(repeats: int = 3, quick: bool = False) -> dict:
    """The cyclic experiment against :func:`tools.bench.reference.cyclic`."""
    from tools.bench.paired import bench_case

    return bench_case("att_cyclic", quick=quick, repeats=repeats)


def bench_local(repeats: int = 3, quick: bool = False) -> dict:
    """The local-convergence experiment (both losses) against
    :func:`tools.bench.reference.local`."""
    from tools.bench.paired import bench_case

    return bench_case("att_local", quick=quick, repeats=repeats)


def bench_graph_svm(n_sets: int = 40, seed: int = 0) -> dict:
    """Specialised solver vs cvxpy/Clarabel (default settings) on random cyclic sets."""
    import cvxpy as cp

    from ntpcore.att.data import sample_dataset
    from ntpcore.att.priority import token_priority_graphs
    from ntpcore.att.svm import graph_svm_constraints, solve_graph_svm

    rng = np.random.default_rng(seed)
    t_ours, t_cvx, obj_rel, viol_ours, viol_cvx, sol_rel = [], [], [], [], [], []
    for _ in range(n_sets):
        data = sample_dataset(rng, 6, 4, 6, 8, graph="cyclic")
        t0 = time.perf_counter()
        graphs = token_priority_graphs(data.tokens, data.labels, data.K)
        W = solve_graph_svm(data.E, graphs).W
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


def main() -> None:
    out = {"cyclic": bench_cyclic(), "local": bench_local(), "graph_svm": bench_graph_svm()}
    print(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
