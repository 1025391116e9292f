r"""``python -m tools.bench --only geo-scaling``: how the nuclear-norm SVM solver's time and
memory grow with the number of contexts ``m``, on each support law.

The large-vocabulary solver (:func:`ntpcore.geo.svm_scale.solve_nuclear_svm_scale`, certified
relative duality gap ``1e-6``) on the supports of :func:`tools.bench.solvers.geo_supports`
at ``V = 1000`` words and ``m`` = 1,000 ... 20,000 contexts, one law at a time.  Each point
runs in a child process of its own with a time limit, which records the wall time of every
run (the first, then more while they fit in ``budget_s``: the spread of repeated runs), the
iterations, the certified gap, the reduced size (word classes x distinct supports: the
problem the solver iterates on) and the child's peak resident memory.  A law stops at its
first point that runs out of time or memory (larger ``m`` can only take longer).

:func:`growth` fits, per law, the CPU time of an iteration (the time on a core of its own,
which the load of a shared machine does not add to) as :math:`c\,m^b` and the peak memory
as :math:`a+c\,m`, each through the two largest measured points, and extrapolates from
them, with the most iterations seen, the largest ``m`` certified within ``budget`` seconds
on a machine of ``memory_gb`` GB (the smaller of the two bounds): an *extrapolation*,
marked as such, unless a measured point reaches the budget.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tools.bench.timing import Timing, blas_info, child_env

#: vocabulary size, contexts and laws of the section
V = 1000
M_VALUES = (1000, 2000, 5000, 10000, 20000)
LAWS = ("distinct", "zipf1.1-k4", "zipf1.5-k4", "zipf1.1-k8", "wiki")
#: the machine the largest ``m`` is stated for: memory and time budget of one solve
MACHINE_GB = 24.0
BUDGET_S = 600.0
#: the certified relative duality gap
TOL = 1e-6


def _peak_mb() -> float:
    """Peak resident memory of this process in MB (ru_maxrss: KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024**2 if sys.platform == "darwin" else 1024)


def _child(law: str, v: int, m: int, repeats: int, budget_s: float) -> dict[str, Any]:
    """Run in a child process: the point ``(law, v, m)``, timed ``repeats`` times at most."""
    from ntpcore.geo.svm_problem import reduce_support
    from ntpcore.geo.svm_scale import solve_nuclear_svm_scale
    from tools.bench.solvers import geo_supports

    S = geo_supports(v, m, law, seed=0)
    r, u = reduce_support(S).Sr.shape
    times: list[float] = []
    cpu: list[float] = []
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    t_start = time.perf_counter()
    sol = None
    while len(times) < repeats:
        t0, c0 = time.perf_counter(), time.process_time()
        sol = solve_nuclear_svm_scale(S, tol=TOL)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        if time.perf_counter() - t_start + float(np.median(times)) > budget_s:
            break
    assert sol is not None
    return {
        **Timing(tuple(times)).as_dict(),
        "status": "ok",
        "gap": float(sol.gap),
        "violation": float(sol.violation),
        "iterations": int(sol.iterations),
        "objective": float(sol.objective),
        "shape": [int(n) for n in S.shape],
        "reduced_shape": [int(r), int(u)],
        "peak_rss_mb": _peak_mb(),
        "cpu_times": cpu,
        "load_before": load,
        "blas": blas_info(),
    }


def _run_child(law: str, v: int, m: int, repeats: int, budget_s: float, timeout: float) -> dict:
    """One point in a child process; a time limit or running out of memory is recorded."""
    cmd = [sys.executable, "-m", "tools.bench.scaling", law, str(v), str(m), str(repeats)]
    cmd.append(str(budget_s))
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
        return {"status": reason, "median": None}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _wiki_limit(v: int) -> int:
    """How many contexts the Wikipedia sample has at vocabulary ``v`` (law ``wiki``)."""
    from ntpcore.geo.experiments.scale import CorpusConfig, full_dataset

    return int(full_dataset(CorpusConfig(vocab_size=v)).m)


