r"""Code-level mutation score of the maths modules (mutmut), beside the scientific catalogue.

The catalogue of :mod:`tools.qa.mutations` asks whether the *figures* catch
deliberate scientific errors.  This asks a narrower question of the *unit tests*: mutmut
(https://mutmut.readthedocs.io) rewrites one operator, constant, argument or string at a
time in a module (``<`` to ``<=``, ``axis=0`` to ``axis=None``, ``1.0`` to ``2.0``, ...),
runs the tests that call the changed function, and counts the mutant *killed* when a test
fails (or it times out).  A *survivor* is a change no test notices: a weak spot, or a change
with no observable effect (an *equivalent* mutant).

Each module of :data:`MODULES` is run on its own, with only its own unit tests, one worker
(``--max-children 1``) and ``OMP_NUM_THREADS=1``, in a folder ``_build/mutmut/<key>/`` that
links the package and the tests and holds the mutmut configuration (``setup.cfg``), so the
repository's ``pyproject.toml`` carries none.  Each mutant's tests run in a process forked
from the one that ran the clean tests, so a cache filled there (``lru_cache``) would hide a
mutant of the cached function: the tests of such a module clear it (``att.priority``'s SCC
structures).  mutmut's per-mutant limit is CPU time,
``(t + TIMEOUT_CONSTANT) * TIMEOUT_MULTIPLIER * 2`` seconds for tests that took ``t`` seconds
on the clean code.

Survivors are explained, never hidden: a survivor whose only change is the wording of a
string inside a ``raise`` (``"XX...XX"``, upper or lower case) is reported as *message
wording* (the error's type and reason stay; the tests match the reason, not its
typography), and one listed in :data:`EQUIVALENT` (``tests/mutmut/equivalent.yaml``, matched
on the function and the changed lines, so a changed line makes it a survivor again) as
*equivalent*, with the reason.  The run prints each module's score, every unexplained
survivor with its diff, ends with ``code-level mutation score: K/N killed`` and writes
``results/mutmut/report.json`` (the book's Claims page reads it).  It exits 1 when a survivor
is unexplained.

Needs mutmut on ``sys.path`` (``make mutmut`` installs the pins of ``requirements/mutmut.txt``
into ``_build/mutmut/tool``, never into the project's environment).  A developer's tool, not
part of CI.
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import difflib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from ntpcore.core import paths
from ntpcore.core.io import write_text_atomic
from ntpcore.figure import provenance

__all__ = ["EQUIVALENT", "MODULES", "REPORT", "Survivor", "classify", "main"]

#: module key -> (source file, its unit tests), paths relative to the repository root
MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "core.logits": ("ntpcore/core/logits.py", ("tests/core", "tests/lin/test_data_loss.py")),
    "lin.subspace": (
        "ntpcore/lin/subspace.py",
        ("tests/lin/test_subspace.py", "tests/lin/test_data_loss.py"),
    ),
    "att.priority": ("ntpcore/att/priority.py", ("tests/att/test_att_priority.py",)),
}
REPORT = paths.RESULTS_DIR / "mutmut" / "report.json"
EQUIVALENT = paths.ROOT / "tests" / "mutmut" / "equivalent.yaml"
WORK = paths.ROOT / "_build" / "mutmut"
TIMEOUT_MULTIPLIER = 10.0
TIMEOUT_CONSTANT = 1.0

#: mutmut's exit codes per mutant (mutmut/stats.py), folded into the report's categories
_STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped"}
_STATUS.update({c: "timeout" for c in (36, -24, 24, 152, 255)})
_STATUS.update({c: "segfault" for c in (-11, -9)})
_NAME = re.compile(r"^x_?(?P<func>.+?)__mutmut_(?P<n>\d+)$")


@dataclass
class Survivor:
    name: str
    function: str
    status: str
    before: str
    after: str
    explained: str | None = None
    kind: str | None = None  # "message wording" | "equivalent" | None (unexplained)


@dataclass
class ModuleResult:
    key: str
    file: str
    tests: list[str]
    mutants: int = 0
    killed: int = 0
    timeout: int = 0
    survived: int = 0
    no_tests: int = 0
    other: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    error: str | None = None
    not_mutated: list[str] = field(default_factory=list)
    survivors: list[Survivor] = field(default_factory=list)

    @property
    def detected(self) -> int:
        return self.killed + self.timeout


# ----------------------------------------------------------------------------- running
def _setup_cfg(source: str, tests: tuple[str, ...]) -> str:
    lines = [
        "[mutmut]",
        "source_paths = ntpcore",
        f"only_mutate = {source}",
        "pytest_add_cli_args_test_selection =",
        *(f"    {t}" for t in tests),
        "pytest_add_cli_args =",
        "    -m",
        "    not slow and not paper",
        f"timeout_multiplier = {TIMEOUT_MULTIPLIER}",
        f"timeout_constant = {TIMEOUT_CONSTANT}",
        "use_git_change_detection = false",
        "",
    ]
    return "\n".join(lines)


def _workdir(key: str, source: str, tests: tuple[str, ...]) -> Path:
    """A fresh folder with links to the package and the tests, the repository's pytest
    settings (its pyproject.toml) and the mutmut configuration of this module."""
    work = WORK / key
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for name in ("ntpcore", "tests"):
        (work / name).symlink_to(paths.ROOT / name, target_is_directory=True)
    shutil.copy2(paths.ROOT / "pyproject.toml", work / "pyproject.toml")
    (work / "setup.cfg").write_text(_setup_cfg(source, tests))
    return work


def _run_mutmut(work: Path) -> tuple[int, float, float]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(work / "mutmut.log", "w") as log:
        rc = subprocess.run(
            [sys.executable, "-m", "mutmut", "run", "--max-children", "1"],
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rc, wall, cpu


# ----------------------------------------------------------------------------- reading
def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def _display_name(func: str) -> str:
    """``check_tokens`` or ``SCCStructure.higher`` from mutmut's mangled name."""
    return ".".join(p for p in func.split("ǁ") if p)


