"""Plotting helpers of the self-attention part (key ``att``): mean ± std bands, token-priority
graphs with coloured SCCs, the condensation by priority level, and the automaton panel shared
by the conceptual figure and the playground."""

from __future__ import annotations

from fractions import Fraction

import networkx as nx
import numpy as np
from matplotlib.axes import Axes

from ntpcore.figure.plotting import COLORS

__all__ = [
    "AUTOMATON",
    "CORR_FULL",
    "CORR_SVM",
    "FIN_ERR",
    "MODEL",
    "NORM_DIFF",
    "PROJ_CORR",
    "TIE_SET",
    "band",
    "band_label",
    "legend",
    "signed_image",
    "draw_automaton",
    "draw_condensation",
    "draw_tpg",
    "fmt_exact",
    "scc_colors",
    "small_fraction",
]

GREY = "#BBBBBB"


def small_fraction(x: float, max_den: int = 12) -> Fraction | None:
    """``x`` as a fraction with denominator <= ``max_den`` when it is one (to 1e-9), else None."""
    f = Fraction(float(x)).limit_denominator(max_den)
    return f if abs(float(f) - x) < 1e-9 else None


def fmt_exact(x: float, *, signed: bool = False, max_den: int = 12) -> str:
    """A number as a small fraction when it is one (to 1e-9), else with 3 significant digits."""
    f = small_fraction(x, max_den)
    if f is not None:
        txt = str(f)
        return ("+" + txt) if signed and f > 0 else txt
    return f"{x:+.3g}" if signed else f"{x:.3g}"


#: The labels of the curves the figures draw (the figures and their checks,
#: :mod:`ntpcore.att.checks.panels`, name each series by them).
CORR_SVM = r"corr$(W(\tau), W^{\mathrm{svm}})$"
CORR_FULL = r"corr$(W(\tau), W^{\mathrm{fin}} + R\,W^{\mathrm{svm}})$"
PROJ_CORR = r"corr$(W^{\mathrm{svm}}, W(\tau) - \Pi_{S_{\mathrm{fin}}} W(\tau))$"
NORM_DIFF = r"$\|\Pi_{S_{\mathrm{fin}}} W(\tau) - W_{\mathrm{fin}}(\tau)\|$ (paper)"
FIN_ERR = r"$\|\Pi_{S_{\mathrm{fin}}} W(\tau) - W^{\mathrm{fin}}\|$ (exact limit)"
SPREAD = {"std": "±1 std", "quantiles": "25–75%", "log": "×/÷ geometric std"}
#: the automaton panel's bars: the automaton (decided, or the tie set weighted by W^fin) and
#: the trained model
AUTOMATON = "automaton"
TIE_SET = r"tie set, $W^{\mathrm{fin}}$ weights"
MODEL = r"model $f_W(X)$"


def band_label(label: str, mode: str = "std") -> str:
    """The label of the band drawn around the curve ``label`` (``mode``: ``"std"``,
    ``"quantiles"`` or ``"log"``, see :func:`band`)."""
    return f"{label}: {SPREAD[mode]}"


def band(
    ax: Axes,
    x,
    Y,
    *,
    color,
    label: str,
    ls="-",
    alpha=0.18,
    log: bool = False,
    quantiles: bool = False,
):
    """Mean over the rows of ``Y`` (trials, steps) with a ±1 std band (as in the paper).

    ``log=True`` (for log-scaled axes): geometric mean with a ×/÷ geometric-std band, which
    stays positive; non-positive values are clipped at 1e-300.  ``quantiles=True``: the median
    with the band between the 25% and 75% quantiles of the trials, which stays inside the range
    of the data (for nonnegative quantities such as norms, where mean - std can go below 0).
    The curve is labelled ``label``, the band :func:`band_label` (a legend drawn by
    :func:`legend` lists the curves only)."""
    Y = np.asarray(Y, float)
    if quantiles:
        lo, mid, hi = np.quantile(Y, [0.25, 0.5, 0.75], axis=0)
    elif log:
        L = np.log(np.maximum(Y, 1e-300))
        m, s = L.mean(axis=0), L.std(axis=0)
        lo, mid, hi = np.exp(m - s), np.exp(m), np.exp(m + s)
    else:
        mid, s = Y.mean(axis=0), Y.std(axis=0)
        lo, hi = mid - s, mid + s
    mode = "quantiles" if quantiles else "log" if log else "std"
    ax.plot(x, mid, color=color, label=label, ls=ls)
    ax.fill_between(x, lo, hi, color=color, alpha=alpha, lw=0, label=band_label(label, mode))


