"""Golden outputs: what nbval compares the quick-profile notebooks with.

The cells tagged ``nbval-check-output`` print the claims and key numbers of a figure at a
stated precision.  Comparing a notebook with the output of the same run proves nothing, so
the reference outputs are kept in the repository, one text file per figure
(``tests/golden/<fig_id>.txt``), and change only by a deliberate command::

    python -m ntpcore.pipeline.golden update _build/test/executed   # after reviewing the diff
    python -m ntpcore.pipeline.golden inject _build/test/executed _build/test/nbval

``inject`` copies each executed notebook with the golden text in place of the outputs of
its tagged cells; ``pytest --nbval-lax`` on the copies then re-executes every notebook and
fails, with a readable diff, where a printed number moved.  ``make test`` does both.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from ntpcore.core.io import write_text_atomic
from ntpcore.pipeline import paths

__all__ = ["GOLDEN_DIR", "TAG", "GoldenError", "extract", "inject", "parse", "render"]

TAG = "nbval-check-output"
GOLDEN_DIR = paths.ROOT / "tests" / "golden"
_HEADER = "=== cell {k}"


class GoldenError(RuntimeError):
    """A golden file is missing or does not fit its notebook."""


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
    lines = [
        f"# Golden outputs of the {TAG} cells of {fig_id} (quick profile).",
        "# Change them only deliberately: python -m ntpcore.pipeline.golden update <executed>",
    ]
    for k, text in enumerate(texts, 1):
        lines.append(_HEADER.format(k=k))
        if text:
            lines.append(text.rstrip("\n"))
    return "\n".join(lines) + "\n"


def parse(text: str) -> list[str]:
    """Inverse of :func:`render`."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("=== cell "):
            blocks.append([])
        elif blocks:
            blocks[-1].append(line)
        elif not line.startswith("#"):
            raise GoldenError(f"text before the first cell header: {line!r}")
    return ["\n".join(b) + "\n" if b else "" for b in blocks]


def inject(nb: nbformat.NotebookNode, texts: list[str], fig_id: str) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose tagged cells carry the golden ``texts`` as their output."""
    nb = nbformat.from_dict(nb)
    cells = _tagged(nb)
    if len(cells) != len(texts):
        raise GoldenError(
            f"{fig_id}: {len(cells)} tagged cells but {len(texts)} golden outputs; "
            f"review and run `python -m ntpcore.pipeline.golden update`"
        )
    for cell, text in zip(cells, texts, strict=True):
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)] if text else []
        cell.execution_count = cell.execution_count or 1  # nbval compares only run cells
    return nb


def update(executed: Path, golden_dir: Path = GOLDEN_DIR) -> list[Path]:
    written = []
    for nb_path in sorted(executed.glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        target = golden_dir / f"{nb_path.stem}.txt"
        write_text_atomic(target, render(nb_path.stem, extract(nb)))
        written.append(target)
    return written


def inject_all(executed: Path, out: Path, golden_dir: Path = GOLDEN_DIR) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for nb_path in sorted(executed.glob("*.ipynb")):
        golden = golden_dir / f"{nb_path.stem}.txt"
        if not golden.exists():
            raise GoldenError(
                f"no golden outputs for {nb_path.stem} ({golden}); review the notebook's "
                f"tagged cells and run `python -m ntpcore.pipeline.golden update`"
            )
        nb = inject(nbformat.read(nb_path, as_version=4), parse(golden.read_text()), nb_path.stem)
        nbformat.write(nb, out / nb_path.name)
        written.append(out / nb_path.name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ntpcore.pipeline.golden", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("update", help="write tests/golden/ from executed quick notebooks")
    up.add_argument("executed", type=Path)
    inj = sub.add_parser("inject", help="copy executed notebooks with the golden outputs")
    inj.add_argument("executed", type=Path)
    inj.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if not args.executed.is_dir() or not any(args.executed.glob("*.ipynb")):
        print(f"error: no executed notebooks in {args.executed}", file=sys.stderr)
        return 2
    try:
        if args.cmd == "update":
            files = update(args.executed)
            print(
                f"wrote {len(files)} golden files to {GOLDEN_DIR}; review `git diff tests/golden`"
            )
        else:
            files = inject_all(args.executed, args.out)
            print(f"{len(files)} notebooks with golden outputs in {args.out}")
    except GoldenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
