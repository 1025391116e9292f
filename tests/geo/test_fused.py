"""The compiled attention, RMSNorm and SwiGLU gate of the transformer on the prefix trie
(``ntpcore/geo/models/_fused.c``) against torch's operations, outputs and gradients, and
against finite differences; and the transformer's trie path on each against the plain
(context, position) forward."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ntpcore.errors import DataError
from ntpcore.geo.models import fused
from ntpcore.geo.models.transformer import Transformer, TransformerConfig
from ntpcore.geo.models.trie import PrefixTrie

pytestmark = pytest.mark.skipif(
    fused._LIB is None, reason=f"not built: {fused.unavailable_reason()}"
)


def _trie(seed: int = 0, B: int = 40, T: int = 5, vocab: int = 7) -> PrefixTrie:
    g = torch.Generator().manual_seed(seed)
    return PrefixTrie(torch.randint(0, vocab, (B, T), generator=g))


def _leaves(n: int, dtype, seed: int, *shapes):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, dtype=dtype, requires_grad=True) for s in shapes][:n]


def _attention_both(dtype, H=3, D=5, rows=None, queries=None):
    """Outputs and gradients of both paths on a random trie (keys and values per node, or per
    ``rows`` when given; queries on all nodes or on ``queries``)."""
    trie = _trie()
    anc, mask = trie.ancestors, trie.mask
    if queries is not None:
        anc, mask = anc[queries], mask[queries]
    M = trie.n_nodes if rows is None else int(rows.max()) + 1
    if rows is not None:
        anc = rows[anc]
    q, k, v = _leaves(3, dtype, 1, (anc.shape[0], H * D), (M, H * D), (M, H * D))
    g_out = torch.randn(anc.shape[0], H * D, generator=torch.Generator().manual_seed(2)).to(dtype)
    outs = []
    for f in (fused._Attention.apply, fused._attention_torch):
        o = f(q, k, v, anc, mask, H, D**-0.5)
        outs.append([o.detach(), *torch.autograd.grad(o, (q, k, v), g_out)])
    return outs


@pytest.mark.parametrize(
    ("dtype", "rtol"), [(torch.float64, 1e-13), (torch.float32, 2e-6)], ids=["f64", "f32"]
)
@pytest.mark.parametrize("where", ["nodes", "tokens", "leaves"])
def test_attention_equals_torch(dtype, rtol, where):
    trie = _trie()
    rows = trie.token_row if where == "tokens" else None
    queries = trie.leaf if where == "leaves" else None
    ours, theirs = _attention_both(dtype, rows=rows, queries=queries)
    for name, a, b in zip(["out", "dq", "dk", "dv"], ours, theirs, strict=True):
        scale = float(b.abs().max())
        assert scale > 0.1, name  # nothing vacuous: every output and gradient is non-zero
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=rtol * scale, err_msg=name)


def test_attention_gradients_by_finite_differences():
    trie = _trie(B=12, T=4)
    q, k, v = _leaves(3, torch.float64, 3, *[(trie.n_nodes, 6)] * 3)
    fn = lambda q, k, v: fused._Attention.apply(q, k, v, trie.ancestors, trie.mask, 2, 0.7)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k, v))


def test_attention_comparison_can_fail():
    """A kernel that forgets the scale, or the mask, is told apart from torch's path."""
    trie = _trie()
    q, k, v = _leaves(3, torch.float64, 1, *[(trie.n_nodes, 15)] * 3)
    with torch.no_grad():
        ref = fused._attention_torch(q, k, v, trie.ancestors, trie.mask, 3, 0.5)
        unscaled = fused._Attention.apply(q, k, v, trie.ancestors, trie.mask, 3, 1.0)
        every = torch.ones_like(trie.mask)  # the padding (the node again) counted too
        unmasked = fused._Attention.apply(q, k, v, trie.ancestors, every, 3, 0.5)
    assert float((unscaled - ref).abs().max()) > 1e-2
    assert float((unmasked - ref).abs().max()) > 1e-2


def test_attention_bad_input_is_refused():
    trie = _trie()
    n = trie.n_nodes
    q, k, v = (torch.randn(n, 6) for _ in range(3))
    with pytest.raises(DataError, match="multiple of n_heads"):
        fused.trie_attention(q, k, v, trie.ancestors, trie.mask, 4, 1.0)
    with pytest.raises(DataError, match="must be"):
        fused.trie_attention(q, k, v, trie.ancestors[:, :2], trie.mask, 2, 1.0)
    bad = trie.ancestors.clone()
    bad[0, 0] = n  # an allowed row outside k
    with pytest.raises(DataError, match="outside"):
        fused.trie_attention(q, k, v, bad, trie.mask, 2, 1.0)
    empty = trie.mask.clone()
    empty[3] = False
    with pytest.raises(DataError, match="empty row"):
        fused.trie_attention(q, k, v, trie.ancestors, empty, 2, 1.0)


