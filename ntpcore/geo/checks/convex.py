r"""The checks of the geometry paper's convex side [geo, Sec. 2] (key ``geo``).

One function per statement; each records its claims on a figure's ledger
(:class:`ntpcore.figure.claims.Ledger`), with the statement's source in the paper, the
paper's number where it prints one, and the tolerance.  A notebook calls the check of every
statement it illustrates in one line.

The objects of the convex side are checked wherever a figure uses them, cheaply and with
code of its own, so that a bug of the builder they come from cannot pass both:

* :func:`check_lmm` -- :math:`L^{\mathrm{mm}}` solves the nuclear-norm NTP-SVM: feasible
  (equalities on each support, margins at least 1) and certified optimal by a dual
  certificate :math:`G` (repaired to exact dual feasibility here, so its value is a rigorous
  lower bound of :math:`\|L^{\mathrm{mm}}\|_*`);
* :func:`check_factors` -- :math:`W^{\mathrm{mm}}`, :math:`H^{\mathrm{mm}}` are the balanced
  factors of :math:`L^{\mathrm{mm}}` (product, balance, Grams as matrix square roots computed
  by an eigendecomposition);
* :func:`check_proxy` -- :math:`\tilde S=(I-\mathbf 1\mathbf 1^\top/V)S` built from the raw
  training pairs;
* :func:`check_finite_part` -- :math:`L^{\mathrm{in}}`, the centred log-counts on each
  support, built from the raw training pairs.

The supports those checks compare with are read from the ``n`` training pairs of the data
set (:func:`raw_supports`), not from :attr:`ntpcore.geo.data.ContextDataset.S` or
:func:`ntpcore.geo.data.support_groups`, which the solvers use.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ntpcore.figure import claims
from ntpcore.geo.data import ContextDataset, subset_contexts
from ntpcore.geo.experiments.datasets import DATASETS, DataConfig, load_dataset
from ntpcore.geo.svm import nuclear_svm_cvxpy, solve_nuclear_svm
from ntpcore.geo.synthetic import synthetic_dataset

__all__ = [
    "DUAL",
    "FACTORS",
    "LIN",
    "PROXY",
    "SVM",
    "RawSupports",
    "certified_dual",
    "check_factors",
    "check_finite_part",
    "check_lmm",
    "check_lmm_independent",
    "check_lmm_size",
    "check_proxy",
    "check_proxy_exactness",
    "check_proxy_gaps",
    "check_proxy_objects",
    "factor_errors",
    "finite_part_of",
    "proxy_of",
    "raw_entropy",
    "raw_supports",
    "svm_violation",
    "synthetic_spread",
]

#: the statements' sources in the paper
SVM = "[geo, Sec. 2, nuclear-norm NTP-SVM]"
DUAL = "[geo, Sec. 2, NTP-SVM dual]"
PROXY = "[geo, Sec. 2, centred-support proxy]"
LIN = "[geo, Sec. 2, finite component]"
FACTORS = "[geo, Sec. 2, NTP-UFM as nuclear-norm regularization]"

#: largest constraint violation of a solution of the SVM (equalities, margins)
FEASIBLE_TOL = 1e-6
#: a relative duality gap below this is rounding (weak duality: a truly negative gap means
#: an infeasible solution or certificate)
GAP_FLOOR = -1e-9
#: relative errors of the balanced factors: the factors drop the singular values below
#: 1e-6 sigma_max (the solvers' rounding floor), up to sqrt(rank) 1e-6 of the norm (measured:
#: 1e-8 on the paper-size sets, 1.6e-6 at corpus scale, where L^mm is certified to 1e-5)
FACTORS_TOL = 1e-4
#: largest entry-wise error of the closed forms of S~ and L^in (float64 rounding)
EXACT_TOL = 1e-12


# ------------------------------------------------------------------------------------------
# The data, read from the raw training pairs
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RawSupports:
    """Supports and counts rebuilt from the ``n`` training pairs of a data set.

    ``support[j]``: the sorted next words seen after context ``j``; ``counts`` (V, m) the
    joint counts; ``groups``: contexts with identical supports, in order of first appearance.
    """

    V: int
    m: int
    support: tuple[tuple[int, ...], ...]
    counts: NDArray[np.float64]
    groups: tuple[tuple[int, ...], ...]

    @property
    def S(self) -> NDArray[np.bool_]:
        """(V, m) support matrix, filled from :attr:`support`."""
        S = np.zeros((self.V, self.m), dtype=bool)
        for j, words in enumerate(self.support):
            S[list(words), j] = True
        return S

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """Context pairs ``j < j'`` with identical supports."""
        return [(a, b) for g in self.groups for i, a in enumerate(g) for b in g[i + 1 :]]


