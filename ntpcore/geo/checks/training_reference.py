r"""An independent re-implementation of the geometry paper's training [geo, Sec. 3], for checks.

The figures' models are trained by :mod:`ntpcore.geo.train`: the UFM by a closed-form
gradient with a compiled AdamW step on the distinct contexts weighted by their counts, the
networks by torch modules that share each prefix's computation (:mod:`ntpcore.geo.models`).
The checks of :mod:`ntpcore.geo.checks.training` compare their records with this module,
which shares none of that code:

* **the model**, written out functionally from the paper's architecture (Sec. 3): the UFM
  ``L = W H``; the transformer as a loop over layers on the full ``(m, T)`` token grid
  (RMSNorm, causal softmax attention of ``n_heads`` heads of width
  ``(d // n_heads // 2) * 2``, SwiGLU of width ``4 d``, no positional encoding, the last
  position's final-norm output as :math:`h_j`); the LSTM by ``torch.nn.LSTM`` itself (not the
  prefix-trie recursion of :mod:`ntpcore.geo.models.lstm`);
* **the initial values**, drawn here in the same order from the same seed (numpy for the
  UFM, a ``torch.Generator`` for the networks), so that both runs start at the same point;
* **the loss**: the authors' per-sample cross-entropy, summed over the ``n`` training pairs
  (``torch.nn.functional.cross_entropy`` on the expanded pairs, not the count-weighted form);
* **the optimiser**: ``torch.optim.AdamW`` (default implementation) and
  ``torch.optim.lr_scheduler.MultiStepLR``, stepped once per epoch;
* **float64** throughout (the networks are trained in float32);
* **the measures** (:func:`curve_values`): :math:`\mathrm{CE}-\mathcal H` from the pairs'
  log-probabilities, :math:`\|P_F(L)-L^{\mathrm{in}}\|_F` from the raw supports and counts,
  cosine matrices, the paper's structural correlation and the subspace-collapse cosines,
  each written again here.

:func:`reference_training` is cached (:func:`ntpcore.core.cache.cached`) on the run's
configuration, the data fingerprint and the record epochs, so the figures of one run that
check the same model share one reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

from ntpcore.core.cache import cached
from ntpcore.geo.checks.convex import RawSupports, finite_part_of, proxy_of
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.experiments import training
from ntpcore.geo.experiments.datasets import data_fingerprint, load_dataset
from ntpcore.geo.experiments.training import RunConfig
from ntpcore.geo.train.protocol import record_epochs

__all__ = [
    "NETWORK_REFERENCE_EPOCHS",
    "NORM_EPS",
    "TOLERANCES",
    "Tolerance",
    "logits_of",
    "record_index",
    "reference_at",
    "relative_distance",
    "collapse_cosines",
    "cosines",
    "curve_values",
    "mm_cosines",
    "prefetch_references",
    "reference_training",
    "structural_corr",
]

#: RMSNorm epsilon of the networks (the authors' code)
NORM_EPS = 1e-5
#: std of the networks' normal initialisation (the authors' code)
INIT_STD = 0.02


@dataclass(frozen=True)
class ReferenceKey:
    """What a reference run depends on: the run (data and trainer), the data fingerprint and
    the epochs it records (the figure's record epochs up to the last one checked)."""

    run: RunConfig
    fingerprint: str
    epochs: tuple[int, ...]


def reference_training(key: ReferenceKey, ds: ContextDataset) -> dict[str, Any]:
    """The run ``key.run`` redone independently up to ``max(key.epochs)``: ``epoch`` (E,),
    snapshots ``W`` (E, V, d), ``H`` (E, d, m), ``b`` (E, V), float64, and ``n_params``, the
    number of trained parameters (cached)."""
    return _reference_training(key, ds)


@cached
def _reference_training(key: ReferenceKey, ds: ContextDataset) -> dict[str, Any]:
    trainer = key.run.trainer
    p = trainer.protocol
    torch.manual_seed(0)  # nothing below draws from it; fixes any default-generator use
    params = _initial(ds, trainer)
    features, W_name, b_name = _model(ds, trainer, params)
    ctx, target = (torch.as_tensor(a) for a in ds.samples())
    opt = torch.optim.AdamW(
        list(params.values()),
        lr=p.lr,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=p.weight_decay,
        foreach=False,
    )
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, list(p.lr_milestones), gamma=p.lr_gamma)
    wanted = set(key.epochs)
    out: dict[str, list[np.ndarray]] = {"W": [], "H": [], "b": []}
    for k in range(max(key.epochs) + 1):
        h = features()  # (m, d)
        W = params[W_name]  # (V, d)
        b = params[b_name] if b_name else torch.zeros(ds.V, dtype=torch.float64)
        if k in wanted:
            out["W"].append(W.detach().numpy().copy())
            out["H"].append(h.detach().t().numpy().copy())
            out["b"].append(b.detach().numpy().copy())
        if k == max(key.epochs):
            break
        logits = h @ W.t() + b  # (m, V)
        loss = F.cross_entropy(logits[ctx], target, reduction="sum")  # the n pairs
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    n_params = sum(int(t.numel()) for t in params.values())
    return {"epoch": np.array(sorted(wanted), dtype=np.int64), "n_params": n_params} | {
        k: np.stack(v) for k, v in out.items()
    }


