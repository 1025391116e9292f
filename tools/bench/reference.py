r"""Reference formulations of the published experiments, for ``make bench``: what the
authors' code does, re-derived here from the papers' definitions (never copied), written the
usual way -- torch autograd, one trial after another, a loop over samples where the data are
ragged -- so that the project's batched closed-form loops are timed against them in one run
and compared with them statistic by statistic.

:func:`cyclic`
    The cyclic-TPG experiment [att, cyclic-TPG figure] (book ``att-thm-gd``): per trial the
    token-priority graphs and their SCCs (``scipy.sparse.csgraph``), the Graph-SVM through
    cvxpy + Clarabel (one constraint per TPG edge: ``= 0`` inside an SCC, ``>= 1`` across),
    an orthonormal basis of :math:`S_\mathrm{fin}`, normalized GD on
    :math:`L(W) = \frac1n\sum_i -\log \sum_{t: x_{it} = e_{y_i}} \mathbb S(X_i W \bar x_i)_t`
    by autograd (``torch.optim.SGD`` on the normalized gradient), recording ``W(tau)`` and the
    attention mass on the best SCC of every forward pass, then the reduced run from 0: one
    forward per cyclic sample on its label-SCC positions (a ragged list), the sum over them
    divided by ``n``.  The curves of :func:`ntpcore.att.experiments.run_global` follow from
    the recorded iterates.
:func:`local`
    The local-convergence experiment [att, local-convergence experiments] (book
    ``att-conj-local``): the general head ``u = E X^T s`` with the cross-entropy or squared
    loss; from the final attention the selected and ambiguous tokens, the local TPGs and their
    Graph-SVM (cvxpy), and the reduced runs on the global and the local SCCs, per sample.
:func:`ufm`
    The NTP-UFM of [geo, Sec. 3] the authors' way: every one of the ``n`` training pairs
    through a one-hot ``Linear(m, d)`` and ``Linear(d, V)``, the summed cross-entropy,
    ``torch.optim.AdamW`` and ``MultiStepLR``, one full batch per epoch, float32 (torch's
    default) -- a lean loop: the data are built once, not reloaded every epoch.

The trials draw their data and initialisations from the same generators as the project's
functions (:func:`ntpcore.att.data.sample_dataset`, ``SeedSequence(seed).spawn``), so both
sides compute on identical problems.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

#: Singular values below this (relative) are rank-deficient directions of a spanning set.
_RANK_TOL = 1e-10


# ------------------------------------------------------------------------------ attention


def _trial_rngs(seed: int, n_trials: int) -> list[np.random.Generator]:
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n_trials)]


def _draw(rng, n, T, K, d, graph):
    """Tokens, labels and embeddings (the project's sampler, for identical problems)."""
    from ntpcore.att.data import sample_dataset

    ds = sample_dataset(rng, n, T, K, d, graph=graph)
    return ds.E, ds.tokens, ds.labels


def _scc_labels(edges: list[tuple[int, int]], K: int) -> NDArray[np.int64]:
    """SCC id of every node of the digraph on ``range(K)`` with ``edges``."""
    if not edges:
        return np.arange(K)
    i, j = zip(*edges, strict=True)
    A = coo_matrix((np.ones(len(edges)), (i, j)), shape=(K, K)).tocsr()
    return connected_components(A, directed=True, connection="strong")[1]


def _tpgs(tokens, labels, K) -> dict[int, list[tuple[int, int]]]:
    """Edges of the token-priority graph G^(k) for each last token k: y_i -> j, j in X_i."""
    G: dict[int, set] = {k: set() for k in range(K)}
    for seq, y in zip(tokens.tolist(), labels.tolist(), strict=True):
        G[seq[-1]].update((y, j) for j in seq if j != y)
    return {k: sorted(e) for k, e in G.items()}


def _local_tpgs(tokens, selected, ambiguous, K) -> dict[int, list[tuple[int, int]]]:
    """Local TPGs: c -> j for every selected c of sample i and j in X_i, j != c, j not
    ambiguous (last token k of sample i)."""
    G: dict[int, set] = {k: set() for k in range(K)}
    for i, seq in enumerate(tokens.tolist()):
        for c in np.flatnonzero(selected[i]).tolist():
            G[seq[-1]].update((c, j) for j in set(seq) if j != c and not ambiguous[i, j])
    return {k: sorted(e) for k, e in G.items()}


def _kron_row(E, i, j, k) -> NDArray[np.float64]:
    """vec((e_i - e_j) e_k^T)."""
    return np.outer(E[i] - E[j], E[k]).ravel()


def _graph_svm_cvxpy(E, graphs) -> NDArray[np.float64] | None:
    """min ||W||_F s.t. (e_i - e_j)^T W e_k = 0 on every edge inside an SCC of G^(k) and
    >= 1 on every edge between SCCs; None when infeasible."""
    import cvxpy as cp

    d = E.shape[1]
    eq, ineq = [], []
    for k, edges in graphs.items():
        scc = _scc_labels(edges, E.shape[0])
        for i, j in edges:
            (eq if scc[i] == scc[j] else ineq).append(_kron_row(E, i, j, k))
    if not ineq:
        return np.zeros((d, d))
    w = cp.Variable(d * d)
    cons = [np.array(ineq) @ w >= 1] + ([np.array(eq) @ w == 0] if eq else [])
    prob = cp.Problem(cp.Minimize(cp.sum_squares(w)), cons)
    prob.solve(solver=cp.CLARABEL)
    if prob.status not in ("optimal", "optimal_inaccurate"):
        return None
    return np.asarray(w.value).reshape(d, d)


def _s_fin_basis(E, graphs) -> NDArray[np.float64]:
    """Orthonormal rows spanning S_fin = span{(e_i - e_j) e_k^T : i, j in one SCC of G^(k)}."""
    rows = []
    for k, edges in graphs.items():
        scc = _scc_labels(edges, E.shape[0])
        for c in np.unique(scc):
            members = np.flatnonzero(scc == c)
            rows += [_kron_row(E, m, members[0], k) for m in members[1:]]
    p = E.shape[1] ** 2
    if not rows:
        return np.zeros((0, p))
    _, s, Vt = np.linalg.svd(np.array(rows), full_matrices=False)
    return Vt[: int(np.sum(s > _RANK_TOL * s[0]))]


def _cos(A, B) -> NDArray[np.float64]:
    """<A, B>_F / (||A|| ||B||) over the last two axes (0 if a norm is 0)."""
    num = np.sum(A * B, axis=(-2, -1))
    den = np.linalg.norm(A, axis=(-2, -1)) * np.linalg.norm(B, axis=(-2, -1))
    return np.divide(num, den, out=np.zeros(np.broadcast(num, den).shape), where=den > 0)


def _project(W, basis) -> NDArray[np.float64]:
    """Orthogonal projection of W (..., d, d) on the span of the orthonormal rows ``basis``."""
    w = W.reshape(*W.shape[:-2], -1)
    return ((w @ basis.T) @ basis).reshape(W.shape)


def _ngd(W0, loss_fn, eta, n_steps, on_forward=None, eps=1e-12) -> NDArray[np.float64]:
    """Normalized GD by autograd: ``W <- W - eta grad / (||grad|| + eps)`` with
    ``torch.optim.SGD``; returns W(0..n_steps) (n_steps + 1, d, d).  ``loss_fn(W)`` returns
    the loss (or None: no gradient, W stays) and ``on_forward`` reads that forward pass."""
    W = torch.nn.Parameter(torch.tensor(W0, dtype=torch.float64))
    opt = torch.optim.SGD([W], lr=eta)
    traj = [W.detach().clone()]
    for tau in range(n_steps + 1):
        opt.zero_grad()
        loss = loss_fn(W)
        if on_forward is not None:
            on_forward()
        if tau == n_steps:
            break
        if loss is not None:
            loss.backward()
            with torch.no_grad():
                W.grad /= W.grad.norm() + eps
            opt.step()
        traj.append(W.detach().clone())
    return torch.stack(traj).numpy()


def cyclic(cfg) -> dict[str, Any]:
    """The cyclic experiment of ``cfg`` (an :class:`ntpcore.att.experiments.GlobalConfig`
    with normalized GD), trial after trial; arrays ``(n_trials, n_steps + 1)``: ``corr_svm``,
    ``corr_full``, ``proj_corr``, ``norm_diff``, ``attn_best``."""
    n, T, K, d = cfg.n_samples, cfg.seq_len, cfg.vocab_size, cfg.dim
    keys = ("corr_svm", "corr_full", "proj_corr", "norm_diff", "attn_best")
    out: dict[str, list] = {k: [] for k in keys}
    for rng in _trial_rngs(cfg.trial_seed, cfg.n_trials):
        E, tok, lab = _draw(rng, n, T, K, d, cfg.graph)
        graphs = _tpgs(tok, lab, K)
        W_svm = _graph_svm_cvxpy(E, graphs)
        while W_svm is None:  # infeasible: new embeddings (never for K <= d)
            from ntpcore.att.data import unit_embeddings

            E = unit_embeddings(rng, K, d)
            W_svm = _graph_svm_cvxpy(E, graphs)
        W0 = rng.uniform(-1.0, 1.0, (d, d)) / np.sqrt(d)
        basis = _s_fin_basis(E, graphs)
        scc = {k: _scc_labels(e, K) for k, e in graphs.items()}
        Et = torch.tensor(E)
        X = Et[torch.as_tensor(tok)]  # (n, T, d)
        xbar = X[:, -1]
        on_label = torch.as_tensor(tok == lab[:, None], dtype=torch.float64)
        # position -> SCC of its token in G^(k_i), one-hot (n, T, K)
        scc_onehot = np.zeros((n, T, K))
        for i, seq in enumerate(tok):
            scc_onehot[i, np.arange(T), scc[int(seq[-1])][seq]] = 1.0
        scc_onehot_t = torch.as_tensor(scc_onehot)
        attn = []
        state = {}

        def full_loss(W, X=X, xbar=xbar, on_label=on_label, state=state):
            s = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, xbar), dim=-1)
            state["s"] = s
            return -torch.log((s * on_label).sum(-1)).mean()

        def record(state=state, attn=attn, scc_onehot_t=scc_onehot_t):
            with torch.no_grad():
                mass = torch.einsum("nt,ntc->nc", state["s"], scc_onehot_t)
                attn.append(float(mass.max(-1).values.mean()))

        W = _ngd(W0, full_loss, cfg.lr, cfg.n_steps, record)
        # reduced data: the label-SCC positions of every cyclic sample (ragged), query x_T
        reduced = []
        for i, (seq, y) in enumerate(zip(tok, lab, strict=True)):
            keep = scc[int(seq[-1])][seq] == scc[int(seq[-1])][y]
            if np.any(keep & (seq != y)):
                reduced.append(
                    (X[i][torch.as_tensor(keep)], xbar[i], torch.as_tensor(seq[keep] == y))
                )

        def reduced_loss(W, reduced=reduced):
            if not reduced:
                return None
            total = 0.0
            for Xr, q, is_label in reduced:
                s = torch.softmax(Xr @ W @ q, dim=0)
                total = total - torch.log(s[is_label].sum())
            return total / n

        W_red = _ngd(np.zeros((d, d)), reduced_loss, cfg.lr, cfg.n_steps)
        W_fin_end = W_red[-1]
        R = np.sum((W[-1] - W_fin_end) * W_svm) / np.sum(W_svm**2)
        PW = _project(W, basis)
        out["corr_svm"].append(_cos(W, W_svm))
        out["corr_full"].append(_cos(W, W_fin_end + R * W_svm))
        out["proj_corr"].append(_cos(W - PW, W_svm))
        out["norm_diff"].append(np.linalg.norm(PW - W_red, axis=(-2, -1)))
        out["attn_best"].append(np.array(attn))
    return {k: np.array(v) for k, v in out.items()}


