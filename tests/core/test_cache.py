"""The computation cache survives a damaged entry and computes a shared entry once."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

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


def test_a_lock_setting_that_is_not_on_or_off_is_refused(monkeypatch):
    monkeypatch.setenv("NTP_CACHE_LOCK", "sometimes")
    with pytest.raises(ParameterError, match="NTP_CACHE_LOCK must be"):
        cache.lock_enabled()