# ------------------------------------------------------------------------------------------
# Where a run is checked, and how closely
# ------------------------------------------------------------------------------------------

#: the networks' float64 reference runs this many epochs at most (the paper profile's
#: transformer on real text: about 1 s per epoch)
NETWORK_REFERENCE_EPOCHS = 150


@dataclass(frozen=True)
class Tolerance:
    """How far a run may be from its reference (see the module docstring)."""

    ce: float  # CE - H, relative
    norms: float  # ||W||, ||H||, relative
    pf: float  # ||P_F(L) - L_in||, relative
    geometry: float  # structural correlations and same-support cosines, absolute
    logits: float  # relative Frobenius distance of the logits


#: Tolerances, measured: the UFM is float64 on both sides (deviations below 4e-8, from the
#: float32 snapshots); the networks are trained in float32, and their deviations from the
#: float64 reference after the quick profile's 150 epochs (both datasets) are at most 2.8e-4
#: (CE - H), 3.9e-5 (norms), 2.8e-4 (structural correlations, same-support cosines), 2.6e-3
#: (logits) and, for the transformer's in-support logits, whose distance to L_in has shrunk
#: to 0.5% of its start, 0.12; each tolerance is three to ten times that.  A faster or
#: slower optimiser fails them: a learning rate 5% off moves CE - H by 9-15% and the norms by
#: 1-2%, a step-wise decay one epoch late by 0.7-2%.
_FLOAT64 = Tolerance(1e-6, 1e-6, 1e-6, 1e-6, 1e-6)
TOLERANCES = {
    "ufm": _FLOAT64,
    "transformer": Tolerance(3e-3, 3e-4, 0.3, 1e-3, 1e-2),
    "lstm": Tolerance(3e-3, 3e-4, 3e-3, 1e-3, 1e-2),
}


def reference_at(run: RunConfig) -> tuple[int, dict[str, Any]]:
    """The epoch where a run of ``run`` is checked -- the configured end for the UFM, else
    the last configured record epoch up to :data:`NETWORK_REFERENCE_EPOCHS` -- and the
    reference run up to it, recorded at the configured record epochs (from the
    configuration, not from the run, so that a run cut short has no record there)."""
    k, key, ds = _reference_key(run)
    return k, reference_training(key, ds)


def _reference_key(run: RunConfig) -> tuple[int, ReferenceKey, ContextDataset]:
    """The checked epoch of ``run``, the key of its reference run, and the dataset."""
    p = run.trainer.protocol
    limit = p.n_steps if run.trainer.model == "ufm" else min(p.n_steps, NETWORK_REFERENCE_EPOCHS)
    kept = tuple(int(e) for e in record_epochs(p.n_steps, p.n_records) if e <= limit)
    ds = load_dataset(run.data)
    return kept[-1], ReferenceKey(run, data_fingerprint(ds), kept), ds


def prefetch_references(runs: list[RunConfig]) -> None:
    """Compute now the reference run of each of ``runs`` that no other process is computing
    (a stored one is read, not computed).  Registered in
    :data:`ntpcore.geo.experiments.training.WHILE_WAITING`: a notebook that waits for a
    training another notebook holds (the real-text transformer, 30,000 epochs) computes
    the references its checks will read meanwhile, and the notebook that trains it finds
    them stored instead of computing them after it."""
    for run in runs:
        _, key, ds = _reference_key(run)
        if not _reference_training.in_flight(key):
            _reference_training(key, ds)


training.WHILE_WAITING["reference runs"] = prefetch_references


