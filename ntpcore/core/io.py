"""Atomic file writes: a crash or an exception never leaves a half-written file.

Every file written here gets the mode an ordinary ``open(path, "w")`` would give it, ``0o666``
less the process's umask (``0o644`` under the usual umask ``022``, ``0o664`` under ``002``):
the temporary file is created with that mode (:func:`tempfile.mkstemp` would make it
``0o600``, private to its owner whatever the umask, which breaks a cache or a book shared
by several users).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from ntpcore.errors import DataError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` on success.

    The temporary file keeps the suffix of ``path`` so that writers that infer the
    format from the file name (matplotlib, numpy) behave as for the final name.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = temporary_beside(path)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except OSError as exc:
        if exc.filename is None:  # e.g. a full disk: say which file could not be written
            raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from exc
        raise
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def temporary_beside(path: Path, tag: str = "tmp") -> Path:
    """Create an empty file ``.<stem>.<random>.<tag><suffix>`` in ``path``'s folder, with the
    umask's mode (see the module docstring), and return its path."""
    for _ in range(100):
        tmp = path.parent / f".{path.stem}.{secrets.token_hex(4)}.{tag}{path.suffix}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path.parent))


def current_umask() -> int:
    """The process's umask (read from ``/proc`` where it can be; else set and restored)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike[str], writer: Callable[[IO[bytes]], None]) -> None:
    """Call ``writer(fileobj)`` on a temporary file, then move it to ``path``."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        writer(fh)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_atomic(path, lambda fh: fh.write(text.encode("utf-8")))


def file_version(path: str | os.PathLike[str], data: bytes | None = None) -> tuple[str, str]:
    """A file as it is now: its resolved path and a digest of its bytes (``data``, when the
    caller has read them).  A cache keyed by it never returns what another version of the
    file gave; a modification time would not do: two rewrites of one size within a tick of
    the file system's clock share it."""
    data = Path(path).read_bytes() if data is None else data
    return (str(Path(path).resolve()), hashlib.blake2b(data, digest_size=16).hexdigest())


def read_utf8_text(path: str | os.PathLike[str], what: str = "text file") -> str:
    """The whole of a UTF-8 text file, or a :class:`~ntpcore.errors.DataError` saying why not.

    The error names the file and the reason: it does not exist or is not a file, it cannot
    be read (permissions), it is empty or blank, it is binary (NUL bytes), or it is not UTF-8,
    in which case the message gives the byte offset, line and value of the first byte that
    does not decode, and how to convert the file (``iconv``).  ``what`` names the file's role
    in the messages (``"corpus file"``).
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"{what} {str(p)!r} does not exist")
    if not p.is_file():
        raise DataError(f"{what} {str(p)!r} is not a file")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise DataError(f"{what} {str(p)!r} cannot be read ({exc.strerror or exc})") from exc
    if not raw.strip():
        raise DataError(f"{what} {str(p)!r} is empty")
    if b"\x00" in raw[:65536]:
        raise DataError(f"{what} {str(p)!r} is not text (it contains NUL bytes)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DataError(
            f"{what} {str(p)!r} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset "
            f"{exc.start:,} (line {line}) does not decode ({exc.reason}); convert it from its "
            f"encoding first, e.g. iconv -f latin1 -t utf-8 {p.name} > {p.stem}.utf8{p.suffix}"
        ) from exc


def replace_together(moves: list[tuple[Path, Path]]) -> None:
    """Move each ``source`` to its ``destination``, all or none.

    The destinations' folders are created and checked writable first, then every source is
    copied (or renamed) beside its destination under a temporary name, and only then are
    the destinations replaced, in the order given, each by one rename; a previous file is
    kept as a hard link (a copy where links are not supported) until all are in place.  If
    any step fails, every destination is left as it was (a replaced one is put back, a new
    one removed), the temporary files are removed, and the :class:`OSError` raised names
    the path that failed (``filename``).  The sources are removed only on success.
    """
    staged: list[tuple[Path, Path]] = []  # (temporary beside the destination, destination)
    backups: list[tuple[Path, Path | None]] = []  # (destination, its previous file or None)
    current = moves[0][1] if moves else Path()  # what the step in progress writes
    try:
        for folder in dict.fromkeys(dest.parent for _, dest in moves):
            current = folder
            folder.mkdir(parents=True, exist_ok=True)
            if not os.access(folder, os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(folder))
        for src, dest in moves:
            current = dest
            if dest.is_dir():
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(dest))
            tmp = temporary_beside(dest, "new")
            staged.append((tmp, dest))
            _copy_into(src, tmp)
        for tmp, dest in staged:
            current = dest
            old = None
            if dest.exists():
                old = temporary_beside(dest, "old")
                old.unlink()
                try:
                    os.link(dest, old)
                except OSError:
                    shutil.copy2(dest, old)
            backups.append((dest, old))
            os.replace(tmp, dest)
    except OSError as exc:
        for dest, old in reversed(backups):
            with contextlib.suppress(OSError):
                if old is not None:
                    os.replace(old, dest)
                    old.unlink(missing_ok=True)  # a rename onto a link to itself keeps both
                else:
                    dest.unlink(missing_ok=True)
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        raise type(exc)(exc.errno, exc.strerror or str(exc), str(current)) from exc
    for _, old in backups:
        if old is not None:
            with contextlib.suppress(OSError):
                old.unlink()
    for src, _ in moves:
        with contextlib.suppress(OSError):
            src.unlink(missing_ok=True)


def _copy_into(src: Path, tmp: Path) -> None:
    """``src``'s bytes into ``tmp`` (a name :func:`temporary_beside` reserved): a hard link on
    one file system (``src`` stays until every destination is in place), else a copy with
    ``src``'s mode."""
    tmp.unlink()
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copyfile(src, tmp)
        shutil.copymode(src, tmp)
