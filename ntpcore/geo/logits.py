r"""The two parts of the logits that the geometry paper separates [geo, Sec. 2].

Orientation: logits ``L``, soft labels ``P`` and supports ``S`` are ``(V, m)`` -- rows are
words, columns the ``m`` distinct contexts, :math:`\mathcal S_j=\{z:\hat p_{j,z}>0\}`,
:math:`k_j=|\mathcal S_j|`.  With the in-support subspace
:math:`F=\mathrm{span}\{(e_z-e_{z'})e_j^\top: z,z'\in\mathcal S_j\}` and its projection
:math:`P_F` (:func:`ntpcore.core.logits.project_F`; book: ``geo-def-lin``):

* the **finite part** :math:`L^{in}\in F` (:func:`finite_logits`), the unique element of
  :math:`F` with :math:`(e_z-e_{z'})^\top L^{in}e_j=\log(\hat p_{j,z}/\hat p_{j,z'})`,

  .. math:: L^{in}_{zj}=\log\hat p_{j,z}-\tfrac1{k_j}\textstyle\sum_{z'\in\mathcal S_j}
            \log\hat p_{j,z'}\ (z\in\mathcal S_j),\qquad 0\ \text{otherwise};

* the **centred support** :math:`\tilde S=(I-\mathbf 1\mathbf 1^\top/V)S`
  (:func:`centered_support`), a feasible point of the nuclear-norm NTP-SVM of
  :math:`L^{mm}` (book: ``geo-eq-svm``) with every margin equal to 1, hence
  :math:`\|L^{mm}\|_*\le\|\tilde S\|_*`; equal to :math:`L^{mm}` for one-hot labels
  (book: ``geo-prop-proxy``);
* the nuclear norm :math:`\|L\|_*` (:func:`nuclear_norm`);
* two read-outs of the support pattern that :math:`L^{mm}` predicts for trained logits
  [geo, Fig. 1]: whether each context's support words carry its largest logits
  (:func:`support_on_top`), and whether logit columns of contexts with identical supports
  are more alike than the others (:func:`same_vs_other`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.logits import project_F, support_of
from ntpcore.core.validate import as_float_array, as_prob_matrix, as_support


def finite_logits(P: ArrayLike) -> NDArray[np.float64]:
    r"""Finite (in-support) part :math:`L^{in}` of the logits (book: ``geo-def-lin``).

    The unique element of :math:`F` with :math:`(e_z-e_{z'})^\top L^{in}e_j=\log(p_{j,z}/p_{j,z'})`
    for :math:`z,z'\in\mathcal S_j`: the log-probabilities centred on each support
    (:math:`P_F` of :math:`\log P` restricted to the support), zero off the support.

    Raises
    ------
    DataError
        If a column of ``P`` is not a probability vector.
    """
    P = as_prob_matrix(P)
    S = support_of(P)
    with np.errstate(divide="ignore"):
        logP = np.where(S, np.log(np.where(S, P, 1.0)), 0.0)
    return project_F(logP, S)


def centered_support(S: ArrayLike) -> NDArray[np.float64]:
    r"""Centred support :math:`\tilde S=(I-\mathbf 1\mathbf 1^\top/V)S` (proxy of :math:`L^{mm}`).

    Column :math:`j` equals :math:`1-k_j/V` on :math:`\mathcal S_j` and :math:`-k_j/V` off it, so
    it satisfies the NTP-SVM constraints with all margins exactly 1.
    """
    S = as_support(S).astype(np.float64)
    return S - S.mean(axis=0, keepdims=True)


def nuclear_norm(L: ArrayLike) -> float:
    """Sum of singular values."""
    return float(np.linalg.svd(as_float_array(L, "L", ndim=2), compute_uv=False).sum())


def support_on_top(L: ArrayLike, S: ArrayLike) -> float:
    r"""Fraction of contexts whose :math:`k_j` support words carry the :math:`k_j` largest logits.

    1 for :math:`L^{mm}` and for any logits with the sign pattern of the NTP-SVM margins
    (every in-support entry of a column above every off-support entry); trained logits
    approach it as their low-rank part dominates [geo, Fig. 1].

    ``L`` (V, m) are logits, ``S`` (V, m) the support matrix.
    """
    L, S, k = _logits_and_support(L, S)
    top = np.argsort(-L, axis=0)  # (V, m): word indices by decreasing logit
    return float(np.mean([S[top[: k[j], j], j].all() for j in range(L.shape[1])]))


def same_vs_other(L: ArrayLike, S: ArrayLike) -> tuple[float, float]:
    r"""Mean Pearson correlation of logit columns with identical vs different supports.

    Returns ``(same, other)``: the mean correlation :math:`\mathrm{corr}(\ell_j,\ell_{j'})`
    over pairs :math:`j\ne j'` with :math:`\mathcal S_j=\mathcal S_{j'}` (NaN when there is no
    such pair) and over pairs with :math:`\mathcal S_j\ne\mathcal S_{j'}`.  Identical supports
    give identical columns of :math:`L^{mm}` (book: ``geo-def-collapse``), so trained logits
    should have ``same > other``.

    ``L`` (V, m) are logits, ``S`` (V, m) the support matrix.
    """
    L, S, k = _logits_and_support(L, S)
    C = np.corrcoef(L.T)  # (m, m)
    Si = S.astype(int)
    same = (Si.T @ Si == k[:, None]) & (k[:, None] == k[None, :])  # |S_j ∩ S_j'| = k_j = k_j'
    off = ~np.eye(len(k), dtype=bool)
    return float(C[same & off].mean()) if (same & off).any() else np.nan, float(C[~same].mean())


def _logits_and_support(
    L: ArrayLike, S: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.int64]]:
    """Validated logits (V, m), support matrix (V, m) and support sizes ``k`` (m,)."""
    S = as_support(S)
    return as_float_array(L, "L", shape=S.shape), S, S.sum(axis=0)
