r"""Nuclear-norm NTP-SVM of paper ``geo`` at the size of a real vocabulary.

Same program as :mod:`ntpcore.geo.svm_problem` ([geo, eq. (6)]; the max-margin logits
:math:`L^{mm}` of [geo, Thm. 1]):

.. math::
    \min_{L\in\mathbb R^{V\times m}}\|L\|_*\quad\text{s.t.}\quad
    L_{zj}=L_{z'j}\ (z,z'\in\mathcal S_j),\qquad L_{zj}-L_{vj}\ge1\
    (z\in\mathcal S_j,\ v\notin\mathcal S_j),

and the same exact reduction (classes of identical columns and identical rows of ``S``,
:func:`ntpcore.geo.svm_problem.reduce_support`) to a weighted (r x u) problem in
:math:`N=D_r^{1/2}L_rD_c^{1/2}`.  What changes is the iteration, so that the reduced
problems of real-text supports (a few hundred to a few thousand rows and columns) are
certified in seconds to minutes.

Douglas-Rachford splitting with Anderson acceleration
-----------------------------------------------------
With :math:`f=\|\cdot\|_*` and :math:`g` the indicator of the (column-separable) feasible set
:math:`C`, the Douglas-Rachford operator on the state :math:`v` is

.. math::
    z=\Pi_C(v),\qquad x=\mathrm{SVT}_{1/\rho}(2z-v),\qquad T(v)=v+x-z,

whose fixed points give :math:`z=x=N^{mm}` (it is ADMM on the same splitting as
:func:`ntpcore.geo.svm.solve_nuclear_svm`, written in the variable
:math:`v=Z+U`).  :math:`T` is firmly non-expansive, so its fixed-point residual
:math:`T(v)-v` can be driven to zero much faster by Anderson acceleration (type II, memory
``memory``): the next state is the combination of the last :math:`T(v_i)` whose residuals
combine to the least-squares smallest one.  The step is safeguarded: an accelerated state
whose residual exceeds the last accepted residual is replaced by the plain step
:math:`T(v_k)` (Zhang, O'Donoghue & Boyd, SIAM J. Optim. 2020), so the iteration inherits
the convergence of Douglas-Rachford.

*The relaxed step.*  The state moves by :math:`v\leftarrow v+\lambda(x-z)` with
:math:`\lambda` = ``relax`` = 1.5 (over-relaxed Douglas-Rachford: the same fixed points, firmly
non-expansive for :math:`\lambda<2`); Anderson acceleration and its safeguard act on this
operator.  Iterations to the certificate on the all-distinct 1000 x 5000 instance with the
gap checked every 2 iterations: 82 at :math:`\lambda=1`, 76 at 1.5 (and 80 at 1.3 and 1.8
with checks every 10, against 90 at 1).

*The penalty* :math:`\rho` stays fixed at ``0.2 / mean(s)`` (``s`` the nonzero singular
values of the centred support, the start).  On the bench ladder, residual balancing and
changing :math:`\rho` when the gap stalls (or once the primal has converged) slowed the
certificate down.  The best fixed multiple depends on the instance; iterations with
``c / mean(s)`` for ``c`` = 0.1 / 0.2 / 0.3 / 0.5 on the ladder's instances
(:func:`tools.bench.solvers.geo_supports`) with the plain step: 200 x 1000 150 / 80 /
60 / 60, 500 x 2500 150 / 90 / 100 / 120, 1000 x 5000 150 / 140 / 180 / 240; with all
supports distinct: 200 x 1000 90 / 60 / 50 / 50, 500 x 2500 190 / 100 / 70 / 80, 1000 x
5000 140 / 90 / 90 (not run at 0.5).  With the relaxed step, all-distinct 1000 x 5000:
``c`` = 0.15 / 0.2 / 0.3: 92 / 76 / 88.  *The memory* is 8: 5, 8 and 12 gave iteration
counts within 20 of each other on the patterns instances and the 200 x 1000 and 500 x 2500
all-distinct ones (12: 76 iterations on the all-distinct 1000 x 5000 instance, as 8).  The
stored differences stay float64: stored as float32 and widened to float64 a block at a
time for the products (half the memory), the Anderson step took 36 ms instead of 27 ms at
977 x 5000 (the widening costs more than the memory traffic it saves), and float32
products would put float32 rounding into an ill-conditioned least-squares problem.

*Single precision first.*  Until the fixed-point residual is below ``3e-5 ||Z0||_F``, or
stops falling by 20% every 5 iterations, the SVT, the dominant cost, runs in float32
(Gram matrix, eigendecomposition and product at about half the float64 time).  The
Gram matrix squares the spectrum, so its rounding perturbs the SVT by about
:math:`\epsilon_{32}\sigma_{max}^2/\tau^2` relative, far below the residual early on: on the
all-distinct 1000 x 5000 instance the float32 residuals follow the float64 ones to
``5e-5 ||Z0||_F`` and lag by a factor 1.5 at ``1e-5``.  Switching at ``1e-4`` there: 47
float32 and 29 float64 iterations; at ``3e-5``: 60 and 18 (78 in all, at about 0.33 s
against 0.6 s an iteration, below).  The projection, the state and the certificate stay
in float64 throughout, so every ``z`` is feasible and the certificate is exact; no gap is
evaluated in that phase.  The gap is evaluated every ``check_every`` = 10 iterations, and
every 2 once it is within ``30 tol``, so that the certificate is not missed by up to 9
iterations (90 -> 82 at :math:`\lambda=1` on that instance).

Where the time goes
-------------------
Measured on a 2-core AMD EPYC (Zen 4, AVX-512) virtual machine, one thread, the wheels'
OpenBLAS (numpy's for the products, scipy's for the eigendecompositions, both on their
AVX-512 ``SkylakeX`` kernels), at the all-distinct 1000 x 5000 instance (reduced 977 x
5000): per float64 iteration the Gram matrix ``Y Y^T`` 0.10 s, its eigendecomposition
(``syevd``) 0.145 s, the product ``QY`` 0.18 s (about 50 Gflop/s: the BLAS is at its
peak), the projection about 0.06 s, the Anderson step about 0.03 s; in float32 0.05 /
0.083 / 0.093 s.  A gap evaluation costs about one iteration, a polish step a bit more,
the final ``gesdd`` singular values 1.2 s.  The SVT output has rank 889 of 977 at the
solution: the max-margin logits of such supports are not low rank, so partial
eigendecompositions (``syevr``: 0.18 s for every vector) or randomized SVDs do not pay.
MKL (torch's CPU build, one thread) is slower here: 0.21 s / 0.20 s / 0.21 s in float64.
With the plain step, checks every 10, the switch at ``1e-4`` and plain alternating
projections the instance took 90 iterations (46 float32, 44 float64) and 8 polish steps,
57 s on a quiet machine; now 76 iterations (60 float32, 16 float64) and 7 polish steps.
In CPU time, paired runs (whole processes: start-up and instance included; median
[min, max] of 3 pairs, load 5-11): 55.5 s [55.0, 58.7] before, 41.7 s [41.3, 44.5] now
(ratio 0.75 [0.75, 0.76]); 47.0 s with the relaxed step, the checks near the certificate
and the later switch but before the relaxed polish.  Their wall times at that load:
414 s [267, 506] and 230 s [215, 288].  At 1000 x 5000 the bench's other laws take 14-45 s
of CPU time (1-4 words with Zipf exponent 1.1: 35 s, 88 iterations; 1.5: 21 s, 146
iterations; 1-8 words: 44 s, 82 iterations; the Wikipedia sample's supports: 45 s, 80
iterations; the ladder's shared patterns: 14.5 s, 122 iterations).

*The same instance measured 44 s and 88 s* (the old solver).  Its iteration count does not
change (90 in every run: the iteration is deterministic for a given BLAS) and neither do
the BLAS kernels: OpenBLAS's AVX2 kernels (``OPENBLAS_CORETYPE=Haswell``, what a CPU or
hypervisor without AVX-512 gets) run the Gram matrix, eigendecomposition and product in
0.44 s of CPU time against 0.41-0.43 s for the AVX-512 ones (Zen 4 executes AVX-512 on
256-bit units).  What changes is the load of the 2 shared cores: paired runs of the old
solver took 89 s, 96 s and 244 s of wall time for 53-56 s of CPU time at load averages
5-8 (other users' test suites), 57 s at load about 1; 88 s is what it takes beside one
busy neighbour.  A BLAS allowed two threads is worse under load (the same three
operations: 2.2 s of wall time at load 5 against 0.41 s with one thread) and better on an
idle machine, which may be how it once took 44 s, below the 57 s of one quiet thread (not
reproduced: the machine was never idle).  The bench therefore records, per solve, the
load average before it and the CPU time beside the wall time, and per run the kernels and
threads of numpy's and scipy's OpenBLAS (``machine.blas`` in ``bench.json``).

Certificate
-----------
Every :math:`z` is feasible (up to rounding), and :math:`G=\rho(2z-v-x)` is a subgradient of
the nuclear norm at :math:`x` with :math:`\|G\|_{op}\le1`, but it violates the sign and
column-sum constraints of the reduced dual (see :mod:`ntpcore.geo.svm_problem`) by about the
fixed-point residual.  Any :math:`P` in the cone
:math:`D=\{P:\ \omega^\top P=0,\ P_{wg}\le0\ (w\notin\mathcal S_g)\}` certifies
:math:`\|L^{mm}\|_*\ge-\langle J-S,P\rangle/\|P\|_{op}`.
Waiting for the Douglas-Rachford dual to make this tight is slow (the primal settles long
before), so the certificate is built from the nearly optimal iterate instead:

* at every gap evaluation, :math:`P=\Pi_D(G)` (the Euclidean projection, a root-finding
  per column, :func:`ntpcore.geo.svm_dual._project_dual_cone`) rather than clipping
  :math:`G`, which on the bench ladder halves the dual's loss;
* once :math:`\|z\|_*-\|x\|_*` (the primal's excess over the infeasible SVT output, which
  is optimal to second order) is below half the requested gap, a *dual polish*
  alternates projections between :math:`D` and the unit operator-norm ball
  (:func:`ntpcore.geo.svm_dual._dual_polish`): the scaling loss :math:`\|P\|_{op}-1`
  falls geometrically (it halves at every projection on the all-distinct 1000 x 5000
  instance) and the dual reaches the primal's accuracy in 3-8 projections (500 x 2500:
  relative dual error 2e-6 -> 3e-8 in 6 projections).

The gap pairs the best feasible primal with the best dual point met so far (any dual
point bounds the optimum, whichever iterate it came from).  During the iteration the gap
is estimated from eigenvalues of Gram matrices (cheap); the stopping gap is then
recomputed with singular values (LAPACK ``gesdd``) for the centred primal and the
exactly rescaled dual (:func:`ntpcore.geo.svm_problem._dual_repair`), and the result carries only
that certified value.  If the requested gap is not certified, :class:`SolverError` is
raised: an uncertified iterate is never returned as a solution.

Cost per iteration: one symmetric eigendecomposition of the :math:`r\times r` Gram matrix of
the SVT argument and two :math:`r\times r\times u` products (the Gram matrix and
:math:`QY`, :func:`_svt_nuc`), plus :math:`O(ru)` work: the column-wise projections run on
column blocks that stay in cache (:func:`ntpcore.geo.svm_problem._project_columns`), the
iteration's (r x u) arrays are allocated once, and the Anderson least-squares problem is
``memory x memory`` (its Gram matrix is refreshed one row per iteration, reading the stored
residual differences once).  A polish step costs about one iteration.  With the dual
polished, the remaining iterations are the primal's: its excess is
:math:`\|P_{T^\perp}(z-x)\|_*` (the part of the projection's correction normal to the
tangent space of the low-rank :math:`x`), which shrinks with the fixed-point residual.
The start (the polar factor of the centred support) comes from the eigendecomposition of
its Gram matrix rather than an SVD (:func:`_polar_gram`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.validate import as_support
from ntpcore.errors import ParameterError, SolverError
from ntpcore.geo.svm_dual import (  # noqa: F401  (_clip_op: re-exported for the tests)
    _clip_op,
    _dual_polish,
    _dual_value,
    _nuclear_estimate,
    _op_norm_estimate,
    _project_dual_cone,
)
from ntpcore.geo.svm_problem import (
    NuclearSVMResult,
    _dual_repair,
    _project_columns,
    expand_solution,
    reduced_centred_support,
)

__all__ = ["solve_nuclear_svm_scale"]


def _svt_nuc(
    Y: NDArray[np.float64], tau: float, out: NDArray[np.float64] | None = None
) -> tuple[NDArray[np.float64], float]:
    """:func:`ntpcore.geo.svm_problem._svt` that also returns ``||SVT_tau(Y)||_*`` (no extra work).

    With ``k`` of the ``r`` (<= ``u``) singular values above ``tau``, the shrinkage is applied
    as ``Q Y`` with the ``r x r`` matrix ``Q = U_k diag(1 - tau/sigma) U_k^T`` when that is
    cheaper than ``U_k (diag(.) U_k^T Y)`` (``r^2 (k + u)`` against ``2 r k u`` flops: near
    full rank, one ``r x u`` product instead of two).  Computed in the precision of ``Y``
    (float64, or float32 in the solver's early phase); ``out``: optional array for the result.
    """
    if Y.shape[0] > Y.shape[1]:
        X, nuc = _svt_nuc(Y.T, tau, None if out is None else out.T)
        return X.T, nuc
    r, u = Y.shape
    ev, U = scipy.linalg.eigh(Y @ Y.T, check_finite=False, driver="evd", overwrite_a=True)
    keep = ev > tau * tau
    k = int(np.count_nonzero(keep))
    if k == 0:
        X = np.zeros_like(Y) if out is None else out
        X[...] = 0.0
        return X, 0.0
    Uk = U[:, keep]
    sigma = np.sqrt(ev[keep])
    shrink = 1.0 - tau / sigma
    if r * (k + u) < 2 * k * u:
        X = np.matmul((Uk * shrink[None, :]) @ Uk.T, Y, out=out)
    else:
        X = np.matmul(Uk * shrink[None, :], Uk.T @ Y, out=out)
    return X, float((sigma - tau).sum())


def _polar_gram(
    A: NDArray[np.float64], rtol: float = 1e-7
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Polar factor ``U V^T`` of ``A`` (compact SVD ``A = U diag(s) V^T`` over the singular
    values above ``rtol * s_max``) and those singular values, from the eigendecomposition
    of the smaller Gram matrix, several times cheaper than an SVD; singular values below
    about ``1e-8 s_max`` are not resolved this way, which is immaterial for a start."""
    if A.shape[0] > A.shape[1]:
        P, s = _polar_gram(A.T, rtol)
        return P.T, s
    ev, U = scipy.linalg.eigh(A @ A.T, check_finite=False, driver="evd", overwrite_a=True)
    keep = ev > (rtol * rtol) * max(ev[-1], 0.0)
    Uk = U[:, keep]
    s = np.sqrt(ev[keep])
    return ((Uk / s[None, :]) @ Uk.T) @ A, s


def _anderson_update(
    H: NDArray[np.float64],
    dG: NDArray[np.float64],
    slot: int,
    k: int,
    g: NDArray[np.float64],
    rhs_prev: NDArray[np.float64] | None,
) -> NDArray[np.float64]:
    """Refresh row/column ``slot`` of the Gram matrix ``H = dG dG^T`` of the first ``k`` rows
    and return the Anderson right-hand side ``dG g``, reading ``dG`` once.

    ``dG[slot] = g - g_prev`` and every other row is unchanged since ``rhs_prev = dG g_prev``
    was computed, so ``dG[i] . dG[slot] = (dG g)_i - (rhs_prev)_i`` for ``i != slot``;
    ``rhs_prev=None`` (no previous right-hand side) computes the row directly.
    """
    rhs = dG[:k] @ g
    if rhs_prev is None or rhs_prev.size < k - 1:
        col = dG[:k] @ dG[slot]
    else:
        col = np.empty(k)
        col[: rhs_prev.size] = rhs[: rhs_prev.size] - rhs_prev
        col[slot] = float(dG[slot] @ dG[slot])
    H[slot, :k] = col
    H[:k, slot] = col
    return rhs


def solve_nuclear_svm_scale(
    S: ArrayLike,
    *,
    tol: float = 1e-6,
    max_iter: int = 5_000,
    check_every: int = 10,
    memory: int = 8,
    rho: float | None = None,
    relax: float = 1.5,
    polish_steps: int = 12,
    max_seconds: float | None = None,
    log: Callable[[dict[str, float]], None] | None = None,
    single_until: float = 3e-5,
) -> NuclearSVMResult:
    r"""Nuclear-norm NTP-SVM for large vocabularies (Anderson-accelerated Douglas-Rachford).

    Parameters
    ----------
    S : (V, m) bool or 0/1 support matrix.
    tol : relative duality gap certified at exit.
    max_iter : iteration limit.
    check_every : iterations between (estimated) gap evaluations; every 2 iterations once
        an evaluated gap is within ``30 tol`` (the certificate is then near).
    memory : Anderson memory (0: plain Douglas-Rachford, i.e. ADMM).
    rho : penalty (default: from the scale of the centred support).
    relax : relaxation :math:`\lambda\in(0,2)` of the Douglas-Rachford step
        :math:`v\leftarrow v+\lambda(x-z)` (1: the plain step; the fixed points are the same).
    polish_steps : most alternating projections per dual polish (0: certificate from the
        Douglas-Rachford dual alone).
    max_seconds : optional wall-time limit.
    log : called at every gap evaluation with iteration, (estimated) gap, primal, dual,
        fixed-point residual and the number of polish steps taken.
    single_until : the SVT runs in single precision while the fixed-point residual
        ``||T(v) - v||_F`` is above ``single_until * ||Z0||_F`` (``Z0`` the start), still falls
        by 20% every 5 iterations, and for at most ``max_iter // 2`` iterations (0: double
        precision throughout); the gap is evaluated and certified in double precision only.

    Returns
    -------
    NuclearSVMResult
        With ``solver="dr-anderson"``; ``objective`` is the nuclear norm of the returned
        ``L`` and ``dual_objective`` the value of the returned dual-feasible ``G``.

    Raises
    ------
    DataError
        On an invalid support matrix.
    ParameterError
        If ``relax`` is not in (0, 2).
    SolverError
        If the gap ``tol`` is not certified within ``max_iter`` iterations / ``max_seconds``.
    """
    if not 0.0 < relax < 2.0:
        raise ParameterError(f"relax must lie in (0, 2), got {relax}")
    S = as_support(S)
    t0 = time.perf_counter()
    # start: reduced centred support and its polar factor, as solve_nuclear_svm
    red, Z0 = reduced_centred_support(S)
    Sr, omega, delta = red.Sr, red.omega, red.delta
    V = float(S.shape[0])
    polar0, s0 = _polar_gram(Z0)
    if rho is None:
        rho = 0.2 / float(np.mean(s0))  # 0.2: see "The penalty" in the module docstring
    v = Z0 - polar0 / rho
    del polar0
    # the estimated gap must clear tol by more than the rounding of the estimates
    tol_est = tol * (1.0 - 1e-3)

    alpha: NDArray[np.float64] | None = None
    support = np.nonzero(Sr)
    # Anderson memory: differences of residuals g_i = T(v_i) - v_i and of T(v_i) (ring
    # buffers) and the Gram matrix of the former, refreshed one row per iteration
    dG = np.empty((max(memory, 1), Z0.size))
    dF = np.empty_like(dG)
    H = np.zeros((max(memory, 1), max(memory, 1)))
    n_hist = 0
    # the iteration's (r, u) arrays live in buffers allocated once (fresh arrays of this size
    # cost page faults at every iteration): the state v (overwritten by y = 2z - v once z is
    # known: T(v) = v + x - z = z + x - y), z, x, the residual g and T(v), and g and T(v) of
    # the last accepted state (prev_g, prev_f; prev_res is None while there is none)
    vy = v
    z, x, g, f = (np.empty_like(v) for _ in range(4))
    prev_g, prev_f = np.empty_like(v), np.empty_like(v)
    prev_res: float | None = None
    # early phase: the SVT in single precision (y32 -> x32) until the fixed-point residual
    # is below SINGLE_UNTIL * ||Z0||_F (see the module docstring)
    single = single_until > 0.0
    y32 = np.empty(v.shape, dtype=np.float32) if single else None
    x32 = np.empty_like(y32) if single else None
    switch_res = single_until * float(np.linalg.norm(Z0))
    res_hist: list[float] = []
    rhs_prev: NDArray[np.float64] | None = None  # the last Anderson right-hand side, dG prev_g
    # best feasible primal and best dual-feasible point met so far (estimated values)
    best_primal: tuple[float, NDArray[np.float64]] = (np.inf, Z0)
    best_dual: tuple[float, NDArray[np.float64]] = (-np.inf, Z0)
    certified: tuple[NDArray[np.float64], float, NDArray[np.float64], float] | None = None
    gap = np.inf
    it = last_check = 0
    for it in range(1, max_iter + 1):
        z, alpha = _project_columns(vy, Sr, omega, delta, alpha, out=z, support=support)
        np.subtract(z, vy, out=vy)
        vy += z  # y = 2z - v
        y = vy
        if single:
            np.copyto(y32, y, casting="same_kind")
            _, nuc_x = _svt_nuc(y32, 1.0 / rho, out=x32)
            np.copyto(x, x32)
        else:
            x, nuc_x = _svt_nuc(y, 1.0 / rho, out=x)
        # relaxed step: T(v) = v + relax (x - z), with v = 2z - y
        np.subtract(x, z, out=g)
        if relax != 1.0:
            g *= relax  # fixed-point residual T(v) - v
        np.subtract(z, y, out=f)
        f += z
        f += g  # T(v)
        res = float(np.linalg.norm(g))
        # double precision once the residual is small, or once single precision stalls (5
        # iterations gaining less than 20%: its rounding is then what the residual measures)
        res_hist.append(res)
        stalled = len(res_hist) > 5 and res > 0.8 * res_hist[-6]
        if single and (res < switch_res or stalled or it > max_iter // 2):  # (a failsafe)
            single, y32, x32 = False, None, None
        # safeguard: an accelerated state must not increase the residual; restart the
        # memory from the last accepted state's T(v)
        if prev_res is not None and res > prev_res and memory > 0:
            np.copyto(vy, prev_f)
            n_hist, prev_res, rhs_prev = 0, None, None
            continue
        # no gap evaluation in the single-precision phase: its residual is far above what a
        # certificate needs
        due = it % check_every == 0 or (gap <= 30.0 * tol and it - last_check >= 2)
        if due and not single:
            last_check = it
            primal = _nuclear_estimate(z)
            if primal < best_primal[0]:
                best_primal = (primal, z.copy())
            G_dr = rho * (y - x)
            P = _project_dual_cone(G_dr, Sr, omega)
            dual = _dual_value(P, Sr, omega, delta) / max(1.0, _op_norm_estimate(P) * (1.0 + 1e-12))
            if dual > best_dual[0]:
                best_dual = (dual, P)
            steps = 0
            target = best_primal[0] * (1.0 - tol_est)
            # the infeasible SVT output is near-optimal well before z: polish the dual only
            # once ||z||_* - ||x||_* says the primal can carry the requested gap
            if best_dual[0] < target and primal - nuc_x <= 0.5 * tol * primal:
                dual, P, steps = _dual_polish(G_dr, Sr, omega, delta, target, polish_steps)
                if dual > best_dual[0]:
                    best_dual = (dual, P)
            del G_dr, P
            gap = (best_primal[0] - best_dual[0]) / best_primal[0]
            if log is not None:
                log(
                    {
                        "iteration": it,
                        "gap": gap,
                        "primal": best_primal[0],
                        "dual": best_dual[0],
                        "res": res,
                        "polish_steps": steps,
                    }
                )
            if gap <= tol_est:
                # centring (I - omega omega^T / V) on reduced rows = centring L's columns: a
                # contraction that keeps feasibility, so the gap can only shrink
                Zb = best_primal[1]
                Zb = Zb - omega[:, None] * ((omega[:, None] * Zb).sum(axis=0, keepdims=True) / V)
                objective = float(scipy.linalg.svdvals(Zb, check_finite=False).sum())
                Gb, dual_exact = _dual_repair(best_dual[1], Sr, omega, delta)
                gap = (objective - dual_exact) / objective
                if gap <= tol:
                    certified = (Zb, objective, Gb, dual_exact)
                    break
        if it % check_every == 0 and max_seconds is not None:
            if time.perf_counter() - t0 > max_seconds:
                break
        rhs = None
        if prev_res is not None and memory > 0:
            slot = n_hist % memory
            np.subtract(g.reshape(-1), prev_g.reshape(-1), out=dG[slot])
            np.subtract(f.reshape(-1), prev_f.reshape(-1), out=dF[slot])
            n_hist += 1
            rhs = _anderson_update(H, dG, slot, min(n_hist, memory), g.reshape(-1), rhs_prev)
        rhs_prev = rhs
        # this state is now the last accepted one
        g, prev_g = prev_g, g
        f, prev_f = prev_f, f
        prev_res = res
        k = min(n_hist, memory)
        if k == 0:
            np.copyto(vy, prev_f)
            continue
        # type-II Anderson: gamma = argmin ||g - dG^T gamma||, v+ = T(v) - dF^T gamma
        Hk = H[:k, :k].copy()
        Hk[np.diag_indices(k)] += 1e-12 * np.trace(Hk) + 1e-300
        try:
            gamma = scipy.linalg.solve(Hk, rhs, assume_a="pos", check_finite=False)
        except np.linalg.LinAlgError:  # a degenerate history: plain step, memory restarted
            np.copyto(vy, prev_f)
            n_hist, rhs_prev = 0, None
            continue
        np.matmul(gamma, dF[:k], out=vy.reshape(-1))
        np.subtract(prev_f, vy, out=vy)
    if certified is None:
        gap_txt = "no gap evaluated" if not np.isfinite(gap) else f"relative duality gap {gap:.2e}"
        raise SolverError(
            f"Anderson-DR stopped after {it} iterations with {gap_txt} > tol={tol:.0e} "
            "(no certified solution)"
        )
    Zb, objective, Gb, dual = certified
    return expand_solution(S, red, Zb, Gb, dual, it, "dr-anderson", t0, objective=objective)
