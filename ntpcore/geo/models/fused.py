r"""Fused kernels of the transformer's blocks on the prefix trie
(:meth:`ntpcore.geo.models.transformer.Block.forward_trie`): the attention over a node's
ancestors, RMSNorm, and the SwiGLU gate; and the matrix products of that path and of the
LSTM's (:func:`linear`, by oneDNN).

**Attention over the trie.** Query row :math:`n` attends to the key/value rows
``anc[n, t]`` that ``mask[n, t]`` allows (its node's ancestors, itself included); per head,

.. math::  s_t = \mathrm{scale}\; q^\top k_t, \qquad p = \mathrm{softmax}_t(s), \qquad
           o = \textstyle\sum_t p_t\, v_t .

**RMSNorm** of the rows of ``x`` with gain ``w``: :math:`y = x\,w / \sqrt{\overline{x^2} +
\epsilon}` (``torch.nn.RMSNorm``).

**The SwiGLU gate** :math:`\mathrm{silu}(a) \odot b`, :math:`\mathrm{silu}(a) = a / (1 +
e^{-a})`, between the feed-forward's matrix products.

Each has two implementations of one function:

* the torch path (:func:`_attention_torch`, :func:`torch.nn.functional.rms_norm`,
  ``silu(a) * b``): torch's operations, differentiated by autograd, on any device and dtype;
* the compiled kernels of ``ntpcore/geo/models/_fused.c``: a forward and a hand-written
  backward each (:class:`_Attention`, :class:`_RMSNorm`, :class:`_SwiGLU`), one pass over
  the rows instead of a dozen tensor operations and their temporaries (the attention's
  gathered (N, T, H, D) keys and values, whose broadcast inner dimensions torch does not
  vectorise; the gate's five passes over (nodes, 512) arrays).  Every sum is taken in a
  fixed order without fused multiply-adds, so every CPU computes the same bits (the
  softmax's exponential is the C library's; the gate's float exponential is written out in
  ``_fused.c``, so that it vectorises: relative error about 1e-7).

**Matrix products.** :func:`linear` is ``torch.nn.functional.linear``; on the CPU in
float32 its forward and its backward's two products run oneDNN's kernels (torch's operator
``mkldnn._linear_pointwise``) instead of MKL's, where torch was built with oneDNN and
``NTP_ONEDNN`` is not ``0`` (:func:`product` says which); ``tests/geo/test_linear.py``
compares the two.

:func:`trie_attention`, :func:`rms_norm` and :func:`swiglu` take the compiled kernels for
float32 and float64 tensors on the CPU when the extension was built and ``NTP_COMPILED`` is
not ``0`` (:func:`kernel` says which); ``tests/geo/test_fused.py`` compares the two paths,
outputs and gradients, and checks the compiled gradients by finite differences.
"""

from __future__ import annotations

import ctypes
import os

import torch
import torch.nn.functional as F

from ntpcore.core import native
from ntpcore.errors import DataError

__all__ = [
    "MAX_HEADS",
    "MAX_LENGTH",
    "kernel",
    "linear",
    "product",
    "rms_norm",
    "swiglu",
    "trie_attention",
    "unavailable_reason",
]

#: The longest context (trie depth) and the most heads the compiled attention takes
#: (``NTP_MAX_T`` and ``NTP_MAX_H`` of the C source); longer ones run the torch path.
MAX_LENGTH = 64
MAX_HEADS = 64

_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_SIGNATURES: dict[str, tuple] = {}
for _sfx, _real in (("f32", ctypes.c_float), ("f64", ctypes.c_double)):
    _att = [_I64] * 5 + [_PTR] * 5 + [_real]
    _SIGNATURES[f"ntp_attention_fwd_{_sfx}"] = (ctypes.c_int, [*_att, _PTR, _PTR])
    _SIGNATURES[f"ntp_attention_bwd_{_sfx}"] = (ctypes.c_int, [*_att] + [_PTR] * 5)
    _norm = [_I64, _I64, _PTR, _PTR, _real, _PTR, _PTR]
    _SIGNATURES[f"ntp_rms_norm_fwd_{_sfx}"] = (ctypes.c_int, _norm)
    _SIGNATURES[f"ntp_swiglu_fwd_{_sfx}"] = (ctypes.c_int, [_I64] + [_PTR] * 3)
    _SIGNATURES[f"ntp_swiglu_bwd_{_sfx}"] = (ctypes.c_int, [_I64] + [_PTR] * 5)
    _SIGNATURES[f"ntp_rms_norm_bwd_{_sfx}"] = (ctypes.c_int, [_I64, _I64] + [_PTR] * 6)
_LIB, _REASON = native.load("ntpcore.geo.models._fused", _SIGNATURES)
_SUFFIX = {torch.float32: "f32", torch.float64: "f64"}


def kernel(x: torch.Tensor | None = None) -> str:
    """``"compiled"`` when :func:`trie_attention`, :func:`rms_norm` and :func:`swiglu` run
    the compiled kernels (on ``x``, if given: a float32 or float64 tensor on the CPU), else
    ``"torch"``."""
    if _LIB is None or not native.enabled():
        return "torch"
    if x is not None and (x.device.type != "cpu" or x.dtype not in _SUFFIX):
        return "torch"
    return "compiled"


