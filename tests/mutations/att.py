"""Mutations of the attention paper (Li et al., AISTATS 2024): errors a run must catch.

Each entry wraps one function where the code under test looks it up: in the modules of
``ntpcore.att.experiments`` (imported first; ``_replace(..., where=...)``), so that the
independent checks of :mod:`ntpcore.att.checks` (which share none of the room's builders)
still see the true objects, or a function of :mod:`ntpcore.att.plots`; see
:mod:`tools.qa.mutations`.  Perturbations are deterministic (a seeded numpy generator).
"""

from __future__ import annotations

from tools.qa.mutations import Mutation

# W^fin: the experiments and the automaton (conceptual figure, playground) each import it.
_WFIN = """
import numpy as _np
import ntpcore.att.experiments
import ntpcore.att.finite as _fin

_orig = _fin.finite_component


def _mutated(*args, **kwargs):
    _applied()
    W = _orig(*args, **kwargs)
    {body}
    return W


_replace(
    _fin, "finite_component", _mutated, where=("ntpcore.att.experiments", "ntpcore.att.automaton")
)
"""

# W^svm: the experiments import solve_graph_svm; graph_svm (automaton) calls it in svm.
_WSVM = """
import dataclasses as _dc
import numpy as _np
import ntpcore.att.experiments
import ntpcore.att.svm as _svm

_orig = _svm.solve_graph_svm


def _mutated(*args, **kwargs):
    _applied()
    res = _orig(*args, **kwargs)
    W = res.W
    {body}
    return _dc.replace(res, W=W)


_replace(
    _svm, "solve_graph_svm", _mutated, where=("ntpcore.att.experiments", "ntpcore.att.svm")
)
"""

# The descent loop of every trained model of the experiments (run_global calls descend,
# the others run_descent, which calls descend; both take the same keywords).
_DESCENT = """
import numpy as _np
import ntpcore.att.experiments
import ntpcore.att.descent as _des


def _mutated(_orig, W0, P, **kw):
    {body}
    return _orig(W0, P, **kw)


_run_descent, _descend = _des.run_descent, _des.descend
_replace(_des, "run_descent", lambda W0, P, **kw: _mutated(_run_descent, W0, P, **kw),
         where=("ntpcore.att.experiments",))
# run_global's descent only: run_descent calls the unwrapped descend (wrapped once)
_replace(
    _des, "descend", lambda W0, P, **kw: _mutated(_descend, W0, P, **kw),
    where=("ntpcore.att.experiments",),
)
"""

# The mean ± std band of the curve figures (the notebooks import it after start-up).
_BAND = """
import numpy as _np
import ntpcore.att.plots as _plots

_orig = _plots.band


def _mutated(ax, x, Y, **kw):
    _applied()
    {body}
    return _orig(ax, x, Y, **kw)


_replace(_plots, "band", _mutated)
"""

# The signed score matrices of the playground (the notebook imports the module at start-up).
_IMAGE = """
import ntpcore.att.plots as _plots


def _mutated(ax, M, *, vmax, cmap="RdBu_r"):
    _applied()
    return ax.imshow(M, cmap=cmap)


_replace(_plots, "signed_image", _mutated)
"""

