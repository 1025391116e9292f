r"""What every panel of the self-attention figures (key ``att``) must show, one function per
figure: a :class:`ntpcore.figure.sourcedata.Panels` built from the run's results -- the
statistics over trials computed here, not read from the plotting calls -- with every panel's
axis scales, every labelled curve and band, bar series and image (with its colour limits).
:func:`ntpcore.figure.provenance.savefig` compares the drawn figure with it.
"""

from __future__ import annotations

import numpy as np

from ntpcore.att.plots import (
    AUTOMATON,
    CORR_FULL,
    CORR_SVM,
    FIN_ERR,
    MODEL,
    NORM_DIFF,
    PROJ_CORR,
    TIE_SET,
    band_label,
)
from ntpcore.figure.sourcedata import Panels

__all__ = [
    "acyclic",
    "conceptual",
    "curve",
    "cyclic",
    "local",
    "plain_gd",
    "playground",
    "reg_path",
    "scc_statistics",
    "score_matrices",
    "spread",
]

#: the label of panel (c) of the acyclic figures and (d) of the cyclic one
LARGEST_ATTENTION = "largest attention"
BEST_SCC = "mass on the best SCC"
ONE_MINUS_CORR = r"$1 -$ corr$(W(\tau), W^{\mathrm{svm}})$"
W_NORM = r"$\|W(\tau)\|_F$"
LOSS_GAP = r"$L - L_\star$"
LOSS_RATE = r"$\|W^{\mathrm{svm}}\|^2/(\eta\tau)$ (theory)"


def spread(Y, mode: str = "std") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The curve and its band over the trials (rows of ``Y``): ``(mid, lower, upper)`` for the
    mean ± 1 std (``"std"``), the median and quartiles (``"quantiles"``) or the geometric mean
    ×/÷ the geometric std of the values clipped at 1e-300 (``"log"``)."""
    Y = np.asarray(Y, dtype=float)
    if mode == "quantiles":
        lower, mid, upper = np.quantile(Y, [0.25, 0.5, 0.75], axis=0)
        return mid, lower, upper
    if mode == "log":
        logs = np.log(np.maximum(Y, 1e-300))
        m, s = logs.mean(axis=0), logs.std(axis=0)
        return np.exp(m), np.exp(m - s), np.exp(m + s)
    m, s = Y.mean(axis=0), Y.std(axis=0)
    return m, m - s, m + s


def curve(want: Panels, p: int, x, Y, label: str, mode: str = "std") -> Panels:
    """Declare the curve ``label`` over the trials ``Y`` and its band on panel ``p``."""
    mid, lower, upper = spread(Y, mode)
    want.line(p, label, x, mid)
    want.band(p, band_label(label, mode), x, lower, upper)
    return want


def acyclic(res: dict) -> Panels:
    """The acyclic-TPG figures: (a) the correlation, (b) 1 - corr on a log axis, (c) the
    largest attention."""
    x = np.asarray(res["steps"])
    want = Panels()
    curve(want.axes(0), 0, x, res["corr_svm"], CORR_SVM)
    curve(want.axes(1, yscale="log"), 1, x, 1 - np.asarray(res["corr_svm"]), ONE_MINUS_CORR, "log")
    curve(want.axes(2), 2, x, res["attn_best"], LARGEST_ATTENTION)
    return want


def cyclic(res: dict) -> Panels:
    """The cyclic-TPG figure: (a) both correlations, (b) the projected one, (c) the two norm
    differences (median and quartiles), (d) the attention on the best SCC."""
    x = np.asarray(res["steps"])
    want = Panels()
    curve(want.axes(0), 0, x, res["corr_svm"], CORR_SVM)
    curve(want, 0, x, res["corr_full"], CORR_FULL)
    curve(want.axes(1), 1, x, res["proj_corr"], PROJ_CORR)
    curve(want.axes(2), 2, x, res["norm_diff"], NORM_DIFF, "quantiles")
    curve(want, 2, x, res["fin_err"], FIN_ERR, "quantiles")
    curve(want.axes(3), 3, x, res["attn_best"], BEST_SCC)
    return want


def plain_gd(res: dict, lr: float) -> Panels:
    """Plain GD on a log time axis (step 0 left out): (a) the correlation, (b) the finite
    component's error (log), (c) the norm, (d) the excess loss (log, clipped at 1e-16) with the
    theorem's rate :math:`\\|W^{\\mathrm{svm}}\\|^2/(\\eta\\tau)` (geometric mean over trials)."""
    steps = np.asarray(res["steps"])
    pos = steps > 0
    x = steps[pos]
    want = Panels()
    curve(want.axes(0, xscale="log"), 0, x, res["corr_svm"][:, pos], CORR_SVM)
    curve(want.axes(1, xscale="log", yscale="log"), 1, x, res["fin_err"][:, pos], FIN_ERR, "log")
    curve(want.axes(2, xscale="log"), 2, x, res["W_norm"][:, pos], W_NORM)
    gap = np.maximum(np.asarray(res["loss_gap"])[:, pos], 1e-16)
    curve(want.axes(3, xscale="log", yscale="log"), 3, x, gap, LOSS_GAP, "log")
    svm_sq = np.exp(np.mean(np.log(np.asarray(res["W_svm_norm"]) ** 2)))
    want.line(3, LOSS_RATE, x, svm_sq / (lr * x))
    return want


