r"""Losses and closed-form gradients for one self-attention layer, batched over independent
problems (trials); the descent loops that use them are :mod:`ntpcore.att.descent`.

Model (book ``att-eq-model``): for sequence ``i`` with embedded tokens ``X_i`` (T, d) and last token
:math:`\bar x_i = x_{iT}` the scores are :math:`z_i = X_i W \bar x_i` and the attention is
:math:`s_i = \mathbb S(z_i)` (softmax over the positions allowed by a mask).

Heads and losses
    ``("identity", "log")``      :math:`f_W(X)_k = \sum_{t: a_t = k} s_t` (the head with
                                 :math:`C E^\top = I`), loss :math:`-\log f_W(X)_y`
                                 (book ``att-eq-loss``).
    ``("identity", "squared")``  :math:`(1 - f_W(X)_y)^2`.
    ``("general", "ce")``        ``att-conj-local``: logits :math:`u = E X^\top s`, loss
                                 :math:`-\log \mathbb S(u)_y` (nonconvex in W).
    ``("general", "squared")``   :math:`(1 - \mathbb S(u)_y)^2`.

Gradient (all cases): with :math:`g_i = \partial \ell_i / \partial s_i` the softmax Jacobian gives
:math:`\partial \ell_i/\partial z_i = s_i \odot (g_i - s_i^\top g_i)` and

.. math::
    \nabla L(W) = \sum_i w_i\, X_i^\top \frac{\partial \ell_i}{\partial z_i}\, \bar x_i^\top ,

a sum of rank-one matrices :math:`(e_j - e_{y_i}) \bar x_i^\top` for the identity log-loss, hence
:math:`\nabla L(W) \in S` [att, App. Lemma 6(ii)] (book ``att-eq-grad``, ``att-lem-subspace``).
For the identity log-loss
:math:`\partial \ell_i / \partial z_i = s_i - q_i`, :math:`q_i` = :math:`s_i` restricted to the
label positions and renormalised.

Everything is float64 numpy with a leading batch axis ``B``; no autograd (the torch model in
:mod:`ntpcore.att.oracle` is the autograd oracle for the tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ntpcore.core.validate import as_float_array
from ntpcore.errors import DataError, ParameterError

__all__ = [
    "AttentionProblem",
    "HEAD_LOSSES",
    "attention_weights",
    "loss_grad",
    "make_problem",
    "smoothness_bounds",
]


HEAD_LOSSES = (
    ("identity", "log"),
    ("identity", "squared"),
    ("general", "ce"),
    ("general", "squared"),
)


@dataclass(frozen=True)
class AttentionProblem:
    """A batch of ``B`` independent training problems (same n, T, d).

    Attributes
    ----------
    X : (B, n, T, d)        embedded sequences
    xbar : (B, n, d)        queries (the original last token, also for reduced problems)
    label_pos : (B, n, T)   positions holding the label
    bias : (B, n, T)        0 on attended positions, -inf on masked ones (reduced sequences)
    weight : (B, n)         sample weights (1/n; 0 for samples dropped from a reduced loss)
    E : (B, K, d)           embeddings (vocabulary logits of the general head)
    labels : (B, n)         label ids
    head, loss : str        one of :data:`HEAD_LOSSES`; ``loss="per-problem"`` for a general
                            head whose problems have their own losses, ``losses`` (B,)
    """

    X: NDArray[np.float64]
    xbar: NDArray[np.float64]
    label_pos: NDArray[np.bool_]
    bias: NDArray[np.float64]
    weight: NDArray[np.float64]
    E: NDArray[np.float64]
    labels: NDArray[np.int64]
    head: str = "identity"
    loss: str = "log"
    losses: tuple[str, ...] | None = None

    @property
    def batch(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[-1]


def make_problem(
    E, tokens, labels, *, head: str = "identity", loss="log", mask=None, sample_weight=None
) -> AttentionProblem:
    """Build a (batched) problem from embeddings and token ids.

    ``E`` (K, d) or (B, K, d); ``tokens`` (n, T) or (B, n, T); ``labels`` (n,) or (B, n);
    ``mask`` (optional, same shape as tokens): positions the softmax runs over (default all);
    ``sample_weight`` (optional, (n,) or (B, n)): default ``1/n`` for every sample;
    ``loss``: one of the head's losses, or (general head, batched) one per problem.
    """
    losses = None
    if not isinstance(loss, str):
        losses = tuple(str(lo) for lo in loss)
        if head != "general" or not losses or any(lo not in ("ce", "squared") for lo in losses):
            raise ParameterError(f"per-problem losses need the general head and ce/squared: {loss}")
        loss, losses = (losses[0], None) if len(set(losses)) == 1 else ("per-problem", losses)
    elif (head, loss) not in HEAD_LOSSES:
        raise ParameterError(f"(head, loss) must be one of {HEAD_LOSSES}, got {(head, loss)}")
    E = as_float_array(E, "E")
    tok = np.asarray(tokens)
    lab = np.asarray(labels)
    if tok.ndim == 2:
        E, tok, lab = E[None], tok[None], lab[None]
        mask = None if mask is None else np.asarray(mask)[None]
        sample_weight = None if sample_weight is None else np.asarray(sample_weight)[None]
    if E.ndim != 3 or tok.ndim != 3 or lab.shape != tok.shape[:2] or E.shape[0] != tok.shape[0]:
        raise DataError(f"inconsistent shapes: E {E.shape}, tokens {tok.shape}, labels {lab.shape}")
    if not np.issubdtype(tok.dtype, np.integer) or not np.issubdtype(lab.dtype, np.integer):
        raise DataError("tokens and labels must be integer ids")
    B, n, T = tok.shape
    K = E.shape[1]
    if n == 0 or T == 0:
        raise DataError(f"the dataset is empty (n = {n} sequences of length T = {T})")
    if losses is not None and len(losses) != B:
        raise DataError(f"{len(losses)} per-problem losses for a batch of {B} problems")
    if tok.min() < 0 or tok.max() >= K or lab.min() < 0 or lab.max() >= K:
        raise DataError(f"token ids must lie in [0, K) = [0, {K})")
    X = np.take_along_axis(E[:, None], tok[..., None], axis=2)  # (B, n, T, d)
    label_pos = tok == lab[..., None]
    m = np.ones(tok.shape, bool) if mask is None else np.asarray(mask, bool)
    w = (
        np.full((B, n), 1.0 / n)
        if sample_weight is None
        else as_float_array(sample_weight, "sample_weight")
    )
    if m.shape != tok.shape or w.shape != (B, n):
        raise DataError("mask must have the shape of tokens and sample_weight that of labels")
    if np.any(w < 0):
        raise DataError("sample_weight has negative entries")
    active = w != 0
    if head == "identity" and np.any(active & ~np.any(label_pos & m, axis=-1)):
        raise DataError(
            "a label does not occur among the attended positions of its sequence; the identity "
            "head needs y_i in X_i (realizability), otherwise the log-loss is +inf"
        )
    if np.any(~m.any(axis=-1)):
        raise DataError("every sequence needs at least one attended position")
    bias = np.where(m, 0.0, -np.inf)
    return AttentionProblem(
        X=X,
        xbar=X[:, :, -1],
        label_pos=label_pos,
        bias=bias,
        weight=w,
        E=E,
        labels=lab.astype(np.int64),
        head=head,
        loss=loss,
        losses=losses,
    )


def _scores(W, P: AttentionProblem) -> NDArray[np.float64]:
    """Scores ``z[b, i, t] = x_it^T W_b xbar_i`` (B, n, T), masked positions at -inf."""
    u = np.matmul(P.xbar, np.swapaxes(W, -1, -2))  # (B, n, d): u_i = W xbar_i
    return np.matmul(P.X, u[..., None])[..., 0] + P.bias  # (B, n, T)


def check_weights(W, P: AttentionProblem, *, trajectory: bool = False) -> NDArray[np.float64]:
    """``W`` as finite float64 weights of ``P``: (d, d), (B, d, d) (B the batch, or 1) or, with
    ``trajectory``, (S, B, d, d); a :class:`DataError` otherwise."""
    if not isinstance(P, AttentionProblem):
        raise DataError(f"P must be an AttentionProblem (make_problem), got {type(P).__name__}")
    W = as_float_array(W, "W")
    d, B = P.d, P.batch
    shapes = "(d, d), (B, d, d)" + (" or (S, B, d, d)" if trajectory else "")
    ok = W.ndim in ((2, 3, 4) if trajectory else (2, 3)) and W.shape[-2:] == (d, d)
    if ok and W.ndim >= 3:
        ok = W.shape[-3] in (1, B) if W.ndim == 3 else W.shape[-3] == B
    if not ok:
        raise DataError(f"W must have shape {shapes} with d = {d}, B = {B}, got {W.shape}")
    return W


def attention_weights(W, P: AttentionProblem) -> NDArray[np.float64]:
    """Attention probabilities ``s`` (B, n, T) (or (S, B, n, T) for a trajectory ``W``)."""
    W = check_weights(W, P, trajectory=True)
    return _attention_weights(W, P)


def _attention_weights(W, P: AttentionProblem) -> NDArray[np.float64]:
    """:func:`attention_weights` without the checks (the descent's own iterates)."""
    if W.ndim == 4:  # a recorded trajectory (S, B, d, d)
        u = np.einsum("bnd,sbed->sbne", P.xbar, W)
        z = np.einsum("bntd,sbnd->sbnt", P.X, u) + P.bias
    else:
        z = _scores(W, P)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_vjp(s, g):
    """``s * (g - <s, g>)`` written as ``s_t * sum_u s_u (g_t - g_u)`` (no cancellation when
    ``s`` is nearly one-hot), over the last axis."""
    diff = g[..., :, None] - g[..., None, :]  # (..., T, T): g_t - g_u
    return s * np.matmul(diff, s[..., None])[..., 0]


def loss_grad(W, P: AttentionProblem, *, need_grad: bool = True):
    """Loss (B,) and gradient (B, d, d) of every problem of the batch at ``W`` (B, d, d)."""
    return _loss_grad(check_weights(W, P), P, need_grad=need_grad)


def _loss_grad(W, P: AttentionProblem, *, need_grad: bool = True):
    """:func:`loss_grad` without the checks (the descent's own iterates)."""
    z = _scores(W, P)
    zmax = z.max(axis=-1, keepdims=True)
    e = np.exp(z - zmax)
    Z = e.sum(axis=-1, keepdims=True)
    s = e / Z  # (B, n, T)
    if P.head == "identity":
        el = np.where(P.label_pos, e, 0.0)
        Zl = el.sum(axis=-1)  # (B, n) label mass (unnormalised)
        Zn = Z[..., 0] - Zl if P.loss == "squared" else np.sum(e, -1, where=~P.label_pos)
        if P.loss == "log":
            # -log f_y = log(1 + Zn/Zl); dl/dz = s - q, written without cancellation:
            # non-label positions s_t, label positions -q_t * (non-label mass), so the entries
            # sum to 0 to relative precision even when s is one-hot up to 1e-300 (keeps the
            # gradient in S and Π_S⊥ W frozen for thousands of normalized steps).
            with np.errstate(divide="ignore", invalid="ignore"):
                per = np.log1p(Zn / Zl)
                q = el / np.where(Zl > 0, Zl, 1.0)[..., None]
            dz = np.where(P.label_pos, -q * (Zn / Z[..., 0])[..., None], s)
        else:  # squared: (1 - f_y)^2, dl/ds_t = -2 (1 - f_y) 1{t label}
            f_y = Zl / Z[..., 0]
            per = (1.0 - f_y) ** 2
            g = np.where(P.label_pos, (-2.0 * (1.0 - f_y))[..., None], 0.0)
            dz = _softmax_vjp(s, g)
    else:
        h = np.matmul(s[..., None, :], P.X)[..., 0, :]  # (B, n, d): X^T s
        u = np.matmul(h, np.swapaxes(P.E, -1, -2))  # (B, n, K): logits E X^T s
        u = u - u.max(axis=-1, keepdims=True)
        eu = np.exp(u)
        pu = eu / eu.sum(axis=-1, keepdims=True)  # softmax over the vocabulary
        p_y = np.take_along_axis(pu, P.labels[..., None], axis=-1)[..., 0]
        onehot = np.zeros_like(pu)
        np.put_along_axis(onehot, P.labels[..., None], 1.0, axis=-1)
        ce = np.array([lo == "ce" for lo in (P.losses or (P.loss,) * P.batch)])[:, None]
        per_ce = np.log(eu.sum(-1)) - np.take_along_axis(u, P.labels[..., None], -1)[..., 0]
        per_sq = (1.0 - p_y) ** 2  # squared: (1 - p_y)^2
        per = np.where(ce, per_ce, per_sq)
        du_sq = (-2.0 * (1.0 - p_y) * p_y)[..., None] * (onehot - pu)
        du = np.where(ce[..., None], pu - onehot, du_sq)
        dh = np.matmul(du, P.E)  # (B, n, d)
        g = np.matmul(P.X, dh[..., None])[..., 0]  # (B, n, T): dl/ds_t = x_t^T dh
        dz = _softmax_vjp(s, g)
    loss = np.sum(P.weight * np.where(P.weight != 0, per, 0.0), axis=-1)
    if not need_grad:
        return loss, None
    r = dz * P.weight[..., None]  # (B, n, T)
    gx = np.matmul(r[..., None, :], P.X)[..., 0, :]  # (B, n, d): sum_t r_t x_t
    grad = np.matmul(np.swapaxes(gx, -1, -2), P.xbar)  # (B, d, d): sum_i gx_i xbar_i^T
    return loss, grad


def smoothness_bounds(P: AttentionProblem) -> NDArray[np.float64]:
    r"""Safe smoothness constant of the identity log-loss, per problem (B,):
    :math:`L_W \le \sum_i w_i \tfrac12 \|X_i\|_2^2 \|\bar x_i\|^2` (softmax Hessian <= 1/2)."""
    Xn = np.linalg.norm(P.X, ord=2, axis=(-2, -1))  # (B, n) spectral norms
    return np.sum(P.weight * 0.5 * Xn**2 * np.sum(P.xbar**2, -1), axis=-1)