def _general_loss(X, xbar, E, labels, loss: str, mask=None):
    """Mean over samples of the general-head loss: logits ``u = E X^T s``; ``"ce"`` the
    cross-entropy, ``"squared"`` ``(1 - softmax(u)_y)^2``."""

    def loss_fn(W):
        z = torch.einsum("ntd,de,ne->nt", X, W, xbar)
        if mask is not None:
            z = z.masked_fill(~mask, -torch.inf)
        s = torch.softmax(z, dim=-1)
        u = torch.einsum("nt,ntd,kd->nk", s, X, E)
        if loss == "ce":
            return torch.nn.functional.cross_entropy(u, labels)
        p_y = torch.softmax(u, dim=-1).gather(1, labels[:, None])[:, 0]
        return ((1 - p_y) ** 2).mean()

    return loss_fn


def local(cfg) -> dict[str, Any]:
    """The local-convergence experiment of ``cfg`` (an
    :class:`ntpcore.att.experiments.LocalConfig`), trial after trial, each loss in turn;
    arrays ``(n_losses, n_trials, n_steps + 1)``: ``corr_global``, ``corr_local``,
    ``norm_diff_global``, ``norm_diff_local``."""
    n, T, K, d = cfg.n_samples, cfg.seq_len, cfg.vocab_size, cfg.dim
    keys = ("corr_global", "corr_local", "norm_diff_global", "norm_diff_local")
    out: dict[str, list] = {k: [[] for _ in cfg.losses] for k in keys}
    for rng in _trial_rngs(cfg.trial_seed, cfg.n_trials):
        E, tok, lab = _draw(rng, n, T, K, d, "cyclic")
        graphs = _tpgs(tok, lab, K)
        W_svm = _graph_svm_cvxpy(E, graphs)
        W0 = rng.uniform(-1.0, 1.0, (d, d)) / np.sqrt(d)
        basis_glob = _s_fin_basis(E, graphs)
        Et = torch.tensor(E)
        X = Et[torch.as_tensor(tok)]
        xbar = X[:, -1]
        labels = torch.as_tensor(lab)
        for a, lo in enumerate(cfg.losses):
            W = _ngd(W0, _general_loss(X, xbar, Et, labels, lo), cfg.lr, cfg.n_steps)
            with torch.no_grad():
                Wt = torch.as_tensor(W[-1])
                s = torch.softmax(torch.einsum("ntd,de,ne->nt", X, Wt, xbar), -1).numpy()
            mass = np.zeros((n, K))
            for i in range(n):
                np.add.at(mass[i], tok[i], s[i])
            selected = mass > cfg.c_thres
            ambiguous = (mass > cfg.e_thres) & ~selected
            g_loc = _local_tpgs(tok, selected, ambiguous, K)
            W_loc = _graph_svm_cvxpy(E, g_loc)
            W_loc = np.zeros((d, d)) if W_loc is None else W_loc
            basis_loc = _s_fin_basis(E, g_loc)
            reduced_runs = []
            anchors = {
                "global": (graphs, lab),
                "local": (g_loc, np.array([np.flatnonzero(r)[0] for r in selected])),
            }
            for G, anchor in anchors.values():
                scc = {k: _scc_labels(e, K) for k, e in G.items()}
                samples = []  # reduced sequences: positions in the anchor's SCC, > 1 token
                for i, seq in enumerate(tok):
                    sk = scc[int(seq[-1])]
                    keep = sk[seq] == sk[anchor[i]]
                    if len(np.unique(seq[keep])) > 1:
                        samples.append((X[i][torch.as_tensor(keep)], xbar[i], labels[i]))

                def reduced_loss(W, samples=samples, lo=lo, Et=Et):
                    if not samples:
                        return None
                    total = 0.0
                    for Xr, q, y in samples:
                        per = _general_loss(Xr[None], q[None], Et, y[None], lo)(W)
                        total = total + per
                    return total / n

                reduced_runs.append(_ngd(np.zeros((d, d)), reduced_loss, cfg.lr, cfg.n_steps))
            out["corr_global"][a].append(_cos(W, W_svm))
            out["corr_local"][a].append(_cos(W, W_loc))
            out["norm_diff_global"][a].append(
                np.linalg.norm(_project(W, basis_glob) - reduced_runs[0], axis=(-2, -1))
            )
            out["norm_diff_local"][a].append(
                np.linalg.norm(_project(W, basis_loc) - reduced_runs[1], axis=(-2, -1))
            )
    return {k: np.array(v) for k, v in out.items()}