def _typography(old: str, new: str) -> bool:
    """``new`` is ``old`` with a stretch wrapped in ``XX``, or with letters' case changed
    (mutmut's string mutations; a stretch, since implicit concatenation joins literals)."""
    if new == old:
        return False
    if new.lower() == old.lower():
        return True
    marks = [i for i in range(len(new) - 1) if new.startswith("XX", i)]
    return any(
        new[:a] + new[a + 2 : b] + new[b + 2 :] == old for a in marks for b in marks if b >= a + 2
    )


def _string_changes_in_raise(a: ast.AST, b: ast.AST, in_raise: bool = False) -> bool | None:
    """Walk two trees in step: None if they are equal, True if they differ only in the
    typography of string constants inside ``raise`` statements, False otherwise."""
    if type(a) is not type(b):
        return False
    if isinstance(a, ast.Constant):
        if a.value == b.value and type(a.value) is type(b.value):
            return None
        ok = isinstance(a.value, str) and isinstance(b.value, str) and in_raise
        return bool(ok and _typography(a.value, b.value))
    in_raise = in_raise or isinstance(a, ast.Raise)
    found = None
    for name, va in ast.iter_fields(a):
        vb = getattr(b, name, None)
        if name == "name" and isinstance(a, ast.FunctionDef):
            continue
        la, lb = (va, vb) if isinstance(va, list) else ([va], [vb])
        if not isinstance(lb, list) or len(la) != len(lb):
            return False
        for xa, xb in zip(la, lb, strict=True):
            if isinstance(xa, ast.AST):
                r = _string_changes_in_raise(xa, xb, in_raise)
                if r is False:
                    return False
                found = found or r
            elif xa != xb:
                return False
    return found


