"""``make bench``, section *trainers*: training steps per second against plain formulations.

Steps per second of GD/NGD/Adam on the linear model against a plain numpy loop, and of
UFM/transformer/LSTM training (this project's formulation: distinct contexts with counts)
against the per-sample formulation; on CPU, and on a GPU when torch sees one.
"""

from __future__ import annotations

import numpy as np

from tools.bench.timing import measure


def _plain_numpy_gd(H, P, pi, W0, eta, n_steps):
    """What one writes without the package: a plain numpy GD loop on the CE loss."""
    W = W0.copy()
    for _ in range(n_steps):
        L = W @ H
        L = L - L.max(axis=0)
        Q = np.exp(L)
        Q /= Q.sum(axis=0)
        W -= eta * ((Q - P) * pi) @ H.T
    return W


def bench_trainers(quick: bool) -> list[dict]:
    import torch

    from ntpcore.core.optim import init_weights, train
    from ntpcore.lin.data import make_synthetic
    from ntpcore.lin.loss import make_loss_grad

    rows = []
    data = make_synthetic()  # the synthetic set of lin App. A.2
    H, P, pi = data.H, data.P, data.pi
    W0 = init_weights((P.shape[0], H.shape[0]), "lecun", 0)
    n = 500 if quick else 2000
    t_plain, _ = measure(lambda: _plain_numpy_gd(H, P, pi, W0, 0.5, n), repeats=3)
    rows.append(
        {
            "group": "linear model (V=10, d=60, m=50)",
            "name": "plain numpy GD loop",
            "steps_per_s": n / t_plain.median,
            "baseline": True,
        }
    )
    lg = make_loss_grad(H, P, pi)
    for opt, eta in (("gd", 0.5), ("ngd", 0.01), ("adam", 0.01)):
        t, _ = measure(
            lambda opt=opt, eta=eta: train(
                lg, W0, optimizer=opt, eta=eta, n_steps=n, record_steps=[0, n]
            ),
            repeats=3,
        )
        rows.append(
            {
                "group": "linear model (V=10, d=60, m=50)",
                "name": f"ntpcore {opt}",
                "steps_per_s": n / t.median,
                "ratio_to_baseline": t_plain.median / t.median,
            }
        )

    from ntpcore.geo.synthetic import synthetic_dataset
    from ntpcore.geo.text import text_dataset
    from ntpcore.geo.train import TrainerConfig
    from tools.bench.geo import epoch_seconds, naive_epoch_seconds

    datasets = {"synthetic": synthetic_dataset()}
    if not quick:
        datasets["text"] = text_dataset()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for ds_name, ds in datasets.items():
        for model in ("ufm", "transformer", "lstm"):
            cfg = TrainerConfig(model=model)
            n_ep = 20 if model != "ufm" else 200
            naive = naive_epoch_seconds(ds, cfg, n_epochs=max(3, n_ep // 10))
            ours = epoch_seconds(ds, cfg, n_epochs=n_ep)
            group = f"{ds_name} set (m={ds.m}, V={ds.V}, n={ds.n})"
            rows.append(
                {
                    "group": group,
                    "name": f"{model}: per-sample loop (autograd)",
                    "device": "cpu",
                    "steps_per_s": 1 / naive,
                    "baseline": True,
                }
            )
            rows.append(
                {
                    "group": group,
                    "name": f"{model}: ntpcore (distinct contexts)",
                    "device": "cpu",
                    "steps_per_s": 1 / ours,
                    "ratio_to_baseline": naive / ours,
                }
            )
            del devices[1:]  # GPU timings: recorded by the notebooks' sidecars when present
    return rows


def gpu_name() -> str | None:
    """The GPU torch sees, or None: the Performance page says whether the run had one."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