def bench_scaling(
    m_values: tuple[int, ...] = M_VALUES,
    laws: tuple[str, ...] = LAWS,
    *,
    v: int = V,
    repeats: int = 3,
    budget_s: float = 120.0,
    max_seconds: float = 1800.0,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Every point ``(law, m)`` in a child process (``max_seconds`` its time limit, a run
    repeated up to ``repeats`` times while the runs fit in ``budget_s``); returns the rows
    and the growth fits of :func:`growth`.  ``progress`` is called with the section so far
    after every point (the command line saves it, so an interrupted run keeps its points)."""
    from tqdm.auto import tqdm

    rows: list[dict[str, Any]] = []
    for law in laws:
        limit = _wiki_limit(v) if law == "wiki" else None
        stopped = ""
        for m in tqdm(m_values, desc=f"geo-scaling {law}"):
            row: dict[str, Any] = {"law": law, "V": v, "m": int(m)}
            if limit is not None and m > limit:
                row["specialised"] = {
                    "status": f"the corpus has {limit:,} qualifying contexts",
                    "median": None,
                }
            elif stopped:
                row["specialised"] = {"status": stopped, "median": None}
            else:
                res = _run_child(law, v, m, repeats, budget_s, max_seconds)
                if res.get("median") is None:
                    stopped = f"skipped (m = {m:,}: {res['status']})"
                row["specialised"] = res
            rows.append(row)
            if progress is not None:
                progress(_section(rows, v, max_seconds))
    return _section(rows, v, max_seconds)


def _section(rows: list[dict[str, Any]], v: int, max_seconds: float) -> dict[str, Any]:
    return {"V": v, "tol": TOL, "time_limit_s": max_seconds, "rows": rows, "growth": growth(rows)}


def merge_sections(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """The section ``new`` with the points of ``old`` it did not measure (another law, or
    another ``m``; same ``V``): runs of different laws, one after another or side by side,
    add up to one table.  The growth fits are recomputed over the merged points."""
    if not old or old.get("V") != new["V"]:
        return new
    have = {(r["law"], r["m"]) for r in new["rows"]}
    rows = [r for r in old.get("rows", []) if (r["law"], r["m"]) not in have] + new["rows"]
    order = {law: i for i, law in enumerate(LAWS)}
    rows.sort(key=lambda r: (order.get(r["law"], len(order)), r["m"]))
    return {**old, **new, "rows": rows, "growth": growth(rows)}


def _fit_power(ms: list[float], ts: list[float]) -> tuple[float, float]:
    """``(c, b)`` of ``t = c m^b`` through the two largest points (log-log)."""
    (m1, t1), (m2, t2) = sorted(zip(ms, ts, strict=True))[-2:]
    b = math.log(t2 / t1) / math.log(m2 / m1)
    return t2 / m2**b, b


def _work_seconds(entry: dict[str, Any]) -> float:
    """The seconds a point takes on a core of its own: the median CPU time of its runs (one
    thread), else (not recorded) the median wall time."""
    cpu = entry.get("cpu_times")
    return float(np.median(cpu)) if cpu else float(entry["median"])


def growth(
    rows: list[dict[str, Any]], budget_s: float = BUDGET_S, memory_gb: float = MACHINE_GB
) -> dict[str, dict[str, Any]]:
    r"""Per law, from its measured points, how time and memory grow with ``m`` and the
    largest ``m`` certified within ``budget_s`` on ``memory_gb`` GB.

    Time is the CPU time of one thread (the time on a core of its own: on a shared machine
    the wall time adds the load, up to several times it).  The iteration counts do not grow
    with ``m`` in a regular way (all-distinct supports: 118, 104, 76, 146 iterations at
    ``m`` = 1,000 ... 10,000), so the time is modelled as the cost of an iteration,
    :math:`c\,m^b` through the two largest points (``time_exponent`` ``b``: the
    :math:`r^2u` of the SVT, about linear once the word classes ``r`` reach ``V``; a fit
    below linear, from the noise of a shared machine's CPU times, is replaced by the line
    through the largest point: ``time_exponent_used``), times the most iterations seen for
    the law (``iterations_max``).  Memory: the line through the
    two largest points (below them it is mostly the libraries'), ``memory_mb_per_1000``.
    ``largest_m`` is measured when one point exceeded the budget and a smaller one did not,
    else extrapolated from these fits (the smaller of the time and the memory bound),
    ``extrapolated`` saying which.
    """
    out: dict[str, dict[str, Any]] = {}
    for law in dict.fromkeys(r["law"] for r in rows):
        pts = [
            (
                float(r["m"]),
                _work_seconds(r["specialised"]),
                r["specialised"].get("peak_rss_mb"),
                int(r["specialised"].get("iterations") or 1),
            )
            for r in rows
            if r["law"] == law and r["specialised"].get("median") is not None
        ]
        if len(pts) < 2:
            continue
        ms = [m for m, _, _, _ in pts]
        per_it = [t / n for _, t, _, n in pts]
        c, b = _fit_power(ms, per_it)
        its = max(n for _, _, _, n in pts)
        info: dict[str, Any] = {
            "measured_m": [int(m) for m in ms],
            "time_exponent": b,
            "iterations_max": its,
        }
        if b < 1.0:  # never below linear: u grows with m at fixed r (noise, or r saturating)
            m_top, t_top = max(zip(ms, per_it, strict=True))
            c, b = t_top / m_top, 1.0
        info["time_exponent_used"] = b
        m_time = (budget_s / (c * its)) ** (1.0 / b) if b > 0 else math.inf
        mems = [(m, float(p)) for m, _, p, _ in pts if p is not None]
        m_mem = math.inf
        if len(mems) >= 2:
            (m1, p1), (m2, p2) = sorted(mems)[-2:]  # the import floor flattens small m
            slope = (p2 - p1) / (m2 - m1)
            icpt = p2 - slope * m2
            info["memory_mb_per_1000"] = float(slope) * 1000.0
            info["memory_intercept_mb"] = float(icpt)
            if slope > 0:
                m_mem = (memory_gb * 1024.0 - icpt) / slope
        fits = [t <= budget_s and (p or 0.0) <= memory_gb * 1024.0 for _, t, p, _ in pts]
        if not all(fits) and any(fits):
            info.update(
                largest_m=int(max(m for (m, _, _, _), ok in zip(pts, fits, strict=True) if ok)),
                extrapolated=False,
            )
        else:
            largest = min(m_time, m_mem)
            info.update(
                largest_m=int(largest) if math.isfinite(largest) else None,
                limited_by="time" if m_time <= m_mem else "memory",
                extrapolated=True,
            )
        out[law] = info
    return out


def _child_main(argv: list[str]) -> int:
    """``python -m tools.bench.scaling LAW V M REPEATS BUDGET_S``: one point, its row
    printed as JSON on the last line (:func:`_run_child` reads it)."""
    law, v, m, repeats, budget = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), float(argv[4])
    print(json.dumps(_child(law, v, m, repeats, budget)))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
