r"""Mutation score: does every scientific error fail a run?

A *mutation* is a deliberate error in the science (a finite part scaled by 5 %, a max-margin
solution perturbed, a support pattern changed, a training cut short, a loss without its
entropy term, the query token off by one, two legend labels swapped, ...), applied from
outside the code under test: a ``sitecustomize.py`` on the kernel's ``PYTHONPATH`` wraps one
package function when the kernel starts, as the sabotage tests of the claims ledger do.  The
catalogue (``tests/mutations/<paper>.py``) names, for each mutation, the figures that must
catch it.

``python -m tools.qa.mutations`` (``make mutations``) runs those figures in the quick
profile once per mutation, each from an empty cache (a cached result would hide the error),
and counts a mutation as **killed** when

* the runner fails (a claim of the paper no longer holds: the claims ledger caught it), or
* the golden check fails (a printed number moved beyond its measured tolerance, or a word
  changed: :mod:`tools.qa.golden`), or
* a figure's pixels moved beyond their measured tolerance (:mod:`tools.qa.images`).

Each mutation also writes a marker file the first time its wrapped function runs; a mutation
whose marker is missing was never exercised, and is reported as *not applied* (an error of
the catalogue, never a kill).  A control entry that changes nothing must survive, or the
harness itself is broken.  The run ends with ``mutation score: K/N killed``, lists the
survivors and writes ``results/mutations/report.json`` (the Claims page shows the score).

A mutation's kernels are new (no kernel can serve two mutations), but they are forked from
a process of the worker that has already imported the third-party modules
(:mod:`tools.qa.zygote`), not started from nothing: about 1.2 s a kernel instead of 3 to
4 s.  ``NTP_FORK_KERNELS=0`` starts them as new processes.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import importlib.util
import io
import json
import multiprocessing
import os
import re
import sys
import tempfile
import textwrap
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat

from ntpcore.core import paths
from ntpcore.core.io import write_text_atomic
from ntpcore.figure import claims as claims_mod
from ntpcore.figure import provenance
from tools.qa import golden, images

__all__ = ["CATALOGUE", "REPORT", "Mutation", "Outcome", "load_catalogue", "run_mutation"]

CATALOGUE = paths.ROOT / "tests" / "mutations"
REPORT = paths.RESULTS_DIR / "mutations" / "report.json"
KINDS = (
    "finite part",
    "max-margin",
    "support",
    "training",
    "loss",
    "data",
    "attention",
    "plot",
    "control",
)

_PRELUDE = '''\
import os as _os
import sys as _sys


def _applied():
    """Leave the marker that says the mutation ran (once)."""
    path = _os.environ.get("NTP_MUTATION_MARK")
    if path and not _os.path.exists(path):
        open(path, "w").close()


def _replace(owner, name, new, where=("ntpcore",)):
    """Put ``new`` in place of ``owner.name`` wherever the package binds that object: in every
    loaded module whose name starts with one of ``where`` (default: all of ``ntpcore``, the
    module that defines it included, so modules imported later bind ``new`` too).  A narrower
    ``where`` (e.g. ``("ntpcore.att.experiments",)``, imported first) leaves the independent
    checks elsewhere with the true object."""
    orig = getattr(owner, name)
    for module in list(_sys.modules.values()):
        if getattr(module, "__name__", "").startswith(where) and getattr(
            module, name, None
        ) is orig:
            setattr(module, name, new)


'''


@dataclass(frozen=True)
class Mutation:
    """One deliberate error and the figures that must catch it.

    ``code`` runs in every kernel at start-up; it wraps a package function and calls
    ``_applied()`` when the wrapped function runs.  ``explained``: for a mutation no honest
    claim can catch, the reason (it is then listed, not counted as killed, and does not fail
    the run).
    """

    name: str
    kind: str
    paper: str
    what: str
    figures: tuple[str, ...]
    code: str
    explained: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: kind {self.kind!r} not in {KINDS}")
        if not self.figures:
            raise ValueError(f"{self.name}: names no figure")
        if self.kind != "control" and "_applied()" not in self.code:
            raise ValueError(f"{self.name}: its code never calls _applied()")


@dataclass
class Outcome:
    name: str
    kind: str
    paper: str
    what: str
    figures: list[str]
    applied: bool
    killed: bool
    by: list[str]  # "claims: <ids>", "golden: <n> numbers", "image: <figs>", "runner: error"
    seconds: float
    explained: str = ""


def load_catalogue(path: Path = CATALOGUE) -> list[Mutation]:
    """The mutations of a catalogue file, or of every ``*.py`` file of a catalogue folder
    (one per paper), each defining a list ``MUTATIONS``."""
    files = (
        sorted(p for p in path.glob("*.py") if not p.name.startswith("_"))
        if path.is_dir()
        else [path]
    )
    muts: list[Mutation] = []
    for f in files:
        spec = importlib.util.spec_from_file_location(f"ntp_mutations_{f.stem}", f)
        if spec is None or spec.loader is None:
            raise FileNotFoundError(f)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        muts += list(module.MUTATIONS)
    names = [m.name for m in muts]
    if len(set(names)) != len(names):
        raise ValueError("mutation names must be unique")
    return muts


def _failed_claims(failed_dir: Path, figures: tuple[str, ...]) -> list[str]:
    out = []
    for fig in figures:
        side = failed_dir / fig / f"{fig}.json"
        if side.exists():
            claims = json.loads(side.read_text()).get("claims", [])
            out += [c["id"] for c in claims if claims_mod.is_blocking(c)]
    return out


def run_mutation(mut: Mutation, *, jobs: int = 1, keep: Path | None = None) -> Outcome:
    """Run the mutation's figures (quick profile, empty cache) with the mutation applied."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"mutation-{mut.name}-") as tmp:
        tmp_path = Path(keep or tmp)
        site = tmp_path / "site"
        site.mkdir(parents=True, exist_ok=True)
        (site / "sitecustomize.py").write_text(_PRELUDE + textwrap.dedent(mut.code))
        mark = tmp_path / "applied"
        env = {
            "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(
                os.pathsep
            ),
            "NTP_MUTATION_MARK": str(mark),
            "NTP_CACHE_DIR": str(tmp_path / "cache"),
            "NTP_FIGURE_DIR": str(tmp_path / "figures"),
            "NTP_EXECUTED_DIR": str(tmp_path / "executed"),
            "NTP_FAILED_DIR": str(tmp_path / "failed"),
        }
        argv = ["--profile", "quick", "--jobs", str(jobs), "--only", *mut.figures]
        returncode, output = _run_runner(argv, env)
        by: list[str] = []
        if returncode != 0:
            claims = _failed_claims(tmp_path / "failed", mut.figures)
            by.append("claims: " + ", ".join(claims) if claims else "runner: " + _last(output))
        executed = tmp_path / "executed"
        if any(executed.glob("*.ipynb")):
            diffs = []
            for nb in sorted(executed.glob("*.ipynb")):
                cmp = golden.compare(
                    nb.stem, golden.read_golden(nb.stem), golden.extract(nbformat.read(nb, 4))
                )
                diffs += cmp.differences
            if diffs:
                figs = sorted({d.fig_id for d in diffs})
                by.append(f"golden: {len(diffs)} number(s)/line(s) in {', '.join(figs)}")
        figs_dir = tmp_path / "figures"
        moved = [
            r.fig_id
            for r in images.check(figs_dir, write_diffs=False)
            if r.fig_id in mut.figures and (figs_dir / f"{r.fig_id}.png").exists() and not r.ok
        ]
        if moved:
            by.append("image: " + ", ".join(moved))
        applied = mark.exists() or mut.kind == "control"
    return Outcome(
        mut.name,
        mut.kind,
        mut.paper,
        mut.what,
        list(mut.figures),
        applied,
        bool(by) and applied,
        by,
        time.perf_counter() - t0,
        mut.explained,
    )


