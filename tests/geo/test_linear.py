"""The transformer's and the LSTM's products by oneDNN (:func:`ntpcore.geo.models.fused.linear`)
against torch's ``linear``: outputs and the three gradients, on the shapes of the models and
on transposed views; the switch; and each model on both paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ntpcore.errors import DataError
from ntpcore.geo.models import fused
from ntpcore.geo.models.lstm import LSTMConfig, LSTMModel
from ntpcore.geo.models.transformer import Transformer, TransformerConfig
from ntpcore.geo.models.trie import PrefixTrie

pytestmark = pytest.mark.skipif(fused._ONEDNN is None, reason="torch was built without oneDNN")


def _both(x, w, b, g_out):
    """Output and gradients of oneDNN's path and torch's."""
    leaves = [t for t in (x, w, b) if t is not None]
    outs = []
    for f in (fused._Linear.apply, F.linear):
        y = f(x, w, b)
        outs.append([y.detach(), *torch.autograd.grad(y, leaves, g_out)])
    return outs


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize(("N", "C", "K"), [(1000, 128, 1024), (157, 512, 128), (7, 13, 5)])
def test_linear_equals_torch(N, C, K, bias):
    g = torch.Generator().manual_seed(N + C + K)
    x = torch.randn(N, C, generator=g, requires_grad=True)
    w = (torch.randn(K, C, generator=g) * 0.1).requires_grad_()
    b = torch.randn(K, generator=g, requires_grad=True) if bias else None
    g_out = torch.randn(N, K, generator=g)
    ours, theirs = _both(x, w, b, g_out)
    for name, a, r in zip(["y", "dx", "dw", "db"], ours, theirs, strict=False):
        scale = float(r.abs().max())
        assert scale > 0.1, name
        # float32 sums of up to 1000 terms taken in another order
        np.testing.assert_allclose(a.numpy(), r.numpy(), rtol=0, atol=2e-6 * scale, err_msg=name)


def test_linear_on_views_and_one_input():
    """Transposed and strided inputs give torch's products; a gradient is formed only for
    the inputs that need one."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 40, generator=g)[:, ::2].requires_grad_()  # strided (64, 20)
    w = torch.randn(20, 30, generator=g).t()  # a transposed (30, 20) view, no gradient
    y = fused._Linear.apply(x, w, None)
    np.testing.assert_allclose(y.detach().numpy(), F.linear(x, w).detach().numpy(), atol=1e-5)
    (gx,) = torch.autograd.grad(y.sum(), (x,))
    np.testing.assert_allclose(gx.numpy(), w.sum(0).expand(64, 20).numpy(), rtol=1e-5)


def test_linear_comparison_can_fail():
    """A backward that multiplies by the weight untransposed, or forgets the bias, is told
    apart (square shapes, so that both run)."""
    g = torch.Generator().manual_seed(4)
    x, w = torch.randn(50, 16, generator=g), torch.randn(16, 16, generator=g)
    gy = torch.randn(50, 16, generator=g)
    right = F.linear(gy, w.t())  # grad @ w
    assert float((fused._onednn(gy, w.t()) - right).abs().max()) < 1e-4
    assert float((fused._onednn(gy, w) - right).abs().max()) > 1.0
    b = torch.randn(16, generator=g)
    assert float((fused._onednn(x, w) - F.linear(x, w, b)).abs().max()) > 0.1


def _path(y: torch.Tensor) -> str:
    """Which product made ``y``: oneDNN's (:class:`fused._Linear`) or torch's."""
    return "onednn" if type(y.grad_fn).__name__ == "_LinearBackward" else "torch"


def test_linear_takes_onednn_where_it_should(monkeypatch):
    x = torch.randn(4, 3, requires_grad=True)
    w, b = torch.randn(2, 3), torch.randn(2)
    assert fused.product(x) == "onednn"
    assert _path(fused.linear(x, w)) == _path(fused.linear(x, w, b)) == "onednn"
    assert fused.product(x.double()) == "torch"  # oneDNN has no float64 product
    assert _path(fused.linear(x.double(), w.double())) == "torch"
    # a weight or a bias of another dtype: torch's product, which refuses the mix itself
    for args in ((w.double(),), (w, b.double())):
        with pytest.raises(RuntimeError):
            fused.linear(x, *args)
    monkeypatch.setenv("NTP_ONEDNN", "0")
    assert fused.product(x) == "torch"
    assert _path(fused.linear(x, w)) == "torch"


def test_linear_refuses_bad_shapes():
    x = torch.randn(4, 3)
    with pytest.raises(DataError, match=r"need \(N, C\), \(K, C\)"):
        fused.linear(x, torch.randn(2, 4))
    with pytest.raises(DataError, match=r"need \(N, C\)"):
        fused.linear(torch.randn(2, 3, 3), torch.randn(2, 3))  # one dimension too many
    with pytest.raises(DataError, match=r"bias \(3,\): need \(2,\)"):
        fused.linear(x, torch.randn(2, 3), torch.randn(3))


def _gradients(net, x, V):
    net.zero_grad()
    logits = net(x)
    (logits * torch.linspace(-1, 1, V)).sum().backward()
    return [logits.detach()] + [p.grad.clone() for p in net.parameters()]


@pytest.mark.parametrize("model", ["transformer", "lstm"])
def test_models_on_onednn_match_torch_products(model, monkeypatch):
    """Each model in float32 on its trie with oneDNN's products against the same model with
    torch's: logits and every parameter gradient, to float32 rounding."""
    tokens = torch.randint(0, 9, (40, 5), generator=torch.Generator().manual_seed(6))
    gen = torch.Generator().manual_seed(7)
    if model == "transformer":
        cfg = TransformerConfig(vocab_in=9, vocab_out=11, dim=24, n_layers=3, n_heads=3)
        net = Transformer(cfg, generator=gen)
    else:
        net = LSTMModel(LSTMConfig(vocab_in=9, vocab_out=11, dim=24), generator=gen)
    trie = PrefixTrie(tokens)
    calls = []
    onednn = fused._onednn
    monkeypatch.setattr(fused, "_onednn", lambda *a: calls.append(1) or onednn(*a))
    runs = []
    for flag in ("1", "0"):
        monkeypatch.setenv("NTP_ONEDNN", flag)
        runs.append(_gradients(net, trie, 11))
        assert bool(calls) == (flag == "1")  # the first run took oneDNN's products, not the second
        calls.clear()
    for i, (a, b) in enumerate(zip(*runs, strict=True)):
        scale = float(b.abs().max())
        assert scale > 0, i
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-5 * scale, err_msg=str(i))
