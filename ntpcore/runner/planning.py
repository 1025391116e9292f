r"""What a run of the runner will do, decided before any kernel starts: the figures of the
registry and their parameters (:func:`plan`: ``--set`` values parsed as typed, every
override validated against the notebook's ``parameters`` cell, then every parameter's final
value against its range, memory and time estimated and refused beyond this machine unless
forced), and their order (:func:`order_jobs`: a figure whose cached computations others read
starts first, its readers last).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from ntpcore.core import paths
from ntpcore.core.params import PROFILES
from ntpcore.errors import ParameterError
from ntpcore.runner.registry import (
    FigureEntry,
    RegistryError,
    check_parameters,
    parse_parameters,
    validate_overrides,
)

#: Per-cell time limit (seconds) by profile: a quick-profile cell never legitimately takes
#: minutes, so a hung kernel fails the run instead of stalling CI; paper-profile cells
#: may train for an hour on a CPU and have no limit.
CELL_TIMEOUT = {"quick": 600.0, "paper": None}  # one entry per profile (PROFILES)

__all__ = [
    "CELL_TIMEOUT",
    "Job",
    "MAX_MINUTES",
    "ORDERS",
    "check_resources",
    "list_text",
    "machine_memory_gb",
    "order_jobs",
    "parse_set",
    "plan",
]


@dataclass(frozen=True)
class Job:
    entry: FigureEntry
    profile: str
    parameters: dict[str, Any]
    adhoc: dict[str, Any] = field(default_factory=dict)
    cell_timeout: float | None = None
    #: an exploration replaces the previous exploration of its figure (``--replace``) instead
    #: of keeping it in ``results/explore/<id>/previous-<n>/``
    replace: bool = False


def list_text(registry: dict) -> str:
    """The registry as ``--list`` prints it: id, the paper's label, notebook, in aligned
    columns; a figure beyond the paper (label "-" or "—") reads "— (beyond the paper)" or keeps
    what the registry adds in brackets."""

    def label(text: str) -> str:
        text = text.strip()
        if text in ("", "-", "—"):
            return "— (beyond the paper)"
        return "—" + text[1:] if text.startswith("-") else text

    rows = [(fig_id, label(e.paper_label), str(e.notebook)) for fig_id, e in registry.items()]
    w_id = max(len(r[0]) for r in rows)
    w_label = max(len(r[1]) for r in rows)
    head = ("figure", "paper label", "notebook")
    lines = [f"{head[0]:{w_id}s}  {head[1]:{w_label}s}  {head[2]}"]
    lines += [f"{i:{w_id}s}  {lab:{w_label}s}  {nb}" for i, lab, nb in rows]
    return "\n".join(lines)


def parse_set(items: list[str]) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` strings; values are read as YAML (numbers, bools, lists), and a
    number written with an exponent and no point that is whole (``1e8``) as an integer, which
    a parameter of either type accepts."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ParameterError(f"--set expects KEY=VALUE, got {item!r}")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key.isidentifier():
            raise ParameterError(f"--set: {key!r} is not a valid parameter name")
        value = yaml.safe_load(raw) if raw.strip() else ""
        if isinstance(value, str):  # YAML reads 1e-3, nan and inf as strings
            word = value.strip().lower().lstrip("+")
            if word in ("nan", "inf", "-inf", "infinity", "-infinity"):
                value = float(word)
            else:
                try:
                    value = float(value) if any(c in value for c in ".eE") else int(value)
                except ValueError:
                    pass
                else:  # 1e8 is a count, as a user means it; 1.0e8 and 2.5e-3 stay floats
                    text = raw.strip().lower()
                    if isinstance(value, float) and "." not in text and value.is_integer():
                        value = int(value)
        if key in out:
            raise ParameterError(f"--set {key} is given twice")
        out[key] = value
    return out


#: A run longer than this (estimated from the registry's ``resources``) needs --force.
MAX_MINUTES = 24 * 60


def machine_memory_gb() -> float:
    """Physical memory of this machine in GB (10^9 bytes)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _culprit(
    entry: FigureEntry, params: dict[str, Any], key: str, before: dict[str, Any]
) -> tuple[str, bool]:
    """The parameter to lower for the estimate ``key``, and whether the user set it.

    Of the parameters the user changed (those whose value differs from ``before``, the
    parameters without the user's ``--set``) that the estimate uses, the one whose change
    raised the estimate most; when the user changed none of them, the largest contributor:
    the one whose halving lowers the estimate most."""
    expr = entry.resources.get(key, "")
    used = [p for p, v in params.items() if _numeric(v) and re.search(rf"\b{re.escape(p)}\b", expr)]
    base = entry.estimate(params)[key]
    changed = [p for p in used if p in before and before[p] != params[p]]
    if changed:

        def raised(p: str) -> float:
            return base / max(entry.estimate({**params, p: before[p]})[key], 1e-300)

        return max(changed, key=raised), True
    drops = {p: base - entry.estimate({**params, p: params[p] / 2})[key] for p in used}
    return (max(drops, key=lambda p: drops[p]) if drops else ""), False