def _run_runner(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """The figure runner (``python -m ntpcore.reproduce argv``) in this process, under
    ``os.environ`` updated with ``env`` (restored after), its output captured.

    In this process, not a new one: the runner and its dependencies are imported once per
    worker of :func:`main`'s pool instead of once per mutation (about 2 s each, half of it
    jsonschema's format checkers, which nbformat imports).  The mutation is applied in the
    kernels only: they start with ``env``'s ``PYTHONPATH`` (a kernel started under another
    environment is never reused, :mod:`ntpcore.runner.kernels`), and the serial run discards
    its kernel at the end.
    """
    from ntpcore.runner import kernels, runner
    from tools.qa import zygote

    # New kernels forked from a warm process of this worker (tools.qa.zygote).
    kernels.manager_class = zygote.ForkingKernelManager if zygote.enabled() else None
    saved = dict(os.environ)
    os.environ.update(env)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                returncode = runner.main(argv)
            except Exception:  # noqa: BLE001 - reported as the runner's failure, as a crash was
                traceback.print_exc()
                returncode = 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return returncode, out.getvalue()


def _last(text: str) -> str:
    """The error the runner reported (``raised XError: ...``), else its last line."""
    m = re.search(r"raised (\w+): (.*)", text)
    if m:
        return f"{m.group(1)}: {m.group(2)}"[:200]
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "the runner failed and printed nothing"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.qa.mutations",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run these mutations only")
    parser.add_argument("--catalogue", type=Path, default=CATALOGUE)
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--list", action="store_true", help="list the catalogue and exit")
    parser.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="mutations run at once, each with one worker (a mutation's figures are few: two "
        "mutations side by side keep two cores busy where one would not)",
    )
    args = parser.parse_args(argv)
    muts = load_catalogue(args.catalogue)
    if args.list:
        for m in muts:
            print(f"{m.name:34s} {m.kind:12s} {', '.join(m.figures)}")
        return 0
    if args.only:
        unknown = set(args.only) - {m.name for m in muts}
        if unknown:
            print(f"error: unknown mutation(s) {sorted(unknown)}", file=sys.stderr)
            return 2
        muts = [m for m in muts if m.name in args.only]
    outcomes = []

    def report_one(k: int, m: Mutation, out: Outcome) -> None:
        status = (
            "NOT APPLIED"
            if not out.applied
            else (
                "survived (control)"
                if m.kind == "control" and not out.killed
                else "KILLED"
                if out.killed
                else "SURVIVED"
            )
        )
        print(
            f"[{k:2d}/{len(muts)}] {m.name:34s} {status:12s} {'; '.join(out.by)[:160]}", flush=True
        )

    # Worker processes (spawned: no inherited kernel, thread or zmq state), each running one
    # mutation at a time, so that each has its own os.environ for its runner.
    with ProcessPoolExecutor(
        max_workers=max(1, args.jobs), mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        futures = {pool.submit(run_mutation, m): m for m in muts}
        for k, fut in enumerate(as_completed(futures), 1):
            out = fut.result()
            outcomes.append(out)
            report_one(k, futures[fut], out)
    order = {m.name: i for i, m in enumerate(muts)}
    outcomes.sort(key=lambda o: order[o.name])
    real = [o for o in outcomes if o.kind != "control"]
    killed = [o for o in real if o.killed]
    survivors = [o for o in real if o.applied and not o.killed and not o.explained]
    explained = [o for o in real if o.applied and not o.killed and o.explained]
    not_applied = [o for o in real if not o.applied]
    bad_controls = [o for o in outcomes if o.kind == "control" and o.by]
    state = provenance.git_state()
    report = {
        "when": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "commit": state.get("commit"),
        "dirty": state.get("dirty"),
        "profile": "quick",
        "killed": len(killed),
        "total": len(real),
        "outcomes": [asdict(o) for o in outcomes],
    }
    if not args.only:
        write_text_atomic(args.report, json.dumps(report, indent=1))
    for o in survivors:
        print(f"survivor: {o.name} ({', '.join(o.figures)}): {o.what}")
    for o in explained:
        print(f"explained survivor: {o.name}: {o.explained}")
    for o in not_applied:
        print(f"not applied: {o.name}: its wrapped function never ran in {', '.join(o.figures)}")
    for o in bad_controls:
        print(f"control killed: {o.name}: {'; '.join(o.by)} (the harness or a golden is wrong)")
    print(f"mutation score: {len(killed)}/{len(real)} killed")
    return 1 if (survivors or not_applied or bad_controls) else 0


if __name__ == "__main__":
    sys.exit(main())
