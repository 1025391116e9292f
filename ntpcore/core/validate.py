"""Input validation shared by the paper modules.

All checks run before any computation and raise :class:`ntpcore.errors.DataError`
with a message that names the offending argument.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.errors import DataError


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