def _fitting_value(
    entry: FigureEntry, params: dict[str, Any], name: str, limits: dict[str, float]
) -> str | None:
    """The largest value of ``name`` (the others as they are) whose estimates all stay
    within their ``limits``, found by bisection (the estimates grow with their parameters),
    as the refusal prints it; ``None`` when none does."""
    value = params[name]
    integer = isinstance(value, int)
    lo, hi = (1, value) if integer else (0.0, float(value))

    def fits(v: float) -> bool:
        est = entry.estimate({**params, name: v})
        return all(est[k] <= limit for k, limit in limits.items() if k in est)

    if hi <= lo or not fits(lo):
        return None
    for _ in range(200):
        if (integer and hi - lo <= 1) or (not integer and hi - lo <= 1e-3 * hi):
            break
        mid = (lo + hi) // 2 if integer else (lo + hi) / 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return f"{lo:,}" if integer else f"{lo:.3g}"


def _refusal(
    entry: FigureEntry,
    params: dict[str, Any],
    key: str,
    before: dict[str, Any],
    limits: dict[str, float],
    need: str,
) -> ParameterError:
    """The error of an estimate ``key`` beyond this machine: what it needs, the parameter
    to lower and a value of it that fits every limit."""
    name, by_user = _culprit(entry, params, key, before)
    if not name:
        return ParameterError(f"{entry.fig_id}: {need}; pass --force to run anyway")
    now = params[name]
    shown = f"{now:,}" if isinstance(now, int) else f"{now:.3g}"
    which = f"{name} = {shown}" + (" (you set it)" if by_user else " (the largest contributor)")
    fitting = _fitting_value(entry, params, name, limits)
    if fitting is None:
        advice = f"no value of {name} fits with the other parameters as they are"
    else:
        advice = f"{name} = {fitting} fits"
    return ParameterError(
        f"{entry.fig_id}: {need}; it grows with {which}: {advice}. Lower it, or pass "
        f"--force to run anyway"
    )


