r"""Timers of the geometry paper's trainers and nuclear-norm SVM solvers (key ``geo``).

Training cost of one full-batch epoch in two formulations of the same loss, the summed
cross-entropy over the :math:`n` training pairs (book: ``geo-eq-summed-loss``):

.. math::
    \sum_{i=1}^n -\log \mathbb S_{z_i}(L e_{j(i)})
    = \sum_j \Big(n_j\,\mathrm{LSE}(\ell_j) - \sum_z n_{z,j}\,\ell_{z,j}\Big):

* :func:`naive_epoch_seconds` -- the left side, the authors' formulation: every pair through
  the model, autograd, the default ``torch.optim.AdamW``;
* :func:`epoch_seconds` -- the right side, this project's :func:`ntpcore.geo.train.train_model`
  on the :math:`m` distinct contexts with their counts.

:func:`benchmark_nuclear_svm` times the specialised solver of the nuclear-norm NTP-SVM
(book: ``geo-eq-svm``) against cvxpy on random supports (:func:`random_supports`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from ntpcore.geo import nuclear_svm_cvxpy, solve_nuclear_svm
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.train import TrainerConfig, build_model, train_model


def naive_epoch_seconds(
    ds: ContextDataset, cfg: TrainerConfig, n_epochs: int = 10, warmup: int = 2
) -> float:
    """Seconds per epoch of the authors' formulation, for timing comparisons only.

    One full batch of all ``n`` training pairs (each context repeated by its count), every
    position through every block, the UFM as a one-hot ``Linear(m, d)`` layer, autograd and
    the default (non-fused) ``torch.optim.AdamW``; CPU, ``cfg.torch_dtype``.
    """
    model = build_model(ds, cfg)
    ctx_idx, z = ds.samples()
    target = torch.from_numpy(z)
    if cfg.model == "ufm":
        x: Any = torch.nn.functional.one_hot(torch.from_numpy(ctx_idx), ds.m).to(cfg.torch_dtype)
    else:
        x = torch.from_numpy(np.array(ds.contexts, dtype=np.int64)[ctx_idx])  # (n, T)

    def logits() -> torch.Tensor:
        if cfg.model == "ufm":
            return (x @ model.H.t()) @ model.W.t()  # one-hot layer, then the output layer
        if cfg.model == "lstm":
            return model(x)
        h = model.tok_embeddings(x)
        for layer in model.layers:
            h = layer(h, last_only=False)
        return model.output(model.norm(h[:, -1]))

    opt = torch.optim.AdamW(
        model.parameters(), lr=cfg.protocol.lr, weight_decay=cfg.protocol.weight_decay
    )
    for k in range(warmup + n_epochs):
        if k == warmup:
            t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(logits(), target, reduction="sum")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return (time.perf_counter() - t0) / n_epochs


def epoch_seconds(ds: ContextDataset, cfg: TrainerConfig, n_epochs: int = 10) -> float:
    """Seconds per epoch of :func:`ntpcore.geo.train.train_model` (this project's formulation),
    CPU."""
    protocol = dataclasses.replace(cfg.protocol, n_steps=n_epochs, n_records=2)
    cfg = dataclasses.replace(cfg, protocol=protocol)
    return float(train_model(ds, cfg, progress=False, device="cpu")["sec_per_epoch"])


def random_supports(V: int, m: int, k_max: int, seed: int) -> NDArray[np.bool_]:
    """Random (V, m) supports of sizes uniform in {1..k_max} (the benchmark instances)."""
    rng = np.random.default_rng(seed)
    S = np.zeros((V, m), dtype=bool)
    for j in range(m):
        S[rng.choice(V, int(rng.integers(1, k_max + 1)), replace=False), j] = True
    return S


def benchmark_nuclear_svm(
    S: NDArray[np.bool_], n_repeats: int = 3, reference: str | None = "SCS"
) -> dict[str, float]:
    """Median wall times of the specialised solver and of cvxpy, and their agreement.

    ``reference=None`` skips cvxpy.  Returns ``t_admm``, ``t_ref``, ``speedup``,
    ``obj_admm``, ``obj_ref``, ``rel_obj_diff``, ``viol_admm``, ``viol_ref``, ``gap_admm``.
    """
    t_admm, t_ref = [], []
    sol = ref = None
    for _ in range(n_repeats):
        t0 = time.perf_counter()
        sol = solve_nuclear_svm(S)
        t_admm.append(time.perf_counter() - t0)
        if reference is not None:
            t0 = time.perf_counter()
            ref = nuclear_svm_cvxpy(S, solver=reference)
            t_ref.append(time.perf_counter() - t0)
    assert sol is not None
    out = {
        "t_admm": float(np.median(t_admm)),
        "obj_admm": sol.objective,
        "viol_admm": sol.violation,
        "gap_admm": sol.gap,
    }
    if ref is not None:
        out.update(
            t_ref=float(np.median(t_ref)),
            speedup=float(np.median(t_ref) / np.median(t_admm)),
            obj_ref=ref.objective,
            viol_ref=ref.violation,
            rel_obj_diff=abs(sol.objective - ref.objective) / ref.objective,
        )
    return out
