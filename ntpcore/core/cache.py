"""Cache computations, not notebooks.

A function decorated with :func:`cached` takes one frozen dataclass (its configuration;
further arguments, if any, are inputs the configuration stands for) and returns a ``dict``
of arrays and scalars.  The result is stored as
``<cache_dir>/<qualname>/<key>.npz`` (arrays) plus ``<key>.json`` (scalars and the
configuration) where ``key`` is the SHA-256 of the canonical JSON of
``(qualname, asdict(cfg), ntpcore.__version__, CACHE_SALT)`` (a field marked
:data:`OMIT_DEFAULT` is left out while it has its default).  Bump :data:`CACHE_SALT`
whenever numerics change.  Both files are written atomically, the ``.json`` last, so
an interrupted run leaves either a complete entry or none.

The ``.json`` records the SHA-256 of the ``.npz``.  A damaged entry (a truncated archive,
an empty or garbled ``.json``, a checksum that does not match) is discarded with a warning
naming the file, and the result is computed again.

**A cache shared by several users** (``NTP_CACHE_DIR`` on a cluster): entries are written
with the mode the umask gives (``0o644`` under umask ``022``: anyone may read them; ``0o664``
under ``002``, with a shared group, anyone of the group may also add entries beside them),
so every user reuses every other user's entries.  An entry this process is not allowed to
read is *unreadable*, not damaged: the warning names it with its owner and mode, the entry
is left in place, and the result is computed without the cache.  A damaged entry owned by
another user is never deleted either (the warning names its owner), and an entry that
cannot be stored (a folder of another user that this one may not write) is computed and
returned with a warning, not an error.

A computation in flight is computed once: the first process takes an exclusive lock on
``<key>.lock`` for the duration of the computation, and any other process (another
notebook running at the same time) that needs the same entry waits for the lock and then
reads the stored result instead of computing it a second time.  ``f.in_flight(cfg)`` says
whether another process is computing an entry right now, so that a caller that needs
several entries can compute the free ones first (:func:`free_first`).  ``NTP_CACHE_LOCK=0``
turns the lock off (each process computes what it lacks, as before the lock existed); it
exists to measure what the lock saves, and the runner records it in its run record.

Notebook execution itself is never cached: papermill always runs fresh, and the
function cache makes a re-run after a plot-only change fast.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import functools
import hashlib
import json
import os
import stat
import warnings
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

import ntpcore
from ntpcore.core import paths
from ntpcore.core.io import atomic_path, write_text_atomic
from ntpcore.errors import ParameterError

CACHE_SALT = "2026-11-29.onednn"  # the transformer's and the LSTM's products by oneDNN

Result = dict[str, Any]
F = TypeVar("F", bound=Callable[..., Result])
T = TypeVar("T")


#: Field metadata of a configuration field left out of the key while it has its default
#: (``dataclasses.field(default=..., metadata={OMIT_DEFAULT: True})``): a field added after
#: entries were stored keeps them valid for the configurations that do not use it.  Any
#: other value is part of the key, as for every field.
OMIT_DEFAULT = "cache_key_omit_default"


def _omitted(f: dataclasses.Field, value: Any) -> bool:
    return bool(f.metadata.get(OMIT_DEFAULT)) and value == f.default


def _canonical(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.name: _canonical(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if not _omitted(f, getattr(obj, f.name))
        }
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items())}
    if isinstance(obj, list | tuple):
        return [_canonical(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float | int | str | bool) or obj is None:
        return obj
    raise TypeError(f"cannot use {type(obj).__name__} in a cache key: {obj!r}")


def cache_key(qualname: str, cfg: Any) -> str:
    """SHA-256 key of a configuration (stable across runs and machines)."""
    payload = json.dumps(
        [qualname, _canonical(cfg), ntpcore.__version__, CACHE_SALT],
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _split(result: Result) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, Any] = {}
    for k, v in result.items():
        if isinstance(v, np.ndarray):
            if v.dtype == object:
                raise TypeError(f"cached result {k!r} is an object array; use numeric arrays")
            arrays[k] = v
        else:
            scalars[k] = _canonical(v)
    return arrays, scalars


class CorruptEntry(Exception):
    """A cache entry that cannot be read back (damaged)."""


class UnreadableEntry(Exception):
    """A cache entry this process has no permission to read (e.g. another user's, written
    with a private mode); ``path`` is the file that could not be read."""

    def __init__(self, path: Path, exc: OSError) -> None:
        super().__init__(f"{path}: {exc.strerror or exc}")
        self.path = path
        self.reason = str(exc.strerror or exc)


#: errno values of a file the process may not open (not a damaged one)
_DENIED = (errno.EACCES, errno.EPERM)


def owner_and_mode(path: Path) -> str:
    """``"owner alice, mode 0600"`` of ``path`` (``"uid 1234"`` where the name is unknown)."""
    try:
        st = path.stat()
    except OSError as exc:
        return f"not stat-able: {exc.strerror or exc}"
    try:
        import pwd

        owner = pwd.getpwuid(st.st_uid).pw_name
    except (ImportError, KeyError):
        owner = f"uid {st.st_uid}"
    return f"owner {owner}, mode {stat.S_IMODE(st.st_mode):04o}"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load(meta_path: Path, npz_path: Path) -> Result:
    """Read one entry; raise :class:`UnreadableEntry` if a file of it may not be read,
    :class:`CorruptEntry` with the reason if it is damaged."""
    try:
        meta = json.loads(meta_path.read_text())
        result: Result = dict(meta["scalars"])
        if meta["arrays"]:
            digest = meta.get("npz_sha256")
            if digest is not None and _sha256(npz_path) != digest:
                raise CorruptEntry(f"{npz_path} does not match its checksum")
            with np.load(npz_path, allow_pickle=False) as data:
                result.update({k: data[k] for k in meta["arrays"]})
    except CorruptEntry:
        raise
    except OSError as exc:
        if exc.errno in _DENIED:
            raise UnreadableEntry(Path(exc.filename or meta_path), exc) from exc
        raise CorruptEntry(f"{type(exc).__name__}: {exc}") from exc
    except (ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
        raise CorruptEntry(f"{type(exc).__name__}: {exc}") from exc
    return result


def _owned_by_another_user(path: Path) -> bool:
    try:
        return path.stat().st_uid != os.geteuid()
    except OSError:
        return False


def _discard(meta_path: Path, npz_path: Path, reason: str) -> bool:
    """Delete a damaged entry with a warning; an entry of another user is left in place
    (the warning names its owner).  Returns whether the entry was deleted."""
    theirs = next((p for p in (meta_path, npz_path) if _owned_by_another_user(p)), None)
    if theirs is not None:
        warnings.warn(
            f"a damaged cache entry {meta_path} ({reason}) belongs to another user "
            f"({owner_and_mode(theirs)}); it is left in place and the result computed without "
            f"the cache (its owner can delete it)",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    warnings.warn(
        f"discarding a corrupt cache entry {meta_path} ({reason}); computing it again",
        RuntimeWarning,
        stacklevel=3,
    )
    for p in (npz_path, meta_path):
        p.unlink(missing_ok=True)
    return True


def _unreadable(meta_path: Path, exc: UnreadableEntry) -> None:
    warnings.warn(
        f"cannot read the cache entry {exc.path} ({exc.reason}; {owner_and_mode(exc.path)}): "
        f"unreadable, not damaged, so it is left in place and the result computed without "
        f"the cache (its owner can make it readable: chmod a+r, and umask 022 or 002)",
        RuntimeWarning,
        stacklevel=3,
    )


def lock_enabled() -> bool:
    """Whether computations take the per-key lock (``NTP_CACHE_LOCK`` unset, ``1`` or ``on``)."""
    value = os.environ.get("NTP_CACHE_LOCK", "1").strip().lower()
    if value not in ("0", "1", "off", "on", "false", "true"):
        raise ParameterError(f"NTP_CACHE_LOCK must be 0/off/false or 1/on/true, got {value!r}")
    return value in ("1", "on", "true")


def _open_lock(lock_path: Path) -> int | None:
    """A descriptor of ``lock_path`` to ``flock``, created with the umask's mode if absent:
    opened for writing where allowed (NFS needs it for an exclusive lock), else read-only
    (another user's lock file); ``None`` where it can be neither created nor opened (a
    folder of another user), and the computation then runs without the lock."""
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
        try:
            return os.open(lock_path, flags, 0o666)
        except OSError as exc:
            if exc.errno not in _DENIED and exc.errno != errno.ENOENT:
                raise
    return None


def _held_elsewhere(lock_path: Path) -> bool:
    """Whether another open file (another process) holds the lock on ``lock_path``."""
    if not lock_path.exists():
        return False
    fd = _open_lock(lock_path)
    if fd is None:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:  # a read-only descriptor on a file system that needs a writable one
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``lock_path`` (blocks while another holds it);
    no lock at all when :func:`lock_enabled` is false or the lock file cannot be opened
    (:func:`_open_lock`)."""
    if not lock_enabled():
        yield
        return
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
    except PermissionError:
        yield
        return
    fd = _open_lock(lock_path)
    if fd is None:
        yield
        return
    locked = False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            locked = True
        except OSError:  # EBADF: NFS wants a writable descriptor for an exclusive lock
            pass
        yield
    finally:
        if locked:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _store(
    qualname: str, cfg: Any, meta_path: Path, npz_path: Path, arrays: dict, scalars: dict
) -> None:
    """Write one entry (the ``.npz``, then the ``.json``), or warn that it could not be
    written (a folder this user may not write; a full disk) and leave none."""
    writing = npz_path
    try:
        if arrays:
            with atomic_path(npz_path) as tmp:
                np.savez_compressed(tmp, **arrays)
        writing = meta_path
        meta = {
            "qualname": qualname,
            "config": _canonical(cfg),
            "ntpcore": ntpcore.__version__,
            "salt": CACHE_SALT,
            "arrays": sorted(arrays),
            "npz_sha256": _sha256(npz_path) if arrays else None,
            "scalars": scalars,
        }
        write_text_atomic(meta_path, json.dumps(meta, indent=1, sort_keys=True))
    except OSError as exc:
        where = Path(exc.filename or writing)
        whose = f"; its folder: {owner_and_mode(meta_path.parent)}" if exc.errno in _DENIED else ""
        warnings.warn(
            f"the result was computed but not stored in the cache: {exc.strerror or exc} "
            f"({where}{whose})",
            RuntimeWarning,
            stacklevel=3,
        )