# ------------------------------------------------------------------------------ geometry


def ufm(ds, cfg, dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """The UFM of ``cfg`` (a :class:`ntpcore.geo.train.TrainerConfig`) on ``ds`` the authors'
    way: the ``n`` one-hot samples through ``Linear(m, d)`` then ``Linear(d, V)``, the summed
    cross-entropy, default ``torch.optim.AdamW`` and ``MultiStepLR``, ``dtype`` (torch's
    default float32).  Same initial values as the project (:func:`ntpcore.geo.train.train_model`).

    Returns ``epoch`` (record epochs), ``W``, ``H`` snapshots there, and the final
    ``ce_minus_H``, ``W_norm``, ``H_norm``, ``L_norm`` (float64, from the snapshots).
    """
    from ntpcore.geo.train import init_ufm_state, record_epochs

    theta = init_ufm_state(ds, cfg)
    p = cfg.protocol
    nW = ds.V * p.dim
    H = torch.nn.Parameter(torch.tensor(theta[nW:].reshape(p.dim, ds.m), dtype=dtype))
    W = torch.nn.Parameter(torch.tensor(theta[:nW].reshape(ds.V, p.dim), dtype=dtype))
    ctx, target = ds.samples()
    x = torch.nn.functional.one_hot(torch.as_tensor(ctx), ds.m).to(dtype)  # (n, m)
    target_t = torch.as_tensor(target)
    opt = torch.optim.AdamW(
        [H, W], lr=p.lr, weight_decay=p.weight_decay, betas=(0.9, 0.999), eps=1e-8
    )
    sched = torch.optim.lr_scheduler.MultiStepLR(
        opt, milestones=list(p.lr_milestones), gamma=p.lr_gamma
    )
    epochs = record_epochs(p.n_steps, p.n_records)
    snaps_W, snaps_H = [], []
    nxt = 0
    for k in range(p.n_steps + 1):
        if nxt < len(epochs) and epochs[nxt] == k:
            snaps_W.append(W.detach().double().numpy().copy())
            snaps_H.append(H.detach().double().numpy().copy())
            nxt += 1
        if k == p.n_steps:
            break
        logits = (x @ H.t()) @ W.t()  # (n, V): one-hot layer, then the output layer
        loss = torch.nn.functional.cross_entropy(logits, target_t, reduction="sum")
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    L = snaps_W[-1] @ snaps_H[-1]  # (V, m)
    return {
        "epoch": epochs,
        "W": np.array(snaps_W),
        "H": np.array(snaps_H),
        "ce_minus_H": _ce_minus_entropy(L, ds.counts),
        "W_norm": float(np.linalg.norm(snaps_W[-1])),
        "H_norm": float(np.linalg.norm(snaps_H[-1])),
        "L_norm": float(np.linalg.norm(L)),
    }


def _ce_minus_entropy(L, counts) -> float:
    r""":math:`\frac1n\sum_{j,z} n_{z,j} (\log \hat p_{z|j} - \log \mathbb S_z(\ell_j))` (the
    excess of the mean cross-entropy over the empirical entropy), float64."""
    N = np.asarray(counts, dtype=float)
    Lm = L - L.max(axis=0)
    logq = Lm - np.log(np.exp(Lm).sum(axis=0))
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = np.where(N > 0, np.log(N / N.sum(axis=0)), 0.0)
    return float(np.sum(N * (logp - logq)) / N.sum())


__all__ = ["cyclic", "local", "ufm"]
