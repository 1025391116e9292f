r"""The compiled descent steps of ``ntpcore/att/_steps.c``, called through :mod:`ctypes`.

:func:`ntpcore.att.descent.descend` runs its hot loop here
(:func:`ntpcore.att.kernel.loop_compiled`) when the extension was built (``pip install -e .``
compiles it; it is optional) and ``NTP_COMPILED`` is not ``0``:
many steps of every problem of the batch per call, instead of one numpy call per
operation and step.  The arithmetic is that of the numpy kernel
(:class:`ntpcore.att.kernel.Kernel`), each sum in a fixed order and no fused multiply-add,
so the vector width of the CPU does not change a bit (``exp`` is the C library's), and it
agrees with numpy's BLAS products to rounding
(``tests/att/test_att_compiled.py``); ``NTP_COMPILED=0`` runs the numpy loop instead
(the *numpy-kernels* configuration of :mod:`tools.qa.reproducibility`).
"""

from __future__ import annotations

import ctypes

import numpy as np

from ntpcore.core import native
from ntpcore.errors import DataError

__all__ = ["StepData", "available", "steps", "unavailable_reason"]

_I64, _F64, _PTR, _INT = ctypes.c_int64, ctypes.c_double, ctypes.c_void_p, ctypes.c_int


_RECORDS = [_PTR, _PTR, _I64, _I64, _PTR, _I64, _I64, _I64]  # W, W_out.., e_out.., n_e
_LIB, _REASON = native.load(
    "ntpcore.att._steps",
    {
        "ntp_identity_log_steps": (
            _INT,
            [_I64] * 6 + _RECORDS + [_PTR] * 7 + [_F64, _INT, _INT, _F64],
        ),
        "ntp_general_steps": (
            _INT,
            [_I64] * 7 + _RECORDS + [_PTR] * 9 + [_INT, _PTR, _F64, _INT, _INT, _INT],
        ),
    },
)


def available() -> bool:
    """Whether :func:`ntpcore.att.descent.descend` uses the compiled steps: the extension is
    built and ``NTP_COMPILED`` is not ``0``."""
    return _LIB is not None and native.enabled()


def unavailable_reason() -> str:
    """Why the compiled steps are not used ("" when they are)."""
    if _LIB is None:
        return _REASON
    return "" if available() else "NTP_COMPILED=0"


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def _row_strides(a: np.ndarray, shape: tuple[int, ...], name: str) -> tuple[int, int]:
    """Element strides of the two leading axes of a float64 array whose last axis is
    contiguous; the shape is checked."""
    if a.dtype != np.float64 or a.shape != shape or a.strides[-1] != 8:
        raise DataError(f"{name}: a float64 array {shape} with a contiguous last axis is needed")
    if any(s % 8 for s in a.strides):
        raise DataError(f"{name}: strides must be whole elements")
    return a.strides[0] // 8, a.strides[1] // 8


