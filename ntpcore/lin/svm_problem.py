r"""The NTP-SVM program of the linear paper [lin, Def. 3, eqs. (6a)-(6b)]: its data check,
its margins and the post-check every solver's answer passes.

.. math::
    W^{\mathrm{mm}} = \arg\min_W \tfrac12\|W\|_F^2\ \text{s.t.}\
    (e_{z_j} - e_{z'})^\top W\bar h_j = 0\ (z'\in\mathcal S_j),\quad
    (e_{z_j} - e_v)^\top W\bar h_j \ge 1\ (v\notin\mathcal S_j)

in anchor form (:math:`z_j` = smallest in-support token).  The solvers
(:mod:`ntpcore.lin.dual`, :mod:`ntpcore.lin.dual_cd`, :mod:`ntpcore.lin.svm_reference`) and
their dispatch (:mod:`ntpcore.lin.svm`) build on this module; it imports none of them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.validate import as_float_array, as_support
from ntpcore.errors import DataError, SolverError
from ntpcore.lin.subspace import anchor_tokens

Array = NDArray[np.float64]

#: Post-check of every solver: (6a)-(6b) hold to this tolerance, i.e. min margin >= 1 - tol
#: and in-support spread <= tol max(1, ||W||).
CHECK_TOL = 1e-6


@dataclass(frozen=True, eq=False)
class NTPSVMResult:
    """Solution of the NTP-SVM and a record of how it was obtained."""

    W_mm: Array  # (V, d)
    solver: str  # "dual" | "dual-cd" | "cvxpy": the method that answered
    status: str
    norm: float  # ||W_mm||_F (the normalised max-margin is 1/norm)
    min_margin: float  # min over j, v not in S_j of (e_{z_j} - e_v)^T W h_j
    max_spread: float  # max over j of the in-support logit spread
    n_active: int  # margin constraints with margin <= 1 + 1e-6
    iterations: int
    time_s: float
    C: Array | None = None  # (V, m) dual coefficients, W_mm = C H^T (dual solver)
    extra: dict = field(default_factory=dict)


def check_svm_data(H: ArrayLike, S: ArrayLike) -> tuple[Array, NDArray[np.bool_]]:
    H = as_float_array(H, "H", ndim=2)
    S = as_support(S, "S")
    if S.shape[1] != H.shape[1]:
        raise DataError(f"H has {H.shape[1]} columns (contexts) but S has {S.shape[1]}")
    if S.all():
        raise DataError(
            "every context has full support (S_j = V): there is no margin constraint and the "
            "NTP-SVM is trivial (W = 0); the paper assumes some S_j < V"
        )
    return H, S


def margins(W: ArrayLike, H: ArrayLike, S: ArrayLike) -> dict[str, float]:
    """Margins of W: min anchor margin off the support, in-support spread, strict margin.

    ``strict`` is min_j (min_{z in S_j} L_zj - max_{v not in S_j} L_vj), equal to
    ``min_margin`` when the spread is zero.
    """
    H = as_float_array(H, "H", ndim=2)
    S = as_support(S, "S")
    L = as_float_array(W, "W", shape=(S.shape[0], H.shape[0])) @ H  # (V, m)
    cols = np.arange(S.shape[1])
    z = anchor_tokens(S)
    marg = L[z, cols][None, :] - L
    off = ~S
    min_margin = float(marg[off].min()) if off.any() else np.inf
    Lin_max = np.where(S, L, -np.inf).max(axis=0)
    Lin_min = np.where(S, L, np.inf).min(axis=0)
    spread = float((Lin_max - Lin_min).max())
    has_off = off.any(axis=0)
    strict = (Lin_min - np.where(off, L, -np.inf).max(axis=0))[has_off]
    return {
        "min_margin": min_margin,
        "max_spread": spread,
        "strict_margin": float(strict.min()) if strict.size else np.inf,
        "n_active": int(np.sum(off & (marg <= 1 + 1e-6))),
    }


def svm_result(
    W: Array,
    H: Array,
    S: NDArray[np.bool_],
    solver: str,
    status: str,
    it: int,
    t0: float,
    C: Array | None = None,
    extra: dict | None = None,
) -> NTPSVMResult:
    mg = margins(W, H, S)
    res = NTPSVMResult(
        W_mm=W,
        solver=solver,
        status=status,
        norm=float(np.linalg.norm(W)),
        min_margin=mg["min_margin"],
        max_spread=mg["max_spread"],
        n_active=mg["n_active"],
        iterations=it,
        time_s=time.perf_counter() - t0,
        C=C,
        extra=extra or {},
    )
    if res.min_margin < 1 - CHECK_TOL or res.max_spread > CHECK_TOL * max(1.0, res.norm):
        raise SolverError(
            f"NTP-SVM ({solver}) returned an inaccurate point: min margin {res.min_margin:.3g}"
            f" (need >= 1 - {CHECK_TOL:g}), in-support spread {res.max_spread:.3g}"
        )
    return res
