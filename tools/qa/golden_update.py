r"""Changing the golden outputs (``tests/golden/``), never silently.

:func:`update` (``make golden``) rewrites the golden files from executed quick notebooks and
prints every number that moves (old -> new, relative change) and every line that changes; a
change beyond a tolerance, or of the text, is refused unless a reason is given, which is
recorded in ``tests/golden/CHANGES.md``.  Tolerances change only by :func:`apply_tolerances`
from a reproducibility report (:mod:`tools.qa.reproducibility`), for review with
``git diff tests/golden``.  What the files hold and how a run is compared with them:
:mod:`tools.qa.golden`.

The quick profile, which CI runs, leaves out the claims of the paper profile, and those whose
step it does not reach (their golden lines say ``SKIP``).  :func:`record_paper_run` keeps,
in ``tests/golden/paper-claims.json``, how they came out in the last complete paper run
(and on which commit); a test refuses a ``SKIP`` claim that is not there, so a new one
cannot land without a paper run.

Command line::

    python -m tools.qa.golden_update update _build/test/executed [--reason "..."]
    python -m tools.qa.golden_update tolerances results/reproducibility/report.json
    python -m tools.qa.golden_update paper book/figures      # after make book (paper profile)
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ntpcore.core.io import write_text_atomic
from ntpcore.figure import provenance
from tools.qa import images
from tools.qa.golden import (
    GOLDEN_DIR,
    Difference,
    claim_tags,
    compare,
    executed_notebooks,
    extract,
    line_label,
    parse,
    rel_change,
    render,
    text_lines,
)
from tools.qa.printed import (
    NUMBER,
    SAFETY,
    GoldenError,
    fmt_tol,
    parse_golden_line,
    plain,
    segments,
    suggest_tolerance,
    tokenize,
)

__all__ = ["CHANGES", "Update", "apply_tolerances", "number_key", "update"]

CHANGES = "CHANGES.md"


def _mark(rline: str, tols: list[float | None]) -> str:
    """``rline`` with its measured numbers written ``⟦value ± tol⟧`` (``tols`` per number)."""
    it = iter(tols)

    def sub(m: re.Match) -> str:
        tol = next(it)
        return m.group(0) if tol is None else f"⟦{m.group(0)} ± {fmt_tol(tol)}⟧"

    parts, _ = segments(rline)
    return "".join(NUMBER.sub(sub, text) for text, _, _ in parts)


def _golden_text(
    run_text: str,
    old_text: str | None,
    spreads: dict[str, float] | None,
    fig_id: str,
    k: int,
    *,
    widen_only: bool = False,
) -> str:
    """A cell's new golden text: the run's numbers, each measured one with its tolerance.

    The tolerance of a number already in the golden file at the same place (same words) is
    kept, unless ``spreads`` (from a reproducibility report) gives a new one (with
    ``widen_only``, only a wider one); a new number gets its spread's tolerance, or its floor
    when it was not measured.
    """
    old = text_lines(old_text or "")
    out = []
    for j, rl in enumerate(text_lines(run_text), 1):
        r = tokenize(rl)
        g = parse_golden_line(old[j - 1]) if j <= len(old) else None
        same = g is not None and g.words == r.words and len(g.numbers) == len(r.numbers)
        tols: list[float | None] = []
        for i, rn in enumerate(r.numbers):
            spread = (spreads or {}).get(number_key(fig_id, k, j, i))
            old_tol = g.numbers[i].tol if same else None
            if spread is not None and (rn.measured or spread > 0):
                tol = suggest_tolerance(rn, spread)
                tols.append(max(tol, old_tol) if widen_only and old_tol is not None else tol)
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
    for nb_path in executed_notebooks(executed):
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
                f"{fig_id}, {w}: {g} -> {r} ({rel_change(float(g), float(r))}, "
                f"within ± {fmt_tol(t)})"
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


def apply_tolerances(
    report: Path, golden_dir: Path = GOLDEN_DIR, *, reason: str, replace: bool = False
) -> list[str]:
    """Set the tolerances of the golden files from a reproducibility report's spreads.

    Values and words are kept; each measured number gets ``max(SAFETY * spread, floor)``.
    A report holds the configurations of one machine, and the tolerances already written hold
    those of the machines before it (whose reports are not kept), so by default a tolerance
    only widens: ``max(old, new)``, and an image's spread is the larger of the two.
    ``replace=True`` recomputes every tolerance from this report alone (after a change that
    makes an old spread meaningless).  A spread whose line has other words in the report than
    in the golden file is skipped: its key (a position on the line) may name another number.
    Returns one line per tolerance that changed (old -> new) or line skipped, also logged in
    ``CHANGES.md``.
    """
    data = json.loads(Path(report).read_text())
    rows = data.get("printed", {})
    spreads = {k: v["spread"] for k, v in rows.items() if v.get("spread") is not None}
    by_line: dict[str, list[str]] = {}  # "fig/cell/line" -> the keys of its numbers
    for key in spreads:
        by_line.setdefault(key.rsplit("/", 1)[0], []).append(key)
    changed = []
    for path in sorted(golden_dir.glob("*.txt")):
        fig_id = path.stem
        old = parse(path.read_text(encoding="utf-8"))
        texts = []
        for k, text in enumerate(old, 1):
            for j, line in enumerate(text_lines(text), 1):
                # a number's key is its position; after a line's words changed (a number
                # added to a statement) the report's key may name another number of it
                words = parse_golden_line(line).words
                keys = by_line.get(f"{fig_id}/{k}/{j}", [])
                if any(rows[key].get("words") not in (None, words) for key in keys):
                    for key in keys:
                        del spreads[key]
                    changed.append(f"{fig_id}, cell {k}, line {j}: skipped, its words changed")
            new = _golden_text(
                "\n".join(plain(x) for x in text_lines(text)),
                text,
                spreads,
                fig_id,
                k,
                widen_only=not replace,
            )
            for j, (a, b) in enumerate(zip(text_lines(text), text_lines(new), strict=True), 1):
                ga, gb = parse_golden_line(a), parse_golden_line(b)
                for x, y in zip(ga.numbers, gb.numbers, strict=True):
                    if x.tol != y.tol:
                        changed.append(
                            f"{fig_id}, {line_label(k, j, gb)}: {y.text} ± "
                            f"{fmt_tol(x.tol) if x.tol is not None else 'exact'} -> ± "
                            f"{fmt_tol(y.tol) if y.tol is not None else 'exact'}"
                        )
            texts.append(new)
        new_file = render(fig_id, texts)
        if new_file != path.read_text(encoding="utf-8"):
            write_text_atomic(path, new_file)
    img = {f: r["spread"] for f, r in data.get("images", {}).items() if r.get("spread") is not None}
    if img and golden_dir == GOLDEN_DIR:
        changed += images.set_tolerances(img, SAFETY, widen_only=not replace)
    if changed:
        _log(golden_dir, reason, Update(moved=changed), title="tolerances")
    return changed


PAPER_RECORD = GOLDEN_DIR / "paper-claims.json"


def record_paper_run(figures: Path, path: Path = PAPER_RECORD) -> dict:
    """Write the claims that the quick profile leaves out (``SKIP`` in the golden files:
    paper-only claims, and those whose step the quick run does not reach) as a complete
    paper-profile run found them (its sidecars in ``figures``, one per registered figure) to
    ``path``: per figure, the commit it ran on and each claim's outcome, ``pass`` or ``known
    deviation`` (failed inside its band).  Refuses a run that misses a figure, is not the
    paper profile, or has one of these claims failed or not evaluated."""
    from ntpcore.runner.registry import load_registry

    out: dict[str, dict] = {}
    problems = []
    for fig_id in sorted(load_registry()):
        side = figures / f"{fig_id}.json"
        if not side.exists():
            problems.append(f"{fig_id}: no sidecar in {figures}")
            continue
        data = json.loads(side.read_text(encoding="utf-8"))
        if data.get("profile") != "paper":
            problems.append(f"{fig_id}: profile {data.get('profile')!r}, not the paper profile")
            continue
        found = {c["id"].removeprefix(f"{fig_id}:"): c for c in data.get("claims", [])}
        held = {}
        skipped = sorted(k for k, tag in claim_tags(fig_id, path.parent).items() if tag == "SKIP")
        for short in skipped:
            c = found.get(short)
            if c is None:
                problems.append(f"{fig_id}:{short}: not in the paper run")
            elif c["status"] == "pass":
                held[short] = "pass"
            elif c["status"] == "fail" and c.get("known_deviation") and not c.get("blocking"):
                held[short] = "known deviation"
            else:
                problems.append(f"{fig_id}:{short}: {c['status']} in the paper profile")
        git = data.get("git") or {}
        out[fig_id] = {"commit": git.get("commit"), "dirty": git.get("dirty"), "claims": held}
    if problems:
        raise GoldenError("not a complete paper run whose claims hold:\n  " + "\n  ".join(problems))
    record = {
        "about": "the claims the quick profile leaves out (SKIP in the golden files) and how "
        "they came out in the last complete paper-profile run; written by "
        "`python -m tools.qa.golden_update paper book/figures`",
        "figures": out,
    }
    text = json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    write_text_atomic(path, text)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.qa.golden_update",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--golden-dir", type=Path, default=GOLDEN_DIR, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("update", help="rewrite tests/golden/ from executed quick notebooks")
    up.add_argument("executed", type=Path)
    up.add_argument("--figures", type=Path, help="also update the baseline images from these")
    up.add_argument("--reason", default=None, help="why numbers moved beyond their tolerance")
    tol = sub.add_parser("tolerances", help="set tolerances from a reproducibility report")
    tol.add_argument("report", type=Path)
    tol.add_argument("--reason", required=True)
    tol.add_argument(
        "--replace",
        action="store_true",
        help="recompute every tolerance from this report alone (default: only widen them, "
        "keeping what earlier machines measured)",
    )
    pap = sub.add_parser("paper", help="record the SKIP claims as a complete paper run found them")
    pap.add_argument("figures", type=Path, help="the run's figure folder (make book: book/figures)")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "paper":
            rec = record_paper_run(args.figures, args.golden_dir / PAPER_RECORD.name)
            n = sum(len(f["claims"]) for f in rec["figures"].values())
            figs = len(rec["figures"])
            print(f"recorded {n} claim(s) the quick profile leaves out, of {figs} figure(s)")
            return 0
        if args.cmd == "tolerances":
            changed = apply_tolerances(
                args.report, args.golden_dir, reason=args.reason, replace=args.replace
            )
            for line in changed:
                print(line)
            skipped = sum(line.endswith("skipped, its words changed") for line in changed)
            print(
                f"{len(changed) - skipped} tolerance(s) changed, {skipped} line(s) skipped; "
                "review `git diff tests/golden`"
            )
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
