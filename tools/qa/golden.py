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

Where the tolerances come from (:func:`tools.qa.printed.suggest_tolerance`). A last-
bit difference in a floating-point kernel (numpy's SIMD dispatch, OpenBLAS's core type, the
number of threads, torch's CPU capability) can grow through thousands of optimiser steps;
the spread of each printed number across the floating-point configurations one machine can
run is measured by ``make reproducibility`` (:mod:`tools.qa.reproducibility`). A
measured number's tolerance is ``SAFETY`` (:mod:`tools.qa.printed`) times that
spread (max - min over the configurations), and never less than its *floor*: one unit in the
last printed digit (a value next to a rounding boundary can print either way), and for a
claim's measured value at least one unit in its third significant digit (the claims print
three significant digits and drop trailing zeros).

Changing the goldens (:func:`tools.qa.golden_update.update`, ``make golden``) prints
every number that moves (old -> new, relative change) and every line that changes; a change
beyond a tolerance, or of the text, is refused unless a reason is given, which is recorded
in ``tests/golden/CHANGES.md``. Tolerances change only by
:func:`tools.qa.golden_update.apply_tolerances` from a reproducibility report, for
review with ``git diff tests/golden``. The quick-profile figures are compared the same way
with baseline images (:mod:`tools.qa.images`).

Command line (changing the goldens: :mod:`tools.qa.golden_update`)::

    python -m tools.qa.golden check  _build/test/executed
    python -m tools.qa.golden inject _build/test/executed _build/test/nbval
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ntpcore.core import paths
from ntpcore.figure.claims import line_markdown, report_html
from tools.qa import images
from tools.qa.printed import (
    CLAIM,
    SAFETY,
    GoldenError,
    Line,
    Number,
    fmt_tol,
    parse_golden_line,
    plain,
    suggest_tolerance,
    tokenize,
)

__all__ = [
    "executed_notebooks",
    "line_label",
    "rel_change",
    "text_lines",
    "GOLDEN_DIR",
    "SAFETY",
    "TAG",
    "Difference",
    "GoldenError",
    "Line",
    "Number",
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
]

TAG = "nbval-check-output"
GOLDEN_DIR = paths.ROOT / "tests" / "golden"
_HEADER = "=== cell {k}"


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
            m = CLAIM.match(line)
            if not m:
                continue
            tag, full_id = line.split(" ", 2)[:2]
            full_id = full_id.rstrip(":")
            if not full_id.startswith(prefix):
                raise GoldenError(f"{fig_id}: golden claim line of another figure: {line[:80]!r}")
            tags[full_id.removeprefix(prefix)] = tag
    return tags


def text_lines(text: str) -> list[str]:
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
                f"({rel_change(g, r)}; tolerance ± {fmt_tol(self.tol or 0.0)})"
            )
        if self.kind == "image":
            return f"image {self.run}"
        if self.kind == "exact":
            return f"{self.fig_id}, {self.where}: {self.golden} -> {self.run} (printed exactly)"
        return f"{self.fig_id}, {self.where}:\n    golden: {self.golden}\n    run:    {self.run}"


def rel_change(old: float, new: float) -> str:
    if old == new:
        return "unchanged"
    if old == 0:
        return f"{new - old:+.2g} absolute"
    return f"{(new - old) / abs(old):+.2%}"


def line_label(k: int, j: int, line: Line) -> str:
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
        glines, rlines = text_lines(gtext), text_lines(rtext)
        for j in range(max(len(glines), len(rlines))):
            if j >= len(glines) or j >= len(rlines):
                gl = plain(glines[j]) if j < len(glines) else "(no line)"
                rl = rlines[j] if j < len(rlines) else "(no line)"
                out.differences.append(
                    Difference(fig_id, f"cell {k}, line {j + 1}", "text", gl, rl)
                )
                continue
            g, r = parse_golden_line(glines[j]), tokenize(rlines[j])
            where = line_label(k, j + 1, g)
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


def executed_notebooks(executed: Path) -> list[Path]:
    nbs = sorted(executed.glob("*.ipynb"))
    if not nbs:
        raise GoldenError(f"no executed notebooks in {executed}")
    return nbs


def check(executed: Path, golden_dir: Path = GOLDEN_DIR) -> list[Comparison]:
    """Compare every executed notebook in ``executed`` with its golden outputs."""
    return [
        compare(p.stem, read_golden(p.stem, golden_dir), extract(nbformat.read(p, as_version=4)))
        for p in executed_notebooks(executed)
    ]


# ------------------------------------------------------------------------- nbval copies
def outputs(text: str) -> list[nbformat.NotebookNode]:
    """The outputs a kernel gives for a tagged cell that printed ``text``.

    A ledger's report (:meth:`ntpcore.figure.claims.Ledger.report`: a summary line and the
    claim lines under it) is one ``display_data`` output, its plain text those lines and its
    HTML :func:`~ntpcore.figure.claims.report_html` of them; a claim line shown on its own
    (a ledger that does not defer) is a ``display_data`` output whose Markdown is
    :func:`~ntpcore.figure.claims.line_markdown` of it; the lines printed around them are
    stdout streams, split where a display comes, as the kernel flushes them.
    """
    outs: list[nbformat.NotebookNode] = []
    printed: list[str] = []

    def flush() -> None:
        if printed:
            outs.append(nbformat.v4.new_output("stream", name="stdout", text="".join(printed)))
            printed.clear()

    lines = text.splitlines(keepends=True)
    k = 0
    while k < len(lines):
        line = lines[k].rstrip("\n")
        if report_html(line) is not None:  # a report: the summary and its claim lines
            block = [line]
            while k + 1 < len(lines) and line_markdown(lines[k + 1].rstrip("\n")) is not None:
                k += 1
                block.append(lines[k].rstrip("\n"))
            flush()
            plain_block = "\n".join(block)
            data = {"text/plain": plain_block, "text/html": report_html(plain_block)}
            outs.append(nbformat.v4.new_output("display_data", data=data))
        elif (md := line_markdown(line)) is not None:
            flush()
            data = {"text/plain": line, "text/markdown": md}
            outs.append(nbformat.v4.new_output("display_data", data=data))
        else:
            printed.append(lines[k])
        k += 1
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
        text = "\n".join(plain(x) for x in text_lines(text)) + ("\n" if text else "")
        cell.outputs = outputs(text)
        cell.execution_count = cell.execution_count or 1  # nbval compares only run cells
    return nb


def inject_all(executed: Path, out: Path, golden_dir: Path = GOLDEN_DIR) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for nb_path in executed_notebooks(executed):
        nb = inject(
            nbformat.read(nb_path, as_version=4),
            read_golden(nb_path.stem, golden_dir),
            nb_path.stem,
        )
        nbformat.write(nb, out / nb_path.name)
        written.append(out / nb_path.name)
    return written


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
        prog="python -m tools.qa.golden",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--golden-dir", type=Path, default=GOLDEN_DIR, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="cmd", required=True)
    chk = sub.add_parser("check", help="compare executed quick notebooks with tests/golden/")
    chk.add_argument("executed", type=Path)
    chk.add_argument("--figures", type=Path, help="also compare these figures with the baselines")
    inj = sub.add_parser("inject", help="copy executed notebooks with the golden outputs")
    inj.add_argument("executed", type=Path)
    inj.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "check":
            rc = _report(check(args.executed, args.golden_dir))
            if args.figures is not None:
                rc |= _report_images(images.check(args.figures))
            return rc
        files = inject_all(args.executed, args.out, args.golden_dir)
        print(f"{len(files)} notebooks with golden outputs in {args.out}")
        return 0
    except GoldenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
