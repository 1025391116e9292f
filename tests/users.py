"""A second user, for the tests of files that several users share (a cache, a book).

As root (the container where these tests run), file permissions do not bind: root reads,
writes and deletes any file whatever its mode, so a test of "another user's entry" or "a
read-only folder" proves nothing in root's own process.  :func:`as_another_user` runs a
function in a forked child that has dropped to ``nobody`` (uid and gid 65534, or the groups
given), whose permissions are the kernel's real ones: nothing is simulated.  Run as an
ordinary user, there is no second user to become, and the tests that need one skip;
permissions then bind in the test's own process.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import stat
import tempfile
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

NOBODY = 65534


def is_root() -> bool:
    return os.geteuid() == 0


def need_root() -> None:
    if not is_root():
        pytest.skip("needs a second uid: run as root to test another user's access")


@contextlib.contextmanager
def shared_dir() -> Iterator[Path]:
    """A fresh folder under the system's temporary folder that every user may traverse
    (pytest's ``tmp_path`` lies under a folder private to the user running the tests)."""
    path = Path(tempfile.mkdtemp(prefix="ntp-shared-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for p in [path, *path.rglob("*")]:  # let root's rmtree in even after a chmod 0
            with contextlib.suppress(OSError):
                if p.is_dir() and not p.is_symlink():
                    p.chmod(stat.S_IMODE(p.stat().st_mode) | 0o700)
        shutil.rmtree(path, ignore_errors=True)


def as_another_user(
    fn: Callable[..., Any],
    *args: Any,
    uid: int = NOBODY,
    gid: int = NOBODY,
    groups: tuple[int, ...] = (),
    umask: int = 0o022,
) -> tuple[Any, list[str]]:
    """``fn(*args)`` in a forked child running as ``uid``/``gid`` (supplementary ``groups``)
    under ``umask``; returns its value and the messages of the warnings it raised.  An
    exception in the child fails the test with the child's traceback.  Needs root."""
    need_root()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read_end)
            # Loaded while still root: this Python's standard library may lie in a folder
            # only root can read (pyenv under /root), and zipfile (numpy's .npz) loads the
            # cp437 codec on its first use.  Whether an earlier test in this process had
            # used it decided before whether the child could read a cache entry.
            import encodings.cp437  # noqa: F401

            os.setgroups(list(groups))
            os.setgid(gid)
            os.setuid(uid)
            os.umask(umask)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value = fn(*args)
            payload = pickle.dumps(("ok", value, [str(w.message) for w in caught]))
        except BaseException:  # noqa: BLE001 - sent to the parent
            payload = pickle.dumps(("error", traceback.format_exc(), []))
            code = 1
        with os.fdopen(write_end, "wb") as out:
            out.write(payload)
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as inp:
        data = inp.read()
    os.waitpid(pid, 0)
    status, value, caught = pickle.loads(data)
    if status != "ok":
        pytest.fail(f"the child running as uid {uid} failed:\n{value}")
    return value, caught
