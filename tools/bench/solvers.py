"""``make bench``, section *solvers*: the specialised max-margin solvers against generic ones.

Each specialised max-margin solver (NTP-SVM, nuclear-norm SVM, Graph-SVM) against the
straightforward cvxpy formulation with Clarabel and with SCS, on the papers' instance
sizes and on growing sizes.  Every solve (specialised or generic) runs in a child
process with a time limit (default 10 minutes), so a solver that runs out of time or
memory is recorded as such and the ladder stops for it.  Reported: median/min/max
time, objective, relative objective gap to the Clarabel solution, the worst
constraint violation, the peak resident memory of the child and, for the nuclear-norm
SVM, the certified relative duality gap of the specialised solve and the number of
distinct supports of the instance (its support laws: :func:`geo_supports`).  A specialised
solve is repeated (at least 3 runs while they fit in 1.5 time limits, up to 5 in one),
each run's CPU time recorded beside its wall time, with the load average before the
first.
"""

from __future__ import annotations

import functools
import json
import os
import re
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ntpcore.errors import ParameterError
from tools.bench.timing import blas_info, child_env, measure

GENERIC = ("CLARABEL", "SCS")


@dataclass(frozen=True)
class Size:
    """One instance size of a problem; ``label`` says where it comes from; ``law``, if set,
    names the law of a problem's instances when it has several (``geo_supports``)."""

    dims: dict[str, int]
    label: str = ""
    law: str = ""