def unavailable_reason() -> str:
    """Why the compiled kernels are not used ("" when they are)."""
    if _LIB is None:
        return _REASON
    return "" if native.enabled() else "NTP_COMPILED=0"


def _fn(name: str, dtype: torch.dtype):
    return getattr(_LIB, f"ntp_{name}_{_SUFFIX[dtype]}")


def _ptrs(*tensors: torch.Tensor) -> list[int]:
    return [t.data_ptr() for t in tensors]


# --------------------------------------------------------------------------- attention


def trie_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    anc: torch.Tensor,
    mask: torch.Tensor,
    n_heads: int,
    scale: float,
) -> torch.Tensor:
    """Attention of the rows of ``q`` (N, H*D) over the rows ``anc`` (N, T) of ``k`` and
    ``v`` (M, H*D) that ``mask`` (N, T, bool) allows, ``n_heads`` heads; returns (N, H*D).

    Raises :class:`~ntpcore.errors.DataError` on shapes that do not fit, and (compiled path)
    on an allowed row of ``anc`` outside ``k`` or a query that may attend to nothing."""
    if q.ndim != 2 or k.ndim != 2 or k.shape != v.shape or k.shape[1] != q.shape[1]:
        raise DataError(
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: need (N, H*D), "
            "(M, H*D), (M, H*D)"
        )
    if n_heads < 1 or q.shape[1] % n_heads:
        raise DataError(f"the width {q.shape[1]} is not a multiple of n_heads = {n_heads}")
    if anc.shape != mask.shape or anc.ndim != 2 or anc.shape[0] != q.shape[0]:
        raise DataError(f"anc {tuple(anc.shape)} and mask {tuple(mask.shape)} must be (N, T)")
    fits = anc.shape[1] <= MAX_LENGTH and n_heads <= MAX_HEADS and k.shape[0] > 0
    same = q.dtype == k.dtype == v.dtype and q.device == k.device == v.device
    if kernel(q) == "compiled" and fits and same:
        return _Attention.apply(q, k, v, anc, mask, n_heads, float(scale))
    return _attention_torch(q, k, v, anc, mask, n_heads, scale)


def _attention_torch(q, k, v, anc, mask, n_heads: int, scale: float) -> torch.Tensor:
    """The torch path: gather the ancestors' keys and values, then products and sums."""
    N, T = anc.shape
    hd = q.shape[1] // n_heads
    idx = anc.reshape(-1)
    k = k.index_select(0, idx).view(N, T, n_heads, hd)  # the ancestors' keys and values
    v = v.index_select(0, idx).view(N, T, n_heads, hd)
    score = (q.view(N, 1, n_heads, hd) * k).sum(-1) * scale  # (N, T, nh)
    p = torch.softmax(score.masked_fill(~mask[:, :, None], float("-inf")), dim=1)
    return (p.unsqueeze(-1) * v).sum(1).reshape(N, n_heads * hd)  # (N, width)


class _Attention(torch.autograd.Function):
    """The compiled forward and backward of :func:`trie_attention` (first derivatives)."""

    @staticmethod
    def forward(ctx, q, k, v, anc, mask, n_heads: int, scale: float):
        q, k, v = (t.contiguous() for t in (q, k, v))
        anc = anc.to(torch.int64).contiguous()
        mask = mask.to(torch.bool).contiguous()
        (N, width), M, T = q.shape, k.shape[0], anc.shape[1]
        out, p = q.new_empty(N, width), q.new_empty(N, T, n_heads)
        dims = (N, T, n_heads, width // n_heads, M)
        if _fn("attention_fwd", q.dtype)(*dims, *_ptrs(q, k, v, anc, mask), scale, *_ptrs(out, p)):
            raise DataError(
                "trie attention: an allowed row of anc lies outside k and v, or a query may "
                "attend to nothing (mask has an empty row)"
            )
        ctx.save_for_backward(q, k, v, anc, mask, p)
        ctx.dims, ctx.scale = dims, scale
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        q, k, v, anc, mask, p = ctx.saved_tensors
        g = grad.contiguous()
        gq, gk, gv = torch.empty_like(q), torch.zeros_like(k), torch.zeros_like(v)
        if _fn("attention_bwd", q.dtype)(
            *ctx.dims, *_ptrs(q, k, v, anc, mask), ctx.scale, *_ptrs(p, g, gq, gk, gv)
        ):
            raise DataError("trie attention: an allowed row of anc lies outside k and v")
        return gq, gk, gv, None, None, None, None


# --------------------------------------------------------------------------- RMSNorm


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float | None) -> torch.Tensor:
    """RMSNorm of the rows of ``x`` (R, C) with gain ``weight`` (C,):
    ``torch.nn.functional.rms_norm(x, (C,), weight, eps)`` (``eps=None``: the dtype's
    machine epsilon, as there)."""
    if x.ndim != 2 or weight.shape != (x.shape[1],):
        raise DataError(f"x {tuple(x.shape)} and weight {tuple(weight.shape)}: need (R, C), (C,)")
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    if kernel(x) == "compiled" and weight.dtype == x.dtype and weight.device == x.device:
        return _RMSNorm.apply(x, weight, float(eps))
    return F.rms_norm(x, (x.shape[1],), weight, eps)