MUTATIONS = [
    Mutation(
        "att-control",
        "control",
        "att",
        "nothing changed: the figures must pass (the harness's negative control)",
        ("att-acyclic-large-lr",),
        "pass\n",
    ),
    # ------------------------------------------------------------------ finite part W^fin
    Mutation(
        "att-wfin-scaled",
        "finite part",
        "att",
        "the finite component W^fin scaled by 1.05",
        ("att-cyclic-convergence",),
        _WFIN.format(body="W = 1.05 * W"),
    ),
    Mutation(
        "att-wfin-perturbed",
        "finite part",
        "att",
        "the finite component W^fin moved by seeded noise of 2% of its norm",
        ("att-conceptual",),
        _WFIN.format(
            body="N = _np.random.default_rng(0).standard_normal(W.shape); "
            "W = W + 0.02 * _np.linalg.norm(W) * N / _np.linalg.norm(N)"
        ),
    ),
    # ------------------------------------------------------------------ Graph-SVM W^svm
    Mutation(
        "att-wsvm-scaled",
        "max-margin",
        "att",
        "the Graph-SVM direction W^svm scaled by 1.05: its margins are 1.05, not 1",
        ("att-acyclic-large-lr",),
        _WSVM.format(body="W = 1.05 * W"),
    ),
    Mutation(
        "att-wsvm-perturbed",
        "max-margin",
        "att",
        "the Graph-SVM direction W^svm moved by seeded noise of 5% of its norm",
        ("att-cyclic-convergence",),
        _WSVM.format(
            body="N = _np.random.default_rng(1).standard_normal(W.shape); "
            "W = W + 0.05 * _np.linalg.norm(W) * N / _np.linalg.norm(N)"
        ),
    ),
    # ------------------------------------------------------------------ TPGs and SCCs
    Mutation(
        "att-scc-merged",
        "support",
        "att",
        "the experiments and the automaton see the first two SCCs of every token-priority "
        "graph merged into one",
        ("att-conceptual", "att-scc-statistics"),
        """
        import dataclasses as _dc
        import ntpcore.att.experiments
        import ntpcore.att.priority as _priority

        _orig = _priority.scc_structures


        def _merge(s):
            if s.n_sccs < 2:
                return s
            _applied()
            scc = s.scc.copy()
            scc[scc == 1] = 0
            scc[scc > 1] -= 1
            level = s.level.copy()
            level[scc == 0] = s.level[s.scc == 0][0]
            return _dc.replace(s, scc=scc, level=level)


        def _mutated(graphs):
            return [_merge(s) for s in _orig(graphs)]


        _replace(_priority, "scc_structures", _mutated,
                 where=("ntpcore.att.experiments", "ntpcore.att.automaton"))
        """,
    ),
    Mutation(
        "att-tpg-edge-reversed",
        "support",
        "att",
        "the Graph-SVM is solved on token-priority graphs with one edge reversed "
        "(j -> y instead of y -> j)",
        ("att-cyclic-convergence",),
        """
        import ntpcore.att.experiments
        import ntpcore.att.svm as _svm

        _orig = _svm.solve_graph_svm


        def _mutated(E, graphs, **kwargs):
            graphs = [G.copy() for G in graphs]
            G = max(graphs, key=lambda g: g.number_of_edges())
            for i, j in sorted(G.edges):
                if not G.has_edge(j, i):
                    _applied()
                    G.remove_edge(i, j)
                    G.add_edge(j, i)
                    break
            return _orig(E, graphs, **kwargs)


        _replace(
            _svm, "solve_graph_svm", _mutated,
            where=("ntpcore.att.experiments", "ntpcore.att.svm"),
        )
        """,
    ),
    # ------------------------------------------------------------------ last token
    Mutation(
        "att-query-off-by-one",
        "attention",
        "att",
        "the attention query taken from the second-to-last token of each sequence",
        ("att-acyclic-small-lr",),
        """
        import dataclasses as _dc
        import ntpcore.att.dynamics as _dyn
        import ntpcore.att.experiments

        _orig = _dyn.make_problem


        def _mutated(*args, **kwargs):
            _applied()
            P = _orig(*args, **kwargs)
            return _dc.replace(P, xbar=P.X[:, :, -2].copy())


        _replace(_dyn, "make_problem", _mutated, where=("ntpcore.att.experiments",))
        """,
    ),
    # ------------------------------------------------------------------ training
    Mutation(
        "att-step-halved",
        "training",
        "att",
        "normalized GD with half the step size eta",
        ("att-acyclic-small-lr",),
        _DESCENT.format(body='_applied(); kw["eta"] = 0.5 * _np.asarray(kw["eta"], float)'),
    ),
    Mutation(
        "att-ngd-unnormalized",
        "training",
        "att",
        "the run labelled normalized GD is plain GD (the gradient is not normalised)",
        ("att-acyclic-large-lr", "att-cyclic-convergence"),
        _DESCENT.format(
            body='if kw.get("normalized", True):\n        _applied(); kw["normalized"] = False'
        ),
    ),
    Mutation(
        "att-training-short",
        "training",
        "att",
        "the models trained for a tenth of their steps",
        ("att-acyclic-small-lr",),
        _DESCENT.format(
            body='_applied(); n = max(1, kw["n_steps"] // 10); kw["n_steps"] = n\n'
            '    if kw.get("record") is not None:\n'
            '        kw["record"] = _np.unique(_np.minimum(_np.asarray(kw["record"]), n))'
        ),
    ),
    # ------------------------------------------------------------------ regularization path
    Mutation(
        "att-regpath-radius",
        "max-margin",
        "att",
        "the regularization path constrains ||W||^2 <= R instead of ||W|| <= R (radius sqrt(R))",
        ("att-reg-path",),
        """
        import numpy as _np
        import ntpcore.att.experiments
        import ntpcore.att.regpath as _regpath

        _orig = _regpath.regularization_path


        def _mutated(E, tokens, labels, radii, **kwargs):
            _applied()
            return _orig(E, tokens, labels, _np.sqrt(_np.asarray(radii, float)), **kwargs)


        _replace(_regpath, "regularization_path", _mutated, where=("ntpcore.att.experiments",))
        """,
    ),
    # ------------------------------------------------------------------ data
    Mutation(
        "att-sequences-with-replacement",
        "data",
        "att",
        "random sequences drawn with replacement (tokens may repeat) instead of T distinct tokens",
        ("att-scc-statistics", "att-acyclic-large-lr"),
        """
        import numpy as _np
        import ntpcore.att.data as _data

        _orig = _data.random_sequences


        def _mutated(rng, n, T, K):
            _applied()
            return rng.integers(0, K, size=(n, T)).astype(_np.int64)


        _replace(_data, "random_sequences", _mutated)
        """,
    ),
    # ------------------------------------------------------------------ plots
    Mutation(
        "att-plot-steps-reversed",
        "plot",
        "att",
        "every band drawn against its x axis reversed (the last step plotted first)",
        ("att-acyclic-large-lr",),
        _BAND.format(body="x = _np.asarray(x)[::-1]"),
    ),
    Mutation(
        "att-plot-labels-swapped",
        "plot",
        "att",
        "the legend labels of the global and the local Graph-SVM correlations swapped",
        ("att-local-convergence",),
        _BAND.format(
            body='swap = {"global Graph-SVM": "local Graph-SVM", '
            '"local Graph-SVM": "global Graph-SVM"}\n'
            '    kw["label"] = swap.get(kw.get("label"), kw.get("label"))'
        ),
    ),
    Mutation(
        "att-plot-one-trial",
        "plot",
        "att",
        "every band shows the first trial alone instead of the mean and spread over the trials",
        ("att-acyclic-small-lr",),
        _BAND.format(body="Y = _np.asarray(Y, float)[:1]"),
    ),
    Mutation(
        "att-plot-line-shifted",
        "plot",
        "att",
        "every curve and its band drawn one sample late (the value of step t at step t + 1)",
        ("att-cyclic-convergence",),
        _BAND.format(body="x = _np.asarray(x)[1:]; Y = _np.asarray(Y, float)[:, :-1]"),
    ),
    Mutation(
        "att-plot-log-axis",
        "plot",
        "att",
        "the correlation of the acyclic figure (a linear quantity in [0, 1]) drawn on a log y-axis",
        ("att-acyclic-small-lr",),
        _BAND.format(body='if kw.get("label") == _plots.CORR_SVM:\n        ax.set_yscale("log")'),
    ),
    Mutation(
        "att-plot-clim-dropped",
        "plot",
        "att",
        "the playground's two score matrices drawn without their shared symmetric colour "
        "limits (each image scaled on its own)",
        ("att-automaton-playground",),
        _IMAGE,
    ),
]