def check_resources(
    entry: FigureEntry,
    params: dict[str, Any],
    force: bool,
    before: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Estimate memory and time from the parameters; refuse what this machine cannot do,
    naming the parameter to lower (one the user set, where ``before``, the parameters
    without the user's overrides, shows which) and a value of it that fits."""
    est = entry.estimate(params)
    if force:
        return est
    before = params if before is None else before
    have = machine_memory_gb()
    limits = {"memory_gb": 0.8 * have, "minutes": float(MAX_MINUTES)}
    mem, minutes = est.get("memory_gb"), est.get("minutes")
    if mem is not None and mem > limits["memory_gb"]:
        need = (
            f"these parameters need about {mem:.3g} GB of memory and this machine has "
            f"{have:.3g} GB (a run may use {limits['memory_gb']:.3g} GB)"
        )
        raise _refusal(entry, params, "memory_gb", before, limits, need)
    if minutes is not None and minutes > limits["minutes"]:
        need = (
            f"these parameters need about {minutes / 60:.3g} hours, more than the "
            f"{MAX_MINUTES / 60:g} hours a run may take"
        )
        raise _refusal(entry, params, "minutes", before, limits, need)
    return est


def plan(
    ids: list[str] | None,
    profile: str,
    adhoc: dict[str, Any],
    registry: dict[str, FigureEntry],
    force: bool = False,
) -> list[Job]:
    """Build and validate all jobs; raises before anything runs."""
    if profile not in PROFILES:
        raise ParameterError(f"--profile must be one of {PROFILES}, got {profile!r}")
    reserved = sorted({"fig_id", "profile"} & set(adhoc))
    if reserved:
        raise ParameterError(
            f"--set {reserved[0]}=... is not allowed: the runner sets fig_id from --only and "
            f"profile from --profile"
        )
    selected = list(dict.fromkeys(ids)) if ids else list(registry)
    unknown = [i for i in selected if i not in registry]
    if unknown:
        raise ParameterError(f"unknown figure id(s) {unknown}; see --list")
    jobs = []
    for fig_id in selected:
        entry = registry[fig_id]
        if not entry.notebook_path.exists():
            raise RegistryError(f"{fig_id}: notebook {entry.notebook} does not exist")
        specs = parse_parameters(entry.notebook_path)
        for required in ("fig_id", "profile"):
            if required not in specs:
                raise RegistryError(f"{entry.notebook}: parameters cell must declare {required!r}")
        # file paths come back absolute: a registry path from the repository root, a --set
        # path from the directory the command runs in (the kernel runs in notebooks/)
        registry_params = validate_overrides(
            specs, entry.params, "registry params", fig_id, paths.ROOT
        )
        if profile == "quick":
            registry_params |= validate_overrides(
                specs, entry.quick, "registry quick", fig_id, paths.ROOT
            )
        given = validate_overrides(specs, adhoc, "--set", fig_id)
        params = {**registry_params, **given, "fig_id": fig_id, "profile": profile}
        defaults = {k: s.default for k, s in specs.items()}
        sources = {k: "registry params" for k in entry.params}
        if profile == "quick":
            sources |= {k: "registry quick" for k in entry.quick}
        sources |= {k: "--set" for k in given} | {"fig_id": "--only", "profile": "--profile"}
        check_parameters(specs, defaults | params, sources, fig_id)
        check_resources(entry, defaults | params, force, defaults | registry_params)
        jobs.append(Job(entry, profile, params, given, CELL_TIMEOUT[profile]))
    return jobs


#: Job orders of ``--order``: ``reuse`` (default, see :func:`order_jobs`), ``registry``.
ORDERS = ("reuse", "registry")


def order_jobs(jobs: list[Job], how: str = "reuse") -> list[Job]:
    """The order in which ``jobs`` start.

    ``reuse``: first the figures whose cached results another selected figure reuses (they
    compute them), then the figures that reuse nothing, then the figures that reuse a
    selected figure's results; the given order is kept within each group.  Results never
    depend on the order (every computation is keyed by its parameters in the cache); only
    the wall time of a parallel run does.  ``registry``: the given order.
    """
    if how not in ORDERS:
        raise ParameterError(f"--order must be one of {list(ORDERS)}, got {how!r}")
    if how == "registry":
        return list(jobs)
    selected = {job.entry.fig_id for job in jobs}
    reused = {other for job in jobs for other in job.entry.reuses}

    def group(job: Job) -> int:
        if job.entry.fig_id in reused:
            return 0
        return 2 if selected & set(job.entry.reuses) else 1

    return sorted(jobs, key=group)
