r"""Regularization path of the self-attention paper (key ``att``).

.. math::
    W_R = \arg\min_{\|W\|_F \le R} L(W), \qquad
    W_R / R \to W^{\mathrm{svm}}/\|W^{\mathrm{svm}}\|_F,\quad
    \Pi_{S_\mathrm{fin}} W_R \to W^{\mathrm{fin}} \quad (R \to \infty)

(book ``att-thm-regpath``), with the NTP log-loss ``L`` of book ``att-eq-loss`` at token level.
``L`` depends on ``W`` only through its projection on the edge span ``S`` (book
``att-lem-subspace``), so ``W`` is parametrised in an orthonormal basis of ``S`` and the
minimiser is unique.
"""

from __future__ import annotations

import warnings

import numpy as np

from ntpcore.att.finite import subspaces, token_log_loss_terms
from ntpcore.att.linalg import CLARABEL_TIGHT, check_embeddings, score_jacobian
from ntpcore.att.priority import check_tokens
from ntpcore.errors import SolverError


def regularization_path(E, tokens, labels, radii, *, solver: str = "CLARABEL"):
    r"""Regularization path :math:`W_R = \arg\min_{\|W\|_F \le R} L(W)`, shape (len(radii), d, d).

    Coordinates in an orthonormal basis of ``S``; log-loss at token level
    (:func:`ntpcore.att.finite.token_log_loss_terms`; cvxpy + Clarabel, exponential cone).
    For very large R (>~ 50) the objective is flat to machine precision and the solver stops
    short of the constraint ``||W_R|| = R``; use R <= 30.

    Raises
    ------
    SolverError  if the solver fails at some radius.
    """
    import cvxpy as cp

    E = check_embeddings(E)
    K, d = E.shape
    tok, lab = check_tokens(tokens, labels, K)
    B = subspaces(E, tok, lab).S  # (r, d*d)
    c = cp.Variable(B.shape[0])
    R = cp.Parameter(nonneg=True)
    terms = token_log_loss_terms(c, score_jacobian(E, tok, B), tok, lab)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.hstack(terms)) / len(lab)), [cp.norm(c, 2) <= R])
    out = []
    for rad in radii:
        R.value = float(rad)
        with warnings.catch_warnings():
            # Clarabel's tight gap tolerance is occasionally out of reach (status
            # "optimal_inaccurate"); such a point is accepted below only if it is feasible.
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            prob.solve(solver=solver, **(CLARABEL_TIGHT if solver == "CLARABEL" else {}))
        ok = prob.status == "optimal" or (
            prob.status == "optimal_inaccurate"
            and np.linalg.norm(c.value) <= float(rad) * (1 + 1e-6)
        )
        if not ok:
            raise SolverError(f"regularization path: {solver} status {prob.status!r} at R={rad}")
        out.append((np.asarray(c.value) @ B).reshape(d, d))
    return np.array(out)