@pytest.mark.parametrize(
    ("dtype", "rtol"), [(torch.float64, 1e-13), (torch.float32, 2e-6)], ids=["f64", "f32"]
)
@pytest.mark.parametrize("C", [128, 13])  # the model's width; a width of no vector size
def test_rms_norm_equals_torch(dtype, rtol, C):
    x, w = _leaves(2, dtype, 4, (50, C), (C,))
    g_out = torch.randn(50, C, generator=torch.Generator().manual_seed(5)).to(dtype)
    outs = []
    ours = lambda x, w: fused._RMSNorm.apply(x, w, 1e-5)  # noqa: E731
    for f in (ours, lambda x, w: F.rms_norm(x, (C,), w, 1e-5)):
        y = f(x, w)
        outs.append([y.detach(), *torch.autograd.grad(y, (x, w), g_out)])
    for name, a, b in zip(["y", "dx", "dw"], *outs, strict=True):
        scale = float(b.abs().max())
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=rtol * scale, err_msg=name)
    assert torch.autograd.gradcheck(
        lambda x, w: fused._RMSNorm.apply(x, w, 1e-5),
        tuple(t.detach().double().requires_grad_() for t in (x[:4], w)),
    )
    # the comparison can fail: another epsilon is told apart
    with torch.no_grad():
        other = fused._RMSNorm.apply(x * 1e-3, w, 1e-4)
        assert float((other - F.rms_norm(x * 1e-3, (C,), w, 1e-5)).abs().max()) > 1e-3


def test_rms_norm_bad_input_is_refused():
    with pytest.raises(DataError, match="need"):
        fused.rms_norm(torch.randn(3, 4), torch.ones(5), 1e-5)


@pytest.mark.parametrize(
    ("dtype", "rtol"), [(torch.float64, 1e-13), (torch.float32, 1e-6)], ids=["f64", "f32"]
)
def test_swiglu_equals_torch(dtype, rtol):
    """The gate and its gradients against torch's silu and product, over the range where
    the float exponential is written out (|a| up to 100, past its clamps at -87 and 88)."""
    g = torch.Generator().manual_seed(8)
    a = torch.cat([torch.randn(4000, generator=g) * 6, torch.linspace(-100, 100, 2001)])
    a, b = a.to(dtype).requires_grad_(), torch.randn(6001, generator=g).to(dtype).requires_grad_()
    g_out = torch.randn(6001, generator=g).to(dtype)
    outs = []
    for f in (fused._SwiGLU.apply, lambda a, b: F.silu(a) * b):
        y = f(a, b)
        outs.append([y.detach(), *torch.autograd.grad(y, (a, b), g_out)])
    for name, x, y in zip(["out", "da", "db"], *outs, strict=True):
        scale = float(y.abs().max())
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=0, atol=rtol * scale, err_msg=name)
    # elementwise too: relative error of the gate where it is not tiny
    big = outs[1][0].abs() > 1e-3 * float(outs[1][0].abs().max())
    rel = ((outs[0][0] - outs[1][0]).abs() / outs[1][0].abs())[big]
    assert float(rel.max()) < (1e-12 if dtype == torch.float64 else 1e-6)
    assert torch.autograd.gradcheck(
        fused._SwiGLU.apply, tuple(t.detach()[:50].double().requires_grad_() for t in (a, b))
    )
    with torch.no_grad():  # the comparison can fail: a gate without the sigmoid
        assert float((fused._SwiGLU.apply(a, b) - a * b).abs().max()) > 1.0


def test_swiglu_bad_input_is_refused():
    with pytest.raises(DataError, match="one shape"):
        fused.swiglu(torch.randn(3, 4), torch.randn(4, 3))


def test_kernel_follows_switch_and_device(monkeypatch):
    x = torch.randn(2, 3)
    assert fused.kernel(x) == "compiled"
    assert fused.kernel(x.to(torch.bfloat16)) == "torch"
    monkeypatch.setenv("NTP_COMPILED", "0")
    assert fused.kernel(x) == "torch"
    assert fused.unavailable_reason() == "NTP_COMPILED=0"


@pytest.mark.parametrize("compiled", ["1", "0"])
def test_transformer_trie_path_matches_plain_forward(compiled, monkeypatch):
    """The model on the trie (compiled kernels, or torch's path) against its plain forward on
    the (context, position) grid, which uses neither: logits and every parameter gradient."""
    monkeypatch.setenv("NTP_COMPILED", compiled)
    tokens = torch.randint(0, 9, (30, 5), generator=torch.Generator().manual_seed(6))
    cfg = TransformerConfig(vocab_in=9, vocab_out=11, dim=24, n_layers=3, n_heads=3)
    net = Transformer(cfg, generator=torch.Generator().manual_seed(7)).double()
    grads = []
    for x in (tokens, PrefixTrie(tokens)):
        net.zero_grad()
        logits = net(x)
        (logits * torch.linspace(-1, 1, 11, dtype=torch.float64)).sum().backward()
        grads.append([logits.detach()] + [p.grad.clone() for p in net.parameters()])
    for a, b in zip(*grads, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