def _changed_lines(orig: str, mutant: str) -> tuple[str, str]:
    """The removed and added lines (stripped) of the mutant's diff, the def line aside."""
    a, b = orig.splitlines()[1:], mutant.splitlines()[1:]
    minus, plus = [], []
    for line in difflib.unified_diff(a, b, lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        (minus if line[0] == "-" else plus).append(line[1:].strip())
    return "\n".join(minus), "\n".join(plus)


def _qualified_functions(tree: ast.Module) -> list[str]:
    """Module-level functions and methods of a source file, as ``f`` or ``Class.method``."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out.append(node.name)
        elif isinstance(node, ast.ClassDef):
            out += [f"{node.name}.{n.name}" for n in node.body if isinstance(n, ast.FunctionDef)]
    return out


def not_mutated(source: Path, mutated_names: list[str]) -> list[str]:
    """Functions of ``source`` that mutmut left alone (it skips decorated functions, e.g.
    properties and cached functions), so that the score is read with its scope."""
    done = {_display_name(_NAME.match(n + "__mutmut_0").group("func")) for n in mutated_names}
    return [f for f in _qualified_functions(ast.parse(source.read_text())) if f not in done]


def load_equivalent(path: Path = EQUIVALENT) -> dict[tuple[str, str, str, str], str]:
    """(file, function, before, after) -> why, from tests/mutmut/equivalent.yaml."""
    if not path.exists():
        return {}
    out = {}
    for group in yaml.safe_load(path.read_text()) or []:
        for func, before, after in group["mutants"]:
            out[(group["file"], func, before.strip(), after.strip())] = group["why"].strip()
    return out


def classify(
    source_file: str, mutated: Path, codes: dict[str, int | None], equivalent: dict
) -> tuple[dict[str, int], list[Survivor]]:
    """Counts per category and the survivors (with their diffs and explanations)."""
    text = mutated.read_text()
    funcs = _functions(ast.parse(text))
    counts: dict[str, int] = {}
    survivors = []
    for key, code in codes.items():
        status = _STATUS.get(code, "not checked" if code is None else "suspicious")
        counts[status] = counts.get(status, 0) + 1
        if status in ("killed", "timeout"):
            continue
        short = key.rsplit(".", 1)[1]
        m = _NAME.match(short)
        func = m.group("func") if m else short
        mut_def = funcs.get(short)
        orig_def = funcs.get(short.rsplit("__mutmut_", 1)[0] + "__mutmut_orig")
        before = after = ""
        explained = kind = None
        if mut_def is not None and orig_def is not None:
            before, after = _changed_lines(
                ast.get_source_segment(text, orig_def) or "",
                ast.get_source_segment(text, mut_def) or "",
            )
            if _string_changes_in_raise(orig_def, mut_def):
                kind = "message wording"
                explained = "rewords an error message (its type and reason stay)"
        display = _display_name(func)
        why = equivalent.get((source_file, display, before, after))
        if why and explained is None:
            kind, explained = "equivalent", why
        survivors.append(Survivor(short, display, status, before, after, explained, kind))
    return counts, survivors


def run_module(key: str, equivalent: dict, *, reuse: bool = False) -> ModuleResult:
    """Run mutmut on one module (or, with ``reuse``, read its last run again) and classify."""
    source, tests = MODULES[key]
    res = ModuleResult(key=key, file=source, tests=list(tests))
    work = WORK / key
    timing = work / "timing.json"
    if not reuse:
        work = _workdir(key, source, tests)
        rc, wall, cpu = _run_mutmut(work)
        timing.write_text(json.dumps({"rc": rc, "wall_s": wall, "cpu_s": cpu}))
    if not timing.exists():
        res.error = f"no run of {key} in {work} to reuse"
        return res
    t = json.loads(timing.read_text())
    rc, res.wall_s, res.cpu_s = t["rc"], t["wall_s"], t["cpu_s"]
    meta = work / "mutants" / (source + ".meta")
    if rc != 0 or not meta.exists():
        tail = (work / "mutmut.log").read_text(errors="replace")[-2000:]
        res.error = f"mutmut exited {rc}: {tail.strip().splitlines()[-1] if tail.strip() else ''}"
        return res
    meta_data = json.loads(meta.read_text())
    codes = meta_data["exit_code_by_key"]
    res.not_mutated = not_mutated(paths.ROOT / source, list(meta_data["hash_by_function_name"]))
    counts, res.survivors = classify(source, work / "mutants" / source, codes, equivalent)
    res.mutants = sum(counts.values())
    res.killed = counts.get("killed", 0)
    res.timeout = counts.get("timeout", 0)
    res.survived = counts.get("survived", 0)
    res.no_tests = counts.get("no tests", 0)
    res.other = res.mutants - res.killed - res.timeout - res.survived - res.no_tests
    return res


# ----------------------------------------------------------------------------- report
def _mutmut_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mutmut")
    except PackageNotFoundError:
        return None


def _line(r: ModuleResult) -> str:
    if r.error:
        return f"{r.file}: ERROR {r.error}"
    unexplained = [s for s in r.survivors if s.explained is None]
    score = 100.0 * r.detected / r.mutants if r.mutants else float("nan")
    skipped = f"; not mutated: {', '.join(r.not_mutated)}" if r.not_mutated else ""
    return (
        f"{r.file}: {r.detected}/{r.mutants} killed ({score:.1f}%; {r.timeout} by timeout), "
        f"{len(r.survivors)} not killed ({len(r.survivors) - len(unexplained)} explained, "
        f"{len(unexplained)} unexplained), {r.wall_s:.0f} s wall, {r.cpu_s:.0f} s CPU{skipped}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.qa.mutmut_score",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--only", nargs="+", choices=sorted(MODULES), help="these modules only")
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="read the last runs in _build/mutmut again (after editing the equivalents)",
    )
    args = parser.parse_args(argv)
    version = _mutmut_version()
    if version is None:
        print(
            "error: mutmut is not importable; `make mutmut` installs it into _build/mutmut/tool",
            file=sys.stderr,
        )
        return 2
    equivalent = load_equivalent()
    keys = args.only or list(MODULES)
    results = []
    for key in keys:  # one module at a time, one worker each
        print(
            f"mutmut {version}: {MODULES[key][0]} with {' '.join(MODULES[key][1])} ...", flush=True
        )
        r = run_module(key, equivalent, reuse=args.reuse)
        results.append(r)
        print("  " + _line(r), flush=True)
    for r in results:
        for s in r.survivors:
            if s.explained is None:
                print(f"survivor ({s.status}) {r.file} {s.function}: {s.name}")
                for ln in s.before.splitlines():
                    print(f"    - {ln}")
                for ln in s.after.splitlines():
                    print(f"    + {ln}")
    killed = sum(r.detected for r in results)
    total = sum(r.mutants for r in results)
    state = provenance.git_state()
    report = {
        "when": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "commit": state.get("commit"),
        "dirty": state.get("dirty"),
        "tool": f"mutmut {version}",
        "max_children": 1,
        "timeout": {"multiplier": TIMEOUT_MULTIPLIER, "constant_s": TIMEOUT_CONSTANT},
        "killed": killed,
        "total": total,
        "modules": [
            {
                **{k: v for k, v in asdict(r).items() if k != "survivors"},
                "detected": r.detected,
                "survivors": [asdict(s) for s in r.survivors],
            }
            for r in results
        ],
    }
    errors = [r for r in results if r.error]
    if not args.only and not errors:
        write_text_atomic(args.report, json.dumps(report, indent=1, ensure_ascii=False))
        print(f"report: {args.report}")
    print(f"code-level mutation score: {killed}/{total} killed")
    unexplained = sum(1 for r in results for s in r.survivors if s.explained is None)
    return 1 if (errors or unexplained) else 0


if __name__ == "__main__":
    sys.exit(main())
