"""The exercises of the book, and their solutions, run (``notebooks/*_exercises.ipynb``).

Each part of the book ends with exercises whose solutions are cells tagged ``solution``: a
derivation in Markdown (folded in the book) and a code cell that checks the answer against
the package with ledger claims (also folded).  The runner executes the notebooks with the
figures, and a claim that fails fails the build; here the same code runs in this process,
so a solution that rots fails the unit tests too: every solution's check records claims,
every claim holds, and an answer changed on purpose is caught.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import nbformat
import pytest

from ntpcore.core import paths

matplotlib.use("Agg")  # this process only: the notebooks' kernels keep their inline backend

NOTEBOOKS = sorted(paths.NOTEBOOK_DIR.glob("*_exercises.ipynb"))

#: per notebook, one hand-written answer made wrong, and the claim that must catch it
ROTTEN = {
    "lin_exercises.ipynb": (
        "W_star_hand = log2 * np.array([[2 / 3], [-1 / 3], [-1 / 3], [0.0]])",
        "W_star_hand = log2 * np.array([[1 / 3], [-1 / 3], [0.0], [0.0]])",
        "lin-exercises:ex1-w-star",
    ),
    "geo_exercises.ipynb": (
        "L_in_hand = 0.5 * np.log(3) * np.array([[0, 0], [0, -1], [0, 1]])",
        "L_in_hand = np.log(3) * np.array([[0, 0], [0, -1], [0, 1]])",
        "geo-exercises:ex1-l-in",
    ),
    "att_exercises.ipynb": (
        "W_svm_hand[:, 3] = [0, 0, 1, -1]",
        "W_svm_hand[:, 3] = [0, 0, 2, -1]",
        "att-exercises:ex2-w-svm",
    ),
}


def run(path: Path, tmp_path: Path, monkeypatch, edit: tuple[str, str] | None = None):
    """Execute the notebook's code cells here (the install cell apart); return the ledger
    and, per solution cell, the number of claims it recorded."""
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path))
    nb = nbformat.read(path, as_version=4)
    ns: dict = {}
    recorded = []
    for k, cell in enumerate(nb.cells):
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code" or "ntp-install" in tags:
            continue
        source = cell.source
        if edit is not None:
            source = source.replace(*edit)
        before = len(ns["ledger"].claims) if "ledger" in ns else 0
        exec(compile(source, f"{path.name}, cell {k}", "exec"), ns)  # noqa: S102 - our notebooks
        if "solution" in tags:
            recorded.append((k, len(ns["ledger"].claims) - before))
    return ns["ledger"], recorded


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_solution_checks_its_answer_and_every_answer_holds(path, tmp_path, monkeypatch):
    ledger, recorded = run(path, tmp_path, monkeypatch)
    assert recorded and all(n >= 1 for _, n in recorded), f"a solution checks nothing: {recorded}"
    failed = [f"{c.id}: {c.statement} (measured {c.shown})" for c in ledger.claims if c.blocking]
    assert not failed, failed
    assert (tmp_path / f"{ledger.fig_id}.png").exists()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_wrong_answer_fails_its_check(path, tmp_path, monkeypatch):
    old, new, claim_id = ROTTEN[path.name]
    sources = [c.source for c in nbformat.read(path, as_version=4).cells]
    assert any(old in src for src in sources), f"{path.name}: the answer to change is gone"
    ledger, _ = run(path, tmp_path, monkeypatch, edit=(old, new))
    failed = [c.id for c in ledger.claims if c.blocking]
    assert failed and failed[0] == claim_id, failed  # later checks that use it may fail too


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_exercise_has_a_solution_and_a_check(path):
    """Three to five exercises per part, each followed by its solution in words (folded by the
    runner in the book) and the solution's check (hidden until opened)."""
    cells = nbformat.read(path, as_version=4).cells
    starts = [k for k, c in enumerate(cells) if re.match(r"## Exercise \d", c.source)]
    assert 3 <= len(starts) <= 5, path.name
    for k in starts:
        words, check = cells[k + 1], cells[k + 2]
        assert words.cell_type == "markdown" and "solution" in words.metadata.get("tags", [])
        assert words.source.startswith("**Solution"), f"{path.name}, cell {k + 1}"
        assert check.cell_type == "code" and "solution" in check.metadata.get("tags", [])
        assert "nbval-check-output" in check.metadata["tags"], "the golden outputs hold its lines"


def test_every_part_has_its_exercises():
    assert sorted(p.name.split("_")[0] for p in NOTEBOOKS) == ["att", "geo", "lin"]
