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
from numpy.typing import NDArray

from ntpcore.att.finite import subspaces, token_log_loss_terms
from ntpcore.att.linalg import CLARABEL_TIGHT, check_embeddings, score_jacobian
from ntpcore.att.priority import check_tokens
from ntpcore.core.validate import check_cvxpy_solver, check_numbers
from ntpcore.errors import SolverError


def regularization_path(
    E, tokens, labels, radii, *, solver: str = "CLARABEL"
) -> dict[str, NDArray[np.float64]]:
    r"""Regularization path :math:`W_R = \arg\min_{\|W\|_F \le R} L(W)`: ``{"R": radii,
    "W": (len(radii), d, d), "norm": ||W_R||_F}`` (a dict, as the other papers' paths).

    Coordinates in an orthonormal basis of ``S``; log-loss at token level
    (:func:`ntpcore.att.finite.token_log_loss_terms`; cvxpy + Clarabel, exponential cone).
    For very large R (>~ 50) the objective is flat to machine precision and the solver stops
    short of the constraint ``||W_R|| = R``; use R <= 30.

    Raises
    ------
    SolverError  if no attempt reports an optimal solution at some radius (statuses named).
    """
    import cvxpy as cp

    E = check_embeddings(E)
    K, d = E.shape
    tok, lab = check_tokens(tokens, labels, K)
    radii = check_numbers(radii, "radii", lo=0)
    solver = check_cvxpy_solver(solver)  # never a silent fallback to SCS
    B = subspaces(E, tok, lab).S  # (r, d*d)
    c = cp.Variable(B.shape[0])
    R = cp.Parameter(nonneg=True)
    terms = token_log_loss_terms(c, score_jacobian(E, tok, B), tok, lab)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.hstack(terms)) / len(lab)), [cp.norm(c, 2) <= R])
    out = []
    # An interior-point solve can end "optimal_inaccurate" at tight tolerances; such a point
    # is never accepted: it is re-solved with more iterations, then with SCS at a tight
    # tolerance, and the path fails with every status if no attempt reports "optimal".
    attempts = [
        (solver, CLARABEL_TIGHT if solver == "CLARABEL" else {}),
        (solver, {"max_iter": 1000}),
        ("SCS", {"eps": 1e-9, "max_iters": 200_000}),
    ]
    for rad in radii:
        R.value = float(rad)
        statuses = []
        for name, kwargs in attempts:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                try:
                    prob.solve(solver=name, **kwargs)
                except cp.error.SolverError as exc:
                    statuses.append(f"{name}: {exc}")
                    continue
            statuses.append(f"{name}: {prob.status}")
            if prob.status == "optimal":
                break
        else:
            raise SolverError(
                f"regularization path: no optimal solve at R={rad} ({'; '.join(statuses)})"
            )
        out.append((np.asarray(c.value) @ B).reshape(d, d))
    W = np.array(out)
    return {
        "R": np.asarray(radii, dtype=float),
        "W": W,
        "norm": np.linalg.norm(W.reshape(len(W), -1), axis=1),
    }
