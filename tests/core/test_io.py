"""Atomic writes: the mode the umask gives (issue 32: every file was 0600), and a failure that
names the file it was writing."""

from __future__ import annotations

import errno
import os
import stat

import pytest
from matplotlib import pyplot as plt

from ntpcore.core import io
from ntpcore.figure import provenance


@pytest.fixture(params=[0o022, 0o002, 0o077], ids=["022", "002", "077"])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_an_atomic_write_takes_the_mode_an_ordinary_open_would(tmp_path, umask):
    io.write_text_atomic(tmp_path / "new.json", "{}")
    with open(tmp_path / "plain.json", "w") as fh:
        fh.write("{}")
    mode = stat.S_IMODE((tmp_path / "new.json").stat().st_mode)
    assert mode == 0o666 & ~umask == stat.S_IMODE((tmp_path / "plain.json").stat().st_mode)
    assert io.current_umask() == umask


def test_a_figure_and_its_sidecar_are_readable_as_the_umask_says(tmp_path, monkeypatch, umask):
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path))
    provenance.savefig(plt.figure(), "lin-modes", {}, profile="paper")
    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == [
        "lin-modes.data.json",
        "lin-modes.json",
        "lin-modes.pdf",
        "lin-modes.png",
    ]
    assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o666 & ~umask}


def test_a_full_disk_names_the_file_and_leaves_the_old_one(tmp_path):
    target = tmp_path / "fig.png"
    target.write_bytes(b"old")

    def full(fh):
        fh.write(b"new, partly")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left on device") as info:
        io.write_atomic(target, full)
    assert info.value.filename == str(target) and str(target) in str(info.value)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fig.png"]


def test_a_file_version_changes_with_its_bytes_not_its_clock(tmp_path):
    """Two rewrites of one size within a tick of the file system's clock are two versions;
    the same bytes are one, however they were read."""
    f = tmp_path / "a.txt"
    f.write_text("one")
    first = io.file_version(f)
    st = f.stat()
    f.write_text("two")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same modification time and size
    assert io.file_version(f) != first
    assert io.file_version(f) == io.file_version(f, f.read_bytes())
    f.write_text("one")
    assert io.file_version(f) == first
