r"""Training the geometry paper's models on distinct contexts [geo, Sec. 3, Fig. 2].

Every model maps the ``m`` distinct contexts of a :class:`~ntpcore.geo.data.ContextDataset`
to logits :math:`L = W H (+ b 1^\top) \in \R^{V\times m}` (``W``: output-layer weight, the
word embeddings; ``H``: the context embeddings, one column per context).  The loss is the
authors' **sum** over the ``n`` training pairs (book: ``geo-eq-summed-loss``), computed
from the distinct contexts and their counts :math:`n_{z,j}` -- the same number at a
fraction of the cost:

.. math::
    \sum_{i=1}^n -\log \mathbb S_{z_i}(L e_{j(i)})
    = \sum_j \Big(n_j\,\mathrm{LSE}(\ell_j) - \sum_z n_{z,j}\,\ell_{z,j}\Big)
    = n\,\CE(L),\qquad n_j = \textstyle\sum_z n_{z,j}.

The protocol (:class:`~ntpcore.geo.train.protocol.AdamWProtocol`, declared once; the authors'
code): full batch (one
step per epoch), AdamW (lr ``1e-4``, decoupled weight decay ``1e-6`` on every parameter,
betas (0.9, 0.999), eps ``1e-8``), step-wise learning rate
:math:`\mathrm{lr}\cdot\gamma^{\#\{\text{milestones} \le k\}}` at step ``k`` (PyTorch's
``MultiStepLR`` stepped once per epoch; milestones 5k, 10k, ..., 25k, gamma 0.4), 30k epochs.

Two training paths, one module per framework (:func:`train_model` picks one):

* :func:`~ntpcore.geo.train.numpy_ufm.train_ufm_numpy` -- the UFM in float64 with its
  closed-form gradient :math:`\nabla_W = G H^\top`, :math:`\nabla_H = W^\top G`,
  :math:`G = (Q(L) - P)\,\mathrm{diag}(n_j)` and an
  in-place AdamW identical to ``torch.optim.AdamW`` (no autograd, no tensor overhead);
* :func:`~ntpcore.geo.train.torch_nets.train_torch` -- any :mod:`ntpcore.geo.models` module
  (transformer, LSTM, or the torch UFM used as an oracle), on the GPU when one is present.

Both record, at log-spaced epochs (:func:`~ntpcore.geo.train.protocol.record_epochs`),
:math:`\CE - \mathcal H`, :math:`\|W\|_F`, :math:`\|H\|_F`, :math:`\|L\|_F` and
:math:`\|P_\F(L) - L^{\rm in}\|_F` in float64, plus float32 snapshots of ``W``, ``H`` and
``b`` from which the geometry metrics are computed afterwards. With a ``checkpoint`` path
they save their full state (atomically) every ``checkpoint_seconds`` and resume from it;
training is deterministic given the seed, so a resumed run equals an uninterrupted one.

The ridge fit of the regularised UFM is :mod:`~ntpcore.geo.train.ridge`.
"""

from __future__ import annotations

from typing import Any

from ntpcore.geo.data import ContextDataset
from ntpcore.geo.train.numpy_ufm import init_ufm_state, train_ufm_numpy
from ntpcore.geo.train.protocol import (
    MODELS,
    PAPER_MILESTONES,
    AdamWProtocol,
    Recorder,
    TrainerConfig,
    lr_at,
    record_epochs,
)
from ntpcore.geo.train.ridge import fit_ufm_ridge
from ntpcore.geo.train.torch_nets import (
    build_model,
    default_device,
    make_optimizer,
    model_inputs,
    summed_loss,
    train_torch,
)

__all__ = [
    "MODELS",
    "PAPER_MILESTONES",
    "Recorder",
    "AdamWProtocol",
    "TrainerConfig",
    "build_model",
    "default_device",
    "fit_ufm_ridge",
    "init_ufm_state",
    "lr_at",
    "make_optimizer",
    "model_inputs",
    "record_epochs",
    "summed_loss",
    "train_model",
    "train_torch",
    "train_ufm_numpy",
]


def train_model(ds: ContextDataset, cfg: TrainerConfig, **kwargs: Any) -> dict[str, Any]:
    """Train ``cfg.model`` on ``ds``: the UFM in closed form (numpy), networks with torch."""
    if cfg.model == "ufm":
        kwargs.pop("device", None)
        return train_ufm_numpy(ds, cfg, **kwargs)
    return train_torch(ds, cfg, **kwargs)