def _lin_instance(dims: dict[str, int], seed: int = 0):
    from ntpcore.lin.data import make_synthetic

    # supports of 0.6 V tokens when d >= m (always NTP-separable, Lemma 1); with d < m such
    # dense supports are not NTP-separable, so those sizes use sparse 3-token supports
    S = max(1, dims["V"] * 6 // 10) if dims["d"] >= dims["m"] else min(3, dims["V"] - 1)
    data = make_synthetic(m=dims["m"], d=dims["d"], V=dims["V"], S=S, seed=seed)
    return data.H, data.P > 0


#: the Wikipedia sample's supports (law "wiki"): the corpus and its context length, as in
#: the corpus-scale figure (:mod:`ntpcore.geo.experiments.scale`)
WIKI_LAW = "wiki"

_ZIPF_LAW = re.compile(r"zipf(?P<a>\d+(?:\.\d+)?)-k(?P<k>\d+)")


def _zipf_freq(V: int, exponent: float) -> np.ndarray:
    freq = 1.0 / np.arange(1, V + 1) ** exponent
    return freq / freq.sum()


def geo_supports(V: int, m: int, law: str = "patterns", seed: int = 0) -> np.ndarray:
    r"""Support matrices ``S`` (V x m, bool) of the nuclear-norm SVM bench ladder, seeded.

    Sparsity law of ``"patterns"`` and ``"distinct"``: a support has :math:`k` words,
    :math:`k` uniform in :math:`\{1,\dots,\min(5,V-1)\}`, drawn without replacement with
    probabilities proportional to :math:`1/\text{rank}` (a Zipf law of exponent 1 over the
    vocabulary), so that a few frequent words are in many supports and most words in few or
    none, as in real text.

    ``law="patterns"``: :math:`\max(2,\lfloor m/4\rfloor)` supports are drawn this way and
    each of the ``m`` contexts takes one of them uniformly at random, so many contexts share
    a support (about ``m/4`` distinct supports, as in real text): the exact reduction of
    :func:`ntpcore.geo.svm_problem.reduce_support` shrinks the problem to about a quarter of its
    columns.  ``law="distinct"``: every context draws its own support, a support equal to an
    earlier one being drawn again, so all ``m`` supports are distinct and the reduction
    keeps every column (the hardest case for the solvers at a given size).

    ``law="zipf<a>-k<K>"`` (e.g. ``"zipf1.1-k4"``): every context draws its own support of
    :math:`k` words, :math:`k` uniform in :math:`\{1,\dots,\min(K,V-1)\}`, with probabilities
    proportional to :math:`1/\text{rank}^a`, independently of the others (so frequent short
    supports repeat, as in real text: ``zipf1.1-k4`` at 1000 x 5000 has about 3,600 distinct
    supports).  ``law="wiki"``: the supports of the real corpus the book ships, the ``m``
    most frequent contexts of two words of the Wikipedia sample over its ``V`` most frequent
    words (:func:`ntpcore.geo.experiments.scale.scale_dataset`; ``seed`` unused; at most
    5,794 contexts qualify at ``V = 1000``), words no context uses dropped, so ``S`` may have
    fewer than ``V`` rows.

    Raises
    ------
    ParameterError
        On an unknown ``law``, or if ``m`` distinct supports are not found in ``100 m``
        draws (a vocabulary too small for ``m`` distinct supports).
    DataError
        If the corpus has fewer than ``m`` qualifying contexts (``law="wiki"``).
    """
    if law == WIKI_LAW:
        from ntpcore.geo.experiments.scale import CorpusConfig, scale_dataset

        return np.asarray(scale_dataset(CorpusConfig(vocab_size=V), m).S, dtype=bool)
    rng = np.random.default_rng(seed)
    zipf = _ZIPF_LAW.fullmatch(law)
    if zipf is not None:
        freq = _zipf_freq(V, float(zipf["a"]))
        k_max = min(int(zipf["k"]), V - 1)
        S = np.zeros((V, m), dtype=bool)
        for j in range(m):
            S[rng.choice(V, int(rng.integers(1, k_max + 1)), replace=False, p=freq), j] = True
        return S
    k_max = min(5, V - 1)
    freq = _zipf_freq(V, 1.0)
    if law == "patterns":
        n_patterns = max(2, m // 4)
        patterns = np.zeros((V, n_patterns), dtype=bool)
        for k in range(n_patterns):
            size = int(rng.integers(1, k_max + 1))
            patterns[rng.choice(V, size, replace=False, p=freq), k] = True
        return patterns[:, rng.integers(0, n_patterns, m)]
    if law != "distinct":
        raise ParameterError(
            "law must be 'patterns', 'distinct', 'wiki' or 'zipf<a>-k<K>' (e.g. 'zipf1.1-k4'), "
            f"got {law!r}"
        )
    S = np.zeros((V, m), dtype=bool)
    seen: set[tuple[int, ...]] = set()
    draws = 0
    while len(seen) < m:
        draws += 1
        if draws > 100 * m:
            raise ParameterError(
                f"no {m} distinct supports of 1..{k_max} words found among V={V} words "
                f"in {100 * m} draws"
            )
        size = int(rng.integers(1, k_max + 1))
        support = tuple(sorted(rng.choice(V, size, replace=False, p=freq)))
        if support not in seen:
            S[list(support), len(seen)] = True
            seen.add(support)
    return S


def _geo_instance(dims: dict[str, int], law: str = "patterns", seed: int = 0):
    return geo_supports(dims["V"], dims["m"], law, seed)


def _att_instance(dims: dict[str, int], seed: int = 0):
    from ntpcore.att.data import sample_dataset

    ds = sample_dataset(np.random.default_rng(seed), dims["n"], dims["T"], dims["K"], dims["d"])
    return ds.E, ds.tokens, ds.labels


def _lin_fast(inst):
    from ntpcore.lin.svm import solve_ntp_svm

    H, S = inst
    return solve_ntp_svm(H, S).W_mm  # "auto": projected Newton (d >= m) or dual CD


def _lin_generic(inst, solver: str):
    from ntpcore.lin.svm_reference import ntp_svm_cvxpy

    H, S = inst
    return ntp_svm_cvxpy(H, S, solver=solver).W_mm


def _lin_check(inst, W) -> tuple[float, float]:
    from ntpcore.lin.svm_problem import margins

    H, S = inst
    mg = margins(W, H, S)
    return float(np.linalg.norm(W)), max(0.0, 1.0 - mg["min_margin"], mg["max_spread"])


def _geo_fast(S):
    from ntpcore.geo.svm import solve_nuclear_svm

    return solve_nuclear_svm(S)  # certified relative gap 1e-8, else SolverError


def _geo_scale(S):
    from ntpcore.geo.svm_scale import solve_nuclear_svm_scale

    return solve_nuclear_svm_scale(S)  # certified relative gap 1e-6, else SolverError


def _geo_unpack(res) -> tuple[np.ndarray, dict[str, Any]]:
    """``L`` of a specialised nuclear-norm solve and its certificate: the relative duality
    gap ``(||L||_* - dual) / ||L||_*`` of the feasible ``L`` and the dual-feasible ``G`` it
    returns (:attr:`ntpcore.geo.svm.NuclearSVMResult.gap`)."""
    return res.L, {
        "gap": float(res.gap),
        "dual_objective": float(res.dual_objective),
        "iterations": int(res.iterations),
        "reduced_shape": [int(n) for n in res.reduced_shape],
    }


def _geo_describe(S) -> dict[str, Any]:
    """Distinct supports (columns of ``S``) and word classes (distinct rows): the size of the
    reduced problem the solvers work on."""
    from ntpcore.geo.svm_problem import reduce_support

    r, u = reduce_support(S).Sr.shape
    return {"distinct_supports": int(u), "word_classes": int(r)}


def _geo_generic(S, solver: str):
    from ntpcore.geo.svm import nuclear_svm_cvxpy

    return nuclear_svm_cvxpy(S, solver=solver).L


def _geo_check(S, L) -> tuple[float, float]:
    from ntpcore.geo.svm_problem import svm_constraint_violation

    return float(np.linalg.norm(L, "nuc")), float(svm_constraint_violation(L, S))


def _att_fast(inst):
    from ntpcore.att.svm import graph_svm

    return graph_svm(*inst)


def _att_generic(inst, solver: str):
    from ntpcore.att.svm import graph_svm_cvxpy

    return graph_svm_cvxpy(*inst, solver=solver)


def _att_check(inst, W) -> tuple[float, float]:
    from ntpcore.att.priority import token_priority_graphs
    from ntpcore.att.svm import graph_svm_constraints

    E, tokens, labels = inst
    A_eq, A_in, _ = graph_svm_constraints(E, token_priority_graphs(tokens, labels, E.shape[0]))
    w = np.asarray(W).reshape(-1)
    viol = 0.0
    if A_eq.shape[0]:
        viol = max(viol, float(np.abs(A_eq @ w).max()))
    if A_in.shape[0]:
        viol = max(viol, float(np.maximum(0.0, 1.0 - A_in @ w).max()))
    return float(np.linalg.norm(W)), viol


@dataclass(frozen=True)
class Problem:
    name: str
    title: str
    instance: Callable[[dict[str, int]], Any]
    fast: Callable[[Any], np.ndarray]
    generic: Callable[[Any, str], np.ndarray]
    check: Callable[[Any, np.ndarray], tuple[float, float]]
    n_vars: Callable[[dict[str, int]], int]
    sizes: tuple[Size, ...]
    generic_solvers: tuple[str, ...] = GENERIC
    #: the specialised solver's solution and what it certifies (e.g. its duality gap), from
    #: what ``fast`` returns; by default ``fast`` returns the solution itself
    unpack: Callable[[Any], tuple[np.ndarray, dict[str, Any]]] = lambda sol: (sol, {})
    #: facts about an instance recorded with its row (e.g. its reduced size)
    describe: Callable[[Any], dict[str, Any]] | None = None

    def make(self, size: Size) -> Any:
        """The instance of one size (of its law, when the size names one)."""
        return self.instance(size.dims, size.law) if size.law else self.instance(size.dims)


PROBLEMS: dict[str, Problem] = {
    "ntp-svm": Problem(
        "ntp-svm",
        "NTP-SVM (lin): min ||W||_F, W in R^{V x d}",
        _lin_instance,
        _lin_fast,
        _lin_generic,
        _lin_check,
        lambda s: s["V"] * s["d"],
        (
            Size({"V": 10, "d": 60, "m": 50}, "lin Fig. 4"),
            Size({"V": 50, "d": 240, "m": 200}, "anchor size (generic-solver time known)"),
            Size({"V": 100, "d": 480, "m": 400}),
            Size({"V": 200, "d": 512, "m": 800}),
            Size({"V": 500, "d": 512, "m": 1000}),
            Size({"V": 1000, "d": 512, "m": 2000}, "target: 10x variables in < 60 s"),
        ),
    ),
    "nuclear-svm": Problem(
        "nuclear-svm",
        "nuclear-norm NTP-SVM (geo): min ||L||_*, L in R^{V x m}",
        lambda s: _geo_instance(s),
        _geo_fast,
        _geo_generic,
        _geo_check,
        lambda s: s["V"] * s["m"],
        (
            Size({"V": 30, "m": 16}, "geo synthetic set"),
            Size({"V": 60, "m": 150}, "anchor size (generic-solver time known)"),
            Size({"V": 104, "m": 403}, "geo real-text size"),
            Size({"V": 200, "m": 1000}),
            Size({"V": 500, "m": 2500}),
            Size({"V": 1000, "m": 5000}, "target: 10x variables in < 60 s"),
        ),
        unpack=_geo_unpack,
        describe=_geo_describe,
    ),
    "nuclear-svm-scale": Problem(
        "nuclear-svm-scale",
        "nuclear-norm NTP-SVM (geo) at vocabulary scale: Anderson-accelerated DR",
        _geo_instance,
        _geo_scale,
        _geo_generic,
        _geo_check,
        lambda s: s["V"] * s["m"],
        (
            Size({"V": 60, "m": 150}, "agreement with SCS"),
            Size({"V": 60, "m": 150}, "agreement with SCS, all supports distinct", "distinct"),
            Size({"V": 104, "m": 403}, "geo real-text size"),
            Size({"V": 200, "m": 1000}),
            Size({"V": 500, "m": 2500}),
            Size({"V": 1000, "m": 5000}, "target: gap 1e-6 in < 60 s"),
            Size(
                {"V": 1000, "m": 5000},
                "target: gap 1e-6 in < 60 s, all supports distinct",
                "distinct",
            ),
            Size(
                {"V": 1000, "m": 5000},
                "target: gap 1e-6 in < 60 s, 1-4 words, Zipf exponent 1.1",
                "zipf1.1-k4",
            ),
            Size(
                {"V": 1000, "m": 5000},
                "target: gap 1e-6 in < 60 s, 1-4 words, Zipf exponent 1.5",
                "zipf1.5-k4",
            ),
            Size(
                {"V": 1000, "m": 5000},
                "target: gap 1e-6 in < 60 s, 1-8 words, Zipf exponent 1.1",
                "zipf1.1-k8",
            ),
            Size(
                {"V": 1000, "m": 5000},
                "target: gap 1e-6 in < 60 s, the Wikipedia sample's supports",
                "wiki",
            ),
            Size({"V": 2000, "m": 10000}, "target: gap 1e-6 in < 10 min"),
            Size(
                {"V": 2000, "m": 10000},
                "target: gap 1e-6 in < 10 min, all supports distinct",
                "distinct",
            ),
        ),
        # Clarabel runs out of memory from about V=60, m=150 (an SDP of size V + m)
        generic_solvers=("SCS",),
        unpack=_geo_unpack,
        describe=_geo_describe,
    ),
    "graph-svm": Problem(
        "graph-svm",
        "Graph-SVM (att): min ||W||_F, W in R^{d x d}",
        _att_instance,
        _att_fast,
        _att_generic,
        _att_check,
        lambda s: s["d"] * s["d"],
        (
            Size({"n": 6, "T": 4, "K": 6, "d": 8}, "att cyclic experiment"),
            Size({"n": 4, "T": 6, "K": 8, "d": 8}, "att acyclic experiment"),
            Size({"n": 40, "T": 6, "K": 16, "d": 16}),
            Size({"n": 200, "T": 8, "K": 32, "d": 32}),
            Size({"n": 1000, "T": 8, "K": 64, "d": 64}),
        ),
    ),
}


def _child(
    problem: str, index: int, solver: str, repeats: int, budget: float = 20.0
) -> dict[str, Any]:
    """Run in a child process: time one solver ("specialised" or a cvxpy backend), up to
    ``repeats`` times, a further run only while the runs so far and one more (at their
    median) fit in ``budget`` seconds (``1.5 budget`` for the first 3 runs).  Records the
    wall and the CPU time of every run (on a shared machine the wall time also measures the
    load, the CPU time much less)."""
    prob = PROBLEMS[problem]
    inst = prob.make(prob.sizes[index])
    if solver == "specialised":
        solve = functools.partial(prob.fast, inst)
    else:
        solve = functools.partial(prob.generic, inst, solver)
    cpu: list[float] = []
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    c0 = time.process_time()
    timing, sol = measure(solve, repeats=1, warmup=0)
    cpu.append(time.process_time() - c0)
    # at least 3 runs (the spread) while they fit in 1.5 budget, up to ``repeats`` in budget
    while len(timing.times) < repeats and sum(timing.times) + timing.median <= (
        1.5 * budget if len(timing.times) < 3 else budget
    ):
        c0 = time.process_time()
        more, sol = measure(solve, repeats=1, warmup=0)
        cpu.append(time.process_time() - c0)
        timing = type(timing)(timing.times + more.times)
    sol, certificate = prob.unpack(sol) if solver == "specialised" else (sol, {})
    objective, violation = prob.check(inst, sol)
    # peak resident memory of this child (instance, solver and check): KiB on Linux, bytes on macOS
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (
        1024**2 if sys.platform == "darwin" else 1024
    )
    return {
        **timing.as_dict(),
        "objective": objective,
        "violation": violation,
        **certificate,
        "status": "ok",
        "peak_rss_mb": peak_mb,
        "cpu_times": cpu,
        "load_before": load,
        "blas": blas_info(),
    }


def _run_child(
    problem: str, index: int, solver: str, timeout: float, repeats: int, budget: float = 20.0
) -> dict:
    """Time one solve in a child process, so that a time limit or running out of memory
    is recorded as such instead of stopping the benchmark (``budget``: see :func:`_child`)."""
    cmd = [
        sys.executable,
        "-m",
        "tools.bench.solvers",
        problem,
        str(index),
        solver,
        str(repeats),
        str(budget),
    ]
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=child_env())
    except subprocess.TimeoutExpired:
        return {"status": f"timeout after {timeout:.0f} s", "median": None}
    if out.returncode != 0:
        reason = (
            "out of memory"
            if out.returncode in (-9, 137)
            else (out.stderr.strip().splitlines() or ["failed"])[-1][:200]
        )
        return {"status": reason, "median": None, "elapsed": time.perf_counter() - t0}
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_solvers(
    problems: list[str],
    max_seconds: float,
    quick: bool,
    *,
    dims: list[dict[str, int]] | None = None,
    generic: bool = True,
) -> list[dict]:
    """The rows of the solvers section; ``dims``: only the sizes with these dimensions;
    ``generic=False``: the specialised solvers only (the generic ones recorded as not run)."""
    from tqdm.auto import tqdm

    rows = []
    for name in problems:
        prob = PROBLEMS[name]
        sizes = prob.sizes[:2] if quick else prob.sizes
        gave_up: set[str] = set()
        for index, size in enumerate(tqdm(sizes, desc=name)):
            if dims is not None and size.dims not in dims:
                continue
            row = {
                "problem": name,
                "title": prob.title,
                "dims": size.dims,
                "label": size.label,
                "n_vars": prob.n_vars(size.dims),
            }
            if size.law:
                row["law"] = size.law
            if prob.describe is not None:
                row.update(prob.describe(prob.make(size)))
            for solver in ("specialised", *GENERIC):
                if solver not in ("specialised", *prob.generic_solvers):
                    row[solver] = {"status": "not run at these sizes", "median": None}
                    continue
                if solver != "specialised" and not generic:
                    row[solver] = {"status": "not run in this run", "median": None}
                    continue
                if solver in gave_up:
                    row[solver] = {
                        "status": "skipped (a smaller size ran out of time/memory)",
                        "median": None,
                    }
                    continue
                # the specialised solves repeated (the spread of repeated runs): at least 3
                # while they fit in 1.5 time limits, up to 5 in one, the child allowed 2.5
                # time limits (a first run past one limit is stopped at 2.5: recorded as a
                # timeout); the generic ones while short
                specialised = solver == "specialised"
                res = _run_child(
                    name,
                    index,
                    solver,
                    2.5 * max_seconds if specialised else max_seconds,
                    repeats=5 if specialised else 3,
                    budget=max_seconds if specialised else 20.0,
                )
                if str(res.get("status", "")).startswith(("timeout", "out of memory")):
                    gave_up.add(solver)  # larger sizes can only take longer
                row[solver] = res
            # reference objective: Clarabel's (interior point, high accuracy), else SCS's
            ref = row["CLARABEL"].get("objective") or row["SCS"].get("objective")
            row["reference"] = "CLARABEL" if row["CLARABEL"].get("objective") else "SCS"
            for key in ("specialised", *GENERIC):
                o = row[key].get("objective")
                if o is not None and ref:
                    row[key]["rel_gap"] = abs(o - ref) / abs(ref)
                if (
                    row[key].get("median")
                    and key != "specialised"
                    and row["specialised"].get("median")
                ):
                    row[key]["speedup"] = row[key]["median"] / row["specialised"]["median"]
            rows.append(row)
    return rows


def plot_solvers(rows: list[dict], path: Path) -> None:
    """Time against number of variables, one panel per problem, log-log."""
    import matplotlib

    matplotlib.use("Agg")  # the bench is a script, never a kernel
    from ntpcore.figure import plotting

    plotting.use_style()
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    fig, axes = plotting.new_figure(1, len(problems), aspect=0.33, squeeze=False)
    for ax, problem in zip(axes[0], problems, strict=True):
        sel = [r for r in rows if r["problem"] == problem]
        for key, label, color in (
            ("specialised", "ntpcore", plotting.COLORS[0]),
            ("CLARABEL", "cvxpy + Clarabel", plotting.COLORS[1]),
            ("SCS", "cvxpy + SCS", plotting.COLORS[2]),
        ):
            pts = [(r["n_vars"], r[key]["median"]) for r in sel if r[key].get("median")]
            if pts:
                x, y = zip(*pts, strict=True)
                ax.loglog(x, y, "o-", color=color, label=label)
        ax.axhline(60, color="0.5", ls=":", lw=1)
        ax.set_title(problem)
        ax.set_xlabel("variables")
    axes[0, 0].set_ylabel("seconds (median)")
    axes[0, 0].legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})


def _child_main(argv: list[str]) -> int:
    """``python -m tools.bench.solvers PROBLEM INDEX SOLVER REPEATS [BUDGET]``: one timed
    solve, its row printed as JSON on the last line (:func:`_run_child` reads it)."""
    problem, index, solver, repeats = argv[0], int(argv[1]), argv[2], int(argv[3])
    budget = float(argv[4]) if len(argv) > 4 else 20.0
    print(json.dumps(_child(problem, index, solver, repeats, budget)))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
