"""Claims with teeth: figure source data, series checks and the mutation catalogue."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from ntpcore.figure import sourcedata  # noqa: E402
from ntpcore.runner.registry import load_registry  # noqa: E402
from tools.qa import mutations

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "book" / "_ext"))

K = np.arange(0, 11, dtype=float)


def _figure(swap: bool = False):
    fig, (a, c) = plt.subplots(1, 2)
    cos, corr = 1 - 1 / (K + 1), 1 - 0.5 / (K + 1)
    labels = ["cos", "corrected"][::-1] if swap else ["cos", "corrected"]
    a.plot(K, K**2, label="CE")
    c.plot(K[1:], cos[1:], label=labels[0])  # from step one, as on a log axis
    c.plot(K[1:], corr[1:], label=labels[1])
    c.scatter([1, 2], [3, 4], label="points")
    return fig, {(0, "CE"): (K, K**2), (1, "cos"): (K, cos), (1, "corrected"): (K, corr)}


def test_source_data_records_every_panel_and_series():
    fig, _ = _figure()
    data = sourcedata.extract(fig)
    assert [p["panel"] for p in data["panels"]] == [0, 1]
    series = data["panels"][1]["series"]
    assert [s["label"] for s in series] == ["cos", "corrected", "points"]
    assert series[0]["x"] == list(K[1:]) and series[2]["kind"] == "points"
    plt.close(fig)


def test_a_series_check_passes_the_right_figure_and_fails_swapped_labels():
    fig, expected = _figure()
    assert sourcedata.check_series(fig, expected) == 3
    plt.close(fig)
    fig, expected = _figure(swap=True)
    with pytest.raises(sourcedata.FigureDataError, match="labelled 'cos' does not plot"):
        sourcedata.check_series(fig, expected)
    plt.close(fig)


def test_a_series_from_another_run_or_a_missing_label_fails():
    fig, expected = _figure()
    other = {(1, "cos"): (K, 1 - 1 / (K + 2))}
    with pytest.raises(sourcedata.FigureDataError, match="does not plot"):
        sourcedata.check_series(fig, other)
    with pytest.raises(sourcedata.FigureDataError, match="0 lines labelled 'Adam'"):
        sourcedata.check_series(fig, {(1, "Adam"): (K, K)})
    shifted = {(1, "cos"): (K + 1, 1 - 1 / (K + 1))}  # against the wrong x axis
    with pytest.raises(sourcedata.FigureDataError):
        sourcedata.check_series(fig, shifted)
    plt.close(fig)


# ------------------------------------------------------------------------ catalogue
def test_the_catalogue_is_at_least_thirty_mutations_on_registered_figures():
    muts = mutations.load_catalogue()
    real = [m for m in muts if m.kind != "control"]
    assert len(real) >= 30
    assert {m.paper for m in real} == {"lin", "geo", "att"}
    assert sum(m.kind == "plot" for m in real) >= 3
    assert any(m.kind == "control" for m in muts)
    registry = load_registry()
    for m in muts:
        assert set(m.figures) <= set(registry), m.name
    assert sum(bool(m.explained) for m in real) <= 2


def test_a_mutation_must_mark_that_it_ran():
    with pytest.raises(ValueError, match="never calls _applied"):
        mutations.Mutation("x", "loss", "lin", "?", ("lin-gd-direction",), "pass\n")
    with pytest.raises(ValueError, match="kind"):
        mutations.Mutation("x", "typo", "lin", "?", ("lin-gd-direction",), "_applied()\n")


@pytest.mark.long
def test_swapped_labels_in_the_training_plot_fail_the_gd_figure():
    """Issue 21's example: two legend labels of Fig. 4's panel (c) swapped."""
    (mut,) = [m for m in mutations.load_catalogue() if m.name == "lin-plot-labels-swapped"]
    environ = dict(os.environ)
    out = mutations.run_mutation(mut)
    assert out.applied and out.killed
    assert any("FigureDataError" in b for b in out.by), out.by
    # the runner ran in this process: its environment is restored, and the next mutation of
    # the same figure gets a new kernel (a control on it survives: no kernel kept the error)
    assert dict(os.environ) == environ
    control = mutations.Mutation(
        "gd-control", "control", "lin", "nothing", ("lin-gd-direction",), "pass\n"
    )
    after = mutations.run_mutation(control)
    assert not after.killed and not after.by, after.by


def test_the_claims_page_states_the_score():
    import ntpclaims

    data = {
        "when": "2026-11-24T12:00:00+00:00",
        "commit": "abc1234567890",
        "profile": "quick",
        "killed": 1,
        "total": 2,
        "outcomes": [
            {
                "name": "c",
                "kind": "control",
                "what": "nothing",
                "figures": ["f"],
                "applied": True,
                "killed": False,
                "by": [],
            },
            {
                "name": "a",
                "kind": "loss",
                "what": "x",
                "figures": ["f"],
                "applied": True,
                "killed": True,
                "by": ["claims: f:y"],
            },
            {
                "name": "b",
                "kind": "plot",
                "what": "y",
                "figures": ["f"],
                "applied": True,
                "killed": False,
                "by": [],
                "explained": "no honest claim",
            },
        ],
    }
    text = ntpclaims.mutations_text(data)
    assert "**Mutation score: 1/2 killed**" in text and "2026-11-24" in text
    assert "`claims: f:y`" in text and "**survived**: no honest claim" in text


def test_a_mutation_replaces_a_function_wherever_the_package_binds_it(tmp_path, monkeypatch):
    """``_replace`` (the catalogue's prelude) reaches a name imported with ``from ... import``
    by a module loaded before the mutation and by one loaded after it."""
    pkg = tmp_path / "ntpcore_mutdemo"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "maths.py").write_text("def f():\n    return 1\n")
    (pkg / "early.py").write_text("from ntpcore_mutdemo.maths import f\n")
    (pkg / "late.py").write_text("from ntpcore_mutdemo.maths import f\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    early = importlib.import_module("ntpcore_mutdemo.early")
    maths = importlib.import_module("ntpcore_mutdemo.maths")
    namespace: dict = {}
    exec(mutations._PRELUDE, namespace)  # noqa: S102 - the catalogue's own prelude
    namespace["_replace"](maths, "f", lambda: 2)
    late = importlib.import_module("ntpcore_mutdemo.late")
    assert maths.f() == early.f() == late.f() == 2
    for name in ("ntpcore_mutdemo", "ntpcore_mutdemo.maths", "ntpcore_mutdemo.early",
                 "ntpcore_mutdemo.late"):  # fmt: skip
        sys.modules.pop(name, None)