def _centres(x, width: float) -> np.ndarray:
    """The centres matplotlib records for bars drawn at ``x`` with ``width``: a bar is a
    rectangle from ``x - width/2``, whose centre is read back as that plus ``width/2``."""
    return (np.asarray(x, dtype=float) - width / 2) + width / 2


#: the local-convergence figure's labels: direction and finite-component panels
GLOBAL_SVM, LOCAL_SVM = "global Graph-SVM", "local Graph-SVM"
GLOBAL, LOCAL = "global", "local"


def local(res: dict, losses) -> Panels:
    """The local-convergence figure: per loss (a row), the correlations with the global and
    the local Graph-SVM and the two norm differences (median and quartiles)."""
    x = np.asarray(res["steps"])
    want = Panels()
    for a, _ in enumerate(losses):
        p = 2 * a
        curve(want.axes(p), p, x, res["corr_global"][a], GLOBAL_SVM, "quantiles")
        curve(want, p, x, res["corr_local"][a], LOCAL_SVM, "quantiles")
        curve(want.axes(p + 1), p + 1, x, res["norm_diff_global"][a], GLOBAL, "quantiles")
        curve(want, p + 1, x, res["norm_diff_local"][a], LOCAL, "quantiles")
    return want


PATH_CORR = r"corr$(W_R, W^{\mathrm{svm}})$"
PATH_FIN = r"$\|\Pi_{S_{\mathrm{fin}}} W_R - W^{\mathrm{fin}}\|$"
PATH_NORM = r"$\|W_R\|$"


def reg_path(res: dict) -> Panels:
    """The regularization path against R (log): (a) the correlation, (b) the finite part
    (log, geometric), (c) the norm (log) with the line ``R``."""
    R = np.asarray(res["radii"])
    want = Panels()
    curve(want.axes(0, xscale="log"), 0, R, res["corr_svm"], PATH_CORR)
    curve(want.axes(1, xscale="log", yscale="log"), 1, R, res["fin_err"], PATH_FIN, "log")
    curve(want.axes(2, xscale="log", yscale="log"), 2, R, res["W_norm"], PATH_NORM)
    want.line(2, "$R$", R, R)
    return want


#: the SCC-statistics figure's panels, by the statistic they show
STAT_PANELS = ("largest_frac", "n_sccs", "pure_comp", "single_scc")


def scc_statistics(res: dict) -> Panels:
    """The SCC statistics against n (log), one curve per T with its ±1 std band."""
    n = np.asarray(res["sample_sizes"])
    want = Panels()
    for p, key in enumerate(STAT_PANELS):
        want.axes(p, xscale="log")
        for a, T in enumerate(res["seq_lens"]):
            curve(want, p, n, np.asarray(res[key][a]).T, f"T = {T}")
    return want


EXACT, TRAINED = "automaton (exact)", "trained model"


def conceptual(res: dict) -> Panels:
    """The conceptual figure: four drawings (data, TPG, condensation, retrieval) and the bars
    of (e) the automaton and the mean trained model on the test sequence and (f) every model
    on the undecided sequence."""
    K = len(res["svm_scores"])
    x = np.arange(K)
    want = Panels()
    for p in range(4):
        want.axes(p)
    want.axes(4).bars(4, EXACT, _centres(x - 0.2, 0.4), res["composition"])
    want.bars(4, TRAINED, _centres(x + 0.2, 0.4), np.asarray(res["models"]).mean(0))
    M = np.asarray(res["undecided_models"])
    width = 0.8 / (M.shape[0] + 1)
    want.axes(5)
    for r in range(M.shape[0]):
        centre = x + (r + 0.5 - M.shape[0] / 2) * width
        want.bars(5, f"model, init {r + 1}", _centres(centre, width), M[r])
    return want


#: the playground's images
SVM_SCORES = r"$e_j^\top W^{\mathrm{svm}} e_k / \|W^{\mathrm{svm}}\|$"
MODEL_SCORES = r"$e_j^\top W(\tau) e_k / \|W(\tau)\|$"


def score_matrices(state: dict) -> tuple[np.ndarray, np.ndarray, float]:
    """The token scores of the Graph-SVM and of the trained model, each over its norm
    (``S[j, k] = e_j^T W e_k / ||W||``), and their shared symmetric colour limit."""
    E = np.asarray(state["E"])
    W_svm, W = np.asarray(state["W_svm"]), np.asarray(state["W"])
    S_svm = E @ W_svm @ E.T / np.linalg.norm(W_svm)
    S_W = E @ W @ E.T / np.linalg.norm(W)
    return S_svm, S_W, float(max(np.abs(S_svm).max(), np.abs(S_W).max()))


def playground(decided: dict, undecided: dict) -> Panels:
    """The playground's static rendering: per example its TPG and the bars of the automaton
    and the model, and the two score matrices (diverging map, shared symmetric limits)."""
    want = Panels()
    S_svm, S_W, vmax = score_matrices(decided)
    for row, state in enumerate((decided, undecided)):
        x = np.arange(len(state["composition"]))
        p = 3 * row
        want.axes(p)
        auto = AUTOMATON if state["status"] == "decided" else TIE_SET
        want.axes(p + 1).bars(p + 1, auto, _centres(x - 0.2, 0.4), state["composition"])
        want.bars(p + 1, MODEL, _centres(x + 0.2, 0.4), state["model"])
        want.axes(p + 2).image(p + 2, S_svm if row == 0 else S_W, clim=(-vmax, vmax), cmap="RdBu_r")
    return want