def raw_supports(ds: ContextDataset) -> RawSupports:
    """The supports, counts and support groups of ``ds`` from its training pairs
    (:meth:`~ntpcore.geo.data.ContextDataset.samples`), with Python sets and dicts."""
    j_of, z_of = ds.samples()
    seen: list[set[int]] = [set() for _ in range(ds.m)]
    counts = np.zeros((ds.V, ds.m))
    for j, z in zip(j_of.tolist(), z_of.tolist(), strict=True):
        seen[j].add(z)
        counts[z, j] += 1.0
    support = tuple(tuple(sorted(s)) for s in seen)
    groups: dict[tuple[int, ...], list[int]] = {}
    for j, words in enumerate(support):
        groups.setdefault(words, []).append(j)
    return RawSupports(ds.V, ds.m, support, counts, tuple(tuple(g) for g in groups.values()))


def _supports(data: ContextDataset | RawSupports) -> RawSupports:
    return data if isinstance(data, RawSupports) else raw_supports(data)


# ------------------------------------------------------------------------------------------
# L^mm: feasibility and the certificate
# ------------------------------------------------------------------------------------------


def svm_violation(L: NDArray[np.float64], raw: RawSupports) -> float:
    """Largest violation of the NTP-SVM constraints by ``L`` (V, m), column by column:
    the spread of ``L`` on each support (equalities) and ``1 - margin`` (margins)."""
    worst = 0.0
    off = np.ones(raw.V, dtype=bool)
    for j, words in enumerate(raw.support):
        col = L[:, j]
        on = col[list(words)]
        off[:] = True
        off[list(words)] = False
        spread = float(on.max() - on.min())
        margin = float(on.min() - col[off].max()) if off.any() else np.inf
        worst = max(worst, spread, 1.0 - margin)
    return worst


def certified_dual(G: NDArray[np.float64], raw: RawSupports) -> float:
    r"""A rigorous lower bound of :math:`\|L^{\mathrm{mm}}\|_*` from a near-feasible dual
    certificate ``G`` (V, m): its positive off-support entries are set to 0, each column sum
    is removed from its support entries (free in sign), and the result is divided by its
    operator norm when that exceeds 1; the dual value :math:`-\langle J-S,G\rangle` of that
    exactly feasible point bounds the optimum from below (weak duality)."""
    G = np.array(G, dtype=np.float64, copy=True)
    S = raw.S
    G[~S & (G > 0)] = 0.0
    for j, words in enumerate(raw.support):
        G[list(words), j] -= G[:, j].sum() / len(words)
    op = float(np.linalg.svd(G, compute_uv=False)[0])
    G /= max(1.0, op)
    return float(-G[~S].sum())