def record_index(res: dict[str, Any], epoch: int) -> int | None:
    """The index of ``epoch`` among a run's records (``None`` when it has none there)."""
    hit = np.flatnonzero(np.asarray(res["epoch"]) == epoch)
    return int(hit[0]) if hit.size else None


def logits_of(W: NDArray, H: NDArray, b: NDArray) -> NDArray[np.float64]:
    """The logits ``W H + b 1^T`` (V, m) of a snapshot, float64."""
    W, H, b = (np.asarray(a, np.float64) for a in (W, H, b))
    return W @ H + b[:, None]


def relative_distance(a: NDArray, b: NDArray) -> float:
    """``||a - b||_F / ||b||_F``."""
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


# ------------------------------------------------------------------------------------------
# Initial values, drawn as the paper's code draws them, and the models as functions
# ------------------------------------------------------------------------------------------


def _initial(ds: ContextDataset, trainer) -> dict[str, torch.Tensor]:
    """The initial parameters, float64 leaves: the UFM's ``U(+-1/sqrt(fan-in))`` from a numpy
    generator; the networks' normal (std 0.02; residual outputs ``0.02 / sqrt(2 layers)``)
    and LSTM uniform draws from a torch generator, in float32 and in the modules' order."""
    p = trainer.protocol
    d, V, m = p.dim, ds.V, ds.m
    if trainer.model == "ufm":
        rng = np.random.default_rng(p.init_seed)
        H = rng.uniform(-1.0, 1.0, size=(d, m)) / math.sqrt(m)
        W = rng.uniform(-1.0, 1.0, size=(V, d)) / math.sqrt(d)
        return {"H": _leaf(H), "W": _leaf(W)}
    gen = torch.Generator().manual_seed(p.init_seed)
    n_in = len(ds.input_vocab)

    def normal(shape: tuple[int, ...], std: float) -> torch.Tensor:
        return torch.empty(shape).normal_(0.0, std, generator=gen)

    out: dict[str, torch.Tensor] = {}
    if trainer.model == "transformer":
        width = trainer.tf_heads * ((d // trainer.tf_heads // 2) * 2)
        resid = INIT_STD / math.sqrt(2 * trainer.tf_layers)
        out["emb"] = normal((n_in, d), INIT_STD)
        for i in range(trainer.tf_layers):
            out[f"{i}.qkv"] = normal((3 * width, d), INIT_STD)
            out[f"{i}.o"] = normal((d, width), resid)
            out[f"{i}.w1"] = normal((4 * d, d), INIT_STD)
            out[f"{i}.w3"] = normal((4 * d, d), resid)
            out[f"{i}.w2"] = normal((d, 4 * d), INIT_STD)
            out[f"{i}.g_att"] = torch.ones(d)
            out[f"{i}.g_ffn"] = torch.ones(d)
        out["g_out"] = torch.ones(d)
        out["out"] = normal((V, d), INIT_STD)
    else:
        bound = 1.0 / math.sqrt(d)
        out["emb"] = normal((n_in, d), INIT_STD)
        for i in range(trainer.lstm_layers):  # nn.LSTM's parameter order
            for name, shape in (("w_ih", (4 * d, d)), ("w_hh", (4 * d, d))) + (
                ("b_ih", (4 * d,)),
                ("b_hh", (4 * d,)),
            ):
                out[f"{i}.{name}"] = torch.empty(shape).uniform_(-bound, bound, generator=gen)
        out["g_out"] = torch.ones(d)
        out["out"] = normal((V, d), INIT_STD)
        if trainer.lstm_bias:
            out["bias"] = torch.zeros(V)
    return {k: _leaf(v) for k, v in out.items()}


def _leaf(a: Any) -> torch.Tensor:
    return torch.as_tensor(a).to(torch.float64).clone().requires_grad_(True)


def _model(ds: ContextDataset, trainer, P: dict[str, torch.Tensor]):
    """``features()`` -> context embeddings (m, d), and the names of ``W`` and of the bias."""
    tokens = torch.as_tensor(np.array(ds.contexts, dtype=np.int64))  # (m, T)
    d = trainer.protocol.dim
    if trainer.model == "ufm":
        return (lambda: P["H"].t()), "W", None

    def rms(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + NORM_EPS) * g

    if trainer.model == "transformer":
        nh = trainer.tf_heads
        hd = (d // nh // 2) * 2
        m, T = tokens.shape
        causal = torch.ones(T, T, dtype=torch.bool).tril()

        def heads(a: torch.Tensor) -> torch.Tensor:
            return a.reshape(m, T, nh, hd).transpose(1, 2)  # (m, nh, T, hd)

        def transformer() -> torch.Tensor:
            x = P["emb"][tokens]  # (m, T, d)
            for i in range(trainer.tf_layers):
                q, k, v = (rms(x, P[f"{i}.g_att"]) @ P[f"{i}.qkv"].t()).split(nh * hd, -1)
                s = heads(q) @ heads(k).transpose(-1, -2) / math.sqrt(hd)  # (m, nh, T, T)
                a = torch.softmax(s.masked_fill(~causal, -math.inf), -1) @ heads(v)
                x = x + a.transpose(1, 2).reshape(m, T, nh * hd) @ P[f"{i}.o"].t()
                y = rms(x, P[f"{i}.g_ffn"])
                x = x + (F.silu(y @ P[f"{i}.w1"].t()) * (y @ P[f"{i}.w3"].t())) @ P[f"{i}.w2"].t()
            return rms(x[:, -1], P["g_out"])  # (m, d)

        return transformer, "out", None

    lstm = torch.nn.LSTM(d, d, num_layers=trainer.lstm_layers, batch_first=True).double()
    gates = ("w_ih", "w_hh", "b_ih", "b_hh")
    names = [f"{i}.{w}" for i in range(trainer.lstm_layers) for w in gates]

    def recurrent() -> torch.Tensor:
        weights = {
            f"{w.replace('w_', 'weight_').replace('b_', 'bias_')}_l{n.split('.')[0]}": P[n]
            for n in names
            for w in (n.split(".")[1],)
        }
        out, _ = torch.func.functional_call(lstm, weights, (P["emb"][tokens],))
        return rms(out[:, -1], P["g_out"])  # (m, d)

    return recurrent, "out", ("bias" if trainer.lstm_bias else None)


# ------------------------------------------------------------------------------------------
# The measures of the figures, written again
# ------------------------------------------------------------------------------------------


def cosines(X: NDArray[np.float64]) -> NDArray[np.float64]:
    """Cosine similarities of the rows of ``X``."""
    n = np.sqrt(np.einsum("ij,ij->i", X, X))
    return (X @ X.T) / np.outer(n, n)


def structural_corr(X: NDArray[np.float64], Y: NDArray[np.float64], C: float = 1e-5) -> float:
    """The paper's structural correlation of two similarity matrices [geo, Fig. 2(d)]:
    covariance over every entry (ddof 0) plus ``C``, over the product of the standard
    deviations (ddof 1) plus ``C``."""
    x, y = X.ravel(), Y.ravel()
    cov = float(np.dot(x - x.mean(), y - y.mean())) / x.size
    return (cov + C) / (float(np.std(x, ddof=1) * np.std(y, ddof=1)) + C)


def mm_cosines(L_mm: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64], int]:
    r"""Cosines of the words and of the contexts predicted by :math:`L^{\mathrm{mm}}`, from its
    Grams :math:`(LL^\top)^{1/2}` and :math:`(L^\top L)^{1/2}` (eigendecompositions; the
    balanced factors have these Grams), and its rank (eigenvalues above ``1e-12`` of the
    largest, i.e. singular values above ``1e-6``)."""

    def gram_cos(A: NDArray[np.float64]) -> tuple[NDArray[np.float64], int]:
        w, Q = np.linalg.eigh(A)
        keep = w > 1e-12 * w.max()
        G = (Q[:, keep] * np.sqrt(w[keep])) @ Q[:, keep].T
        s = np.sqrt(np.diag(G))
        return G / np.outer(s, s), int(keep.sum())

    cW, r = gram_cos(L_mm @ L_mm.T)
    cH, _ = gram_cos(L_mm.T @ L_mm)
    return cW, cH, r


def collapse_cosines(
    W: NDArray[np.float64], H: NDArray[np.float64], pairs: list[tuple[int, int]], r: int
) -> tuple[float, float]:
    r"""Mean raw and projected cosines of the same-support context pairs: :math:`h_j` (the
    columns of ``H``) and their projections on the span of the top ``r`` eigenvectors of
    :math:`W^\top W` (the top right-singular vectors of ``W``) [geo, subspace collapse]."""
    w, Q = np.linalg.eigh(W.T @ W)
    B = Q[:, np.argsort(w)[::-1][:r]]  # (d, r)

    def mean_cos(X: NDArray[np.float64]) -> float:
        c = cosines(X.T)
        return float(np.mean([c[a, b] for a, b in pairs]))

    return mean_cos(H), mean_cos(B.T @ H)


def _pearson_offdiag(X: NDArray[np.float64], Y: NDArray[np.float64]) -> float:
    """Pearson correlation of the off-diagonal entries of two square matrices."""
    keep = ~np.eye(len(X), dtype=bool)
    x, y = X[keep] - X[keep].mean(), Y[keep] - Y[keep].mean()
    return float(np.dot(x, y) / math.sqrt(float(np.dot(x, x)) * float(np.dot(y, y))))


def _direction(A: NDArray[np.float64], B: NDArray[np.float64]) -> float:
    """Distance of the directions of two matrices, ``||A/||A|| - B/||B||||_F``."""
    d = A / math.sqrt(float((A * A).sum())) - B / math.sqrt(float((B * B).sum()))
    return math.sqrt(float((d * d).sum()))


def curve_values(
    W: NDArray[np.float64],
    H: NDArray[np.float64],
    b: NDArray[np.float64],
    raw: RawSupports,
    L_mm: NDArray[np.float64],
) -> dict[str, float]:
    r"""The measures of one snapshot, from the raw supports and counts.  Plotted:
    ``ce_minus_H`` (the pairs' mean :math:`\log\hat p(z|j)-\log\mathbb S_z(\ell_j)`),
    ``W_norm``, ``H_norm``, ``pf_dist`` (:math:`\|P_F(L)-L^{\mathrm{in}}\|_F`, each column
    centred on its support against the centred log-counts), ``sc_H``, ``sc_W`` (structural
    correlation with the cosines predicted by ``L_mm``); claimed: ``collapse_raw``,
    ``collapse_proj``; in the book's tables: ``L_norm``, ``od_H``, ``od_W`` (off-diagonal
    Pearson correlations), ``sc_W_centered`` (the mean word embedding removed), ``dir_Lmm``
    (direction of :math:`L-L^{\mathrm{in}}` to :math:`L^{\mathrm{mm}}`), ``dir_Lmm_centered``
    and ``dir_S_tilde`` (with the columns of ``L`` centred; to :math:`L^{\mathrm{mm}}`, to
    :math:`\tilde S`)."""
    W, H, b = (np.asarray(a, np.float64) for a in (W, H, b))
    L = W @ H + b[:, None]  # (V, m)
    shift = L.max(axis=0)
    logq = L - shift - np.log(np.exp(L - shift).sum(axis=0))  # log-softmax of each column
    ce = pf2 = 0.0
    for j, words in enumerate(raw.support):
        idx = list(words)
        c = raw.counts[idx, j]
        ce += float(np.dot(c, np.log(c / c.sum()) - logq[idx, j]))
        dev = (L[idx, j] - L[idx, j].mean()) - (np.log(c) - np.log(c).mean())
        pf2 += float(np.dot(dev, dev))
    cW_mm, cH_mm, r = mm_cosines(L_mm)
    raw_cos, proj_cos = collapse_cosines(W, H, raw.pairs, r) if raw.pairs else (np.nan, np.nan)
    cos_H, cos_W = cosines(H.T), cosines(W)
    L_in, Lc = finite_part_of(raw), L - L.mean(axis=0)
    return {
        "ce_minus_H": ce / float(raw.counts.sum()),
        "W_norm": float(np.sqrt((W * W).sum())),
        "H_norm": float(np.sqrt((H * H).sum())),
        "pf_dist": math.sqrt(pf2),
        "sc_H": structural_corr(cos_H, cH_mm),
        "sc_W": structural_corr(cos_W, cW_mm),
        "collapse_raw": raw_cos,
        "collapse_proj": proj_cos,
        "L_norm": float(np.sqrt((L * L).sum())),
        "od_H": _pearson_offdiag(cos_H, cH_mm) if len(cos_H) >= 3 else np.nan,
        "od_W": _pearson_offdiag(cos_W, cW_mm),
        "sc_W_centered": structural_corr(cosines(W - W.mean(axis=0)), cW_mm),
        "dir_Lmm": _direction(L - L_in, L_mm),
        "dir_Lmm_centered": _direction(Lc - L_in, L_mm),
        "dir_S_tilde": _direction(Lc - L_in, proxy_of(raw)),
    }
