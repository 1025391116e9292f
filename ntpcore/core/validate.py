"""Input validation shared by the paper modules.

All checks run before any computation and raise the package's typed errors with a message
that names the offending argument: :class:`ntpcore.errors.DataError` for data arrays,
:class:`ntpcore.errors.ParameterError` for numbers out of their range, unknown names and
malformed sequences of numbers (:func:`check_number`, :func:`check_choice`, ...).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.errors import DataError, ParameterError


def as_float_array(
    x: ArrayLike,
    name: str,
    ndim: int | None = None,
    shape: Sequence[int | None] | None = None,
) -> NDArray[np.float64]:
    """Return ``x`` as a finite float64 array, checking its dimension and shape.

    ``shape`` may contain ``None`` for free axes, e.g. ``(V, None)``.
    """
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{name} must be a numeric array ({exc})") from exc
    if ndim is not None and arr.ndim != ndim:
        raise DataError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if shape is not None:
        if arr.ndim != len(shape):
            raise DataError(f"{name} must have shape {tuple(shape)}, got {arr.shape}")
        for axis, (want, got) in enumerate(zip(shape, arr.shape, strict=True)):
            if want is not None and want != got:
                raise DataError(
                    f"{name} has {got} entries along axis {axis}, expected {want} "
                    f"(shape {arr.shape})"
                )
    if arr.size and not np.all(np.isfinite(arr)):
        raise DataError(f"{name} contains NaN or infinite entries")
    return arr


def as_prob_matrix(P: ArrayLike, name: str = "P", atol: float | None = None) -> NDArray[np.float64]:
    """Validate a (V, m) matrix whose columns are probability vectors.

    The tolerance on the column sums scales with the precision of the input: a float32
    ``torch.softmax`` output (column sums off by ~1e-6) is accepted, a float64 one must
    sum to 1 within 1e-8.  The result is float64.
    """
    src = np.asarray(P)
    eps = np.finfo(src.dtype).eps if np.issubdtype(src.dtype, np.floating) else 0.0
    arr = as_float_array(P, name, ndim=2)
    if arr.shape[0] < 2 or arr.shape[1] < 1:
        raise DataError(f"{name} must have at least 2 rows (words) and 1 column, got {arr.shape}")
    if atol is None:
        atol = max(1e-8, 16.0 * np.sqrt(arr.shape[0]) * eps)
    if np.any(arr < 0):
        j = int(np.argwhere(arr < 0)[0, 1])
        raise DataError(f"{name} has negative entries (first in column {j})")
    sums = arr.sum(axis=0)
    bad = np.flatnonzero(np.abs(sums - 1.0) > atol)
    if bad.size:
        j = int(bad[0])
        raise DataError(
            f"columns of {name} must sum to 1 (within {atol:.1e} for {src.dtype} input); "
            f"column {j} sums to 1 {sums[j] - 1.0:+.2e} ({bad.size} bad column(s))"
        )
    return arr


def as_support(S: ArrayLike, name: str = "S") -> NDArray[np.bool_]:
    """Validate a (V, m) 0/1 (or boolean) support matrix with non-empty columns."""
    arr = np.asarray(S)
    if arr.ndim != 2:
        raise DataError(f"{name} must be a 2-D (V, m) matrix, got shape {arr.shape}")
    if 0 in arr.shape:
        raise DataError(
            f"{name} is empty (shape {arr.shape}): a support matrix needs at least one word "
            "(row) and one context (column)"
        )
    if arr.dtype != np.bool_:
        if not np.issubdtype(arr.dtype, np.number):
            raise DataError(f"{name} must be boolean or 0/1, got dtype {arr.dtype}")
        if not np.all((arr == 0) | (arr == 1)):
            raise DataError(f"{name} must contain only 0 and 1")
        arr = arr.astype(bool)
    empty = np.flatnonzero(~arr.any(axis=0))
    if empty.size:
        raise DataError(f"{name}: context(s) {empty[:5].tolist()} have an empty support")
    return arr


# --------------------------------------------------------------------------- arguments
# One contract for the papers' faces: a number out of its range (NaN and infinities
# included), an unknown name or a malformed list of numbers is a ParameterError naming the
# argument; malformed data arrays are a DataError (above).  Never a bare numpy, cvxpy or
# int() error, and never a silent fallback.


def check_number(
    value: Any,
    name: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    integer: bool = False,
) -> Any:
    """``value`` as a finite number in ``[lo, hi]`` (an end open where told), an ``int``
    when ``integer`` (a whole float such as ``5.0`` is taken); a
    :class:`~ntpcore.errors.ParameterError` naming ``name`` otherwise."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ParameterError(f"{name} must be finite, got {value!r}")
    if integer:
        if not float(value).is_integer():
            raise ParameterError(f"{name} must be an integer, got {value!r}")
        value = int(value)
    else:
        value = float(value)
    below = lo is not None and (value <= lo if lo_open else value < lo)
    above = hi is not None and (value >= hi if hi_open else value > hi)
    if below or above:
        raise ParameterError(
            f"{name} must lie in {_interval_text(lo, hi, lo_open, hi_open)}, got {value!r}"
        )
    return value