def legend(ax: Axes, **kwargs):
    """The legend of a panel's curves (its lines), not of their bands."""
    handles = [h for h in ax.get_lines() if not h.get_label().startswith("_")]
    return ax.legend(handles=handles, **kwargs)


def signed_image(ax: Axes, M, *, vmax: float, cmap: str = "RdBu_r"):
    """A signed matrix ``M`` as an image on a diverging colour map centred at 0, with the
    symmetric colour limits ``(-vmax, vmax)`` (shared by the panels that are compared)."""
    return ax.imshow(np.asarray(M, float), cmap=cmap, vmin=-vmax, vmax=vmax)


def scc_colors(scc: np.ndarray, touched: np.ndarray) -> dict[int, str]:
    """Colour per SCC id: non-trivial SCCs and touched singletons get palette colours,
    untouched tokens grey."""
    colors: dict[int, str] = {}
    i = 0
    for c in np.unique(scc):
        members = np.flatnonzero(scc == c)
        if not touched[members].any():
            colors[int(c)] = GREY
        else:
            colors[int(c)] = COLORS[i % (len(COLORS) - 1)]  # skip black (kept for outlines)
            i += 1
    return colors


def _layout(scc, level, nodes):
    """Positions: y = priority level, SCC members side by side, SCCs of a level spread out."""
    pos = {}
    for lev in np.unique(level[nodes]):
        at = [v for v in nodes if level[v] == lev]
        groups = sorted({int(scc[v]) for v in at})
        xs = []
        for g in groups:
            xs.extend(sorted(v for v in at if scc[v] == g))
            xs.append(None)  # gap between SCCs
        xs = xs[:-1]
        offs = (len(xs) - 1) / 2
        for j, v in enumerate(xs):
            if v is not None:
                pos[v] = (j - offs, float(lev))
    return pos


def draw_tpg(
    ax: Axes,
    G: nx.DiGraph,
    scc,
    level,
    touched,
    *,
    highlight=(),
    k=None,
    show_untouched: bool = False,
    node_size: int = 420,
):
    """Draw a TPG ``G^(k)`` with nodes coloured by SCC and placed by priority level.

    ``highlight``: tokens drawn with a thick black outline (e.g. the retrieved SCC).
    """
    scc, level, touched = map(np.asarray, (scc, level, touched))
    nodes = [v for v in G.nodes if touched[v] or show_untouched]
    ax.set_axis_off()
    if not nodes:  # no training sequence ends in k: G^(k) has no edge and nothing to draw
        label = "" if k is None else f" $G^{{({k})}}$"
        ax.text(
            0.5,
            0.5,
            f"the TPG{label} has no edges:\nno training sequence ends in this last token",
            ha="center",
            va="center",
            fontsize=8,
            transform=ax.transAxes,
        )
        return
    pos = _layout(scc, level, nodes)
    cols = scc_colors(scc, touched)
    H = G.subgraph(nodes)
    both = [(u, v) for u, v in H.edges if H.has_edge(v, u)]
    single = [(u, v) for u, v in H.edges if not H.has_edge(v, u)]
    kw = {
        "ax": ax,
        "arrows": True,
        "arrowsize": 10,
        "node_size": node_size,
        "width": 1.0,
        "edge_color": "#555555",
    }
    nx.draw_networkx_edges(H, pos, edgelist=single, connectionstyle="arc3,rad=0.08", **kw)
    nx.draw_networkx_edges(H, pos, edgelist=both, connectionstyle="arc3,rad=0.25", **kw)
    nx.draw_networkx_nodes(
        H,
        pos,
        ax=ax,
        node_size=node_size,
        node_color=[cols[int(scc[v])] for v in H.nodes],
        edgecolors=["black" if v in highlight else "white" for v in H.nodes],
        linewidths=[2.5 if v in highlight else 1.0 for v in H.nodes],
    )
    nx.draw_networkx_labels(H, pos, ax=ax, font_size=8, font_color="white", font_weight="bold")
    ax.set_axis_off()
    if k is not None:
        ax.set_title(rf"TPG $G^{{({k})}}$: SCCs coloured, rows = priority level")
    ys = [p[1] for p in pos.values()]
    ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    xs = [p[0] for p in pos.values()]
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    return pos