def check_lmm(
    ledger: claims.Ledger,
    data: ContextDataset | RawSupports,
    L_mm: NDArray[np.float64],
    G: NDArray[np.float64] | None = None,
    *,
    prefix: str = "",
    gap_tol: float = 1e-7,
    what: str = "",
) -> dict[str, float]:
    r""":math:`L^{\mathrm{mm}}` solves the nuclear-norm NTP-SVM of the data's supports
    [geo, Sec. 2] (book: ``geo-eq-svm``, ``geo-lem-dual``).

    Two claims: ``<prefix>lmm-feasible``, the largest constraint violation (at most
    :data:`FEASIBLE_TOL`), and ``<prefix>lmm-certified``, the relative gap
    :math:`(\|L^{\mathrm{mm}}\|_*-d)/\|L^{\mathrm{mm}}\|_*` to the certified dual value
    :math:`d` of ``G`` (:func:`certified_dual`), in ``[GAP_FLOOR, gap_tol]``: a larger gap
    is a suboptimal solution, a negative one an infeasible solution or certificate.
    Without ``G`` the certificate is that of a new solve of the same supports
    (:func:`ntpcore.geo.svm.solve_nuclear_svm`), which certifies ``L_mm`` all the same (any
    dual-feasible point bounds the optimum).  ``what`` names the data set in the statements
    (e.g. ``"real text: "``).  Returns the measured numbers.
    """
    raw = _supports(data)
    L_mm = np.asarray(L_mm, dtype=np.float64)
    if G is None:
        G = solve_nuclear_svm(raw.S, tol=min(gap_tol, 1e-8) / 10).G
    violation = svm_violation(L_mm, raw)
    nuc = float(np.linalg.svd(L_mm, compute_uv=False).sum())
    gap = (nuc - certified_dual(G, raw)) / nuc
    ledger.check(
        f"{prefix}lmm-feasible",
        rf"{what}$L^{{\mathrm{{mm}}}}$ is constant on each support with margin at least 1 "
        r"over the other words (largest violation, from the raw training pairs)",
        violation,
        claims.at_most(FEASIBLE_TOL),
        source=SVM,
        digits=0,
    )
    ledger.check(
        f"{prefix}lmm-certified",
        rf"{what}$L^{{\mathrm{{mm}}}}$ is optimal: relative gap of $\|L^{{\mathrm{{mm}}}}\|_*$ "
        r"to the value of a dual certificate made exactly feasible",
        gap,
        claims.between(GAP_FLOOR, gap_tol),
        source=DUAL,
        digits=0,
    )
    return {"violation": violation, "gap": gap, "nuc": nuc}


# ------------------------------------------------------------------------------------------
# Balanced factors, proxy, finite part
# ------------------------------------------------------------------------------------------


def _psd_sqrt(A: NDArray[np.float64]) -> NDArray[np.float64]:
    """Square root of a symmetric PSD matrix by its eigendecomposition."""
    w, Q = np.linalg.eigh(A)
    return (Q * np.sqrt(np.clip(w, 0.0, None))) @ Q.T


def _rel(A: NDArray[np.float64], B: NDArray[np.float64]) -> float:
    return float(np.linalg.norm(A - B) / max(float(np.linalg.norm(B)), 1e-300))


def factor_errors(
    L: NDArray[np.float64], W: NDArray[np.float64], H: NDArray[np.float64]
) -> dict[str, float]:
    r"""Relative errors of ``W`` (V, r), ``H`` (r, m) as balanced factors of ``L`` (V, m):
    ``product`` :math:`WH` vs :math:`L`, ``balance`` :math:`W^\top W` vs :math:`HH^\top`,
    ``nuclear`` :math:`\tfrac12(\|W\|_F^2+\|H\|_F^2)` vs :math:`\|L\|_*`, and ``gram``: on
    the smaller side, :math:`WW^\top` vs :math:`(LL^\top)^{1/2}` (words) or :math:`H^\top H`
    vs :math:`(L^\top L)^{1/2}` (contexts), the square root by an eigendecomposition (the
    product and the balance give the other side)."""
    nuc = float(np.linalg.svd(L, compute_uv=False).sum())
    if L.shape[0] <= L.shape[1]:
        gram = _rel(W @ W.T, _psd_sqrt(L @ L.T))
    else:
        gram = _rel(H.T @ H, _psd_sqrt(L.T @ L))
    return {
        "product": _rel(W @ H, L),
        "balance": _rel(W.T @ W, H @ H.T),
        "nuclear": abs(0.5 * float((W * W).sum() + (H * H).sum()) / nuc - 1.0),
        "gram": gram,
    }


def check_factors(
    ledger: claims.Ledger,
    L_mm: NDArray[np.float64],
    W_mm: NDArray[np.float64],
    H_mm: NDArray[np.float64],
    *,
    prefix: str = "",
    what: str = "",
) -> dict[str, float]:
    r"""The predicted embeddings :math:`W^{\mathrm{mm}}` (V, r), :math:`H^{\mathrm{mm}}`
    (r, m) are the balanced factors of :math:`L^{\mathrm{mm}}` [geo, Sec. 2] (book:
    ``geo-lem-nuclear``): one claim ``<prefix>factors-balanced``, the largest relative error
    of :func:`factor_errors`, at most :data:`FACTORS_TOL`."""
    err = factor_errors(*(np.asarray(a, dtype=np.float64) for a in (L_mm, W_mm, H_mm)))
    ledger.check(
        f"{prefix}factors-balanced",
        rf"{what}$W^{{\mathrm{{mm}}}}H^{{\mathrm{{mm}}}} = L^{{\mathrm{{mm}}}}$ with balanced "
        r"factors: $W^\top W = HH^\top$, $\tfrac12(\|W\|_F^2+\|H\|_F^2) = \|L\|_*$, Grams "
        r"$(LL^\top)^{1/2}$, $(L^\top L)^{1/2}$ (largest relative error)",
        max(err.values()),
        claims.at_most(FACTORS_TOL),
        source=FACTORS,
        digits=0,
    )
    return err


