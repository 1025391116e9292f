r"""The geometry at corpus scale: a real Wikipedia sample, thousands of contexts [geo, Secs. 2-3].

The paper checks its theory on at most :math:`V=104` words and :math:`m=403` contexts.  Here
the same objects are computed on next-token sets of the English Wikipedia sample shipped
with gensim (:mod:`ntpcore.geo.wiki`), or of any corpus named by ``corpus``
(:mod:`ntpcore.geo.corpora`: a built-in corpus or a reader's UTF-8 text file, through the
same pipeline): the ``vocab_size`` most frequent words, contexts of ``context_len`` words
seen at least ``min_count`` times with at least ``min_next`` distinct next words, and for
every ``m`` of ``m_values`` the ``m`` most frequent such contexts
(:func:`ntpcore.geo.data.head_contexts`; words that none of them uses are dropped).  A
corpus too small for ``vocab_size`` or the largest ``m`` is refused by :func:`check_corpus`
in one line that says what it supports.

For each ``m`` (:func:`svm_point`):

* the max-margin logits :math:`L^{mm}` of the nuclear-norm NTP-SVM [geo, eq. (6)] (book:
  ``geo-eq-svm``), by the large-vocabulary solver
  (:func:`ntpcore.geo.svm_scale.solve_nuclear_svm_scale`, certified relative duality gap
  ``svm_tol``), against its proxy, the centred support
  :math:`\tilde S=(I-\mathbf 1\mathbf 1^\top/V)S` (book: ``geo-prop-proxy``): direction
  distance :math:`\|L^{mm}/\|L^{mm}\|_F-\tilde S/\|\tilde S\|_F\|_F`, nuclear-norm excess
  :math:`\|\tilde S\|_*/\|L^{mm}\|_*-1\ge0` (:math:`\tilde S` is feasible), singular spectra and
  ranks (singular values above :data:`RANK_TOL` times the largest);

and (:func:`ufm_point`) the NTP-UFM :math:`L=WH` trained on the same set with the project's
trainer (:func:`ntpcore.geo.train.train_model`, full-batch AdamW on the summed loss), recording
at log-spaced epochs [geo, Sec. 3, Fig. 2]:

* :math:`\mathrm{CE}-\mathcal H` (book: ``geo-eq-ce``), which tends to 0;
* :math:`\|P_F(L)-L^{in}\|_F/\|L^{in}\|_F` (book: ``geo-thm-path`` (ii)), which tends to 0;
* the direction distance of the column-centred :math:`L-L^{in}` to :math:`L^{mm}` and to
  :math:`\tilde S` (book: ``geo-thm-path`` (iii));
* the embedding geometry: the off-diagonal Pearson correlation of the cosine matrices
  :math:`\cos(H^\top)` with :math:`\cos(H^{mm\top})` and :math:`\cos(W)` with
  :math:`\cos(W^{mm})`, :math:`W^{mm}=U\Sigma^{1/2}`, :math:`H^{mm}=\Sigma^{1/2}V^\top` the
  balanced factors of :math:`L^{mm}` [geo, Sec. 3, Fig. 3].  At :math:`m=5000` a cosine matrix
  has 25 million entries, so :func:`cosine_correlation` computes the correlation from the
  factors without forming it (:math:`\sum_{i\ne j}X_{ij}Y_{ij}=\|A^\top B\|_F^2-m` for the
  row-normalised factors ``A``, ``B``).

Everything expensive is cached (:func:`ntpcore.core.cache.cached`) under the
configuration and a fingerprint of the data; :func:`run_scale` gathers all ``m``, one
independent run per ``m`` through :func:`ntpcore.core.sweep.map_runs`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ntpcore.core.cache import OMIT_DEFAULT, cached
from ntpcore.errors import DataError
from ntpcore.geo.corpora import (
    DEFAULT_CORPUS,
    check_supports,
    corpus_label,
    corpus_set,
    load_corpus,
)
from ntpcore.geo.data import ContextDataset, head_contexts
from ntpcore.geo.embeddings import balanced_factors, direction_distance, mm_embeddings
from ntpcore.geo.experiments.datasets import data_fingerprint
from ntpcore.geo.logits import centered_support, finite_logits
from ntpcore.geo.svm_scale import solve_nuclear_svm_scale
from ntpcore.geo.train import train_model
from ntpcore.geo.train.protocol import AdamWProtocol, TrainerConfig

#: singular values above RANK_TOL * sigma_max count towards the rank.  The paper counts above
#: 1e-6 with an interior-point solution; the first-order solution certified to a relative gap
#: of 1e-5 leaves a floor of spurious values near 1e-5 sigma_max below a sharp drop of the
#: spectrum, so the count is taken above 1e-4 (on the Wikipedia set with m = 400: 255 values,
#: against 256 above 1e-6 when solved to a gap of 1e-6)
RANK_TOL = 1e-4


@dataclass(frozen=True)
class CorpusConfig:
    """Which next-token set of which corpus (see :func:`ntpcore.geo.text.corpus_dataset`).

    ``corpus`` names the corpus (:func:`ntpcore.geo.corpora.load_corpus`): a built-in one,
    by default the Wikipedia sample, or the path of a UTF-8 text file.  At its default it is
    left out of the cache keys, which hold the data's fingerprint anyway.
    """

    corpus: str = dataclasses.field(default=DEFAULT_CORPUS, metadata={OMIT_DEFAULT: True})
    vocab_size: int = 1000  # V: the most frequent words (input and next-token vocabulary)
    context_len: int = 2  # T: words per context
    min_count: int = 5  # contexts seen at least this often
    min_next: int = 2  # contexts with at least this many distinct next words

    def __post_init__(self) -> None:
        if self.vocab_size < 2 or self.context_len < 1 or self.min_count < 1 or self.min_next < 1:
            raise DataError("need vocab_size >= 2, context_len >= 1, min_count >= 1, min_next >= 1")


#: the figure's UFM protocol: the paper's schedule compressed 20-fold (learning rate x 20,
#: steps and milestones / 20)
SCALE_PROTOCOL = AdamWProtocol(
    n_steps=1500, lr=2e-3, lr_milestones=(250, 500, 750, 1000, 1250), n_records=24
)


@dataclass(frozen=True)
class ScaleConfig:
    """The figure: a corpus set, the ladder of ``m``, the SVM accuracy and the UFM protocol
    (:class:`ntpcore.geo.train.protocol.AdamWProtocol`; by default :data:`SCALE_PROTOCOL`)."""

    data: CorpusConfig = CorpusConfig()
    protocol: AdamWProtocol = SCALE_PROTOCOL
    m_values: tuple[int, ...] = (400, 1000, 2500, 5000)  # the m most frequent contexts
    svm_tol: float = 1e-5  # certified relative duality gap of L^mm

    def __post_init__(self) -> None:
        object.__setattr__(self, "m_values", tuple(int(m) for m in self.m_values))
        if (
            not self.m_values
            or min(self.m_values) < 2
            or list(self.m_values) != sorted(set(self.m_values))
        ):
            raise DataError(f"m_values must be increasing and >= 2, got {self.m_values}")
        if not 0 < self.svm_tol < 1:
            raise DataError(f"svm_tol must lie in (0, 1), got {self.svm_tol}")


def full_dataset(cfg: CorpusConfig) -> ContextDataset:
    """Every qualifying context of the corpus, most frequent first."""
    return corpus_set(
        cfg.corpus,
        vocab_size=cfg.vocab_size,
        context_len=cfg.context_len,
        min_count=cfg.min_count,
        min_next=cfg.min_next,
    )


def check_corpus(cfg: ScaleConfig) -> int:
    """The number of qualifying contexts of ``cfg``'s corpus; a one-line
    :class:`~ntpcore.errors.ParameterError` saying what the corpus supports when it is too
    small for ``vocab_size`` or the largest ``m`` (:func:`ntpcore.geo.corpora.check_supports`).
    """
    data = cfg.data
    return check_supports(
        data.corpus,
        vocab_size=data.vocab_size,
        context_len=data.context_len,
        min_count=data.min_count,
        min_next=data.min_next,
        m_values=cfg.m_values,
    )


def scale_dataset(cfg: CorpusConfig, m: int) -> ContextDataset:
    """The ``m`` most frequent contexts of :func:`full_dataset` (error if there are fewer)."""
    full = full_dataset(cfg)
    if m > full.m:
        raise DataError(
            f"only {full.m} contexts qualify (V={cfg.vocab_size}, T={cfg.context_len}, "
            f"count >= {cfg.min_count}, >= {cfg.min_next} next words); asked for m={m}"
        )
    return head_contexts(full, m)


# ------------------------------------------------------------------------------------------
# Embedding geometry without m x m matrices
# ------------------------------------------------------------------------------------------


def cosine_correlation(X: ArrayLike, Y: ArrayLike) -> float:
    r"""Pearson correlation of the off-diagonal entries of :math:`\cos(X)` and :math:`\cos(Y)`.

    ``X`` (n, p) and ``Y`` (n, q) hold one embedding per row; the cosine matrices (n, n) are
    never formed.  With ``A``, ``B`` the row-normalised ``X``, ``Y`` (a zero row stays zero,
    with cosine 0 on the diagonal, as :func:`ntpcore.geo.embeddings.cosine_matrix`):
    :math:`\sum_{i\ne j}\cos_X\cos_Y=\|A^\top B\|_F^2-\sum_i a_ib_i`,
    :math:`\sum_{i\ne j}\cos_X=\|A^\top\mathbf 1\|^2-\sum_ia_i` and
    :math:`\sum_{i\ne j}\cos_X^2=\|A^\top A\|_F^2-\sum_ia_i` with :math:`a_i\in\{0,1\}` the
    diagonal.  Equal to
    ``offdiag_correlation(cosine_matrix(X), cosine_matrix(Y))`` up to rounding, at cost
    :math:`O(n\,p\,q)` instead of :math:`O(n^2(p+q))`.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0] or X.shape[0] < 3:
        raise DataError(f"need (n, p) and (n, q) with n >= 3, got {X.shape} and {Y.shape}")

    def unit(Z: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        nz = np.linalg.norm(Z, axis=1)
        return Z / np.where(nz > 0, nz, 1.0)[:, None], (nz > 0).astype(np.float64)

    A, da = unit(X)
    B, db = unit(Y)
    n = X.shape[0]
    N = n * (n - 1)
    sx = float(np.sum(A.sum(axis=0) ** 2) - da.sum()) / N
    sy = float(np.sum(B.sum(axis=0) ** 2) - db.sum()) / N
    sxx = float(np.sum((A.T @ A) ** 2) - da.sum()) / N
    syy = float(np.sum((B.T @ B) ** 2) - db.sum()) / N
    sxy = float(np.sum((A.T @ B) ** 2) - (da * db).sum()) / N
    return (sxy - sx * sy) / np.sqrt((sxx - sx * sx) * (syy - sy * sy))


def _rank(s: NDArray[np.float64]) -> int:
    return int(np.sum(s > RANK_TOL * max(float(s[0]), 1e-300)))


# ------------------------------------------------------------------------------------------
# Cached points of the ladder
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _SvmKey:
    corpus: CorpusConfig
    m: int
    svm_tol: float
    fingerprint: str


@dataclass(frozen=True)
class _UfmKey:
    svm: _SvmKey
    protocol: AdamWProtocol


def _rung(cfg: ScaleConfig, m: int) -> tuple[_SvmKey, ContextDataset]:
    """The ``m``-context set of ``cfg``, loaded once, and the key of its SVM solve."""
    ds = scale_dataset(cfg.data, m)
    return _SvmKey(cfg.data, int(m), cfg.svm_tol, data_fingerprint(ds)), ds


def svm_point(cfg: ScaleConfig, m: int) -> dict[str, Any]:
    r""":math:`L^{mm}` of the ``m``-context set against :math:`\tilde S` (cached), with the
    solver's dual certificate ``G``, which the figure's checks verify."""
    return _svm_solution(*_rung(cfg, m))


@cached
def _svm_solution(key: _SvmKey, ds: ContextDataset) -> dict[str, Any]:
    S = ds.S
    sol = solve_nuclear_svm_scale(S, tol=key.svm_tol)
    St = centered_support(S)
    sv_mm = np.linalg.svd(sol.L, compute_uv=False)
    sv_px = np.linalg.svd(St, compute_uv=False)
    return {
        "L_mm": sol.L,
        "G": sol.G,
        "sv_mm": sv_mm,
        "sv_proxy": sv_px,
        "nuc_mm": float(sv_mm.sum()),
        "nuc_proxy": float(sv_px.sum()),
        "nuc_excess": float(sv_px.sum() / sv_mm.sum() - 1.0),
        "dist_proxy": direction_distance(sol.L, St),
        "gap": sol.gap,
        "violation": sol.violation,
        "svm_seconds": sol.seconds,
        "svm_iterations": sol.iterations,
        "reduced_rows": int(sol.reduced_shape[0]),
        "reduced_cols": int(sol.reduced_shape[1]),
        "n_groups": len(ds.support_groups),
        "m": ds.m,
        "V": ds.V,
        "n": ds.n,
        "entropy": ds.entropy,
        "mean_support": float(ds.support_sizes.mean()),
    }


def ufm_point(cfg: ScaleConfig, m: int) -> dict[str, Any]:
    """The UFM trained on the ``m``-context set and its geometry per record (cached)."""
    key, ds = _rung(cfg, m)
    return _ufm_point(_UfmKey(key, cfg.protocol), ds)


def _rung_points(cfg: ScaleConfig, m: int) -> dict[str, dict[str, Any]]:
    """``{"svm": ..., "ufm": ...}`` of one ``m``, on one load of its set."""
    key, ds = _rung(cfg, m)
    return {"svm": _svm_solution(key, ds), "ufm": _ufm_point(_UfmKey(key, cfg.protocol), ds)}


@cached
def _ufm_point(key: _UfmKey, ds: ContextDataset) -> dict[str, Any]:
    svm = _svm_solution(key.svm, ds)
    L_mm = np.asarray(svm["L_mm"])
    W_mm, H_mm = mm_embeddings(L_mm)
    S = ds.S
    St = centered_support(S)
    L_in = finite_logits(ds.P)
    res = train_model(ds, TrainerConfig(key.protocol, "ufm"), progress=False)
    names = ("dir_mm", "dir_proxy", "corr_H", "corr_W", "corr_H_proxy", "corr_W_proxy")
    out: dict[str, list[float]] = {k: [] for k in names}
    W_px, H_px = balanced_factors(St)
    for W32, H32 in zip(res["W"], res["H"], strict=True):
        W, H = np.asarray(W32, np.float64), np.asarray(H32, np.float64)
        L = W @ H
        Lc = L - L.mean(axis=0)  # the CE is blind to column shifts
        out["dir_mm"].append(direction_distance(Lc - L_in, L_mm))
        out["dir_proxy"].append(direction_distance(Lc - L_in, St))
        out["corr_H"].append(cosine_correlation(H.T, H_mm.T))
        out["corr_W"].append(cosine_correlation(W, W_mm))
        out["corr_H_proxy"].append(cosine_correlation(H.T, H_px.T))
        out["corr_W_proxy"].append(cosine_correlation(W, W_px))
    result: dict[str, Any] = {k: np.asarray(v) for k, v in out.items()}
    result.update(
        epoch=np.asarray(res["epoch"], dtype=np.int64),
        ce_minus_H=np.asarray(res["ce_minus_H"]),
        pf_rel=np.asarray(res["pf_dist"]) / float(np.linalg.norm(L_in)),
        L_norm=np.asarray(res["L_norm"]),
        train_seconds=float(res["seconds"]),
        sec_per_epoch=float(res["sec_per_epoch"]),
        entropy=ds.entropy,
    )
    return result


@dataclass(frozen=True)
class LadderPoint:
    """One rung of the ladder: the figure's configuration and one ``m`` of ``m_values``."""

    cfg: ScaleConfig
    m: int


def ladder_point(point: LadderPoint) -> dict[str, dict[str, Any]]:
    """``{"svm": svm_point, "ufm": ufm_point}`` of one ``m``: an independent run of the ladder.

    Both halves are cached (under keys that hold the data fingerprint), so an interrupted
    ladder resumes where it stopped; this wrapper itself stores nothing.
    """
    return _rung_points(point.cfg, point.m)


def run_scale(
    cfg: ScaleConfig,
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Every ``m`` of the ladder: SVM numbers, UFM curves and sizes, stacked over ``m``.

    Scalars per ``m`` become arrays of length ``len(m_values)``; spectra are padded with NaN
    to the longest; curves have shape ``(len(m_values), records)``.  Also the sizes of the
    whole corpus and of the full qualifying set.

    The rungs are independent runs (:func:`ladder_point`): they go through
    :func:`ntpcore.core.sweep.map_runs`, in-process by default, on ``n_workers`` local
    processes or on a ``dask.distributed`` scheduler.  How they run does not change what
    they compute, so neither is part of ``cfg`` or of any cache key.
    """
    from ntpcore.core.sweep import map_runs

    check_corpus(cfg)  # a corpus too small for the ladder: one line, before any work
    points = map_runs(
        ladder_point,
        [LadderPoint(cfg, m) for m in cfg.m_values],
        n_workers=n_workers,
        scheduler=scheduler,
        desc="m ladder",
        progress=progress,
    )
    svm = [p["svm"] for p in points]
    ufm = [p["ufm"] for p in points]
    out: dict[str, Any] = {"m_values": np.array(cfg.m_values)}
    for k in (
        "nuc_mm",
        "nuc_proxy",
        "nuc_excess",
        "dist_proxy",
        "gap",
        "violation",
        "svm_seconds",
        "svm_iterations",
        "reduced_rows",
        "reduced_cols",
        "n_groups",
        "V",
        "n",
        "entropy",
        "mean_support",
    ):
        out[k] = np.array([p[k] for p in svm])
    out["rank_mm"] = np.array([_rank(p["sv_mm"]) for p in svm])
    out["rank_proxy"] = np.array([_rank(p["sv_proxy"]) for p in svm])
    for k in ("sv_mm", "sv_proxy"):
        width = max(len(p[k]) for p in svm)
        out[k] = np.array(
            [np.pad(p[k], (0, width - len(p[k])), constant_values=np.nan) for p in svm]
        )
    for k in ("ce_minus_H", "pf_rel", "dir_mm", "dir_proxy", "corr_H", "corr_W", "L_norm"):
        out[k] = np.array([p[k] for p in ufm])
    for k in ("corr_H_proxy", "corr_W_proxy"):
        out[k] = np.array([p[k] for p in ufm])
    out["epoch"] = np.asarray(ufm[0]["epoch"])
    out["train_seconds"] = np.array([p["train_seconds"] for p in ufm])
    corpus = load_corpus(cfg.data.corpus)
    full = full_dataset(cfg.data)
    out.update(
        corpus=cfg.data.corpus,
        corpus_label=corpus_label(cfg.data.corpus),
        corpus_default=cfg.data.corpus == DEFAULT_CORPUS,
        corpus_tokens=int(corpus.tokens.size),
        corpus_docs=corpus.n_docs,
        corpus_words=len(corpus.words),
        m_qualifying=full.m,
        V_qualifying=full.V,
        description=full.description,
    )
    return out
