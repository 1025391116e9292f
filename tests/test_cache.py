"""The computation cache survives a damaged entry and computes a shared entry once."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ntpcore.pipeline import cache


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
    from ntpcore.pipeline import cache

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        n: int

    def slow(cfg):
        with open(os.environ["CALL_LOG"], "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        time.sleep(1.5)
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
