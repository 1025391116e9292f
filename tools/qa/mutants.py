r"""Code-level mutants that no one chose, with the figures' claims as the test.

The catalogue of :mod:`tools.qa.mutations` holds the scientific mistakes someone thought
of.  This asks the question a reviewer asks: of the mistakes *no one* thought of, how many
does a figure catch?  mutmut's mutation operators (https://mutmut.readthedocs.io: ``<`` to
``<=``, ``+`` to ``-``, ``axis=0`` to ``axis=1``, ``1.0`` to ``2.0``, a keyword argument
dropped, a string changed, ...) generate every one-change mutant of the science modules
(:data:`SCIENCE`: the solvers, data generators, metrics, experiment runners and plotting
helpers of the three papers and their shared core); a fixed-seed random sample of them is
run, each against the figures that execute the changed line:

1. **Coverage.**  Every figure is run once in the quick profile with coverage.py measuring
   the package's lines, each figure in its own context (``_build/mutants/coverage.json``,
   kept per commit).  A mutant on a line no figure executes is *not covered*: reported,
   never sampled (no figure could see it; the unit tests are another matter).
2. **Sample.**  From the covered mutants, ``--sample`` of them (default 150: a score near
   0.9 is then known to about ±5 % at 95 %), drawn with ``--seed``.
3. **Run.**  A scratch tree (``_build/mutants/tree``: links to the checkout, a copy of
   ``ntpcore/`` with its compiled extensions) gets the mutated file; the figures that
   execute the line run through the runner in the quick profile from an empty cache (a
   cached result would hide the mutant), two at a time, fastest first, stopping at the
   first failure.  The mutant is **killed** when a figure fails its test in ``make test``:
   a claim no longer holds, a panel no longer shows what it declares
   (:class:`ntpcore.figure.sourcedata.Panels`), a number or word its checked cells print
   leaves its golden copy's tolerance, or its image moves beyond the baseline's tolerance
   (``tools.qa.golden``, ``tools.qa.images``), or the code raises (reported apart, as
   *crashed*); a figure that runs past ``--timeout`` times its own quick time (and at
   least a minute) counts as killed by *timeout*.  Otherwise it **survived**.
4. **Read.**  Every survivor is printed with its diff.  A survivor whose change cannot be
   observed is listed in ``tests/mutants/equivalent.yaml`` with the reason (matched on the
   file, the function and the changed text, so a changed line makes it a survivor again);
   the score is killed / (sampled - equivalent).

Results are written after every mutant (``_build/mutants/results.jsonl``), so an
interrupted run resumes with ``--resume``; the report goes to
``results/mutants/report.json``, which the book's Claims page shows (score, sample, seed,
date, commit, time), apart from the catalogue's score.  ``make mutants`` runs it; a
developer's tool, not part of CI (its time is in the report and the README).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from ntpcore.core import paths
from ntpcore.core.io import write_text_atomic
from ntpcore.figure import provenance
from ntpcore.runner.registry import load_registry

__all__ = ["SCIENCE", "Mutant", "generate", "main"]

#: the science modules: the papers' rooms and the maths of the shared core
SCIENCE = (
    "ntpcore/lin",
    "ntpcore/geo",
    "ntpcore/att",
    "ntpcore/core/logits.py",
    "ntpcore/core/metrics.py",
    "ntpcore/core/optim.py",
)
#: modules of those rooms that are not science: validation of arguments, references used
#: only by tests, the compiled extensions' loaders
NOT_SCIENCE = ("ntpcore/att/compiled.py", "ntpcore/core/native.py")
#: a paper's checks (``ntpcore/<paper>/checks/``) are the test a mutant faces, as test code
#: is for mutmut: a check made looser still passes on correct science, so it is not mutated
CHECKS = "checks"
WORK = paths.ROOT / "_build" / "mutants"
REPORT = paths.RESULTS_DIR / "mutants" / "report.json"
EQUIVALENT = paths.ROOT / "tests" / "mutants" / "equivalent.yaml"
SAMPLE, SEED, TIMEOUT_FACTOR, TIMEOUT_MIN = 150, 0, 5.0, 60.0


@dataclass(frozen=True)
class Mutant:
    """One change of one node of one file."""

    file: str  # relative to the repository root
    index: int  # its place among the file's mutants
    function: str  # the function (or Class.method) it is in; "" at module level
    line: int  # the first line of the changed node
    before: str  # the changed node's source
    after: str  # what it becomes

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}:{self.index}"


# ----------------------------------------------------------------------------- generating
def _mutmut():
    try:
        import libcst as cst
        from libcst.metadata import MetadataWrapper, PositionProvider
        from mutmut import configuration
        from mutmut.mutation import file_mutation as fm
    except ImportError as err:  # pragma: no cover - make mutants installs the tool
        raise SystemExit(
            f"mutmut is not importable ({err}); run `make mutants`, which installs it into "
            f"_build/mutmut/tool"
        ) from err
    # mutmut reads its settings (here: no do-not-mutate patterns) from a setup.cfg beside
    # the sources, and guesses the sources from the folder's name; the pinned mutmut is
    # told where they are instead of a file of its in the repository
    configuration._guess_source_paths = lambda: ["ntpcore"]
    return cst, MetadataWrapper, PositionProvider, fm


def _visitor_class(fm):
    """mutmut's visitor, also inside decorated functions (mutmut skips them because its
    trampolines copy functions; here one node is replaced in place, so a cached experiment
    runner is mutated like any function).  Decorators themselves stay unmutated."""

    class Visitor(fm.MutationVisitor):
        def _skip_node_and_children(self, node) -> bool:
            if isinstance(node, fm.cst.FunctionDef) and node.decorators:
                return False
            return super()._skip_node_and_children(node)

    return Visitor


def _parse(path: Path):
    cst, MetadataWrapper, PositionProvider, fm = _mutmut()
    code = path.read_text()
    module = cst.parse_module(code)
    wrapper = MetadataWrapper(module)
    ignored = fm.get_ignored_lines(str(path), code, wrapper, None)
    visitor = _visitor_class(fm)(fm.mutation_operators, ignored, None)
    wrapper.visit(visitor)
    positions = wrapper.resolve(PositionProvider)
    outer = wrapper.resolve(fm.OuterFunctionProvider)
    return wrapper.module, visitor.mutations, positions, outer


def _function_name(node, module) -> str:
    """``f`` or ``Class.method`` for the top-level node a mutant is in ("" outside any:
    module level, or a class attribute, then ``Class.``)."""
    if node is None:
        return ""
    own = node.name.value if hasattr(node, "name") else ""
    for stmt in module.body:
        if stmt is node:
            return own
        body = getattr(getattr(stmt, "body", None), "body", ())
        if any(m is node for m in body):
            return f"{stmt.name.value}.{own}"
    return own


def science_files() -> list[Path]:
    out = []
    for entry in SCIENCE:
        p = paths.ROOT / entry
        out += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return [
        p
        for p in out
        if str(p.relative_to(paths.ROOT)) not in NOT_SCIENCE
        and CHECKS not in p.relative_to(paths.ROOT).parts[:-1]
    ]


def generate(path: Path) -> list[Mutant]:
    """Every mutant of one file."""
    module, mutations, positions, outer = _parse(path)
    rel = str(path.relative_to(paths.ROOT))
    out = []
    for k, m in enumerate(mutations):
        pos = positions.get(m.original_node)
        out.append(
            Mutant(
                file=rel,
                index=k,
                function=_function_name(outer.get(m.original_node), module),
                line=pos.start.line if pos else 0,
                before=module.code_for_node(m.original_node),
                after=module.code_for_node(m.mutated_node),
            )
        )
    return out


def mutated_source(mutant: Mutant) -> str:
    """The file of ``mutant`` with its one change."""
    _cst, _w, _p, fm = _mutmut()
    module, mutations, _positions, _outer = _parse(paths.ROOT / mutant.file)
    m = mutations[mutant.index]
    changed = fm.deep_replace(module, m.original_node, m.mutated_node)
    if module.code_for_node(m.original_node) != mutant.before:
        raise RuntimeError(f"{mutant.id}: the file changed since the mutant was drawn")
    return changed.code


# ----------------------------------------------------------------------------- coverage
SITECUSTOMIZE = "import coverage\ncoverage.process_startup()\n"


def coverage_map(
    *, jobs: int, force: bool = False, paper: str | None = None
) -> dict[str, dict[int, list[str]]]:
    """file -> line -> the figures that execute it, from one covered quick run per figure
    (kept in ``_build/mutants/coverage[-<paper>].json`` for the commit it was made at);
    with ``paper``, that paper's figures only (``core``: all)."""
    cache = WORK / f"coverage{'-' + paper if paper and paper != 'core' else ''}.json"
    commit = provenance.git_state()["commit"]
    if cache.exists() and not force:
        data = json.loads(cache.read_text())
        if data.get("commit") == commit:
            return {f: {int(k): v for k, v in lines.items()} for f, lines in data["lines"].items()}
    import coverage

    figures = [f for f, e in load_registry().items() if paper in (None, "core") or e.paper == paper]
    tmp = Path(tempfile.mkdtemp(prefix="ntp-cov-"))
    (tmp / "site").mkdir()
    (tmp / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    lines: dict[str, dict[int, set[str]]] = {}
    t0 = time.perf_counter()

    def covered_run(fig: str) -> str:
        rc = tmp / f"{fig}.rc"
        (tmp / "data" / fig).mkdir(parents=True)
        rc.write_text(
            f"[run]\nparallel = True\nsource = ntpcore\ndata_file = {tmp / 'data' / fig / 'cov'}\n"
        )
        env = _env(tmp / "run" / fig, extra_path=tmp / "site")
        env["COVERAGE_PROCESS_START"] = str(rc)
        # a kernel of its own per figure: a warm kernel is shut down by a kill, and a killed
        # process never writes its coverage data
        env["NTP_WARM_KERNEL"] = "0"
        subprocess.run(
            [sys.executable, "-m", "ntpcore.reproduce", "--only", fig, "--profile", "quick"],
            cwd=paths.ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        return fig

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for k, fig in enumerate(pool.map(covered_run, figures), 1):
            print(f"  coverage [{k}/{len(figures)}] {fig}", flush=True)
            measured = coverage.Coverage(data_file=str(tmp / "data" / fig / "cov"))
            measured.combine([str(tmp / "data" / fig)])
            data = measured.get_data()
            for f in data.measured_files():
                rel = os.path.relpath(f, paths.ROOT)
                for line in data.lines(f) or []:
                    lines.setdefault(rel, {}).setdefault(line, set()).add(fig)
    shutil.rmtree(tmp, ignore_errors=True)
    seen = {fig for d in lines.values() for figs in d.values() for fig in figs}
    missing = sorted(set(figures) - seen)
    if missing:  # a figure that measured nothing: its run failed, or wrote no coverage data
        raise RuntimeError(
            f"coverage measured no line of ntpcore for {len(missing)} of {len(figures)} figures "
            f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}): run them with "
            "`python -m ntpcore.reproduce --only <id> --profile quick` to see whether they fail; "
            "nothing was kept"
        )
    out = {f: {ln: sorted(figs) for ln, figs in d.items()} for f, d in lines.items()}
    WORK.mkdir(parents=True, exist_ok=True)
    write_text_atomic(
        cache,
        json.dumps({"commit": commit, "seconds": round(time.perf_counter() - t0, 1), "lines": out}),
    )
    return out