class StepData:
    """The fixed inputs of :func:`steps` for a batch of ``B`` problems over ``G`` datasets
    (problem ``b`` has dataset ``b mod G``), checked once.

    Both heads: ``F`` (G, N, p) with rows :math:`\\operatorname{vec}(x_t \\bar x_i^\\top)`;
    ``bias`` (B, N) 0 or -inf; ``w`` (B, n) sample weights (times the step size for plain
    GD); ``eta`` (B,) normalized-GD step sizes.  Identity head (log-loss): ``label`` (G, N)
    bool.  General head: ``A`` (G, N, K) token-vocabulary products :math:`x_t^\\top e_k`,
    ``onehot`` (G, n, K), ``ce`` (B,) bool (cross-entropy, else squared loss) and
    ``shift_u`` (shift the logits by their maximum).
    """

    def __init__(
        self,
        F,
        bias,
        w,
        eta,
        *,
        eps: float,
        normalized: bool,
        label=None,
        tiny: float = 0.0,
        A=None,
        onehot=None,
        ce=None,
        shift_u: bool = True,
    ):
        c64 = lambda a: np.ascontiguousarray(a, dtype=np.float64)  # noqa: E731
        self.F = c64(F)
        G, N, p = self.F.shape
        self.FT = c64(self.F.transpose(0, 2, 1))
        self.bias, self.w, self.eta = c64(bias), c64(w), c64(eta)
        B, n = self.w.shape
        ok = self.bias.shape == (B, N) and self.eta.shape == (B,) and B % G == 0 and N % n == 0
        self.head = "identity" if A is None else "general"
        if self.head == "identity":
            self.label = c64(np.asarray(label, bool))
            ok = ok and self.label.shape == (G, N)
            self.tiny = float(tiny)
        else:
            self.A, self.onehot = c64(A), c64(onehot)
            K = self.A.shape[-1]
            ce = np.asarray(ce, bool)
            ok = ok and self.A.shape == (G, N, K) and self.onehot.shape == (G, n, K)
            ok = ok and ce.shape == (B,)
            # dl/du = (p - 1_y)(w_ce + 2 w (1 - p_y) p_y): the numpy kernel's products
            self.w_ce = c64(self.w * ce[:, None])
            self.w_sq = c64(2.0 * self.w * (1.0 - ce[:, None]))
            self.all_ce, self.shift_u = bool(ce.all()), bool(shift_u)
        if not ok:
            raise DataError("inconsistent shapes of the compiled steps' inputs")
        self.ds = np.arange(B, dtype=np.int64) % G
        self.shape = (B, G, n, N, p)
        self.eps, self.normalized = float(eps), bool(normalized)


def steps(data: StepData, W: np.ndarray, n_steps: int, W_out=None, e_out=None, shift=False):
    """Advance every row of ``W`` (B, p) by ``n_steps`` (normalized) GD steps, in place.

    ``W_out`` (B, n_steps, p): W after each step; ``e_out`` (B, k, N), k <= n_steps: the
    exponentiated scores of the first k steps (the attention and the identity loss are read
    from them); both may be strided views with a contiguous last axis.  ``shift``: subtract
    each sequence's largest score before ``exp``."""
    B, G, n, N, p = data.shape
    if W.dtype != np.float64 or W.shape != (B, p) or not W.flags.c_contiguous:
        raise DataError(f"W must be a C-contiguous float64 array {(B, p)}")
    if n_steps < 0:
        raise DataError("n_steps must be >= 0")
    wo = (None, 0, 0)
    if W_out is not None:
        wo = (_ptr(W_out), *_row_strides(W_out, (B, n_steps, p), "W_out"))
    eo, n_e = (None, 0, 0), 0
    if e_out is not None:
        n_e = e_out.shape[1]
        if n_e > n_steps:
            raise DataError("e_out holds more steps than are taken")
        eo = (_ptr(e_out), *_row_strides(e_out, (B, n_e, N), "e_out"))
    d = data
    common = (_ptr(W), *wo, *eo, n_e, _ptr(d.F), _ptr(d.FT), _ptr(d.ds), _ptr(d.bias))
    if d.head == "identity":
        rc = _LIB.ntp_identity_log_steps(
            B, G, n, N, p, n_steps, *common, _ptr(d.label), _ptr(d.w), _ptr(d.eta),
            d.eps, int(d.normalized), int(bool(shift)), d.tiny,
        )  # fmt: skip
    else:
        K = d.A.shape[-1]
        rc = _LIB.ntp_general_steps(
            B, G, n, N, p, K, n_steps, *common, _ptr(d.A), _ptr(d.onehot), _ptr(d.w),
            _ptr(d.w_ce), _ptr(d.w_sq), int(d.all_ce), _ptr(d.eta), d.eps, int(d.normalized),
            int(bool(shift)), int(d.shift_u),
        )  # fmt: skip
    if rc == -2:
        raise MemoryError(f"the compiled steps' buffers (n T = {N}, d^2 = {p})")
    if rc != 0:
        raise DataError(f"inconsistent sizes for the compiled steps (n = {n}, n T = {N})")
