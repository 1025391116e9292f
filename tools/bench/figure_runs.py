"""``make bench``, section *pipeline*: what the figures and whole runs took.

Wall time of every registry figure, read from the provenance sidecars of the latest
paper-profile (``book/figures``) and quick-profile (``_build/test/figures``) runs.
The runner's records of whole runs (elapsed time, cache state, timeline of the workers:
:mod:`ntpcore.runner.runner`) are collected beside them.
"""

from __future__ import annotations

import json

from ntpcore.core import paths


def bench_pipeline() -> list[dict]:
    """One row per figure with a provenance sidecar: its wall time and compute time, the
    profile and the commit it ran at, from the paper-profile and quick-profile folders."""
    rows = []
    for profile, folder in (
        ("paper", paths.FIGURE_DIR),
        ("quick", paths.ROOT / "_build" / "test" / "figures"),
    ):
        for side in sorted(folder.glob("*.json")):
            data = json.loads(side.read_text())
            if "notebook_wall_time_s" not in data:
                continue
            rows.append(
                {
                    "fig_id": data["fig_id"],
                    "profile": data["profile"],
                    "source": profile,
                    "wall_time_s": data["notebook_wall_time_s"],
                    "compute_s": data.get("compute_wall_time_s"),
                    "commit": (data.get("git") or {}).get("commit"),
                }
            )
    return rows


def bench_runs() -> list[dict]:
    """The runner's records of whole runs (:mod:`ntpcore.runner.runner`): the book's
    (``book/figures/runs``) and the quick-profile test run's (``_build/test/figures/runs``),
    oldest first."""
    records = []
    for folder in (paths.FIGURE_DIR / "runs", paths.ROOT / "_build" / "test" / "figures" / "runs"):
        for path in sorted(folder.glob("*.json")):
            records.append({**json.loads(path.read_text()), "record": str(path.name)})
    return sorted(records, key=lambda r: r["started"])