# ----------------------------------------------------------------------------- running
def _env(root: Path, extra_path: Path | None = None) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", NTP_PROGRESS="0")
    for var, sub in (
        ("CACHE", "cache"),
        ("FIGURE", "figures"),
        ("EXECUTED", "executed"),
        ("FAILED", "failed"),
    ):
        env[f"NTP_{var}_DIR"] = str(root / sub)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(extra_path), *filter(None, [env.get("PYTHONPATH")])]
        )
    return env


def scratch_tree() -> Path:
    """Links to the checkout's files, and a copy of ``ntpcore/`` (with its compiled
    extensions) whose files the mutants replace one at a time."""
    tree = WORK / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    for entry in paths.ROOT.iterdir():
        if entry.name in ("ntpcore", ".git", "_build", "results", ".venv"):
            continue
        (tree / entry.name).symlink_to(entry)
    (tree / ".git").symlink_to(paths.ROOT / ".git")
    shutil.copytree(
        paths.ROOT / "ntpcore", tree / "ntpcore", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tree


@dataclass
class Outcome:
    id: str
    file: str
    function: str
    line: int
    before: str
    after: str
    figures: list[str]
    status: str  # killed | survived
    how: str = ""  # claim | panel | crash | timeout
    by: str = ""  # the figure that failed, and what failed
    seconds: float = 0.0
    equivalent: str | None = None
    ran: list[str] = field(default_factory=list)


def _why(failed: Path, fig: str, output: str) -> tuple[str, str]:
    """How a figure failed: a claim (the failed sidecar's blocking claims), a panel (the
    figure's data check), else an error the change caused (the runner's line naming it)."""
    side = failed / fig / f"{fig}.json"
    if side.exists():
        claims = json.loads(side.read_text()).get("claims") or []
        bad = [c["id"] for c in claims if c.get("blocking")]
        if bad:
            return "claim", f"{fig}: {', '.join(bad[:4])}"
    if "FigureDataError" in output or "does not show what it says" in output:
        return "panel", f"{fig}: a panel does not show what it declares"
    said = [x.strip() for x in output.splitlines() if " raised " in x or "Error" in x]
    return "crash", f"{fig}: {(said or ['(no message)'])[0][:200]}"


def _golden_difference(root: Path) -> tuple[str, str] | None:
    """The rest of a figure's test in ``make test``: the numbers and words its checked cells
    print against ``tests/golden/`` (within their measured tolerances) and its image against
    the baseline.  ``("golden" | "image", the first difference)``, or ``None`` when both
    hold (for the figures the run made)."""
    from tools.qa import golden, images

    for comparison in golden.check(root / "executed"):
        if comparison.differences:
            return "golden", comparison.differences[0].describe()[:200]
    made = {p.stem for p in (root / "figures").glob("*.png")}
    for result in images.check(root / "figures", write_diffs=False):
        if result.fig_id in made and not result.ok:
            return "image", result.describe()[:200]
    return None


def run_mutant(mutant: Mutant, figures: list[str], tree: Path, times: dict[str, float]) -> Outcome:
    out = Outcome(
        mutant.id,
        mutant.file,
        mutant.function,
        mutant.line,
        mutant.before,
        mutant.after,
        figures,
        "survived",
    )
    target = tree / mutant.file
    original = target.read_text()
    t0 = time.perf_counter()
    try:
        target.write_text(mutated_source(mutant))
        order = sorted(figures, key=lambda f: times.get(f, 30.0))
        for k in range(0, len(order), 2):
            batch = order[k : k + 2]
            root = Path(tempfile.mkdtemp(prefix="ntp-mutant-", dir=WORK))
            limit = max(TIMEOUT_MIN, TIMEOUT_FACTOR * sum(times.get(f, 30.0) for f in batch))
            try:
                proc = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "ntpcore.reproduce",
                        "--only",
                        *batch,
                        "--profile",
                        "quick",
                        "--jobs",
                        str(len(batch)),
                    ],
                    cwd=tree,
                    env=_env(root, extra_path=tree),
                    capture_output=True,
                    text=True,
                    timeout=limit,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                out.status, out.how, out.by = "killed", "timeout", f"{batch} ran past {limit:.0f} s"
                break
            finally:
                out.ran += batch
            if proc.returncode != 0:
                failed_figs = [f for f in batch if not (root / "figures" / f"{f}.png").exists()]
                fig = failed_figs[0] if failed_figs else batch[0]
                out.status = "killed"
                out.how, out.by = _why(root / "failed", fig, proc.stdout + proc.stderr)
                shutil.rmtree(root, ignore_errors=True)
                break
            golden = _golden_difference(root)
            if golden is not None:
                out.status = "killed"
                out.how, out.by = golden
                shutil.rmtree(root, ignore_errors=True)
                break
            shutil.rmtree(root, ignore_errors=True)
    finally:
        target.write_text(original)
        out.seconds = round(time.perf_counter() - t0, 1)
    return out


