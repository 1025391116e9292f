r"""The descents of the self-attention experiments retraced by torch autograd (key ``att``).

An independent implementation of the update the experiments run with the closed-form
gradients of :mod:`ntpcore.att.dynamics` and the loops of :mod:`ntpcore.att.descent`: the loss
is written from its definition (book ``att-eq-loss``) in torch, float64, and differentiated by
autograd; the step is plain GD, :math:`W \leftarrow W - \eta\nabla L(W)`, or normalized GD,
:math:`W \leftarrow W - \eta\nabla L(W)/(\|\nabla L(W)\|_F + 10^{-12})`.  Trials run side by
side on a leading batch axis (one autograd graph per step).

The identity head's log-loss of sample ``i`` is written
:math:`\operatorname{softplus}(\operatorname{lse}_{t \notin y}(z_{it}) -
\operatorname{lse}_{t \in y}(z_{it}))` (the token-level form of book ``att-eq-loss``), whose
autograd gradient keeps its relative accuracy when the attention is one-hot up to
:math:`10^{-30}` (``-log`` of the label's softmax mass would round it to 0).  The general
head's attention average :math:`X^\top s` is written around the position of largest score for
the same reason.  A normalized run that starts at ``W = 0`` with a gradient of rounding size
(a symmetric cycle, whose finite component is 0) stays there, as in exact arithmetic.
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import NDArray

__all__ = ["descent"]

#: a gradient below this at W = 0 is rounding noise: the normalized run stays at 0
_STATIONARY = 1e-12


def descent(
    E,
    tokens,
    labels,
    W0,
    *,
    lr: float,
    n_steps: int,
    normalized: bool,
    record=None,
    mask=None,
    weight=None,
    head: str = "identity",
    losses=None,
) -> NDArray[np.float64]:
    """The iterates ``W(tau)`` (S, B, d, d) at the ``record``-ed steps (default all) of B
    independent problems (``E`` (B, K, d), ``tokens`` (B, n, T), ``labels`` (B, n), ``W0``
    (B, d, d)); ``mask`` (B, n, T) the positions attended to (default all), ``weight`` (B, n)
    the samples' weights (default 1/n); ``head`` ``"identity"`` (log-loss) or ``"general"``
    with ``losses`` (B,) ``"ce"`` or ``"squared"``."""
    torch.set_num_threads(1)
    Et = torch.as_tensor(np.asarray(E, dtype=float))
    tok = torch.as_tensor(np.asarray(tokens, dtype=np.int64))
    lab = torch.as_tensor(np.asarray(labels, dtype=np.int64))
    B, n, T = tok.shape
    X = Et[torch.arange(B)[:, None, None], tok]  # (B, n, T, d)
    xbar = X[:, :, -1]  # (B, n, d)
    m = torch.ones(B, n, T, dtype=torch.bool) if mask is None else torch.as_tensor(mask)
    w = (
        torch.full((B, n), 1.0 / n, dtype=torch.float64)
        if weight is None
        else torch.as_tensor(np.asarray(weight, dtype=float))
    )
    ninf = torch.tensor(-torch.inf, dtype=torch.float64)
    if head == "identity":
        on = m & (tok == lab[..., None])
        off = m & ~(tok == lab[..., None])
        live = off.any(-1) & (w != 0)  # samples with a loss (the others are 0)
        on = on | ~live[..., None]  # the others: finite stand-ins (no NaN in the backward)
        off = off | ~live[..., None]
        zero = torch.zeros(B, n, dtype=torch.float64)

        def loss(W):
            z = torch.einsum("bntd,bde,bne->bnt", X, W, xbar)
            a = torch.logsumexp(torch.where(off, z, ninf), dim=-1)
            b = torch.logsumexp(torch.where(on, z, ninf), dim=-1)
            per = torch.nn.functional.softplus(torch.where(live, a - b, zero))
            return (w * torch.where(live, per, zero)).sum()

    else:
        ce = torch.as_tensor(np.array([lo == "ce" for lo in losses]))[:, None]

        def loss(W):
            z = torch.einsum("bntd,bde,bne->bnt", X, W, xbar)
            z = torch.where(m, z, ninf)
            s = torch.softmax(z, dim=-1)
            top = z.argmax(dim=-1)  # h = x_top + sum_t s_t (x_t - x_top)
            x_top = torch.gather(X, 2, top[..., None, None].expand(-1, -1, 1, X.shape[-1]))
            h = x_top[:, :, 0] + torch.einsum("bnt,bntd->bnd", s, X - x_top)
            u = torch.einsum("bnd,bkd->bnk", h, Et)  # logits E X^T s
            lp = torch.log_softmax(u, dim=-1).gather(-1, lab[..., None])[..., 0]
            per = torch.where(ce, -lp, (1.0 - lp.exp()) ** 2)
            return (w * per).sum()

    steps = np.arange(n_steps + 1) if record is None else np.unique(np.asarray(record, int))
    out = np.empty((len(steps), B, *np.shape(W0)[1:]))
    W = torch.tensor(np.asarray(W0, dtype=float)).requires_grad_(True)
    eta = torch.full((B, 1, 1), float(lr), dtype=torch.float64)
    r = 0
    for tau in range(n_steps + 1):
        if r < len(steps) and steps[r] == tau:
            out[r] = W.detach().numpy()
            r += 1
        if tau == n_steps:
            break
        (g,) = torch.autograd.grad(loss(W), W)
        with torch.no_grad():
            if normalized:
                norm = torch.linalg.vector_norm(g, dim=(1, 2))[:, None, None]
                if tau == 0:  # a run that starts at a stationary point stays there
                    still = (norm[:, 0, 0] <= _STATIONARY) & ~W.flatten(1).any(dim=1)
                    eta[still] = 0.0
                W -= eta * g / (norm + 1e-12)
            else:
                W -= eta * g
    return out
