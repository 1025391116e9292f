"""The computation cache survives a damaged entry and computes a shared entry once."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import users

from ntpcore.core import cache
from ntpcore.errors import ParameterError


@dataclasses.dataclass(frozen=True)
class _Cfg:
    n: int


CALLS: list[int] = []


@cache.cached
def _square(cfg: _Cfg) -> dict:
    CALLS.append(cfg.n)
    return {"x": np.arange(cfg.n, dtype=float) ** 2, "total": float(cfg.n)}


def _entry(tmp_path, cfg):
    folder = tmp_path / _square.cache_qualname
    key = cache.cache_key(_square.cache_qualname, cfg)
    return folder / f"{key}.json", folder / f"{key}.npz"


@pytest.mark.parametrize(
    "damage",
    ["truncate-npz", "empty-json", "garbled-json", "flip-npz-byte", "missing-npz"],
)
def test_a_corrupt_entry_is_discarded_with_a_warning_and_recomputed(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path))
    CALLS.clear()
    cfg = _Cfg(50)
    first = _square(cfg)
    meta, npz = _entry(tmp_path, cfg)
    if damage == "truncate-npz":
        npz.write_bytes(npz.read_bytes()[:40])
    elif damage == "empty-json":
        meta.write_text("")
    elif damage == "garbled-json":
        meta.write_text('{"scalars": ')
    elif damage == "flip-npz-byte":
        raw = bytearray(npz.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        npz.write_bytes(bytes(raw))
    else:
        npz.unlink()
    with pytest.warns(RuntimeWarning, match=r"discarding a corrupt cache entry .*\.json"):
        again = _square(cfg)
    assert CALLS == [50, 50], "the damaged entry must be recomputed"
    np.testing.assert_array_equal(again["x"], first["x"])
    # ... and the entry written anew reads back without a warning
    np.testing.assert_array_equal(_square(cfg)["x"], first["x"])
    assert CALLS == [50, 50]
    assert json.loads(meta.read_text())["npz_sha256"]


WORKER = textwrap.dedent(
    """
    import dataclasses, os, sys, time
    from ntpcore.core import cache

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        n: int

    def slow(cfg):
        with open(os.environ["CALL_LOG"], "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        time.sleep(float(os.environ.get("SLEEP", "1.5")))
        return {"value": cfg.n * 2}

    slow.__module__ = "lockcheck"
    slow.__qualname__ = "slow"
    print(cache.cached(slow)(Cfg(21))["value"])
    """
)


def test_two_processes_needing_the_same_entry_compute_it_once(tmp_path):
    log = tmp_path / "calls.log"
    env = {**__import__("os").environ, "NTP_CACHE_DIR": str(tmp_path / "c"), "CALL_LOG": str(log)}
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs == ["42", "42"]
    assert len(log.read_text().split()) == 1, "the computation ran in both processes"


def _workers(tmp_path, n, **env):
    log = tmp_path / "calls.log"
    env = {**os.environ, "NTP_CACHE_DIR": str(tmp_path / "c"), "CALL_LOG": str(log), **env}
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(n)
    ]
    return procs, log


def test_with_the_lock_off_each_process_computes_what_it_lacks(tmp_path):
    procs, log = _workers(tmp_path, 2, NTP_CACHE_LOCK="0")
    assert [p.communicate(timeout=120)[0].strip() for p in procs] == ["42", "42"]
    assert len(log.read_text().split()) == 2, "NTP_CACHE_LOCK=0 must restore duplicate work"


def test_a_caller_computes_first_what_another_process_is_not_computing(tmp_path, monkeypatch):
    """``in_flight`` sees the other process's lock; ``free_first`` computes the free entry
    first, then waits for the shared one and reads it instead of computing it."""
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path / "c"))
    (other,), log = _workers(tmp_path, 1, SLEEP="4")
    deadline = time.time() + 60
    while time.time() < deadline and not (log.exists() and log.read_text().strip()):
        time.sleep(0.05)
    assert log.exists(), "the other process never started computing"

    calls = []

    def slow(cfg):
        calls.append(cfg.n)
        return {"value": cfg.n * 2}

    slow.__module__, slow.__qualname__ = "lockcheck", "slow"  # the worker's entry
    fn = cache.cached(slow)
    Cfg = dataclasses.make_dataclass("Cfg", [("n", int)], frozen=True)
    assert fn.in_flight(Cfg(21)) and not fn.in_flight(Cfg(5))
    order = []
    out = cache.free_first([Cfg(21), Cfg(5)], lambda c: order.append(c.n) or fn(c), fn.in_flight)
    assert [r["value"] for r in out] == [42, 10]  # results in the order asked for
    assert order == [5, 21], "the free entry must be computed while the other one is in flight"
    assert calls == [5], "the entry computed by the other process was computed again"
    assert other.communicate(timeout=60)[0].strip() == "42" and other.returncode == 0
    assert not fn.in_flight(Cfg(21))  # stored: nothing in flight


def test_free_first_keeps_the_order_when_nothing_is_in_flight():
    assert cache.free_first([3, 1, 2], lambda x: {"x": x}, lambda x: False) == [
        {"x": 3},
        {"x": 1},
        {"x": 2},
    ]
    busy = {1}
    assert [r["x"] for r in cache.free_first([1, 2, 3], lambda x: {"x": x}, busy.__contains__)] == [
        1,
        2,
        3,
    ]


def test_free_first_does_other_work_once_before_it_waits():
    """``meanwhile`` runs once, after the free items and before the first item another
    process holds; never when nothing is in flight."""
    log = []
    compute = lambda x: log.append(x) or {"x": x}  # noqa: E731
    out = cache.free_first([1, 2, 3, 4], compute, {1, 3}.__contains__, lambda: log.append("m"))
    assert [r["x"] for r in out] == [1, 2, 3, 4]
    assert log == [2, 4, "m", 1, 3]
    log.clear()
    cache.free_first([1, 2], compute, lambda x: False, lambda: log.append("m"))
    assert log == [1, 2]


def test_a_lock_setting_that_is_not_on_or_off_is_refused(monkeypatch):
    monkeypatch.setenv("NTP_CACHE_LOCK", "sometimes")
    with pytest.raises(ParameterError, match="NTP_CACHE_LOCK must be"):
        cache.lock_enabled()


# --------------------------------------------------------------------------- shared caches
# Issue 32: every entry was mode 0600 whatever the umask, so in a cache shared by several users
# (NTP_CACHE_DIR on a cluster) another user's entries were "corrupt", deleted and recomputed.


@contextlib.contextmanager
def _umask(mask):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077], ids=["022", "002", "077"])
def test_entries_take_the_mode_the_umask_gives(tmp_path, monkeypatch, mask):
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path))
    with _umask(mask):
        _square(_Cfg(3))
    meta, npz = _entry(tmp_path, _Cfg(3))
    lock = meta.with_suffix(".lock")
    for path in (meta, npz, lock):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path.name
    assert stat.S_IMODE(meta.parent.stat().st_mode) == 0o777 & ~mask


def _calls_after(cfgs):
    """In the other user's process: the results of ``_square`` and the calls it made."""
    CALLS.clear()
    return [float(_square(c)["total"]) for c in cfgs], list(CALLS)


def test_two_users_sharing_a_cache_reuse_each_others_entries(monkeypatch):
    """Root writes entries under umask 002 in a folder of its group; a second user (uid
    65534, a member of root's group) reads them without computing, and adds its own, which
    root then reads: the cache does not thrash."""
    users.need_root()
    with users.shared_dir() as shared:
        monkeypatch.setenv("NTP_CACHE_DIR", str(shared / "cache"))
        CALLS.clear()
        with _umask(0o002):
            _square(_Cfg(7))
        (values, calls), caught = users.as_another_user(
            _calls_after, [_Cfg(7), _Cfg(8)], groups=(os.getegid(),), umask=0o002
        )
        assert (values, calls, caught) == ([7.0, 8.0], [8], [])  # 7 reused, 8 computed
        meta8, npz8 = _entry(shared / "cache", _Cfg(8))
        assert meta8.stat().st_uid == users.NOBODY
        assert stat.S_IMODE(npz8.stat().st_mode) == 0o664
        CALLS.clear()
        np.testing.assert_array_equal(_square(_Cfg(8))["x"], np.arange(8.0) ** 2)
        assert CALLS == []


def test_under_umask_022_another_user_reads_the_entries_and_cannot_add_to_them(monkeypatch):
    """The README's advice is umask 002 and a shared group; under 022 a second user still
    reuses every entry, and one it cannot store is computed with a warning, not an error."""
    users.need_root()
    with users.shared_dir() as shared:
        monkeypatch.setenv("NTP_CACHE_DIR", str(shared / "cache"))
        with _umask(0o022):
            _square(_Cfg(7))
        (values, calls), caught = users.as_another_user(_calls_after, [_Cfg(7), _Cfg(9)])
        assert (values, calls) == ([7.0, 9.0], [9])
        (message,) = caught
        assert "computed but not stored in the cache: Permission denied" in message
        assert "owner root, mode 0755" in message
        assert not _entry(shared / "cache", _Cfg(9))[0].exists()


def test_an_entry_this_user_cannot_read_is_unreadable_not_corrupt_and_left_in_place(
    tmp_path, monkeypatch
):
    """As root: the entry is root's, mode 0600 (what every entry was), in a folder anyone
    may write (so the second user could delete it), and the second user reads it.  As an
    ordinary user: the entry is made mode 0000 (the test's own user cannot read it)."""
    if users.is_root():
        with users.shared_dir() as shared:
            _check_unreadable(shared, monkeypatch, other=True)
    else:
        _check_unreadable(tmp_path, monkeypatch, other=False)


def _check_unreadable(base, monkeypatch, other):
    monkeypatch.setenv("NTP_CACHE_DIR", str(base / "cache"))
    _square(_Cfg(6))
    meta, npz = _entry(base / "cache", _Cfg(6))
    meta.parent.chmod(0o777)
    for p in (meta, npz):
        p.chmod(0o600 if other else 0o000)
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in (meta, npz)}
    if other:
        (values, calls), caught = users.as_another_user(_calls_after, [_Cfg(6)])
    else:
        with pytest.warns(RuntimeWarning) as record:
            values, calls = _calls_after([_Cfg(6)])
        caught = [str(w.message) for w in record]
    assert (values, calls) == ([6.0], [6])  # computed, correctly
    (message,) = caught
    assert f"cannot read the cache entry {meta} (Permission denied; owner " in message
    assert f"mode {0o600 if other else 0:04o}" in message
    assert "unreadable, not damaged, so it is left in place" in message
    assert "corrupt" not in message
    assert {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in (meta, npz)} == before


def test_a_damaged_entry_of_another_user_is_never_deleted(monkeypatch):
    users.need_root()
    with users.shared_dir() as shared:
        monkeypatch.setenv("NTP_CACHE_DIR", str(shared / "cache"))
        _square(_Cfg(5))
        meta, npz = _entry(shared / "cache", _Cfg(5))
        meta.parent.chmod(0o777)
        meta.write_text('{"scalars": ')
        (values, calls), caught = users.as_another_user(_calls_after, [_Cfg(5)])
        assert (values, calls) == ([5.0], [5])
        (message,) = caught
        assert "belongs to another user (owner root, mode 0644); it is left in place" in message
        assert meta.read_text() == '{"scalars": ' and npz.exists()
