"""Publishing is all or nothing per figure (issue 32, item 1: with ``book/executed``
read-only, a figure reported as failed had already replaced its PNG, PDF, data and sidecar in
``book/figures``).

The read-only folder is real: as root (whose writes no mode stops) the publishing step runs
in a forked child as ``nobody`` that owns the tree (:mod:`users`); as an ordinary user it
runs in the test's process.  A failure after some files were replaced (a full disk) is
simulated by making the third rename fail.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

import pytest
import users

from ntpcore.core import io
from ntpcore.runner import planning, registry, staging

FIG = "lin-pub"
OLD = {
    f"figures/{FIG}.png": b"old png",
    f"figures/{FIG}.pdf": b"old pdf",
    f"figures/{FIG}.data.json": b'{"old": "data"}',
    f"figures/{FIG}.json": b'{"old": "sidecar"}',
    "figures/lin-other.png": b"another figure",
    f"executed/{FIG}.ipynb": b'{"old": "notebook"}',
}
NEW = {
    f"staging/figures/{FIG}.png": b"new png",
    f"staging/figures/{FIG}.pdf": b"new pdf",
    f"staging/figures/{FIG}.data.json": b'{"new": "data"}',
    f"staging/figures/{FIG}.json": b'{"new": "sidecar"}',
    f"staging/{FIG}.ipynb": b'{"new": "notebook"}',
}


def _tree(base):
    for name, data in {**OLD, **NEW}.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_bytes(data)
    (base / "failed").mkdir()


def _snapshot(base):
    """Every file (hidden ones included) of the book's two folders, with its bytes."""
    return {
        str(p.relative_to(base)): p.read_bytes()
        for folder in ("figures", "executed")
        for p in sorted((base / folder).rglob("*"))
        if p.is_file()
    }


def _settle(base):
    entry = registry.FigureEntry(FIG, "lin", "-", "t", f"notebooks/{FIG}.ipynb", ())
    job = planning.Job(entry, "paper", {"fig_id": FIG, "profile": "paper"})
    staged = staging.Staged(staging.Outcome(FIG, True, 1.0), "publish")
    return staging.settle(job, staged, base / "staging", base / "figures", base / "executed")


def _settle_as_someone_who_may_not_write(base, read_only):
    """Settle with ``read_only`` (a folder of ``base``) not writable, for real."""
    if users.is_root():
        for p in [base, *base.rglob("*")]:
            os.chown(p, users.NOBODY, users.NOBODY)
    (base / read_only).chmod(0o555)
    try:
        if users.is_root():
            outcome, _ = users.as_another_user(_settle, base)
            return outcome
        return _settle(base)
    finally:
        (base / read_only).chmod(0o755)


@pytest.mark.parametrize("read_only", ["executed", "figures"])
def test_a_figure_that_cannot_be_published_leaves_the_books_files_byte_identical(
    tmp_path, monkeypatch, read_only
):
    with users.shared_dir() if users.is_root() else contextlib.nullcontext(tmp_path) as base:
        _tree(base)
        monkeypatch.setattr(staging, "FAILED_DIR", base / "failed")
        before = _snapshot(base)
        outcome = _settle_as_someone_who_may_not_write(base, read_only)
        assert _snapshot(base) == before
        assert not outcome.ok
        assert f"{base / read_only}: Permission denied" in outcome.message
        assert "Nothing of it was published" in outcome.message
        assert "traceback" not in outcome.message  # issue 32, item 7: there is none
        assert f"its files are kept for reading: {base / 'failed' / FIG}.ipynb" in outcome.message
        assert (base / "failed" / f"{FIG}.ipynb").read_bytes() == NEW[f"staging/{FIG}.ipynb"]


def test_a_failure_after_some_files_were_replaced_puts_the_previous_ones_back(
    tmp_path, monkeypatch
):
    _tree(tmp_path)
    monkeypatch.setattr(staging, "FAILED_DIR", tmp_path / "failed")
    before = _snapshot(tmp_path)
    real, calls = os.replace, []

    def third_fails(src, dst):
        calls.append(dst)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(io.os, "replace", third_fails)
    outcome = _settle(tmp_path)
    assert _snapshot(tmp_path) == before, calls
    assert len(calls) > 3, "two replaced files were put back"
    assert f"{tmp_path / 'figures' / calls[2].name}: No space left on device" in outcome.message


def test_a_published_figure_replaces_every_file_with_the_umask_mode(tmp_path, monkeypatch):
    old = os.umask(0o022)
    try:
        _tree(tmp_path)
    finally:
        os.umask(old)
    outcome = _settle(tmp_path)
    assert outcome.ok, outcome.message
    after = _snapshot(tmp_path)
    assert after == {
        **{
            k.replace("staging/", "", 1).replace(f"{FIG}.ipynb", f"executed/{FIG}.ipynb"): v
            for k, v in NEW.items()
        },
        "figures/lin-other.png": b"another figure",
    }
    assert {stat.S_IMODE((tmp_path / k).stat().st_mode) for k in after} == {0o644}
    assert not list((tmp_path / "staging").rglob("*.*"))


# --------------------------------------------------------------------------- explorations


def _explore(base, seed, replace=False):
    """Stage an exploration of FIG with ``seed`` and settle it into ``base / "explore"``."""
    stage = base / f"staging-{seed}"
    (stage / "figures").mkdir(parents=True)
    for suffix in (".png", ".pdf", ".data.json"):
        (stage / "figures" / f"{FIG}{suffix}").write_bytes(f"seed {seed}".encode())
    (stage / "figures" / f"{FIG}.json").write_text(f'{{"seed": {seed}}}')
    (stage / f"{FIG}.ipynb").write_text(f'{{"seed": {seed}}}')
    entry = registry.FigureEntry(FIG, "lin", "-", "t", f"notebooks/{FIG}.ipynb", ())
    job = planning.Job(entry, "paper", {"seed": seed}, {"seed": seed}, replace=replace)
    staged = staging.Staged(staging.Outcome(FIG, True, 1.0), "publish")
    explore = base / "explore"
    return staging.settle(job, staged, stage, explore, explore)


def test_a_new_exploration_keeps_the_previous_one_unless_told_to_replace_it(tmp_path):
    """Issue 32, item 7: a new exploration of a figure silently replaced the previous one."""
    explore = tmp_path / "explore"
    first = _explore(tmp_path, 3)
    assert first.ok and "previous" not in first.message
    second = _explore(tmp_path, 4)
    assert second.message.endswith(f"(the previous exploration kept in {explore}/previous-1/)")
    assert (explore / f"{FIG}.json").read_text() == '{"seed": 4}'
    kept = explore / "previous-1"
    assert sorted(p.name for p in kept.iterdir()) == sorted(
        f"{FIG}{s}" for s in (".png", ".pdf", ".data.json", ".json", ".ipynb")
    )
    assert {p.read_bytes() for p in kept.glob("*.json")} == {b"seed 3", b'{"seed": 3}'}
    assert "previous-2" in _explore(tmp_path, 5).message
    third = _explore(tmp_path, 6, replace=True)
    assert third.ok and "previous" not in third.message
    assert sorted(p.name for p in explore.glob("previous-*")) == ["previous-1", "previous-2"]
    assert (explore / f"{FIG}.ipynb").read_text() == '{"seed": 6}'