def proxy_of(raw: RawSupports) -> NDArray[np.float64]:
    r""":math:`\tilde S`: column ``j`` is :math:`1-k_j/V` on the support, :math:`-k_j/V` off it."""
    St = np.empty((raw.V, raw.m))
    for j, words in enumerate(raw.support):
        St[:, j] = -len(words) / raw.V
        St[list(words), j] += 1.0
    return St


def check_proxy(
    ledger: claims.Ledger,
    data: ContextDataset | RawSupports,
    S_tilde: NDArray[np.float64],
    *,
    prefix: str = "",
    what: str = "",
) -> float:
    r"""The proxy used is the centred support :math:`\tilde S=(I-\mathbf 1\mathbf 1^\top/V)S`
    of the data [geo, Sec. 2] (book: ``geo-prop-proxy``), a feasible point of the SVM with
    every margin exactly 1: one claim ``<prefix>proxy-centred``, its largest entry-wise
    difference from :func:`proxy_of` the raw supports (at most :data:`EXACT_TOL`)."""
    err = float(np.abs(np.asarray(S_tilde, dtype=np.float64) - proxy_of(_supports(data))).max())
    ledger.check(
        f"{prefix}proxy-centred",
        rf"{what}the proxy $\tilde S$ is the centred support: $1-k_j/V$ on each support, "
        r"$-k_j/V$ off it (largest difference)",
        err,
        claims.at_most(EXACT_TOL),
        source=PROXY,
        digits=0,
    )
    return err


def finite_part_of(raw: RawSupports) -> NDArray[np.float64]:
    r""":math:`L^{\mathrm{in}}`: the log-counts of each context centred on its support
    (:math:`\log\hat p_{j,z}-\log\hat p_{j,z'}=\log n_{z,j}-\log n_{z',j}`), zero off it."""
    L = np.zeros((raw.V, raw.m))
    for j, words in enumerate(raw.support):
        logc = np.log(raw.counts[list(words), j])
        L[list(words), j] = logc - logc.mean()
    return L


def check_finite_part(
    ledger: claims.Ledger,
    data: ContextDataset | RawSupports,
    L_in: NDArray[np.float64],
    *,
    prefix: str = "",
    what: str = "",
) -> float:
    r""":math:`L^{\mathrm{in}}` is the element of the in-support subspace :math:`F` with the
    data's log-odds on every support [geo, Sec. 2] (book: ``geo-def-lin``): one claim
    ``<prefix>finite-part``, its largest difference from :func:`finite_part_of` the raw
    counts (at most :data:`EXACT_TOL` times its largest entry)."""
    raw = _supports(data)
    ref = finite_part_of(raw)
    err = float(np.abs(np.asarray(L_in, dtype=np.float64) - ref).max())
    ledger.check(
        f"{prefix}finite-part",
        rf"{what}$L^{{\mathrm{{in}}}}$ holds the log-odds of the data on each support and "
        r"is zero off it (largest difference from the centred log-counts)",
        err / max(float(np.abs(ref).max()), 1.0),
        claims.at_most(EXACT_TOL),
        source=LIN,
        digits=0,
    )
    return err


# ------------------------------------------------------------------------------------------
# geo-support-lmm: L^mm depends only on S [geo, Sec. 2, Fig. 1]
# ------------------------------------------------------------------------------------------

#: the cvxpy reference solves supports up to this many entries whole, larger ones on a
#: subset of CVXPY_CONTEXTS contexts (up to 3 per support group, so same-support pairs stay)
CVXPY_MAX_ENTRIES = 4000
CVXPY_CONTEXTS = 24
#: SCS solves to eps 1e-8: its solution agrees with ours to about 1e-8 (measured 2e-8)
CVXPY_TOL = 1e-6