def cached(func: F) -> F:
    """Decorate ``func(cfg, *inputs) -> dict`` with an on-disk cache keyed on ``cfg``.

    Further arguments are inputs the key already stands for -- e.g. the dataset whose
    fingerprint the key holds, loaded once by the caller -- handed to ``func`` when it runs
    and not part of the key."""
    qualname = f"{func.__module__}.{func.__qualname__}"

    @functools.wraps(func)
    def wrapper(cfg: Any, *inputs: Any) -> Result:
        if not (dataclasses.is_dataclass(cfg) and not isinstance(cfg, type)):
            raise TypeError(f"{qualname} expects a dataclass configuration, got {type(cfg)}")
        key = cache_key(qualname, cfg)
        folder = paths.cache_dir() / qualname
        meta_path = folder / f"{key}.json"
        npz_path = folder / f"{key}.npz"

        #: set when the stored entry must be left alone (another user's, or unreadable)
        keep_out: list[bool] = []

        def stored() -> Result | None:
            if not meta_path.exists():
                return None
            try:
                return _load(meta_path, npz_path)
            except UnreadableEntry as exc:
                _unreadable(meta_path, exc)
                keep_out.append(True)
            except CorruptEntry as exc:
                if not _discard(meta_path, npz_path, str(exc)):
                    keep_out.append(True)
            return None

        hit = stored()
        if hit is not None:
            return hit
        with contextlib.nullcontext() if keep_out else _exclusive(folder / f"{key}.lock"):
            hit = None if keep_out else stored()  # another process may have computed it
            if hit is not None:  # while we waited
                return hit
            result = func(cfg, *inputs)
            if not isinstance(result, dict):
                raise TypeError(f"{qualname} must return a dict, got {type(result).__name__}")
            arrays, scalars = _split(result)
            if not keep_out:
                _store(qualname, cfg, meta_path, npz_path, arrays, scalars)
        # Return what a cache hit would return, so that a first run and a re-run print
        # the same thing (plain Python scalars, lists instead of tuples).
        return {**json.loads(json.dumps(scalars)), **arrays}

    def in_flight(cfg: Any) -> bool:
        """Whether another process is computing ``cfg``'s entry right now (holds its
        lock); always false when the lock is off or the entry is stored."""
        key = cache_key(qualname, cfg)
        folder = paths.cache_dir() / qualname
        if not lock_enabled() or (folder / f"{key}.json").exists():
            return False
        return _held_elsewhere(folder / f"{key}.lock")

    wrapper.cache_qualname = qualname  # type: ignore[attr-defined]
    wrapper.in_flight = in_flight  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def free_first(
    items: Sequence[T],
    compute: Callable[[T], Result],
    in_flight: Callable[[T], bool],
    meanwhile: Callable[[], None] | None = None,
) -> list[Result]:
    """``[compute(x) for x in items]``, computing first what no other process is computing.

    Before each computation the first item not in flight elsewhere is taken (the first item
    when all are), so a notebook that needs several cached computations (e.g. three trained
    models) and finds one of them in another notebook's hands computes the others meanwhile
    and reads the shared one from the cache at the end, instead of waiting on its lock
    first.  ``meanwhile`` is called once, when only items in flight elsewhere are left and
    before waiting for the first of them: other work the caller will need (it is not called
    when nothing is in flight).  A serial run keeps the order of ``items``.
    """
    results: dict[int, Result] = {}
    pending = list(range(len(items)))
    while pending:
        i = next((j for j in pending if not in_flight(items[j])), None)
        if i is None:  # only items in another process's hands are left
            if meanwhile is not None:
                meanwhile()
                meanwhile = None
            i = pending[0]
        results[i] = compute(items[i])
        pending.remove(i)
    return [results[i] for i in range(len(items))]
