r"""Metrics shared by the papers.

The *correlation* of the attention literature and the *cosine* of the linear paper are one
quantity, :math:`\langle A, B\rangle_F / (\|A\|_F\|B\|_F)` (:func:`cos`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.validate import as_float_array
from ntpcore.errors import DataError

__all__ = ["cos"]


def cos(A: ArrayLike, B: ArrayLike) -> NDArray[np.float64] | float:
    r"""Frobenius cosine :math:`\langle A, B\rangle_F / (\|A\|_F\|B\|_F)`; 0 if either is 0.

    Vectors and matrices give a float.  Stacks of matrices ``(..., a, b)`` give the cosine
    of each pair over the last two axes.
    """
    A = as_float_array(A, "A")
    B = as_float_array(B, "B")
    if A.ndim <= 2 and B.ndim <= 2:
        if A.shape != B.shape:
            raise DataError(f"A and B must have the same shape, got {A.shape} and {B.shape}")
        na, nb = np.linalg.norm(A), np.linalg.norm(B)
        if na == 0 or nb == 0:
            return 0.0
        return float(np.vdot(A, B) / (na * nb))
    num = np.sum(A * B, axis=(-2, -1))
    den = np.sqrt(np.sum(A * A, axis=(-2, -1)) * np.sum(B * B, axis=(-2, -1)))
    return np.divide(num, den, out=np.zeros(np.broadcast(num, den).shape), where=den > 0)