#: [R] the nuclear norm of L^mm and the proxy excess ||S~||_* / ||L^mm||_* - 1 of an
#: independent re-implementation of the paper's synthetic set (m = 16, V = 30, k_j = 3)
REIMPL_SYNTHETIC = "independent re-implementation of the paper's synthetic set"
LMM_NUC_SYNTHETIC = 22.890
PROXY_GAP_SYNTHETIC = 22.944 / 22.890 - 1.0
#: draws of our synthetic generator (data seeds 0, 1, ...) whose spread sets the tolerance
#: of the comparisons with those numbers: three standard deviations
SEED_DRAWS = 20


@functools.lru_cache(maxsize=4)
def synthetic_spread(n_seeds: int = SEED_DRAWS, max_repeat: int = 4) -> dict[str, NDArray]:
    r"""Per data seed ``0..n_seeds-1`` of the synthetic generator: ``nuc_mm``
    (:math:`\|L^{\mathrm{mm}}\|_*`), ``proxy_gap`` (:math:`\|\tilde S\|_*/\|L^{\mathrm{mm}}\|_*-1`,
    :math:`\tilde S` from :func:`proxy_of`) and ``entropy`` (from the raw counts)."""
    nuc, gap, ent = [], [], []
    for seed in range(n_seeds):
        ds = synthetic_dataset(seed, max_repeat=max_repeat)
        raw = raw_supports(ds)
        n_mm = solve_nuclear_svm(raw.S).objective
        nuc.append(n_mm)
        gap.append(float(np.linalg.svd(proxy_of(raw), compute_uv=False).sum()) / n_mm - 1.0)
        ent.append(raw_entropy(raw))
    return {"nuc_mm": np.array(nuc), "proxy_gap": np.array(gap), "entropy": np.array(ent)}


def raw_entropy(raw: RawSupports) -> float:
    r""":math:`\mathcal H=-\frac1n\sum_{z,j}n_{z,j}\log(n_{z,j}/n_j)` from the raw counts."""
    N = raw.counts
    nj = N.sum(axis=0)
    on = N > 0
    return float(-(N[on] * np.log((N / nj)[on])).sum() / N.sum())


def check_lmm_independent(
    ledger: claims.Ledger, data: ContextDataset, L_mm: NDArray[np.float64]
) -> dict[str, float]:
    r""":math:`L^{\mathrm{mm}}` depends only on the support pattern [geo, Sec. 2, Fig. 1]: an
    independent solver (cvxpy/SCS on the whole program, without the reduction by identical
    columns that our solver makes) gives the same :math:`L^{\mathrm{mm}}`
    (``lmm-cvxpy``, relative distance at most :data:`CVXPY_TOL`), and its columns of
    contexts with identical supports coincide (``identical-columns``, largest difference
    relative to the largest entry, at most :data:`CVXPY_TOL`).  Supports with more than
    :data:`CVXPY_MAX_ENTRIES` entries are solved on :data:`CVXPY_CONTEXTS` of their
    contexts (with our solver's solution of the same subset)."""
    whole = data.V * data.m <= CVXPY_MAX_ENTRIES
    small = data if whole else subset_contexts(data, CVXPY_CONTEXTS)
    raw = raw_supports(small)
    L_ref = nuclear_svm_cvxpy(raw.S, "SCS").L
    ours = np.asarray(L_mm, dtype=np.float64) if whole else solve_nuclear_svm(raw.S).L
    dist = float(np.linalg.norm(ours - L_ref) / np.linalg.norm(L_ref))
    pairs = raw.pairs
    same = max((float(np.abs(L_ref[:, a] - L_ref[:, b]).max()) for a, b in pairs), default=0.0)
    where = "" if whole else f" (on {small.m} of the {data.m} contexts)"
    ledger.check(
        "lmm-cvxpy",
        r"an independent solver (cvxpy, the whole program) finds the same "
        rf"$L^{{\mathrm{{mm}}}}${where} (relative distance)",
        dist,
        claims.at_most(CVXPY_TOL),
        source=SVM,
        digits=0,
    )
    ledger.check(
        "identical-columns",
        r"$L^{\mathrm{mm}}$ depends only on the supports: in the independent solution, "
        rf"contexts with identical supports have identical columns ({len(pairs)} pairs; "
        "largest difference over the largest entry)",
        same / float(np.abs(L_ref).max()),
        claims.at_most(CVXPY_TOL),
        source="[geo, Sec. 2, Fig. 1]",
        digits=0,
    )
    return {"dist": dist, "same": same}


