"""The UFM trainer against the authors' formulation (book ``geo-eq-summed-loss``): the
closed-form float64 loop with the fused AdamW kernel equals the per-sample torch loop of
:func:`tools.bench.reference.ufm` run in float64, to rounding; without the fused kernel
(the numpy AdamW) and with the logits always shifted before ``exp`` it is the same run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ntpcore.geo import train as gt
from ntpcore.geo.synthetic import synthetic_dataset
from ntpcore.geo.train import numpy_ufm
from tools.bench import reference

KEYS = ("ce_minus_H", "W_norm", "H_norm", "L_norm")


@pytest.fixture(scope="module")
def synth():
    return synthetic_dataset(seed=0)


def _cfg(**kw) -> gt.TrainerConfig:
    kw = {"n_steps": 400, "lr": 3e-3, "lr_milestones": (150, 300), **kw}
    return gt.TrainerConfig(gt.AdamWProtocol(**kw))


def test_ufm_equals_the_per_sample_reference_in_float64(synth):
    cfg = _cfg()
    ours = gt.train_ufm_numpy(synth, cfg, progress=False)
    ref = reference.ufm(synth, cfg, dtype=torch.float64)
    np.testing.assert_array_equal(ours["epoch"], ref["epoch"])
    np.testing.assert_allclose(ours["W"], ref["W"], rtol=0, atol=1e-6)  # float32 snapshots
    for k in KEYS:
        assert ours[k][-1] == pytest.approx(ref[k], rel=1e-10), k
    # the comparison can fail: another weight decay is told apart
    other = reference.ufm(synth, _cfg(weight_decay=1e-2), dtype=torch.float64)
    assert abs(other["W_norm"] - ours["W_norm"][-1]) > 1e-6 * ours["W_norm"][-1]


def test_fused_kernel_and_unshifted_logits_change_nothing_but_rounding(synth, monkeypatch):
    cfg = _cfg(n_steps=300)
    fast = gt.train_ufm_numpy(synth, cfg, progress=False)
    monkeypatch.setenv("NTP_COMPILED", "0")  # not the compiled AdamW ...
    monkeypatch.delattr(torch, "_fused_adamw_")  # ... nor torch's fused one: the numpy AdamW
    assert numpy_ufm.adamw_kernel() == "numpy"
    monkeypatch.setattr(numpy_ufm, "_UFM_NO_SHIFT", -1.0)  # every epoch shifts its logits
    slow = gt.train_ufm_numpy(synth, cfg, progress=False)
    for k in (*KEYS, "W_final", "H_final"):
        np.testing.assert_allclose(fast[k], slow[k], rtol=1e-11, atol=1e-13, err_msg=k)