# ----------------------------------------------------------------------------- reading
def load_equivalent(path: Path = EQUIVALENT) -> dict[tuple[str, str, str, str], tuple[str, bool]]:
    """(file, function, before, after) -> (why, equivalent), from
    ``tests/mutants/equivalent.yaml``: an entry with ``equivalent: false`` is a survivor that
    was read and that a run could show, with the reason it is left (it stays in the score)."""
    if not path.exists():
        return {}
    out = {}
    for entry in yaml.safe_load(path.read_text()) or []:
        key = (entry["file"], entry["function"], entry["before"].strip(), entry["after"].strip())
        out[key] = (entry["why"].strip(), bool(entry.get("equivalent", True)))
    return out


def _coverage_seconds(paper: str | None) -> float:
    """How long the coverage run of this commit took (0 when it is not recorded)."""
    cache = WORK / f"coverage{'-' + paper if paper and paper != 'core' else ''}.json"
    try:
        return float(json.loads(cache.read_text()).get("seconds", 0.0))
    except (OSError, ValueError):
        return 0.0


def _figure_times() -> dict[str, float]:
    runs = sorted((paths.ROOT / "_build" / "test" / "figures" / "runs").glob("*-quick.json"))
    if not runs:
        return {}
    return json.loads(runs[-1].read_text()).get("figures", {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.qa.mutants",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sample", type=int, default=SAMPLE)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--resume", action="store_true", help="keep the mutants already run")
    parser.add_argument("--recover", action="store_true", help="measure coverage again")
    parser.add_argument("--list", action="store_true", help="count the mutants and stop")
    parser.add_argument(
        "--paper",
        choices=["lin", "geo", "att", "core"],
        help="only the mutants of one paper's room (or of the shared core), to work on its "
        "survivors; the score of record samples every science module",
    )
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    files = [
        f
        for f in science_files()
        if args.paper is None or str(f.relative_to(paths.ROOT)).startswith(f"ntpcore/{args.paper}/")
    ]
    population = [m for f in files for m in generate(f)]
    print(f"{len(population)} mutants in {len(files)} science modules")
    if args.list:
        return 0
    cov = coverage_map(jobs=args.jobs, force=args.recover, paper=args.paper)
    covered = [m for m in population if cov.get(m.file, {}).get(m.line)]
    print(
        f"{len(covered)} on lines a figure executes; {len(population) - len(covered)} not covered"
    )
    rng = random.Random(args.seed)
    sample = rng.sample(covered, min(args.sample, len(covered)))
    equivalent = load_equivalent()
    results_path = WORK / f"results{'-' + args.paper if args.paper else ''}.jsonl"
    done: dict[str, dict] = {}
    if args.resume and results_path.exists():
        for line in results_path.read_text().splitlines():
            rec = json.loads(line)
            done[rec["id"]] = rec
    elif results_path.exists():
        results_path.unlink()
    tree = scratch_tree()
    times = _figure_times()
    outcomes: list[dict] = []
    for k, m in enumerate(sample, 1):
        if m.id in done:
            outcomes.append(done[m.id])
            continue
        figs = cov[m.file][m.line]
        o = run_mutant(m, figs, tree, times)
        rec = asdict(o)
        outcomes.append(rec)
        with open(results_path, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(
            f"[{k}/{len(sample)}] {o.status:8s} {o.how:8s} {m.id} {m.function}: "
            f"{m.before[:40]!r} -> {m.after[:40]!r} ({o.seconds:.0f} s) {o.by[:80]}",
            flush=True,
        )
    for rec in outcomes:
        why, equiv_ = equivalent.get(
            (rec["file"], rec["function"], rec["before"].strip(), rec["after"].strip()),
            (None, True),
        )
        survived = rec["status"] == "survived"
        rec["equivalent"] = why if survived and equiv_ else None
        rec["read"] = why if survived and not equiv_ else None
    killed = sum(r["status"] == "killed" for r in outcomes)
    equiv = sum(r["equivalent"] is not None for r in outcomes)
    unexplained = [
        r
        for r in outcomes
        if r["status"] == "survived" and r["equivalent"] is None and r["read"] is None
    ]
    scored = len(outcomes) - equiv
    score = killed / scored if scored else float("nan")
    git = provenance.git_state()
    report = {
        "date": _dt.date.today().isoformat(),
        "commit": git["commit"],
        "dirty": git["dirty"],
        "seed": args.seed,
        "paper": args.paper,
        "population": len(population),
        "covered": len(covered),
        "sampled": len(outcomes),
        "killed": killed,
        "equivalent": equiv,
        "survived_unexplained": len(unexplained),
        "score": score,
        "by_how": {
            h: sum(r["how"] == h for r in outcomes if r["status"] == "killed")
            for h in ("claim", "panel", "golden", "image", "crash", "timeout")
        },
        # the time the sample took, resumed runs included: the coverage run and every
        # mutant's runs (a --resume that runs nothing would otherwise report seconds)
        "seconds": round(_coverage_seconds(args.paper) + sum(r["seconds"] for r in outcomes), 1),
        "outcomes": outcomes,
    }
    report_path = REPORT if args.paper is None else REPORT.with_name(f"report-{args.paper}.json")
    write_text_atomic(report_path, json.dumps(report, indent=1))
    for r in unexplained:
        print(
            f"SURVIVED {r['id']} ({r['function']}): {r['before']!r} -> {r['after']!r}; "
            f"figures {r['ran']}"
        )
    print(
        f"code-level mutants: {killed}/{scored} killed ({score:.1%}; {equiv} equivalent "
        f"left out, {len(unexplained)} unexplained survivors) of a sample of {len(outcomes)} "
        f"(seed {args.seed}) from {len(covered)} covered of {len(population)}; "
        f"report {REPORT.relative_to(paths.ROOT)}"
    )
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
