r"""Golden outputs: the reference every quick-profile run is compared with, within tolerances.

The cells tagged ``nbval-check-output`` print the claims and key numbers of a figure.  Their
reference text is kept in the repository, one file per figure (``tests/golden/<fig_id>.txt``),
and a run is compared with it in two parts:

* **numbers** (:func:`compare`): every number a tagged cell prints is compared with its golden
  value.  A number written ``⟦0.0175 ± 0.00069⟧`` in the golden file is a *measured* number,
  compared within that absolute tolerance; a number written plainly (a count, a rank, a
  threshold, a constant of a statement) must be printed exactly as it is.  Everything else
  on the line (statuses, ids, statements, the words of a table) must match exactly.
* **words** (nbval): the golden text is injected into the executed notebooks and nbval
  re-executes them, comparing the tagged cells with every number masked
  (``tests/nbval_numbers.cfg``), so nbval checks the words and the numbers are checked here.

Where the tolerances come from (:func:`suggest_tolerance`).  A last-bit difference in a
floating-point kernel (numpy's SIMD dispatch, OpenBLAS's core type, the number of threads,
torch's CPU capability) can grow through thousands of optimiser steps; the spread of each
printed number across the floating-point configurations one machine can run is measured by
``make reproducibility`` (:mod:`ntpcore.pipeline.reproducibility`).  A measured number's
tolerance is ``SAFETY`` times that spread (max - min over the configurations), and never less
than its *floor*: one unit in the last printed digit (a value next to a rounding boundary can
print either way), and for a claim's measured value at least one unit in its third
significant digit (the claims print three significant digits and drop trailing zeros).

Changing the goldens (:func:`update`, ``make golden``) prints every number that moves (old ->
new, relative change) and every line that changes; a change beyond a tolerance, or of the
text, is refused unless a reason is given, which is recorded in ``tests/golden/CHANGES.md``.
Tolerances change only by :func:`apply_tolerances` from a reproducibility report, for review
with ``git diff tests/golden``.  The quick-profile figures are compared the same way with
baseline images (:mod:`ntpcore.pipeline.images`).

Command line::

    python -m ntpcore.pipeline.golden check  _build/test/executed
    python -m ntpcore.pipeline.golden inject _build/test/executed _build/test/nbval
    python -m ntpcore.pipeline.golden update _build/test/executed [--reason "..."]
    python -m ntpcore.pipeline.golden tolerances results/reproducibility/report.json
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ntpcore.core.io import write_text_atomic
from ntpcore.pipeline import images, paths, provenance
from ntpcore.pipeline.claims import DEVIATION, line_markdown

__all__ = [
    "GOLDEN_DIR",
    "SAFETY",
    "TAG",
    "Difference",
    "GoldenError",
    "Line",
    "Number",
    "apply_tolerances",
    "claim_tags",
    "compare",
    "extract",
    "inject",
    "outputs",
    "parse",
    "parse_golden_line",
    "read_golden",
    "render",
    "suggest_tolerance",
    "tokenize",
    "update",
]

TAG = "nbval-check-output"
GOLDEN_DIR = paths.ROOT / "tests" / "golden"
CHANGES = "CHANGES.md"
#: A measured number's tolerance is SAFETY times its spread across the configurations.
SAFETY = 3.0
_HEADER = "=== cell {k}"
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d+\.\d+|\.\d+|\d+)(?:[eE][-+]?\d+)?(?!\w)")
_MARK = re.compile(r"⟦(\S+) ± (\S+)⟧")
_CLAIM = re.compile(
    r"^(?P<head>(?:PASS|FAIL|SKIP|CHECK) \S+: .*?\]: ours )(?P<ours>.*?)"
    r"(?P<tail> \((?:≤|≥|in \[|= |holds).*)$"
)


class GoldenError(RuntimeError):
    """A golden file is missing, malformed or does not fit its notebook."""


# ----------------------------------------------------------------------------- numbers
@dataclass(frozen=True)
class Number:
    """One number printed in a line.

    ``measured``: a result of the run (compared within a tolerance); otherwise a constant of
    the text (a threshold, a count, a parameter), compared exactly.  ``floor``: the smallest
    tolerance a measured number gets (see the module docstring).  ``tol``: the tolerance
    read from a golden file (``None`` for a run's number or a plain golden number).
    """

    text: str
    measured: bool
    floor: float
    tol: float | None = None

    @property
    def value(self) -> float:
        return float(self.text)


@dataclass(frozen=True)
class Line:
    """A printed line: its words (every number replaced by ``#``) and its numbers."""

    words: str
    numbers: tuple[Number, ...]
    claim: str | None = None  # the claim id, for a line printed by the claims ledger


def _last_digit(text: str) -> float:
    """One unit in the last printed digit of ``text`` (``1e-4`` for ``0.0175``)."""
    mant, _, exp = text.lower().partition("e")
    decimals = len(mant.partition(".")[2])
    return 10.0 ** (int(exp or 0) - decimals)


def _floor(text: str, claim_value: bool) -> float:
    value = abs(float(text))
    unit = _last_digit(text)
    if value == 0.0:
        return 0.0 if "e" in text.lower() else unit
    if claim_value:  # three significant digits, trailing zeros dropped by the 'g' format
        unit = min(unit, 10.0 ** (math.floor(math.log10(value)) - 2))
    return unit


def _is_integer(text: str) -> bool:
    return "." not in text and "e" not in text.lower()


def _numbers(text: str, measured_segment: bool, claim_value: bool = False) -> list[Number]:
    out = []
    for m in _NUMBER.finditer(text):
        t = m.group(0)
        measured = measured_segment and (claim_value or not _is_integer(t))
        out.append(Number(t, measured, _floor(t, claim_value) if measured else 0.0))
    return out


def _segments(line: str) -> tuple[list[tuple[str, bool, bool]], str | None]:
    """Split a line into (text, measured segment, claim value) parts, and its claim id.

    In a claim line only the measured value (``ours ...``) and a known deviation's text
    (which quotes the run) are measured; the statement, source, comparison and the paper's
    and reference numbers are constants.  In any other line every number is a result.
    """
    m = _CLAIM.match(line)
    if not m:
        return [(line, True, False)], None
    claim = line.split(" ", 2)[1].rstrip(":")
    tail = m.group("tail")
    dev = DEVIATION.search(tail)
    expect = tail[: dev.start()] if dev else tail
    parts = [(m.group("head"), False, False), (m.group("ours"), True, True), (expect, False, False)]
    if dev:
        parts += [(dev.group(0), False, False), (tail[dev.end() :], True, False)]
    return parts, claim


def tokenize(line: str) -> Line:
    """The words and numbers of one printed line of a run."""
    parts, claim = _segments(line)
    words, numbers = [], []
    for text, measured, claim_value in parts:
        words.append(_NUMBER.sub("#", text))
        numbers += _numbers(text, measured, claim_value)
    return Line("".join(words), tuple(numbers), claim)


def parse_golden_line(line: str) -> Line:
    """A golden line: ``⟦value ± tol⟧`` marks a measured number, plain numbers are exact."""
    words, numbers, pos = [], [], 0
    for m in _MARK.finditer(line):
        chunk = line[pos : m.start()]
        words.append(_NUMBER.sub("#", chunk))
        numbers += [Number(n.text, False, 0.0) for n in _numbers(chunk, False)]
        value, tol = m.group(1), m.group(2)
        try:
            float(value), float(tol)
        except ValueError as exc:
            raise GoldenError(
                f"bad measured number {m.group(0)!r} in golden line {line!r}"
            ) from exc
        words.append("#")
        numbers.append(Number(value, True, 0.0, float(tol)))
        pos = m.end()
    chunk = line[pos:]
    words.append(_NUMBER.sub("#", chunk))
    numbers += [Number(n.text, False, 0.0) for n in _numbers(chunk, False)]
    plain = _MARK.sub(lambda m: m.group(1), line)
    return Line("".join(words), tuple(numbers), _segments(plain)[1])


def _fmt_tol(tol: float) -> str:
    """``tol`` rounded up to two significant digits."""
    if tol <= 0:
        return "0"
    e = math.floor(math.log10(tol)) - 1
    up = math.ceil(tol / 10.0**e - 1e-9) * 10.0**e
    return f"{up:.2g}"


def suggest_tolerance(number: Number, spread: float | None) -> float:
    """``max(SAFETY * spread, floor)`` for a measured number (``spread`` None: not measured)."""
    return max(SAFETY * (spread or 0.0), number.floor)


def plain(line: str) -> str:
    """A golden line as the notebook prints it (the tolerance marks removed)."""
    return _MARK.sub(lambda m: m.group(1), line)


# ----------------------------------------------------------------------- golden files
def _tagged(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [
        c
        for c in nb.cells
        if c.cell_type == "code" and TAG in c.get("metadata", {}).get("tags", [])
    ]


def _text(cell: nbformat.NotebookNode) -> str:
    """The text a cell printed (streams and plain-text results, in order)."""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.get("data", {}).get("text/plain", "") + "\n")
        elif out.output_type == "error":
            raise GoldenError(f"a tagged cell raised {out.ename}: {out.evalue}")
    return "".join(parts)


def extract(nb: nbformat.NotebookNode) -> list[str]:
    """The printed text of every tagged cell of an executed notebook."""
    return [_text(c) for c in _tagged(nb)]


def render(fig_id: str, texts: list[str]) -> str:
    """A golden file: a header, then each tagged cell's lines (with their marks)."""
    lines = [
        f"# Golden outputs of the {TAG} cells of {fig_id} (quick profile).",
        "# ⟦value ± tol⟧: a measured number and its tolerance (tests/golden/README.md);",
        "# change only with `make golden` (values) or `golden tolerances` (tolerances).",
    ]
    for k, text in enumerate(texts, 1):
        lines.append(_HEADER.format(k=k))
        if text:
            lines.append(text.rstrip("\n"))
    return "\n".join(lines) + "\n"


def parse(text: str) -> list[str]:
    """The cells of a golden file (inverse of :func:`render`), marks kept."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("=== cell "):
            blocks.append([])
        elif blocks:
            blocks[-1].append(line)
        elif not line.startswith("#"):
            raise GoldenError(f"text before the first cell header: {line!r}")
    return ["\n".join(b) + "\n" if b else "" for b in blocks]


def read_golden(fig_id: str, golden_dir: Path = GOLDEN_DIR) -> list[str]:
    path = golden_dir / f"{fig_id}.txt"
    if not path.exists():
        raise GoldenError(
            f"no golden outputs for {fig_id} ({path}); review the notebook's tagged cells "
            f"and run `make golden REASON='new figure {fig_id}'`"
        )
    return parse(path.read_text(encoding="utf-8"))


def claim_tags(fig_id: str, golden_dir: Path = GOLDEN_DIR) -> dict[str, str]:
    """The figure's ledger claims in its golden file: short id -> the tag its line prints
    (``PASS``, ``FAIL``, ``SKIP`` for a claim not evaluated in the quick profile, ``CHECK`` for
    a sanity check).  The quick profile prints every claim of the figure, paper-only ones as
    ``SKIP``, so these are all its claims (read by the registry's claim-map test)."""
    tags: dict[str, str] = {}
    prefix = f"{fig_id}:"
    for text in read_golden(fig_id, golden_dir):
        for line in text.splitlines():
            m = _CLAIM.match(line)
            if not m:
                continue
            tag, full_id = line.split(" ", 2)[:2]
            full_id = full_id.rstrip(":")
            if not full_id.startswith(prefix):
                raise GoldenError(f"{fig_id}: golden claim line of another figure: {line[:80]!r}")
            tags[full_id.removeprefix(prefix)] = tag
    return tags


def _lines(text: str) -> list[str]:
    return text.splitlines()


# ------------------------------------------------------------------------- comparing
@dataclass(frozen=True)
class Difference:
    """One difference between a run and its golden outputs."""

    fig_id: str
    where: str  # "cell 2, line 3 (claim id)"
    kind: str  # "number" (a measured number off its tolerance), "exact", "text"
    golden: str
    run: str
    tol: float | None = None

    def describe(self) -> str:
        if self.kind == "number":
            g, r = float(self.golden), float(self.run)
            return (
                f"{self.fig_id}, {self.where}: {self.golden} -> {self.run} "
                f"({_rel(g, r)}; tolerance ± {_fmt_tol(self.tol or 0.0)})"
            )
        if self.kind == "image":
            return f"image {self.run}"
        if self.kind == "exact":
            return f"{self.fig_id}, {self.where}: {self.golden} -> {self.run} (printed exactly)"
        return f"{self.fig_id}, {self.where}:\n    golden: {self.golden}\n    run:    {self.run}"


def _rel(old: float, new: float) -> str:
    if old == new:
        return "unchanged"
    if old == 0:
        return f"{new - old:+.2g} absolute"
    return f"{(new - old) / abs(old):+.2%}"


def _where(k: int, j: int, line: Line) -> str:
    return f"cell {k}, line {j}" + (f" ({line.claim})" if line.claim else "")


@dataclass
class Comparison:
    """The outcome of comparing one figure's run with its golden outputs."""

    fig_id: str
    compared: int = 0
    differences: list[Difference] = field(default_factory=list)
    #: every measured number: (where, golden, run, tolerance)
    measured: list[tuple[str, str, str, float]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences


def compare(fig_id: str, golden_texts: list[str], run_texts: list[str]) -> Comparison:
    """Compare a run's tagged-cell texts with the golden ones, number by number."""
    out = Comparison(fig_id)
    if len(golden_texts) != len(run_texts):
        out.differences.append(
            Difference(
                fig_id, "tagged cells", "text", f"{len(golden_texts)} cells", f"{len(run_texts)}"
            )
        )
        return out
    for k, (gtext, rtext) in enumerate(zip(golden_texts, run_texts, strict=True), 1):
        glines, rlines = _lines(gtext), _lines(rtext)
        for j in range(max(len(glines), len(rlines))):
            if j >= len(glines) or j >= len(rlines):
                gl = plain(glines[j]) if j < len(glines) else "(no line)"
                rl = rlines[j] if j < len(rlines) else "(no line)"
                out.differences.append(
                    Difference(fig_id, f"cell {k}, line {j + 1}", "text", gl, rl)
                )
                continue
            g, r = parse_golden_line(glines[j]), tokenize(rlines[j])
            where = _where(k, j + 1, g)
            if g.words != r.words or len(g.numbers) != len(r.numbers):
                out.differences.append(
                    Difference(fig_id, where, "text", plain(glines[j]), rlines[j])
                )
                continue
            for gn, rn in zip(g.numbers, r.numbers, strict=True):
                out.compared += 1
                if gn.tol is None:
                    if gn.text != rn.text:
                        out.differences.append(Difference(fig_id, where, "exact", gn.text, rn.text))
                    continue
                out.measured.append((where, gn.text, rn.text, gn.tol))
                if abs(rn.value - gn.value) > gn.tol * (1 + 1e-9) + 1e-300:
                    out.differences.append(
                        Difference(fig_id, where, "number", gn.text, rn.text, gn.tol)
                    )
    return out


def _executed(executed: Path) -> list[Path]:
    nbs = sorted(executed.glob("*.ipynb"))
    if not nbs:
        raise GoldenError(f"no executed notebooks in {executed}")
    return nbs


def check(executed: Path, golden_dir: Path = GOLDEN_DIR) -> list[Comparison]:
    """Compare every executed notebook in ``executed`` with its golden outputs."""
    return [
        compare(p.stem, read_golden(p.stem, golden_dir), extract(nbformat.read(p, as_version=4)))
        for p in _executed(executed)
    ]


# ------------------------------------------------------------------------- nbval copies
def outputs(text: str) -> list[nbformat.NotebookNode]:
    """The outputs a kernel gives for a tagged cell that printed ``text``.

    A claim line is displayed by the ledger (:func:`ntpcore.pipeline.claims.line_markdown`): a
    ``display_data`` output, its plain text the line and its Markdown the same function of it;
    the lines printed around claim lines are stdout streams, split where a claim line
    comes, as the kernel flushes them.
    """
    outs: list[nbformat.NotebookNode] = []
    printed: list[str] = []

    def flush() -> None:
        if printed:
            outs.append(nbformat.v4.new_output("stream", name="stdout", text="".join(printed)))
            printed.clear()

    for line in text.splitlines(keepends=True):
        md = line_markdown(line.rstrip("\n"))
        if md is None:
            printed.append(line)
            continue
        flush()
        data = {"text/plain": line.rstrip("\n"), "text/markdown": md}
        outs.append(nbformat.v4.new_output("display_data", data=data))
    flush()
    return outs


def inject(nb: nbformat.NotebookNode, texts: list[str], fig_id: str) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose tagged cells carry the golden ``texts`` (marks removed), as the
    outputs a kernel printing them gives (:func:`outputs`)."""
    nb = nbformat.from_dict(nb)
    cells = _tagged(nb)
    if len(cells) != len(texts):
        raise GoldenError(
            f"{fig_id}: {len(cells)} tagged cells but {len(texts)} golden outputs; "
            f"review and run `make golden`"
        )
    for cell, text in zip(cells, texts, strict=True):
        text = "\n".join(plain(x) for x in _lines(text)) + ("\n" if text else "")
        cell.outputs = outputs(text)
        cell.execution_count = cell.execution_count or 1  # nbval compares only run cells
    return nb


def inject_all(executed: Path, out: Path, golden_dir: Path = GOLDEN_DIR) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for nb_path in _executed(executed):
        nb = inject(
            nbformat.read(nb_path, as_version=4),
            read_golden(nb_path.stem, golden_dir),
            nb_path.stem,
        )
        nbformat.write(nb, out / nb_path.name)
        written.append(out / nb_path.name)
    return written


# ------------------------------------------------------------------------- updating
def _mark(rline: str, tols: list[float | None]) -> str:
    """``rline`` with its measured numbers written ``⟦value ± tol⟧`` (``tols`` per number)."""
    it = iter(tols)

    def sub(m: re.Match) -> str:
        tol = next(it)
        return m.group(0) if tol is None else f"⟦{m.group(0)} ± {_fmt_tol(tol)}⟧"

    parts, _ = _segments(rline)
    return "".join(_NUMBER.sub(sub, text) for text, _, _ in parts)


def _golden_text(
    run_text: str, old_text: str | None, spreads: dict[str, float] | None, fig_id: str, k: int
) -> str:
    """A cell's new golden text: the run's numbers, each measured one with its tolerance.

    The tolerance of a number already in the golden file at the same place (same words) is
    kept, unless ``spreads`` (from a reproducibility report) gives a new one; a new number
    gets its spread's tolerance, or its floor when it was not measured.
    """
    old = _lines(old_text or "")
    out = []
    for j, rl in enumerate(_lines(run_text), 1):
        r = tokenize(rl)
        g = parse_golden_line(old[j - 1]) if j <= len(old) else None
        same = g is not None and g.words == r.words and len(g.numbers) == len(r.numbers)
        tols: list[float | None] = []
        for i, rn in enumerate(r.numbers):
            spread = (spreads or {}).get(number_key(fig_id, k, j, i))
            old_tol = g.numbers[i].tol if same else None
            if spread is not None and (rn.measured or spread > 0):
                tols.append(suggest_tolerance(rn, spread))
            elif old_tol is not None:
                tols.append(old_tol)
            else:
                tols.append(suggest_tolerance(rn, None) if rn.measured else None)
        out.append(_mark(rl, tols))
    return "\n".join(out) + ("\n" if out else "")


def number_key(fig_id: str, cell: int, line: int, index: int) -> str:
    """The key of a printed number in reproducibility reports: ``fig/cell/line/index``."""
    return f"{fig_id}/{cell}/{line}/{index}"


@dataclass
class Update:
    """What :func:`update` found: the moved numbers and changed lines of every figure."""

    changes: list[Difference] = field(default_factory=list)  # beyond tolerance, or text
    moved: list[str] = field(default_factory=list)  # within tolerance
    new_figures: list[str] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)


def update(
    executed: Path,
    golden_dir: Path = GOLDEN_DIR,
    *,
    figures: Path | None = None,
    reason: str | None = None,
    dry_run: bool = False,
) -> Update:
    """Rewrite the golden files from executed notebooks, saying what moved.

    Every number that moves is listed (old -> new, relative change).  A number beyond its
    tolerance, a changed line or a new figure needs ``reason``; without one nothing is
    written and :class:`GoldenError` names what moved.  The reason is appended to
    ``CHANGES.md`` beside the golden files with the list of changes.
    """
    result = Update()
    staged: dict[Path, str] = {}
    for nb_path in _executed(executed):
        fig_id = nb_path.stem
        run = extract(nbformat.read(nb_path, as_version=4))
        path = golden_dir / f"{fig_id}.txt"
        old = parse(path.read_text(encoding="utf-8")) if path.exists() else None
        if old is None:
            result.new_figures.append(fig_id)
        else:
            cmp = compare(fig_id, old, run)
            result.changes += cmp.differences
            result.moved += [
                f"{fig_id}, {w}: {g} -> {r} ({_rel(float(g), float(r))}, within ± {_fmt_tol(t)})"
                for w, g, r, t in cmp.measured
                if g != r and abs(float(r) - float(g)) <= t * (1 + 1e-9)
            ]
        texts = [
            _golden_text(t, old[k - 1] if old and k <= len(old) else None, None, fig_id, k)
            for k, t in enumerate(run, 1)
        ]
        new = render(fig_id, texts)
        if not path.exists() or path.read_text(encoding="utf-8") != new:
            staged[path] = new
    if figures is not None:
        for r in images.check(figures, write_diffs=False):
            if not (figures / f"{r.fig_id}.png").exists():
                continue  # a partial run (--only) updates the figures it made
            if r.problem or not r.ok:
                result.changes.append(Difference(r.fig_id, "image", "image", "", r.describe()))
            elif r.rms:
                result.moved.append(f"{r.fig_id}: image RMS {r.rms:.3g} (within {r.tol:.3g})")
    if (result.changes or result.new_figures) and not reason:
        raise GoldenError(
            f"{len(result.changes)} change(s) beyond tolerance or of the text"
            + (f", {len(result.new_figures)} new figure(s)" if result.new_figures else "")
            + "; nothing written. Give the reason: make golden REASON='...'"
        )
    if dry_run:
        return result
    for path, text in staged.items():
        write_text_atomic(path, text)
        result.written.append(path)
    if figures is not None:
        _, changed = images.update(figures)
        result.written += [images.baseline(f) for f in changed]
    if reason and (result.changes or result.new_figures or result.moved):
        _log(golden_dir, reason, result)
    return result


def _log(golden_dir: Path, reason: str, result: Update, title: str = "outputs") -> None:
    path = golden_dir / CHANGES
    old = path.read_text(encoding="utf-8") if path.exists() else _CHANGES_HEAD
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    commit = str(provenance.git_state().get("commit") or "unknown")
    entry = [f"## {when}: {title} (on {commit[:12]})", "", f"Reason: {reason}", ""]
    entry += [f"- new figure {f}" for f in result.new_figures]
    entry += [f"- {d.describe()}".replace("\n", "\n  ") for d in result.changes]
    entry += [f"- {m}" for m in result.moved]
    write_text_atomic(path, old.rstrip("\n") + "\n\n" + "\n".join(entry) + "\n")


_CHANGES_HEAD = (
    "# Why the golden outputs changed\n\n"
    "Written by `make golden REASON=...` and `golden tolerances`: each entry gives the reason\n"
    "and every number or line that moved beyond its tolerance (old -> new).\n"
)


def apply_tolerances(report: Path, golden_dir: Path = GOLDEN_DIR, *, reason: str) -> list[str]:
    """Set the tolerances of the golden files from a reproducibility report's spreads.

    Values and words are kept; each measured number gets ``max(SAFETY * spread, floor)``.
    Returns one line per tolerance that changed (old -> new), also logged in ``CHANGES.md``.
    """
    data = json.loads(Path(report).read_text())
    spreads = {
        k: v["spread"] for k, v in data.get("printed", {}).items() if v.get("spread") is not None
    }
    changed = []
    for path in sorted(golden_dir.glob("*.txt")):
        fig_id = path.stem
        old = parse(path.read_text(encoding="utf-8"))
        texts = []
        for k, text in enumerate(old, 1):
            new = _golden_text("\n".join(plain(x) for x in _lines(text)), text, spreads, fig_id, k)
            for j, (a, b) in enumerate(zip(_lines(text), _lines(new), strict=True), 1):
                ga, gb = parse_golden_line(a), parse_golden_line(b)
                for x, y in zip(ga.numbers, gb.numbers, strict=True):
                    if x.tol != y.tol:
                        changed.append(
                            f"{fig_id}, {_where(k, j, gb)}: {y.text} ± "
                            f"{_fmt_tol(x.tol) if x.tol is not None else 'exact'} -> ± "
                            f"{_fmt_tol(y.tol) if y.tol is not None else 'exact'}"
                        )
            texts.append(new)
        new_file = render(fig_id, texts)
        if new_file != path.read_text(encoding="utf-8"):
            write_text_atomic(path, new_file)
    img = {f: r["spread"] for f, r in data.get("images", {}).items() if r.get("spread") is not None}
    if img and golden_dir == GOLDEN_DIR:
        changed += images.set_tolerances(img, SAFETY)
    if changed:
        _log(golden_dir, reason, Update(moved=changed), title="tolerances")
    return changed


# ------------------------------------------------------------------------- command line
def _report(comparisons: list[Comparison]) -> int:
    bad = [d for c in comparisons for d in c.differences]
    n_num = sum(c.compared for c in comparisons)
    n_meas = sum(len(c.measured) for c in comparisons)
    for d in bad:
        print(f"DIFF {d.describe()}")
    print(
        f"golden outputs: {len(comparisons)} figures, {n_num} numbers "
        f"({n_meas} measured, within their tolerances; {n_num - n_meas} exact), "
        f"{len(bad)} difference(s)"
    )
    return 1 if bad else 0


def _report_images(results: list[images.ImageResult]) -> int:
    bad = [r for r in results if not r.ok]
    for r in bad:
        print(f"DIFF image {r.describe()}")
    print(f"baseline images: {len(results)} figures, {len(bad)} beyond their RMS tolerance")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ntpcore.pipeline.golden",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--golden-dir", type=Path, default=GOLDEN_DIR, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="cmd", required=True)
    chk = sub.add_parser("check", help="compare executed quick notebooks with tests/golden/")
    chk.add_argument("executed", type=Path)
    chk.add_argument("--figures", type=Path, help="also compare these figures with the baselines")
    up = sub.add_parser("update", help="rewrite tests/golden/ from executed quick notebooks")
    up.add_argument("executed", type=Path)
    up.add_argument("--figures", type=Path, help="also update the baseline images from these")
    up.add_argument("--reason", default=None, help="why numbers moved beyond their tolerance")
    inj = sub.add_parser("inject", help="copy executed notebooks with the golden outputs")
    inj.add_argument("executed", type=Path)
    inj.add_argument("out", type=Path)
    tol = sub.add_parser("tolerances", help="set tolerances from a reproducibility report")
    tol.add_argument("report", type=Path)
    tol.add_argument("--reason", required=True)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "check":
            rc = _report(check(args.executed, args.golden_dir))
            if args.figures is not None:
                rc |= _report_images(images.check(args.figures))
            return rc
        if args.cmd == "inject":
            files = inject_all(args.executed, args.out, args.golden_dir)
            print(f"{len(files)} notebooks with golden outputs in {args.out}")
            return 0
        if args.cmd == "tolerances":
            changed = apply_tolerances(args.report, args.golden_dir, reason=args.reason)
            for line in changed:
                print(line)
            print(f"{len(changed)} tolerance(s) changed; review `git diff tests/golden`")
            return 0
        return _print_update(args.executed, args.reason, args.figures, args.golden_dir)
    except GoldenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _print_update(
    executed: Path, reason: str | None, figures: Path | None, golden_dir: Path
) -> int:
    try:
        res = update(executed, golden_dir, figures=figures, reason=reason, dry_run=True)
    except GoldenError as exc:
        res = update(executed, golden_dir, figures=figures, reason="(dry run)", dry_run=True)
        _print_moves(res)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    _print_moves(res)
    res = update(executed, golden_dir, figures=figures, reason=reason)
    print(f"wrote {len(res.written)} golden file(s); review `git diff tests/golden`")
    return 0


def _print_moves(res: Update) -> None:
    for f in res.new_figures:
        print(f"NEW    {f}")
    for d in res.changes:
        print(f"BEYOND {d.describe()}")
    for m in res.moved:
        print(f"moved  {m}")
    print(
        f"{len(res.changes)} beyond tolerance or of the text, {len(res.moved)} within tolerance, "
        f"{len(res.new_figures)} new figure(s)"
    )


if __name__ == "__main__":
    sys.exit(main())
