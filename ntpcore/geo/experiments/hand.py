r"""The worked example of the geometry part: three words, three contexts, solvable by hand
(figure ``geo-hand-example``; book: *A worked example* in ``book/geo/index.md``).

Contexts 1 and 2 are followed by words 1 and 2, with probabilities :math:`(p, 1-p)` and
:math:`(1-p, p)`; context 3 by word 3 alone:

.. math::
    P=\begin{pmatrix}p&1-p&0\\1-p&p&0\\0&0&1\end{pmatrix},\qquad
    S=\begin{pmatrix}1&1&0\\1&1&0\\0&0&1\end{pmatrix}.

By hand (the notebook types these closed forms and checks them against the solvers):

* the centred support :math:`\tilde S=(I-J/3)S=uv^\top` with :math:`u=(1,1,-2)/3`,
  :math:`v=(1,1,-1)`, of rank one, is :math:`L^{mm}`: its polar factor
  :math:`G_0=(1,1,-2)(1,1,-1)^\top/\sqrt{18}` is negative off the support, a dual
  certificate (book: ``geo-lem-dual``), and :math:`\|L^{mm}\|_*=\sqrt2`;
* :math:`L^{in}=a\,(1,-1,0)^\top(1,-1,0)` with :math:`a=\tfrac12\log\frac p{1-p}`, so
  :math:`\|L^{in}\|_*=\log\frac p{1-p}`;
* the two have orthogonal column spaces and orthogonal row spaces.

Along the regularization path the logits keep that structure.  Swapping words 1 and 2 and
contexts 1 and 2 leaves the data unchanged, so it leaves the minimiser :math:`L_\lambda`
unchanged (it is unique: it has zero column sums, and on such matrices the CE is strictly
convex); and every matrix with that symmetry and zero column sums has rank at most two,
with one singular pair along the in-support direction :math:`(1,-1,0)/\sqrt2` on both
sides.  In the basis of that pair and of the other one,
every word and context embedding of the balanced factorisation has two coordinates, the
*in-support* one and the *max-margin* one: :func:`run_hand_example` returns them.
Contexts 1 and 2 share their max-margin coordinate at every :math:`\lambda` -- they
coincide in the subspace of the diverging direction (subspace collapse, book:
``geo-def-collapse``) -- while their in-support coordinates tend to
:math:`\pm\sqrt{\tfrac12\log\frac p{1-p}}`, so :math:`\|h_1-h_2\|\to\sqrt{2\log\frac p{1-p}}`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ntpcore.core.cache import cached
from ntpcore.errors import DataError
from ntpcore.geo.regpath import regularization_path

#: the in-support direction of the example, on the words' side and on the contexts' side
IN_DIRECTION = np.array([1.0, -1.0, 0.0]) / np.sqrt(2.0)
#: the max-margin direction on the contexts' side (the right factor of L^mm), for orientation
MM_CONTEXTS = np.array([1.0, 1.0, -1.0]) / np.sqrt(3.0)


def hand_data(p_high: float) -> NDArray[np.float64]:
    """The soft labels ``P`` (3, 3) of the example: words as rows, contexts as columns."""
    if not 0.5 < p_high < 1.0:
        raise DataError(f"p_high must lie in (1/2, 1), got {p_high!r}")
    q = 1.0 - p_high
    return np.array([[p_high, q, 0.0], [q, p_high, 0.0], [0.0, 0.0, 1.0]])


@dataclass(frozen=True)
class HandExampleConfig:
    """The example's probabilities and the grid of its regularization path."""

    p_high: float = 2.0 / 3.0  # p: context 1 is followed by word 1 with p, word 2 with 1 - p
    log10_lam_max: float = -1.0  # largest lambda of the path, 10**log10_lam_max
    log10_lam_min: float = -8.0  # smallest lambda (1e-9 is at rounding level, see the notebook)
    n_lambdas: int = 15  # log-spaced lambdas of the path
    init_seed: int = 0  # seed of the small random start of the path's first solve


def _coordinates(L: NDArray[np.float64]) -> tuple[NDArray[np.float64], ...]:
    """Two-dimensional balanced factors of a rank-two ``L`` of the example: the words
    ``(3, 2)`` and the contexts ``(3, 2)``, coordinates (in-support, max-margin), and the two
    singular values (in-support, max-margin)."""
    U, s, Vt = np.linalg.svd(L)
    i_in = int(np.argmax(np.abs(U[:, :2].T @ IN_DIRECTION)))
    pairs = []
    for i, reference in ((i_in, IN_DIRECTION), (1 - i_in, MM_CONTEXTS)):
        u, v = U[:, i], Vt[i]
        sign = 1.0 if v @ reference >= 0 else -1.0  # orient each pair by its context side
        pairs.append((s[i], sign * u, sign * v))
    words = np.stack([np.sqrt(si) * u for si, u, _ in pairs], axis=1)
    contexts = np.stack([np.sqrt(si) * v for si, _, v in pairs], axis=1)
    return words, contexts, np.array([pairs[0][0], pairs[1][0]])


@cached
def run_hand_example(cfg: HandExampleConfig) -> dict[str, object]:
    r"""The regularization path of the example and its two-dimensional embeddings.

    Returns ``P`` (3, 3), ``lambdas`` (k,), ``L`` (k, 3, 3), ``words`` and ``contexts``
    (k, 3, 2): coordinates (in-support, max-margin) of the balanced factors, ``sigma``
    (k, 2): their singular values (in-support, max-margin), ``sigma_third`` (k,): the third
    singular value (zero up to the solver's accuracy: the logits have rank two), and the
    path's optimality residuals ``opt_residual`` (k,).
    """
    P = hand_data(cfg.p_high)
    lambdas = np.logspace(cfg.log10_lam_max, cfg.log10_lam_min, cfg.n_lambdas)
    path = regularization_path(P, None, lambdas, seed=cfg.init_seed)
    words, contexts, sigma, third = [], [], [], []
    for L in path["L"]:
        w, c, s = _coordinates(L)
        words.append(w)
        contexts.append(c)
        sigma.append(s)
        third.append(np.linalg.svd(L, compute_uv=False)[2])
    return {
        "P": P,
        "lambdas": path["lambdas"],
        "L": path["L"],
        "words": np.array(words),
        "contexts": np.array(contexts),
        "sigma": np.array(sigma),
        "sigma_third": np.array(third),
        "opt_residual": path["opt_residual"],
    }