def check_lmm_size(ledger: claims.Ledger, L_mm: NDArray[np.float64]) -> float:
    r"""The synthetic set's :math:`\|L^{\mathrm{mm}}\|_*` is that of the paper's synthetic set
    [geo, Sec. 3.1, Fig. 1], as an independent re-implementation of it measures it
    (:data:`LMM_NUC_SYNTHETIC`), within three standard deviations over
    :data:`SEED_DRAWS` draws of our generator's supports (``lmm-size``)."""
    nuc = float(np.linalg.svd(np.asarray(L_mm, dtype=np.float64), compute_uv=False).sum())
    sd = float(np.std(synthetic_spread()["nuc_mm"], ddof=1))
    ledger.check(
        "lmm-size",
        r"synthetic set: $\|L^{\mathrm{mm}}\|_*$ is that of the paper's synthetic set "
        rf"(tolerance: 3 standard deviations over {SEED_DRAWS} draws of our generator)",
        nuc,
        claims.close_to(LMM_NUC_SYNTHETIC, atol=3 * sd),
        source="[geo, Sec. 3.1, Fig. 1]",
        digits=4,
        reference=LMM_NUC_SYNTHETIC,
        reference_source=REIMPL_SYNTHETIC,
    )
    return nuc


# ------------------------------------------------------------------------------------------
# geo-proxy-exactness: when S~ is L^mm [geo, Sec. 2, centred-support proxy]
# ------------------------------------------------------------------------------------------

#: a nuclear-norm gap below this is S~ = L^mm (the solves are certified to 1e-10)
EXACT_GAP = 1e-8
#: [R] the proxy excess on random sparse instances (V = 10-12, m = 12-15) lies in
#: [0.06%, 0.6%]; the authors' logs put it under about 1% on their TinyStories extract
SPARSE_GAP_RANGE = (6e-4, 1e-2)
LOGS = "the authors' run logs, TinyStories extract (m = 403, V = 104)"


def check_proxy_objects(ledger: claims.Ledger, res: dict[str, Any], data_seed: int) -> None:
    r"""The :math:`L^{\mathrm{mm}}` and :math:`\tilde S` of the two datasets whose gaps the proxy
    figure shows (``res``: :func:`ntpcore.geo.experiments.run_proxy`), against the raw pairs
    of the datasets of seed ``data_seed``: :func:`check_lmm` and :func:`check_proxy` for each,
    with the ids prefixed ``synthetic-`` and ``text-``."""
    for name in DATASETS:
        raw = raw_supports(load_dataset(DataConfig(name, data_seed)))
        check_lmm(ledger, raw, res[f"L_mm_{name}"], prefix=f"{name}-", what=f"{name} set: ")
        check_proxy(ledger, raw, res[f"S_tilde_{name}"], prefix=f"{name}-", what=f"{name} set: ")