class _RMSNorm(torch.autograd.Function):
    """The compiled forward and backward of :func:`rms_norm` (first derivatives)."""

    @staticmethod
    def forward(ctx, x, weight, eps: float):
        x, weight = x.contiguous(), weight.contiguous()
        R, C = x.shape
        y, rstd = torch.empty_like(x), x.new_empty(R)
        if _fn("rms_norm_fwd", x.dtype)(R, C, *_ptrs(x, weight), eps, *_ptrs(y, rstd)):
            raise DataError(f"rms_norm: cannot take x of shape {(R, C)}")
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, weight, rstd = ctx.saved_tensors
        g = grad.contiguous()
        gx, gw = torch.empty_like(x), torch.zeros_like(weight)
        if _fn("rms_norm_bwd", x.dtype)(*x.shape, *_ptrs(x, weight, rstd, g, gx, gw)):
            raise DataError(f"rms_norm: cannot take x of shape {tuple(x.shape)}")
        return gx, gw, None


# --------------------------------------------------------------------------- SwiGLU's gate


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """SwiGLU's gate ``silu(a) * b`` (``torch.nn.functional.silu``), elementwise."""
    if a.shape != b.shape:
        raise DataError(f"a {tuple(a.shape)} and b {tuple(b.shape)} must have one shape")
    if kernel(a) == "compiled" and a.dtype == b.dtype and a.device == b.device:
        return _SwiGLU.apply(a, b)
    return F.silu(a) * b


class _SwiGLU(torch.autograd.Function):
    """The compiled forward and backward of :func:`swiglu` (first derivatives): one pass
    each way over ``a`` and ``b``, where torch's operations take five and keep ``silu(a)``."""

    @staticmethod
    def forward(ctx, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        if _fn("swiglu_fwd", a.dtype)(a.numel(), *_ptrs(a, b, out)):
            raise DataError("swiglu: cannot take these tensors")
        ctx.save_for_backward(a, b)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        g = grad.contiguous()
        ga, gb = torch.empty_like(a), torch.empty_like(b)
        if _fn("swiglu_bwd", a.dtype)(a.numel(), *_ptrs(a, b, g, ga, gb)):
            raise DataError("swiglu: cannot take these tensors")
        return ga, gb


# --------------------------------------------------------------------------- matrix products

#: oneDNN's matrix product in torch (the operator its compiler uses for linear layers on the
#: CPU), or None where torch was built without oneDNN.
_ONEDNN = (
    getattr(torch.ops.mkldnn, "_linear_pointwise", None)
    if torch.backends.mkldnn.is_available()
    else None
)


def product(x: torch.Tensor | None = None) -> str:
    """``"onednn"`` when :func:`linear` multiplies by oneDNN (on ``x``, if given: a float32
    tensor on the CPU), else ``"torch"`` (``torch.nn.functional.linear``: MKL on x86)."""
    if _ONEDNN is None or os.environ.get("NTP_ONEDNN", "1") == "0":
        return "torch"
    if x is not None and (x.device.type != "cpu" or x.dtype != torch.float32):
        return "torch"
    return "onednn"


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight.T (+ bias)`` for ``x`` (N, C), ``weight`` (K, C), ``bias`` (K,):
    ``torch.nn.functional.linear(x, weight, bias)``.

    On the CPU in float32 (:func:`product`) the three products of a step (this one, and
    the backward's ``grad @ weight`` and ``grad.T @ x``) are oneDNN's: MKL, which torch's
    own products call on x86, takes its AVX2 kernels on AMD CPUs, while oneDNN takes what
    the CPU has (AVX-512).  The two agree to float32 rounding (the sums run in another
    order); ``NTP_ONEDNN=0`` keeps torch's product."""
    if x.ndim != 2 or weight.ndim != 2 or x.shape[1] != weight.shape[1]:
        raise DataError(f"x {tuple(x.shape)} and weight {tuple(weight.shape)}: need (N, C), (K, C)")
    if bias is not None and bias.shape != (weight.shape[0],):
        raise DataError(f"bias {tuple(bias.shape)}: need ({weight.shape[0]},)")
    same = all(t.dtype == x.dtype and t.device == x.device for t in (weight, bias) if t is not None)
    if product(x) == "onednn" and same:
        return _Linear.apply(x, weight, bias)
    return F.linear(x, weight, bias)


def _onednn(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b.T (+ bias)`` by oneDNN (``a``, ``b`` may be transposed views)."""
    return _ONEDNN(a, b, bias, "none", [], "")


class _Linear(torch.autograd.Function):
    """:func:`linear` with each of its products by oneDNN."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return _onednn(x, weight, bias)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        gx = _onednn(grad, weight.t()) if need_x else None
        gw = _onednn(grad.t(), x.t()) if need_w else None
        return gx, gw, grad.sum(0) if need_b else None
