r"""The torch trainer of the geometry paper's networks [geo, Sec. 3] (transformer, LSTM, and
the torch UFM used as an oracle): full batch on the distinct contexts with counts, AdamW,
on the GPU when one is present.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ntpcore.core.io import atomic_path
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.train.numpy_ufm import init_ufm_state
from ntpcore.geo.train.protocol import Recorder, TrainerConfig, epoch_bar, lr_at, record_epochs

__all__ = [
    "build_model",
    "default_device",
    "make_optimizer",
    "model_inputs",
    "summed_loss",
    "train_torch",
    "ufm_init_arrays",
]


def default_device() -> torch.device:
    """The GPU when one is present, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build_model(ds: ContextDataset, cfg: TrainerConfig) -> torch.nn.Module:
    """The model of ``cfg`` for ``ds``, initialised from ``cfg.protocol.init_seed`` (CPU, in
    ``cfg``'s dtype)."""
    from ntpcore.geo.models.lstm import LSTMConfig, LSTMModel
    from ntpcore.geo.models.transformer import Transformer, TransformerConfig
    from ntpcore.geo.models.ufm import UFM

    if cfg.model == "ufm":  # the same initial values as train_ufm_numpy
        return UFM.from_arrays(*ufm_init_arrays(ds, cfg), dtype=cfg.torch_dtype)
    gen = torch.Generator().manual_seed(cfg.protocol.init_seed)
    sizes = {"vocab_in": len(ds.input_vocab), "vocab_out": ds.V, "dim": cfg.protocol.dim}
    if cfg.model == "transformer":
        tcfg = TransformerConfig(**sizes, n_layers=cfg.tf_layers, n_heads=cfg.tf_heads)
        net: torch.nn.Module = Transformer(tcfg, generator=gen)
    else:
        lcfg = LSTMConfig(**sizes, n_layers=cfg.lstm_layers, output_bias=cfg.lstm_bias)
        net = LSTMModel(lcfg, generator=gen)
    return net.to(cfg.torch_dtype)


def ufm_init_arrays(ds: ContextDataset, cfg: TrainerConfig) -> tuple[np.ndarray, np.ndarray]:
    theta = init_ufm_state(ds, cfg)
    nW = ds.V * cfg.protocol.dim
    return theta[:nW].reshape(ds.V, cfg.protocol.dim), theta[nW:].reshape(cfg.protocol.dim, ds.m)


def model_inputs(ds: ContextDataset, cfg: TrainerConfig) -> Any:
    """What the model reads: context indices (m,) for the UFM, the contexts' prefix trie for
    the transformer and the LSTM (same function as on the token ids (m, T), each distinct
    prefix computed once)."""
    from ntpcore.geo.models.trie import PrefixTrie

    if cfg.model == "ufm":
        return torch.arange(ds.m)
    return PrefixTrie(torch.from_numpy(np.array(ds.contexts, dtype=np.int64)))


def summed_loss(logits: torch.Tensor, counts_t: torch.Tensor) -> torch.Tensor:
    r"""Sum over the n samples of the CE loss, from distinct-context ``logits`` (m, V).

    ``counts_t`` (m, V) holds :math:`n_{z,j}` transposed: :math:`\sum_j n_j \mathrm{LSE}(\ell_j)
    - \sum_{j,z} n_{z,j} \ell_{z,j}`.
    """
    return (counts_t.sum(dim=1) * torch.logsumexp(logits, dim=1)).sum() - (counts_t * logits).sum()


def make_optimizer(model: torch.nn.Module, cfg: TrainerConfig) -> torch.optim.AdamW:
    """AdamW on every parameter (the authors' single parameter group)."""
    dev = next(model.parameters()).device
    fused = dev.type in ("cpu", "cuda")
    return torch.optim.AdamW(
        model.parameters(),
        lr=cfg.protocol.lr,
        weight_decay=cfg.protocol.weight_decay,
        betas=(0.9, 0.999),
        eps=1e-8,
        fused=fused,
    )


def train_torch(
    ds: ContextDataset,
    cfg: TrainerConfig,
    *,
    checkpoint: Path | None = None,
    checkpoint_seconds: float = 120.0,
    progress: bool = True,
    device: torch.device | str | None = None,
) -> dict[str, Any]:
    """Train ``build_model(ds, cfg)`` full-batch on the distinct contexts with counts.

    Returns the recorded metrics plus ``W_final``, ``H_final``, ``b_final`` (float64),
    ``seconds``, ``sec_per_epoch``, ``device`` and ``n_params``.
    """
    dev = torch.device(device) if device is not None else default_device()
    model = build_model(ds, cfg).to(dev)
    opt = make_optimizer(model, cfg)
    x = model_inputs(ds, cfg).to(dev)
    counts_t = torch.from_numpy(ds.counts.T.astype(np.float64)).to(dev, cfg.torch_dtype)
    rec = Recorder(ds, record_epochs(cfg.protocol.n_steps, cfg.protocol.n_records))
    start = 0
    if checkpoint is not None and checkpoint.exists():
        state = torch.load(checkpoint, map_location=dev, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = int(state["epoch"])
        rec.load({k: v.numpy() for k, v in state["rec"].items()})

    def save(epoch: int) -> None:
        rec_t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in rec.state().items()}
        with atomic_path(checkpoint) as tmp_path:
            torch.save(
                {
                    "model": model.state_dict(),
                    "opt": opt.state_dict(),
                    "epoch": epoch,
                    "rec": rec_t,
                },
                tmp_path,
            )

    def snapshot(k: int, feats: torch.Tensor) -> None:
        b = model.output_bias
        rec.add(
            k,
            model.output_weight.detach().cpu().numpy(),
            feats.detach().t().cpu().numpy(),
            None if b is None else b.detach().cpu().numpy(),
        )

    model.train()
    t0 = last_save = time.perf_counter()
    bar = epoch_bar(cfg, start, cfg.model, progress)
    nxt = rec.next_epoch()
    for k in range(start, cfg.protocol.n_steps):
        feats = model.features(x)  # (m, d)
        if k == nxt:
            snapshot(k, feats)
            nxt = rec.next_epoch()
        loss = summed_loss(model.output(feats), counts_t)
        for group in opt.param_groups:
            group["lr"] = lr_at(cfg.protocol, k)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        bar.update(1)
        if checkpoint is not None and time.perf_counter() - last_save > checkpoint_seconds:
            save(k + 1)
            last_save = time.perf_counter()
    bar.close()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        feats = model.features(x)
    if nxt == cfg.protocol.n_steps:
        snapshot(cfg.protocol.n_steps, feats)
    b = model.output_bias
    return rec.finish(
        cfg,
        start,
        seconds,
        checkpoint,
        W_final=model.output_weight.detach().cpu().double().numpy(),
        H_final=feats.detach().t().cpu().double().numpy(),
        b_final=np.zeros(ds.V) if b is None else b.detach().cpu().double().numpy(),
        device=str(dev),
        n_params=int(sum(p.numel() for p in model.parameters())),
    )