def check_proxy_exactness(
    ledger: claims.Ledger, res: dict[str, Any], vocab_size: int
) -> dict[str, float]:
    r"""When the centred support is the max-margin solution [geo, Sec. 2] (book:
    ``geo-prop-proxy``), over the random instances of ``res``
    (:func:`ntpcore.geo.experiments.run_proxy`):

    * ``one-hot-exact``: one-hot labels give :math:`\tilde S=L^{\mathrm{mm}}` (largest
      :math:`|\|\tilde S\|_*/\|L^{\mathrm{mm}}\|_*-1|`, at most :data:`EXACT_GAP`);
    * ``certificate-decides``: the polar factor of :math:`\tilde S` is :math:`\le0` off the
      support exactly in the trials where :math:`\tilde S=L^{\mathrm{mm}}`;
    * ``sparse-soft-inexact``: sparse soft labels (:math:`2\le k\le V/2`) never give it
      (smallest gap at least :data:`EXACT_GAP`);
    * ``sparse-soft-close``: but a close one: the median gap lies in
      :data:`SPARSE_GAP_RANGE`, the range a re-implementation measured on random instances
      (0.06%) to the authors' "about 1%".
    """
    ks, gap = np.asarray(res["support_sizes"]), np.asarray(res["gap"])
    exact = np.abs(gap) < EXACT_GAP
    out: dict[str, float] = {}
    if (ks == 1).any():
        out["one_hot"] = float(np.abs(gap[ks == 1]).max())
        ledger.check(
            "one-hot-exact",
            r"one-hot labels: $\tilde S = L^{\mathrm{mm}}$ in every trial (largest "
            r"$|\|\tilde S\|_*/\|L^{\mathrm{mm}}\|_*-1|$)",
            out["one_hot"],
            claims.at_most(EXACT_GAP),
            source=PROXY,
            digits=0,
        )
    ledger.check(
        "certificate-decides",
        r"the polar factor of $\tilde S$ is $\le 0$ off the support exactly in the trials where "
        r"$\tilde S = L^{\mathrm{mm}}$",
        bool(np.all((np.asarray(res["max_off"]) <= 1e-9) == exact)),
        claims.holds(),
        source=DUAL,
    )
    sparse = (ks >= 2) & (ks <= vocab_size // 2)
    if sparse.any():
        out["sparse_min"] = float(gap[sparse].min())
        out["sparse_median"] = float(np.median(gap[sparse]))
        ledger.check(
            "sparse-soft-inexact",
            r"sparse soft labels ($2\le k\le V/2$): $\tilde S \ne L^{\mathrm{mm}}$ in every "
            r"trial (smallest $\|\tilde S\|_*/\|L^{\mathrm{mm}}\|_*-1$)",
            out["sparse_min"],
            claims.at_least(EXACT_GAP),
            source=PROXY,
        )
        ledger.check(
            "sparse-soft-close",
            r"sparse soft labels: yet $\tilde S$ is close, a median excess "
            r"$\|\tilde S\|_*/\|L^{\mathrm{mm}}\|_*-1$ between 0.06% and 1%",
            out["sparse_median"],
            claims.between(*SPARSE_GAP_RANGE),
            source=PROXY,
            reference="0.06% to 0.6% (random instances); about 1% (TinyStories)",
            reference_source="independent re-implementation; " + LOGS,
        )
    return out


def check_proxy_gaps(ledger: claims.Ledger, res: dict[str, Any]) -> dict[str, float]:
    r"""The proxy on the two datasets [geo, Sec. 2]: ``gap-synthetic``, the excess
    :math:`\|\tilde S\|_*/\|L^{\mathrm{mm}}\|_*-1` of the synthetic set, is that of the paper's
    synthetic set as a re-implementation measures it (:data:`PROXY_GAP_SYNTHETIC`), within
    three standard deviations over :data:`SEED_DRAWS` draws of our generator; ``gap-text``,
    that of the real-text set, lies between :data:`EXACT_GAP` (inexact) and 1% (the authors'
    logs on TinyStories)."""
    sd = float(np.std(synthetic_spread()["proxy_gap"], ddof=1))
    ledger.check(
        "gap-synthetic",
        r"synthetic set: the excess $\|\tilde S\|_*/\|L^{\mathrm{mm}}\|_*-1$ is that of the "
        rf"paper's synthetic set (tolerance: 3 standard deviations over {SEED_DRAWS} draws "
        "of our generator)",
        float(res["gap_synthetic"]),
        claims.close_to(PROXY_GAP_SYNTHETIC, atol=3 * sd),
        source=PROXY,
        reference=round(PROXY_GAP_SYNTHETIC, 5),
        reference_source=REIMPL_SYNTHETIC,
    )
    ledger.check(
        "gap-text",
        r"real-text set (Lee corpus): $\tilde S$ is a close but inexact proxy, "
        r"$0 < \|\tilde S\|_*/\|L^{\mathrm{mm}}\|_*-1 \le 1\%$",
        float(res["gap_text"]),
        claims.between(EXACT_GAP, 0.01),
        source=PROXY,
        reference="under 1%",
        reference_source=LOGS,
    )
    return {"synthetic": float(res["gap_synthetic"]), "text": float(res["gap_text"])}
