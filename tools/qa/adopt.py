"""Reuse a finished run of every figure instead of executing the notebooks again.

``make test`` runs every registered notebook once in the quick profile, into ``_build/test``
(executed copies and figures, with the runner's record in ``figures/runs/``).  Two later
steps of CI need that very run: the quick book (``make book PROFILE=quick``) and the
``native`` configuration of ``make reproducibility`` (the quick profile as this CPU runs it,
from an empty cache).  Executing the 33 notebooks again would give the same bits, so this
module *adopts* the run instead, after checking from its record that it is the same
configuration:

* the run is complete, no figure failed, and it ran every figure of the registry
  (no ``--only``, no ``--set``) in the requested profile;
* it was made from this commit, with no uncommitted change then or now (a dirty tree could
  hold other code than the one the run executed);
* for ``reproducibility``: it started from an empty computation cache (``cold``), as each of
  its configurations must (a cached training would hide the configuration's arithmetic).

Anything else is refused with the reason, and the caller runs the notebooks as before::

    python -m tools.qa.adopt _build/test --to-book        # publish into book/ (make book-from-test)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from ntpcore.core import paths
from ntpcore.figure.provenance import git_state
from ntpcore.runner.registry import load_registry

__all__ = ["AdoptError", "adoptable", "copy_run", "main"]


class AdoptError(RuntimeError):
    """The run cannot stand for a new one; the message says why."""


def newest_record(run: Path) -> tuple[Path, dict[str, Any]]:
    records = sorted((run / "figures" / "runs").glob("*.json"))
    if not records:
        raise AdoptError(f"{run}: no run record in {run / 'figures' / 'runs'}")
    return records[-1], json.loads(records[-1].read_text())


def adoptable(run: Path, *, profile: str, cold: bool = False) -> dict[str, Any]:
    """The record of the finished run in ``run`` (``executed/``, ``figures/``), checked to
    stand for a new run of every registered figure in ``profile`` at this commit; raises
    :class:`AdoptError` with the reason otherwise."""
    path, rec = newest_record(run)
    where = f"{run} ({path.name})"
    if rec.get("profile") != profile:
        raise AdoptError(f"{where}: profile {rec.get('profile')!r}, not {profile!r}")
    if not rec.get("complete") or rec.get("failed"):
        raise AdoptError(f"{where}: incomplete or failed figures {rec.get('failed')}")
    if rec.get("only"):
        raise AdoptError(f"{where}: a partial run (--only {' '.join(rec['only'])})")
    now, then = git_state(), rec.get("git") or {}
    if now["commit"] is None or then.get("commit") != now["commit"]:
        raise AdoptError(f"{where}: made at commit {then.get('commit')}, now {now['commit']}")
    if then.get("dirty") or now["dirty"]:
        raise AdoptError(f"{where}: uncommitted changes (then or now): the code may differ")
    if cold and not (rec.get("cache") or {}).get("cold"):
        raise AdoptError(f"{where}: it did not start from an empty cache")
    figures = set(load_registry())
    missing = sorted(figures - set(rec.get("figures") or {}))
    if missing:
        raise AdoptError(f"{where}: figures not in the run: {missing}")
    for fig_id in figures:
        if not (run / "executed" / f"{fig_id}.ipynb").is_file():
            raise AdoptError(f"{where}: no executed copy of {fig_id}")
        if not (run / "figures" / f"{fig_id}.json").is_file():
            raise AdoptError(f"{where}: no sidecar of {fig_id}")
    return rec


def copy_run(run: Path, executed: Path, figures: Path) -> int:
    """Copy the executed copies, the figures' files and the run records of ``run``; returns
    the number of files copied."""
    n = 0
    for src, dst in ((run / "executed", executed), (run / "figures", figures)):
        for f in sorted(src.rglob("*")):
            if f.is_file():
                target = dst / f.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".{target.name}.adopting")
                shutil.copy2(f, tmp)
                tmp.replace(target)
                n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.qa.adopt", description=__doc__)
    parser.add_argument("run", type=Path, help="a finished run (e.g. _build/test)")
    parser.add_argument("--profile", default="quick")
    parser.add_argument(
        "--to-book", action="store_true", help="publish into book/executed and book/figures"
    )
    args = parser.parse_args(argv)
    try:
        rec = adoptable(args.run, profile=args.profile)
    except AdoptError as err:
        print(f"not adopted: {err}", file=sys.stderr)
        return 3
    if args.to_book:
        n = copy_run(args.run, paths.EXECUTED_DIR, paths.FIGURE_DIR)
        print(
            f"adopted {args.run} ({len(rec['figures'])} figures, {args.profile} profile, "
            f"commit {rec['git']['commit'][:7]}): {n} files into book/executed and book/figures"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
