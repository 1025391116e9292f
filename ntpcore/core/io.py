"""Atomic file writes: a crash or an exception never leaves a half-written file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` on success.

    The temporary file keeps the suffix of ``path`` so that writers that infer the
    format from the file name (matplotlib, numpy) behave as for the final name.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent
    )
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_atomic(path: str | os.PathLike[str], writer: Callable[[IO[bytes]], None]) -> None:
    """Call ``writer(fileobj)`` on a temporary file, then move it to ``path``."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        writer(fh)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_atomic(path, lambda fh: fh.write(text.encode("utf-8")))
