"""Trained UFM vs the convex theory (book: ``geo-lem-nuclear``, ``geo-thm-path``).

Two routes to the UFM's logits:

* ridge-regularised UFM by L-BFGS: a stationary point is certified to be the global optimum
  of the convex problem ``CE(L) + lam ||L||_*`` by the subgradient condition
  ``G = -grad CE(L) / lam`` with ``||G||_op <= 1`` and ``<G, L> = ||L||_*``; along the path
  ``lam -> 0`` the in-support part converges (P_F(L) -> L^in, linearly in lam) and the
  direction approaches L^mm;
* the paper's protocol (full-batch AdamW, lr 1e-4, wd 1e-6, step-wise decay, 30k epochs),
  where training time plays the role of 1/lam.
"""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore import geo as g
from ntpcore.geo import train as gt
from ntpcore.geo.data import ContextDataset
from ntpcore.geo.synthetic import synthetic_dataset


@pytest.fixture(scope="module")
def synth() -> ContextDataset:
    return synthetic_dataset(seed=0)


@pytest.fixture(scope="module")
def L_mm(synth: ContextDataset) -> np.ndarray:
    return g.nuclear_svm(synth.S)


def _path(ds: ContextDataset, lams: list[float], d: int = 32) -> list[dict[str, float]]:
    out = []
    L_in, L_mm = g.finite_logits(ds.P), g.nuclear_svm(ds.S)
    for lam in lams:
        W, H = gt.fit_ufm_ridge(ds, d, lam)
        L = W @ H
        G = -g.ce_grad(L, ds.P, ds.pi) / lam
        out.append(
            {
                "lam": lam,
                "op": float(np.linalg.norm(G, 2)),
                "tight": float(np.sum(G * L) / g.nuclear_norm(L)),
                "balance": float(np.linalg.norm(W.T @ W - H @ H.T) / np.linalg.norm(W.T @ W)),
                "mean_word": float(np.linalg.norm(W.sum(axis=0)) / np.linalg.norm(W)),
                "pf": float(np.linalg.norm(g.project_F(L, ds.S) - L_in)),
                "dir": g.direction_distance(L, L_mm),
                "excess": g.ce_excess(L, ds.P, ds.pi),
                "nuc": g.nuclear_norm(L),
            }
        )
    return out


@pytest.mark.theory
def test_ridge_ufm_is_the_convex_optimum_and_follows_the_path(synth: ContextDataset) -> None:
    lams = [1e-2, 1e-3, 1e-4]
    path = _path(synth, lams)
    nuc_mm = g.nuclear_norm(g.nuclear_svm(synth.S))
    for p in path:
        # global optimality of the non-convex UFM point for CE + lam ||L||_* (d >= min(V, m))
        assert p["op"] <= 1 + 1e-4, p
        assert p["tight"] == pytest.approx(1.0, abs=1e-4), p
        # balancedness W^T W = H H^T and 1^T W = 0 at a stationary point (geo-lem-nuclear)
        assert p["balance"] < 1e-5 and p["mean_word"] < 1e-5, p
    # (ii) P_F(L_lam) -> L^in, about 10x per decade of lam
    for a, b in zip(path, path[1:], strict=False):
        assert 5 < a["pf"] / b["pf"] < 20
    # (i) CE - H ~ lam ||L^mm||_* and ||L_lam||_* grows by ||L^mm||_* per e-fold
    assert path[-1]["excess"] / (lams[-1] * nuc_mm) == pytest.approx(1.0, abs=0.1)
    slope = (path[-1]["nuc"] - path[-2]["nuc"]) / np.log(10) / nuc_mm
    assert slope == pytest.approx(1.0, abs=0.1)
    # (iii) the direction approaches L^mm (slowly: logarithmically in 1/lam)
    dirs = [p["dir"] for p in path]
    assert dirs[0] > dirs[1] > dirs[2]
    assert dirs[-1] < 0.25


@pytest.mark.slow
def test_ridge_path_keeps_converging_at_small_lambda(synth: ContextDataset) -> None:
    path = _path(synth, [1e-4, 1e-5, 1e-6])
    assert path[0]["dir"] > path[1]["dir"] > path[2]["dir"]
    assert path[-1]["pf"] < 2e-4
    # L-BFGS stops at gtol = 1e-10 on the factors' gradient, so G = -grad CE / lam carries an
    # error of order sqrt(V m) gtol / lam: 1e-3 certifies lam >= 1e-5, 1e-2 the lam = 1e-6 point
    # (measured 1.00003, 1.0002, 1.0067).
    assert all(p["op"] <= 1 + 1e-3 for p in path[:2])
    assert path[2]["op"] <= 1 + 1e-2


@pytest.mark.theory
def test_adamw_ufm_paper_protocol_matches_the_theory(
    synth: ContextDataset, L_mm: np.ndarray
) -> None:
    """Paper protocol (30k AdamW epochs, ~1 s): the path theorem on the synthetic set."""
    r = gt.train_ufm_numpy(synth, gt.TrainerConfig(), progress=False)
    ep = r["epoch"]
    i1k, i10k, iend = (int(np.searchsorted(ep, k)) for k in (1000, 10000, 30000))
    # CE -> H and P_F(L) -> L^in (finite in-support logits)
    assert r["ce_minus_H"][iend] < 1e-4
    assert r["pf_dist"][iend] < 1e-3
    after = ep >= 100
    assert np.all(np.diff(r["ce_minus_H"][after]) <= 0)
    # norms keep growing after epoch 1000
    late = ep >= 1000
    assert np.all(np.diff(r["W_norm"][late]) > 0) and np.all(np.diff(r["H_norm"][late]) > 0)
    # direction of L - L^in approaches L^mm
    L_in = g.finite_logits(synth.P)
    snap = [r["W"][i].astype(float) @ r["H"][i].astype(float) for i in (i1k, i10k, iend)]
    dirs = [g.direction_distance(L - L_in, L_mm) for L in snap]
    assert dirs[0] > dirs[1] > dirs[2]
    assert dirs[2] < 0.3
    # geometry: structural correlation with the L^mm embeddings rises above 0.9
    W_mm, H_mm = g.mm_embeddings(L_mm)
    sc_end = g.structural_correlation(g.cosine_matrix(r["H_final"].T), g.cosine_matrix(H_mm.T))
    sc_1k = g.structural_correlation(g.cosine_matrix(r["H"][i1k].T), g.cosine_matrix(H_mm.T))
    assert sc_end > sc_1k and sc_end > 0.9
    scw = g.structural_correlation(g.cosine_matrix(r["W_final"]), g.cosine_matrix(W_mm))
    assert scw > 0.9
    # subspace collapse: projected same-support cosine > raw > different-support pairs
    pairs = g.same_support_pairs(synth.S)
    rank = int(np.linalg.matrix_rank(L_mm, tol=1e-6))
    col = g.subspace_collapse(r["W_final"], r["H_final"], pairs, rank)
    assert np.all(col["proj_cos"] > col["raw_cos"])
    assert np.all(col["proj_cos"] > 0.95)
    cosH = g.cosine_matrix(r["H_final"].T)
    same = {tuple(p) for p in pairs.tolist()}
    other = [
        cosH[a, b] for a in range(synth.m) for b in range(a + 1, synth.m) if (a, b) not in same
    ]
    assert col["raw_cos"].min() > np.mean(other)
