r"""Training sets of the linear paper (key ``lin``) in compressed form.

A training set of next-token prediction with fixed context embeddings is summarised by
its :math:`m` distinct contexts [lin, Sec. 2]:

* ``H``  (d, m)  embeddings :math:`\bar h_j` as columns,
* ``P``  (V, m)  next-token distributions :math:`\hat p_j` as columns (each in the simplex),
* ``pi`` (m,)    context frequencies :math:`\hat\pi_j`.

The support of context ``j`` is :math:`\mathcal S_j = \{z : \hat p_{j,z} > 0\}`; it is
returned as a boolean (V, m) matrix ``S`` throughout the ``lin_*`` modules.

Two generators reproduce the paper's experiments:

* :func:`make_toy` -- the 2-D example of Figs. 1-2 (d = 2, m = 3, V = 5, supports
  {2,3,4}, {1,2,5}, {1,4,5} in the paper's 1-based word numbering).  The paper gives neither
  the embeddings nor the probabilities; the defaults are our choice: unit
  vectors at 10, 100 and 260 degrees and Dirichlet(1) probabilities re-drawn until the
  empirical entropy is within ``entropy_tol`` of the paper's H = 0.8811.
* :func:`make_synthetic` -- the synthetic set of App. A.2 (m = 50, d = 60, V = 10,
  S_j = 6).  Defaults: Gaussian N(0, I_d) embeddings, uniform random supports,
  Dirichlet(1) probabilities on each support, uniform context frequencies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.logits import entropy, support_of
from ntpcore.core.validate import (
    as_float_array,
    as_prob_matrix,
    check_choice,
    check_number,
    check_numbers,
    check_seed,
)
from ntpcore.errors import DataError, ParameterError

#: Supports of the toy contexts A, B, C as 0-based token ids (paper: "234", "125", "145").
TOY_SUPPORTS: tuple[tuple[int, ...], ...] = ((1, 2, 3), (0, 1, 4), (0, 3, 4))
#: Angles (degrees) of the toy embeddings h_A, h_B, h_C: our choice, [lin, Fig. 1] does not
#: print them.
TOY_ANGLES_DEG: tuple[float, ...] = (10.0, 100.0, 260.0)
#: Empirical conditional entropy of the paper's toy realisation (App. A.1).
TOY_ENTROPY = 0.8811


@dataclass(frozen=True, eq=False)
class NTPData:
    """A compressed NTP training set ``(H, P, pi)`` (validated on construction).

    Attributes
    ----------
    H : (d, m) float64   context embeddings as columns
    P : (V, m) float64   next-token distributions as columns
    pi : (m,) float64    context frequencies (sum to 1)
    info : dict          generator details (seed, number of re-draws, ...)
    """

    H: NDArray[np.float64]
    P: NDArray[np.float64]
    pi: NDArray[np.float64]
    info: dict | None = None

    def __post_init__(self) -> None:
        H, P, pi = check_data(self.H, self.P, self.pi)
        object.__setattr__(self, "H", H)
        object.__setattr__(self, "P", P)
        object.__setattr__(self, "pi", pi)

    @property
    def d(self) -> int:
        return self.H.shape[0]

    @property
    def m(self) -> int:
        return self.H.shape[1]

    @property
    def V(self) -> int:
        return self.P.shape[0]

    @property
    def S(self) -> NDArray[np.bool_]:
        """Boolean support matrix (V, m)."""
        return support_of(self.P)

    @property
    def support_sizes(self) -> NDArray[np.int64]:
        return self.S.sum(axis=0)

    @property
    def entropy(self) -> float:
        """Empirical conditional entropy H (nats), the lower bound of CE."""
        return entropy(self.P, self.pi)

    def supports(self) -> list[NDArray[np.int64]]:
        """Sorted in-support token ids of every context."""
        return [np.flatnonzero(col) for col in self.S.T]


# ----------------------------------------------------------------------------- validation
def check_embeddings_probs(H: ArrayLike, P: ArrayLike) -> tuple[NDArray, NDArray]:
    """Validate ``H`` (d, m) and ``P`` (V, m) and return them as float64 arrays."""
    H = as_float_array(H, "H", ndim=2)
    P = as_prob_matrix(P, "P")
    if H.shape[1] != P.shape[1]:
        raise DataError(
            f"H has {H.shape[1]} columns (contexts) but P has {P.shape[1]}; "
            "both must be indexed by the m distinct contexts"
        )
    if H.shape[0] < 1:
        raise DataError("H must have at least one row (embedding dimension d >= 1)")
    return H, P


def check_data(H: ArrayLike, P: ArrayLike, pi: ArrayLike | None = None):
    """Validate a training set; ``pi=None`` means uniform frequencies 1/m."""
    H, P = check_embeddings_probs(H, P)
    m = H.shape[1]
    if pi is None:
        pi = np.full(m, 1.0 / m)
    else:
        pi = as_float_array(pi, "pi", ndim=1, shape=(m,))
        if np.any(pi < 0):
            raise DataError("pi has negative entries")
        if abs(pi.sum() - 1.0) > 1e-8:
            raise DataError(f"pi must sum to 1, sums to {pi.sum():.6g}")
    return H, P, pi


# ----------------------------------------------------------------------------- generators
def _draw_probs(
    rng: np.random.Generator, S: NDArray[np.bool_], prob: str, alpha: float
) -> NDArray[np.float64]:
    V, m = S.shape
    P = np.zeros((V, m))
    for j in range(m):
        idx = np.flatnonzero(S[:, j])
        if prob == "dirichlet":
            p = rng.dirichlet(np.full(idx.size, alpha))
            # Dirichlet draws can underflow to exact zeros for tiny alpha; keep the support.
            p = np.maximum(p, 1e-300)
        elif prob == "uniform":
            p = rng.uniform(size=idx.size)
        else:
            raise DataError(f"prob must be 'dirichlet' or 'uniform', got {prob!r}")
        P[idx, j] = p / p.sum()
    return P


def toy_embeddings(angles_deg: Sequence[float] = TOY_ANGLES_DEG) -> NDArray[np.float64]:
    """Unit vectors at the given angles, as the columns of a (2, m) matrix."""
    a = np.deg2rad(check_numbers(angles_deg, "angles_deg"))
    return np.vstack([np.cos(a), np.sin(a)])


def make_toy(
    seed: int = 0,
    *,
    angles_deg: Sequence[float] = TOY_ANGLES_DEG,
    target_entropy: float | None = TOY_ENTROPY,
    entropy_tol: float = 5e-3,
    max_draws: int = 10_000,
) -> NTPData:
    r"""The 2-D toy of Figs. 1-2: d = 2, m = 3 contexts (A, B, C), V = 5, S_j = 3.

    Probabilities on each support are Dirichlet(1) [spec I]; with ``target_entropy``
    set, draws are repeated (same generator) until :math:`|H - H_\text{target}| <`
    ``entropy_tol`` -- the paper reports only H = 0.8811.  ``info['n_draws']`` records
    how many draws that took.  Frequencies are uniform (1/3).
    """
    V, m = 5, len(TOY_SUPPORTS)
    seed = check_seed(seed)
    H = toy_embeddings(angles_deg)
    if H.shape[1] != m:
        raise ParameterError(f"the toy has {m} contexts; got {H.shape[1]} angles")
    if target_entropy is not None:
        target_entropy = check_number(target_entropy, "target_entropy", lo=0)
    entropy_tol = check_number(entropy_tol, "entropy_tol", lo=0, lo_open=True)
    max_draws = check_number(max_draws, "max_draws", lo=1, integer=True)
    S = np.zeros((V, m), dtype=bool)
    for j, sup in enumerate(TOY_SUPPORTS):
        S[list(sup), j] = True
    rng = np.random.default_rng(seed)
    pi = np.full(m, 1.0 / m)
    n_draws = 0
    while True:
        n_draws += 1
        P = _draw_probs(rng, S, "dirichlet", 1.0)
        if target_entropy is None or abs(entropy(P, pi) - target_entropy) < entropy_tol:
            break
        if n_draws >= max_draws:
            raise DataError(f"no draw reached entropy {target_entropy} +- {entropy_tol}")
    info = {"generator": "toy", "seed": seed, "n_draws": n_draws, "angles_deg": list(angles_deg)}
    return NTPData(H, P, pi, info)


def make_synthetic(
    m: int = 50,
    d: int = 60,
    V: int = 10,
    S: int = 6,
    seed: int = 0,
    *,
    emb: str = "gauss",
    prob: str = "dirichlet",
    alpha: float = 1.0,
    freq: str = "uniform",
    n: int = 5000,
) -> NTPData:
    r"""The synthetic set of App. A.2 (defaults: m = 50, d = 60, V = 10, S_j = 6).

    Parameters
    ----------
    m, d, V, S : contexts, embedding dimension, vocabulary, support size (1 <= S <= V)
    seed : seed of ``np.random.default_rng``; embeddings, supports and probabilities are
        drawn from independent child streams, so changing ``S`` keeps the embeddings.
    emb : ``"gauss"`` h_j ~ N(0, I_d) [spec default] or ``"unit"`` (normalised Gaussian)
    prob : ``"dirichlet"`` (Dirichlet(alpha) on each support) [default, alpha = 1] or
        ``"uniform"`` (normalised uniform draws; ruled out by the paper's H = 1.445)
    freq : ``"uniform"`` pi_j = 1/m [default] or ``"multinomial"``: n sequences are drawn,
        contexts uniformly and next tokens from the drawn p_j; P and pi are then the
        empirical frequencies (supports may shrink; contexts never seen are dropped).
    """
    m = check_number(m, "m", lo=1, integer=True)
    d = check_number(d, "d", lo=1, integer=True)
    V = check_number(V, "V", lo=2, integer=True)
    S = check_number(S, "support size S", lo=1, hi=V, integer=True)
    seed = check_seed(seed)
    check_choice(emb, "emb", ("gauss", "unit"))
    check_choice(prob, "prob", ("dirichlet", "uniform"))
    alpha = check_number(alpha, "alpha", lo=0, lo_open=True)
    check_choice(freq, "freq", ("uniform", "multinomial"))
    n = check_number(n, "n", lo=1, integer=True)
    ss_emb, ss_sup, ss_prob, ss_freq = np.random.SeedSequence(seed).spawn(4)
    r_emb = np.random.default_rng(ss_emb)
    H = r_emb.standard_normal((d, m))
    if emb == "unit":
        H /= np.linalg.norm(H, axis=0, keepdims=True)
    elif emb != "gauss":
        raise DataError(f"emb must be 'gauss' or 'unit', got {emb!r}")
    r_sup = np.random.default_rng(ss_sup)
    Smask = np.zeros((V, m), dtype=bool)
    for j in range(m):
        Smask[r_sup.choice(V, S, replace=False), j] = True
    P = _draw_probs(np.random.default_rng(ss_prob), Smask, prob, alpha)
    pi = np.full(m, 1.0 / m)
    info = {"generator": "synthetic", "seed": seed, "emb": emb, "prob": prob, "freq": freq}
    if freq == "multinomial":
        r_f = np.random.default_rng(ss_freq)
        ctx = r_f.integers(0, m, size=n)
        counts = np.zeros((V, m))
        for j in range(m):
            k = int(np.sum(ctx == j))
            if k:
                counts[:, j] = r_f.multinomial(k, P[:, j])
        seen = counts.sum(axis=0) > 0
        H, counts = H[:, seen], counts[:, seen]
        pi = counts.sum(axis=0) / n
        P = counts / counts.sum(axis=0, keepdims=True)
        info["n"] = n
        info["n_dropped_contexts"] = int((~seen).sum())
    elif freq != "uniform":
        raise DataError(f"freq must be 'uniform' or 'multinomial', got {freq!r}")
    return NTPData(H, P, pi, info)


def make_data(H: ArrayLike, P: ArrayLike, pi: ArrayLike | None = None) -> NTPData:
    """Wrap user arrays as a validated :class:`NTPData`."""
    return NTPData(*check_data(H, P, pi))
