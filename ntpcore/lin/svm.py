r"""The NTP-SVM of the linear paper and its solver dispatch [lin, Def. 3, eqs. (6a)-(6b)].

The max-NTP-margin program (NTP-SVM)

.. math::
    W^{\mathrm{mm}} = \arg\min_W \tfrac12\|W\|_F^2\ \text{s.t.}\
    (e_{z_j} - e_{z'})^\top W\bar h_j = 0\ (z'\in\mathcal S_j),\quad
    (e_{z_j} - e_v)^\top W\bar h_j \ge 1\ (v\notin\mathcal S_j)

in anchor form (:math:`z_j` = smallest in-support token; equivalent to (6a)-(6b), since
every in-support difference is a difference of two anchor differences).  It is feasible iff
the data are NTP-separable (Def. 2), depends on P only through the supports, and its
optimal normalized margin is :math:`1/\|W^{\mathrm{mm}}\|`.  Its KKT conditions give
:math:`W^{\mathrm{mm}} = C\bar H^\top` with zero-sum columns :math:`c_j`, non-positive off
the support and non-zero only on active margins.

Solvers (:func:`solve_ntp_svm` picks one):

* ``"cvxpy"`` -- the program verbatim (:mod:`ntpcore.lin.svm_reference`);
* ``"dual"`` and ``"dual-cd"`` -- the dual in C, by projected Newton (full-column-rank H)
  or by block-coordinate descent (any H) (:mod:`ntpcore.lin.dual`, :mod:`ntpcore.lin.dual_cd`).

Every solver's answer passes the same post-check
(:func:`ntpcore.lin.svm_problem.svm_result`): min margin
:math:`\ge 1 - 10^{-6}` and in-support spread :math:`\le 10^{-6}\max(1, \|W\|)`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.logits import support_of
from ntpcore.errors import ParameterError, SolverError
from ntpcore.lin.data import check_embeddings_probs
from ntpcore.lin.dual import svm_dual
from ntpcore.lin.dual_cd import svm_dual_cd
from ntpcore.lin.svm_problem import NTPSVMResult, check_svm_data
from ntpcore.lin.svm_reference import ntp_svm_cvxpy

Array = NDArray[np.float64]


def _full_column_rank(H: Array) -> bool:
    if H.shape[0] < H.shape[1]:
        return False
    s = np.linalg.svd(H, compute_uv=False)
    return bool(s[-1] > 1e-10 * s[0])


#: Under ``solver="auto"``, the certified methods tried, in order, after each first choice
#: raises SolverError (InfeasibleError is a certified answer and is never retried).
FALLBACKS = {"dual": ("dual-cd", "cvxpy"), "dual-cd": ("cvxpy",), "cvxpy": ("dual-cd",)}
#: cvxpy is a fallback only up to this many entries V m (beyond, it is too slow to help).
CVXPY_FALLBACK_MAX = 50_000


def solve_ntp_svm(H: ArrayLike, S: ArrayLike, *, solver: str = "auto") -> NTPSVMResult:
    """NTP-SVM for embeddings H (d, m) and a boolean support matrix S (V, m).

    ``solver``: ``"dual"`` (projected Newton, needs full-column-rank H), ``"dual-cd"``
    (dual block-coordinate descent + active-set polish, any H), ``"cvxpy"`` (Clarabel) or
    ``"auto"``: ``"dual"`` for small full-rank programs (V m <= 1000, where it is the
    fastest), ``"cvxpy"`` for tiny rank-deficient ones (V m <= 2000: Clarabel takes < 1 s
    there and does not suffer from near-degenerate instances), ``"dual-cd"`` otherwise
    (measured 10-40x faster than ``"dual"`` at V = 50-100, d = 240-480, m = 200-400).

    Under ``"auto"`` a method that cannot certify its answer (SolverError) hands over to
    the next of :data:`FALLBACKS` (cvxpy only for V m <= :data:`CVXPY_FALLBACK_MAX`);
    ``NTPSVMResult.solver`` names the method that answered and ``extra["fallback_from"]``
    the methods that failed, with their messages.  Every answer passes the post-check of
    :func:`svm_result`; an explicitly named solver never falls back.
    """
    H, S = check_svm_data(H, S)
    methods = {"dual": svm_dual, "dual-cd": svm_dual_cd, "cvxpy": ntp_svm_cvxpy}
    if solver != "auto":
        if solver not in methods:
            raise ParameterError(
                f"solver must be 'auto', 'dual', 'dual-cd' or 'cvxpy', got {solver!r}"
            )
        return methods[solver](H, S)
    if S.size <= 1000 and _full_column_rank(H):
        first = "dual"  # projected Newton: fastest on small full-rank programs
    elif S.size <= 2000 and not _full_column_rank(H):
        first = "cvxpy"  # interior point: robust and quick on tiny programs
    else:
        first = "dual-cd"
    chain = [first] + [s for s in FALLBACKS[first] if s != "cvxpy" or S.size <= CVXPY_FALLBACK_MAX]
    failed: dict[str, str] = {}
    for name in chain:
        try:
            res = methods[name](H, S)
        except SolverError as exc:
            failed[name] = str(exc)
            continue
        if failed:
            res = replace(res, extra={**res.extra, "fallback_from": failed})
        return res
    raise SolverError(
        "NTP-SVM: no method could certify an answer: "
        + "; ".join(f"{k}: {v}" for k, v in failed.items())
    )


def ntp_svm(H: ArrayLike, P: ArrayLike, *, solver: str = "auto") -> Array:
    r"""The NTP-SVM solution :math:`W^{\mathrm{mm}}` of Def. 3, shape (V, d).

    Depends on P only through its support :math:`P > 0`.

    Raises
    ------
    DataError        bad shapes, NaN, P columns not in the simplex, or every support full
    InfeasibleError  the data are not NTP-separable (Def. 2); the message says why
    SolverError      the solver failed or its answer fails the post-check
    """
    H, P = check_embeddings_probs(H, P)
    return solve_ntp_svm(H, support_of(P), solver=solver).W_mm
