"""Code-level mutants (tools.qa.mutants): each mutant is one change of one node, applied
alone; decorated functions are mutated too; a failure is attributed to what caused it."""

import ast
import difflib
import json
import sys

import pytest

from ntpcore.core import paths
from tools.qa import mutants

TOOL = paths.ROOT / "_build" / "mutmut" / "tool"


@pytest.fixture
def mutmut_on_path(monkeypatch):
    if not (TOOL / "mutmut").is_dir():
        pytest.skip("mutmut is installed by make mutants into _build/mutmut/tool")
    monkeypatch.syspath_prepend(str(TOOL))
    yield
    for name in [m for m in sys.modules if m == "mutmut" or m.startswith("mutmut.")]:
        del sys.modules[name]


def test_each_mutant_changes_one_place_of_its_file(mutmut_on_path):
    path = paths.ROOT / "ntpcore" / "core" / "metrics.py"
    population = mutants.generate(path)
    assert len(population) > 10
    original = path.read_text()
    for m in population[:: max(1, len(population) // 8)]:
        code = mutants.mutated_source(m)
        ast.parse(code)  # still Python
        assert code != original
        changed = [
            line
            for line in difflib.unified_diff(original.splitlines(), code.splitlines(), n=0)
            if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))
        ]
        assert changed, m.id
        # the change is the mutant's: its new text is in the lines that differ
        assert m.after.split("\n")[0].strip()[:15] in "\n".join(changed), m.id
        assert m.line >= 1 and m.file == "ntpcore/core/metrics.py"


def test_decorated_experiment_runners_are_mutated(mutmut_on_path):
    """mutmut leaves decorated functions alone (its trampolines copy them); here a node is
    replaced in place, so a cached experiment runner has mutants like any function."""
    path = paths.ROOT / "ntpcore" / "lin" / "experiments" / "toy.py"
    cached = {
        node.name
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and node.decorator_list
    }
    assert cached
    assert cached & {m.function for m in mutants.generate(path)}


def test_a_failure_is_attributed_to_a_claim_a_panel_or_an_error(tmp_path):
    fig = "lin-x"
    (tmp_path / fig).mkdir()
    side = {"claims": [{"id": f"{fig}:a", "blocking": True}, {"id": f"{fig}:b", "blocking": False}]}
    (tmp_path / fig / f"{fig}.json").write_text(json.dumps(side))
    assert mutants._why(tmp_path, fig, "") == ("claim", f"{fig}: {fig}:a")
    assert mutants._why(tmp_path, "lin-y", "... FigureDataError: the figure does not show")[0] == (
        "panel"
    )
    how, by = mutants._why(tmp_path, "lin-y", "x\n  lin-y: cell 3 raised ValueError: bad\n")
    assert how == "crash" and "raised ValueError" in by


def test_a_run_that_prints_other_words_than_its_goldens_is_a_kill(tmp_path):
    # a figure's executed copy that prints its golden outputs passes; one word changed in a
    # checked cell (a mutant that survives every claim but changes what the page says) fails
    import nbformat

    from tools.qa import golden

    fig = "att-reg-path"
    nb = nbformat.read(paths.ROOT / "notebooks" / "att_reg_path.ipynb", as_version=4)
    executed = tmp_path / "executed"
    executed.mkdir()
    (tmp_path / "figures").mkdir()
    good = golden.inject(nb, golden.read_golden(fig), fig)
    nbformat.write(good, executed / f"{fig}.ipynb")
    assert mutants._golden_difference(tmp_path) is None
    shown = next(c for c in good.cells if c.get("outputs")).outputs[0]
    shown.data["text/plain"] = shown.data["text/plain"].replace("hold", "HOLD", 1)
    nbformat.write(good, executed / f"{fig}.ipynb")
    how, by = mutants._golden_difference(tmp_path)
    assert how == "golden" and "HOLD" in by
