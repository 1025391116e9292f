"""The compiled AdamW step of the numpy UFM trainer (``ntpcore/geo/train/_adamw.c``) against
``torch.optim.AdamW``, torch's fused kernel and the numpy update: three implementations of
one update."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ntpcore.errors import DataError
from ntpcore.geo.train import numpy_ufm

pytestmark = pytest.mark.skipif(
    numpy_ufm._ADAMW_LIB is None, reason=f"not built: {numpy_ufm._ADAMW_REASON}"
)
B1, B2, EPS, WD = 0.9, 0.999, 1e-8, 1e-2


def _run(kind: str, n: int, monkeypatch, steps: int = 60) -> np.ndarray:
    """``steps`` AdamW steps of ``numpy_ufm._adamw`` on a seeded problem (the learning rate
    drops once, as under MultiStepLR); the path ``kind`` is forced."""
    monkeypatch.setenv("NTP_COMPILED", "1" if kind == "compiled" else "0")
    if kind == "numpy":
        monkeypatch.delattr(torch, "_fused_adamw_")
    assert numpy_ufm.adamw_kernel() == kind
    rng = np.random.default_rng(0)
    theta, grad = rng.standard_normal(n), np.empty(n)
    mom, vel = np.zeros(n), np.zeros(n)
    step = numpy_ufm._adamw(theta, grad, mom, vel, 0, WD, B1, B2, EPS)
    for k in range(steps):
        grad[:] = rng.standard_normal(n) * (1 + k % 5)
        step(1e-2 if k < steps // 2 else 1e-3)
    monkeypatch.undo()
    return theta


def _torch_optim(n: int, steps: int = 60) -> np.ndarray:
    """The same run with ``torch.optim.AdamW`` (float64, not fused)."""
    rng = np.random.default_rng(0)
    p = torch.nn.Parameter(torch.from_numpy(rng.standard_normal(n)))
    opt = torch.optim.AdamW([p], lr=1e-2, betas=(B1, B2), eps=EPS, weight_decay=WD, foreach=False)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [steps // 2], gamma=0.1)
    for k in range(steps):
        p.grad = torch.from_numpy(rng.standard_normal(n) * (1 + k % 5))
        opt.step()
        sched.step()
    return p.detach().numpy()


@pytest.mark.parametrize("n", [5888, 37])  # the UFM's parameter count; a size of no vector width
def test_compiled_adamw_equals_torch_and_numpy(n, monkeypatch):
    ours = _run("compiled", n, monkeypatch)
    ref = _torch_optim(n)
    np.testing.assert_allclose(ours, ref, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(ours, _run("torch", n, monkeypatch), rtol=1e-14, atol=1e-16)
    np.testing.assert_allclose(ours, _run("numpy", n, monkeypatch), rtol=1e-13, atol=1e-15)
    # the comparison can fail: another weight decay is told apart
    monkeypatch.setattr(numpy_ufm, "_adamw", _with_decay(numpy_ufm._adamw, 2 * WD))
    assert np.max(np.abs(_run("compiled", n, monkeypatch) - ref)) > 1e-6


def _with_decay(fn, wd):
    return lambda theta, grad, mom, vel, t, _wd, *rest: fn(theta, grad, mom, vel, t, wd, *rest)


def test_compiled_adamw_refuses_mismatched_state(monkeypatch):
    monkeypatch.setenv("NTP_COMPILED", "1")
    x = np.zeros(8)
    with pytest.raises(DataError, match="contiguous float64"):
        numpy_ufm._adamw(x, np.zeros(7), np.zeros(8), np.zeros(8), 0, WD, B1, B2, EPS)
    with pytest.raises(DataError, match="contiguous float64"):
        numpy_ufm._adamw(x, np.zeros(16)[::2], np.zeros(8), np.zeros(8), 0, WD, B1, B2, EPS)
