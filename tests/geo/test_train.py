"""Training-loop tests (paper ``geo``; book: *Trained models*, ``geo-eq-summed-loss``).

Oracles: the distinct-contexts-with-counts loss equals the naive per-sample loop; the
closed-form numpy UFM equals torch autograd + ``torch.optim.AdamW``; a resumed run equals
an uninterrupted one; training is deterministic given the seed.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ntpcore.geo import ce
from ntpcore.geo import train as gt
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.synthetic import synthetic_dataset
from ntpcore.geo.train import numpy_ufm, torch_nets

SMALL = {"dim": 16, "tf_layers": 1, "tf_heads": 2, "lstm_layers": 1}
PROTOCOL = {f.name for f in dataclasses.fields(gt.AdamWProtocol)}


@pytest.fixture(scope="module")
def synth() -> ContextDataset:
    return synthetic_dataset(seed=0)


def _cfg(model: str, **kw) -> gt.TrainerConfig:
    base = {**SMALL, "n_steps": 40, "n_records": 8, "lr": 1e-3, "lr_milestones": (15, 30)}
    base.update(kw)
    if model == "ufm":
        base["dim"] = kw.get("dim", 8)
    protocol = gt.AdamWProtocol(**{k: v for k, v in base.items() if k in PROTOCOL})
    return gt.TrainerConfig(protocol, model, **{k: v for k, v in base.items() if k not in PROTOCOL})


def test_lr_schedule_matches_multistep_lr() -> None:
    cfg = gt.AdamWProtocol(lr=1e-4, lr_milestones=(5, 10, 15, 20, 25))
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=cfg.lr)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, list(cfg.lr_milestones), cfg.lr_gamma)
    for k in range(30):
        assert opt.param_groups[0]["lr"] == pytest.approx(gt.lr_at(cfg, k), rel=1e-12)
        opt.step()
        sched.step()
    assert gt.lr_at(gt.AdamWProtocol(), 29999) == pytest.approx(1e-4 * 0.4**5)


def test_record_epochs() -> None:
    ep = gt.record_epochs(30000, 60)
    assert ep[0] == 0 and ep[-1] == 30000
    assert {1, 10, 100, 1000, 10000} <= set(ep.tolist())
    assert np.all(np.diff(ep) > 0)
    assert gt.record_epochs(0).tolist() == [0]


@pytest.mark.parametrize("model", ["ufm", "transformer", "lstm"])
def test_distinct_context_loss_equals_naive_sample_loop(synth: ContextDataset, model: str) -> None:
    """Oracle: sum over the n samples, one at a time, of -log softmax(logits)[z_i]."""
    cfg = _cfg(model, dtype="float64")
    net = gt.build_model(synth, cfg)
    x = gt.model_inputs(synth, cfg)
    counts_t = torch.from_numpy(synth.counts.T.astype(np.float64))
    fast = gt.summed_loss(net(x), counts_t)
    g_fast = torch.autograd.grad(fast, list(net.parameters()))

    ctx_idx, z = synth.samples()
    tokens = torch.from_numpy(np.array(synth.contexts, dtype=np.int64))
    naive = torch.zeros((), dtype=torch.float64)
    for j, zi in zip(ctx_idx.tolist(), z.tolist(), strict=True):
        inp = torch.tensor([j]) if model == "ufm" else tokens[j : j + 1]
        naive = naive + F.cross_entropy(net(inp), torch.tensor([zi]), reduction="sum")
    g_naive = torch.autograd.grad(naive, list(net.parameters()))
    assert len(z) == synth.n
    torch.testing.assert_close(fast, naive, rtol=1e-12, atol=1e-10)
    for a, b in zip(g_fast, g_naive, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)
    # and the summed loss is n * CE(L) with CE weighted by the context probabilities
    with torch.no_grad():
        L = net(x).t().numpy()  # (V, m)
    assert fast.item() / synth.n == pytest.approx(ce(L, synth.P, synth.pi), rel=1e-12)


def test_numpy_ufm_equals_torch_adamw(synth: ContextDataset) -> None:
    """Closed-form gradient + in-place AdamW == autograd + torch.optim.AdamW (float64)."""
    cfg = _cfg(
        "ufm", n_steps=300, lr=3e-3, lr_milestones=(100, 200), weight_decay=1e-2, n_records=12
    )
    a = gt.train_ufm_numpy(synth, cfg, progress=False)
    b = gt.train_torch(synth, cfg, progress=False, device="cpu")
    np.testing.assert_array_equal(a["epoch"], b["epoch"])
    for k in ("ce", "W_norm", "H_norm", "pf_dist"):
        np.testing.assert_allclose(a[k], b[k], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a["W_final"], b["W_final"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(a["H_final"], b["H_final"], rtol=1e-9, atol=1e-12)
    assert a["ce"][-1] < a["ce"][0]


@pytest.mark.parametrize("model", ["ufm", "transformer", "lstm"])
def test_training_is_deterministic_given_seed(synth: ContextDataset, model: str) -> None:
    cfg = _cfg(model, n_steps=12)
    a = gt.train_model(synth, cfg, progress=False, device="cpu")
    b = gt.train_model(synth, cfg, progress=False, device="cpu")
    c = gt.train_model(
        synth,
        dataclasses.replace(cfg, protocol=dataclasses.replace(cfg.protocol, init_seed=1)),
        progress=False,
        device="cpu",
    )
    for k in ("ce", "W_norm", "H_norm", "W", "H", "b", "W_final"):
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.array_equal(a["W_final"], c["W_final"])


@pytest.mark.parametrize("model", ["ufm", "transformer"])
def test_resume_from_checkpoint_equals_uninterrupted(
    synth: ContextDataset, model: str, tmp_path, monkeypatch
) -> None:
    n = 600 if model == "ufm" else 30
    cfg = _cfg(model, n_steps=n, n_records=10, lr_milestones=(n // 3,))
    full = gt.train_model(synth, cfg, progress=False, device="cpu")

    ckpt = tmp_path / ("run.npz" if model == "ufm" else "run.pt")
    real_lr_at = gt.lr_at
    stop = 2 * n // 3

    def crashing_lr_at(c: gt.AdamWProtocol, step: int) -> float:
        if step == stop:
            raise KeyboardInterrupt
        return real_lr_at(c, step)

    # where the model's trainer looks it up
    trainer = numpy_ufm if model == "ufm" else torch_nets
    monkeypatch.setattr(trainer, "lr_at", crashing_lr_at)
    with pytest.raises(KeyboardInterrupt):
        gt.train_model(
            synth, cfg, progress=False, device="cpu", checkpoint=ckpt, checkpoint_seconds=0
        )
    assert ckpt.exists()
    monkeypatch.setattr(trainer, "lr_at", real_lr_at)
    resumed = gt.train_model(synth, cfg, progress=False, device="cpu", checkpoint=ckpt)
    assert not ckpt.exists()  # removed after a completed run
    for k in ("epoch", "ce", "W_norm", "pf_dist", "W", "H", "W_final", "H_final"):
        np.testing.assert_array_equal(full[k], resumed[k])


def test_recorded_metrics_are_consistent(synth: ContextDataset) -> None:
    cfg = _cfg("lstm", n_steps=20)
    r = gt.train_model(synth, cfg, progress=False, device="cpu")
    L = r["W_final"] @ r["H_final"] + r["b_final"][:, None]
    assert r["epoch"][-1] == 20
    assert r["ce"][-1] == pytest.approx(ce(L, synth.P, synth.pi), rel=1e-5)
    assert np.all(r["ce_minus_H"] > 0)
    assert r["W"].shape == (len(r["epoch"]), synth.V, 16)
    assert r["H"].shape == (len(r["epoch"]), 16, synth.m)
    assert np.any(r["b"][-1] != 0)  # the LSTM output bias trains


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"lr_gamma": -1.0}, r"lr_gamma must lie in \(0, 1\], got -1.0"),
        ({"lr_gamma": 0.0}, r"lr_gamma must lie in \(0, 1\]"),
        ({"lr_gamma": 1.5}, r"lr_gamma must lie in \(0, 1\]"),
        ({"lr": float("nan")}, "finite"),
        ({"lr_milestones": (50, 25)}, "lr_milestones must be increasing"),
        ({"lr_milestones": (-1, 25)}, "lr_milestones must be increasing and >= 0"),
    ],
)
def test_a_schedule_that_would_ascend_is_refused(change, message):
    """Issue 32: lr_gamma=-1 was accepted; every other phase of the training then ascended
    the loss, and the error blamed three theory claims."""
    from ntpcore.errors import DataError

    with pytest.raises(DataError, match=message):
        gt.AdamWProtocol(**change)
