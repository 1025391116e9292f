"""Adopting make test's run (tools.qa.adopt): only a run that stands for a new one."""

import json

import pytest

from tools.qa import adopt

HEAD = "a" * 40


def _run(tmp_path, **changes):
    run = tmp_path / "run"
    (run / "figures" / "runs").mkdir(parents=True)
    (run / "executed").mkdir()
    for fig in ("lin-a", "lin-b"):
        (run / "executed" / f"{fig}.ipynb").write_text("{}")
        (run / "figures" / f"{fig}.json").write_text("{}")
        (run / "figures" / f"{fig}.png").write_bytes(b"png")
    record = {
        "started": "2026-11-28T12:00:00+00:00",
        "profile": "quick",
        "only": None,
        "complete": True,
        "failed": [],
        "figures": {"lin-a": 1.0, "lin-b": 2.0},
        "cache": {"cold": True},
        "git": {"commit": HEAD, "dirty": False},
        **changes,
    }
    (run / "figures" / "runs" / "20261128T120000Z-1-quick.json").write_text(json.dumps(record))
    return run


@pytest.fixture(autouse=True)
def _checkout(monkeypatch):
    monkeypatch.setattr(adopt, "git_state", lambda: {"commit": HEAD, "dirty": False})
    monkeypatch.setattr(adopt, "load_registry", lambda: {"lin-a": None, "lin-b": None})


def test_a_complete_cold_run_of_this_commit_is_adopted_and_copied(tmp_path):
    run = _run(tmp_path)
    rec = adopt.adoptable(run, profile="quick", cold=True)
    assert rec["figures"] == {"lin-a": 1.0, "lin-b": 2.0}
    n = adopt.copy_run(run, tmp_path / "book" / "executed", tmp_path / "book" / "figures")
    assert n == 7
    assert (tmp_path / "book" / "figures" / "lin-b.png").read_bytes() == b"png"
    assert (tmp_path / "book" / "figures" / "runs").is_dir()


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"profile": "paper"}, "profile 'paper'"),
        ({"failed": ["lin-b"]}, "failed figures"),
        ({"only": ["lin-a"]}, "a partial run"),
        ({"git": {"commit": "b" * 40, "dirty": False}}, "made at commit"),
        ({"git": {"commit": HEAD, "dirty": True}}, "uncommitted changes"),
        ({"cache": {"cold": False}}, "empty cache"),
        ({"figures": {"lin-a": 1.0}}, "figures not in the run: \\['lin-b'\\]"),
    ],
)
def test_a_run_that_cannot_stand_for_a_new_one_is_refused_with_the_reason(tmp_path, changes, why):
    with pytest.raises(adopt.AdoptError, match=why):
        adopt.adoptable(_run(tmp_path, **changes), profile="quick", cold=True)


def test_a_missing_executed_copy_is_refused(tmp_path):
    run = _run(tmp_path)
    (run / "executed" / "lin-b.ipynb").unlink()
    with pytest.raises(adopt.AdoptError, match="no executed copy of lin-b"):
        adopt.adoptable(run, profile="quick")