def _interval_text(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    left = "(-inf" if lo is None else f"{'(' if lo_open else '['}{lo:g}"
    right = "inf)" if hi is None else f"{hi:g}{')' if hi_open else ']'}"
    return f"{left}, {right}"


def check_numbers(
    values: Any,
    name: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    integer: bool = False,
    nonempty: bool = True,
) -> NDArray:
    """A 1-D sequence of numbers, each as :func:`check_number` checks it (an ``int64`` array
    when ``integer``, else ``float64``); a :class:`~ntpcore.errors.ParameterError` naming
    ``name`` otherwise (a nested sequence included)."""
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{name} must be a sequence of numbers ({exc})") from exc
    if arr.ndim != 1:
        raise ParameterError(
            f"{name} must be a flat sequence of numbers, got shape {arr.shape}: {values!r}"
        )
    if nonempty and arr.size == 0:
        raise ParameterError(f"{name} must hold at least one number")
    items = [
        check_number(
            v.item() if isinstance(v, np.generic) else v,
            f"{name}[{i}]",
            lo=lo,
            hi=hi,
            lo_open=lo_open,
            hi_open=hi_open,
            integer=integer,
        )
        for i, v in enumerate(arr.tolist() if arr.dtype != object else list(arr))
    ]
    return np.asarray(items, dtype=np.int64 if integer else np.float64)


def check_choice(value: Any, name: str, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``, else a :class:`~ntpcore.errors.ParameterError`
    listing them."""
    if not isinstance(value, str) or value not in choices:
        raise ParameterError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_seed(seed: Any, name: str = "seed") -> int:
    """A seed of :func:`numpy.random.default_rng`: a non-negative integer."""
    return check_number(seed, name, lo=0, integer=True)


def check_cvxpy_solver(solver: Any, name: str = "solver") -> str:
    """``solver`` if cvxpy has a solver of that name installed (any case), else a
    :class:`~ntpcore.errors.ParameterError` listing those it has: never a fallback."""
    import cvxpy as cp

    installed = cp.installed_solvers()
    if not isinstance(solver, str) or solver.upper() not in installed:
        raise ParameterError(f"{name} must be a cvxpy solver of {installed}, got {solver!r}")
    return solver.upper()


def as_index_array(
    x: ArrayLike,
    name: str,
    *,
    ndim: int | tuple[int, ...] | None = None,
    size: int | None = None,
    shape: Sequence[int | None] | None = None,
) -> NDArray[np.int64]:
    """``x`` as an ``int64`` array of indices in ``[0, size)`` (``size`` ``None``: any
    non-negative integer), of ``ndim`` dimensions (one of them, for a tuple) or ``shape``;
    a :class:`DataError` naming ``name`` otherwise: NaN, infinite, fractional or negative
    entries (a negative index would silently count from the end)."""
    try:
        raw = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{name} must be an array of integers ({exc})") from exc
    if raw.dtype == object or raw.dtype.kind not in "biuf":
        raise DataError(f"{name} must be an array of integers, got dtype {raw.dtype}")
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if allowed is not None and raw.ndim not in allowed:
        want = " or ".join(str(a) for a in allowed)
        raise DataError(f"{name} must be {want}-dimensional, got shape {raw.shape}")
    if shape is not None and (
        raw.ndim != len(shape)
        or any(w is not None and w != g for w, g in zip(shape, raw.shape, strict=True))
    ):
        raise DataError(f"{name} must have shape {tuple(shape)}, got {raw.shape}")
    if raw.dtype.kind == "f":
        if not np.all(np.isfinite(raw)):
            raise DataError(f"{name} contains NaN or infinite entries")
        if not np.all(raw == np.round(raw)):
            raise DataError(f"{name} must hold integers, got fractional entries")
    arr = raw.astype(np.int64)
    if arr.size and arr.min() < 0:
        raise DataError(f"{name} holds a negative index ({int(arr.min())})")
    if size is not None and arr.size and arr.max() >= size:
        raise DataError(f"{name} holds index {int(arr.max())}, outside 0..{size - 1}")
    return arr