def draw_condensation(ax: Axes, scc, level, touched, reach, scores=None):
    """Condensation DAG of a TPG: one box per SCC at its priority level, annotated with the
    common W^svm score of its tokens (``scores``: (K,) per-token values)."""
    scc, level, touched, reach = map(np.asarray, (scc, level, touched, reach))
    cols = scc_colors(scc, touched)
    ids = [int(c) for c in np.unique(scc[touched])]
    rep = {c: int(np.flatnonzero(scc == c)[0]) for c in ids}
    C = nx.DiGraph()
    C.add_nodes_from(ids)
    for a in ids:
        for b in ids:
            if a != b and reach[rep[a], rep[b]]:
                C.add_edge(a, b)
    C = nx.transitive_reduction(C)
    by_level: dict[int, list[int]] = {}
    for c in ids:
        by_level.setdefault(int(level[rep[c]]), []).append(c)
    pos = {}
    for lev, cs in by_level.items():
        for j, c in enumerate(sorted(cs)):
            pos[c] = (j - (len(cs) - 1) / 2, float(lev))
    nx.draw_networkx_edges(
        C, pos, ax=ax, arrows=True, arrowsize=10, node_size=1300, edge_color="#555555"
    )
    for c in ids:
        members = np.flatnonzero(scc == c).tolist()
        txt = "{" + ",".join(map(str, members)) + "}"
        if scores is not None:
            txt += "\n" + fmt_exact(scores[members[0]], signed=True)
        ax.text(
            *pos[c],
            txt,
            ha="center",
            va="center",
            fontsize=8,
            color="white",
            fontweight="bold",
            bbox={"boxstyle": "round,pad=0.35", "fc": cols[c], "ec": "white"},
        )
    for lev in by_level:
        ax.text(
            -max(len(v) for v in by_level.values()) / 2 - 0.9,
            lev,
            f"level {lev}",
            ha="right",
            va="center",
            fontsize=8,
            color="#444444",
        )
    ys = list(by_level)
    ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    width = max(len(v) for v in by_level.values())
    ax.set_xlim(-width / 2 - 2.0, width / 2 + 0.6)
    ax.set_axis_off()


def draw_automaton(ax_graph: Axes, ax_bar: Axes, state: dict, *, title: bool = True):
    """TPG of the test sequence's last token with the retrieved SCC outlined (left) and the
    automaton's composition next to the trained model's output f_W(X) (right)."""
    tok, lab = np.asarray(state["tokens"]), np.asarray(state["labels"])
    K = len(state["scc"])
    k = int(state["k"])
    G = nx.DiGraph()
    G.add_nodes_from(range(K))
    for seq, y in zip(tok, lab, strict=True):
        if seq[-1] == k:
            G.add_edges_from((int(y), int(j)) for j in set(seq.tolist()) if j != y)
    highlight = set(np.asarray(state["retrieved"]).tolist())
    draw_tpg(
        ax_graph,
        G,
        state["scc"],
        state["level"],
        state["touched"],
        highlight=highlight,
        k=None if G.number_of_edges() else k,
        show_untouched=False,
    )
    if title:
        seq = ", ".join(map(str, np.asarray(state["test_sequence"]).tolist()))
        ax_graph.set_title(f"$G^{{({k})}}$; test X = ({seq}): retrieved = outlined", fontsize=8)
    x = np.arange(K)
    status = state["status"]
    auto_label = AUTOMATON if status == "decided" else TIE_SET
    ax_bar.bar(x - 0.2, state["composition"], 0.4, color=COLORS[0], label=auto_label)
    ax_bar.bar(x + 0.2, state["model"], 0.4, color=COLORS[1], label=MODEL)
    ax_bar.set_xticks(x)
    ax_bar.set_xlabel("token")
    ax_bar.set_ylabel("next-token probability")
    ax_bar.set_ylim(0, 1.05)
    ax_bar.legend(loc="upper right")
    if status != "decided":
        ax_bar.text(
            0.98,
            0.70,
            "theory undecided:\nfinite remainders decide",
            va="top",
            ha="right",
            transform=ax_bar.transAxes,
            fontsize=7,
            color="#B00000",
        )
