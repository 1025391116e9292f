"""Mutations of the linear paper (Thrampoulidis, NeurIPS 2024): errors a run must catch.

Each entry replaces one function of ``ntpcore.lin`` or of its plotting module wherever the
package binds it (``_replace``); see :mod:`tools.qa.mutations`.
"""

from __future__ import annotations

from tools.qa.mutations import Mutation

_PAIR = """
import numpy as _np
import ntpcore.lin as _lin

_orig = _lin.solution_pair


def _mutated(*args, **kwargs):
    _applied()
    pair = dict(_orig(*args, **kwargs))
    {body}
    return pair


_replace(_lin, "solution_pair", _mutated)
"""

_TRAIN = """
import ntpcore.lin as _lin

_orig = _lin.train_ntp


def _mutated(data, **kw):
    {body}
    return _orig(data, **kw)


_replace(_lin, "train_ntp", _mutated)
"""

MUTATIONS = [
    Mutation(
        "lin-control",
        "control",
        "lin",
        "nothing changed: the figures must pass (the harness's negative control)",
        ("lin-toy-solutions",),
        "pass\n",
    ),
    Mutation(
        "lin-wstar-scaled",
        "finite part",
        "lin",
        "the finite part W* (Def. 1, eq. (4)) scaled by 1.05",
        ("lin-toy-solutions", "lin-gd-direction"),
        _PAIR.format(body='pair["W_star"] = 1.05 * pair["W_star"]'),
    ),
    Mutation(
        "lin-wstar-perturbed",
        "finite part",
        "lin",
        "the finite part W* moved by seeded noise of 2% of its norm",
        ("lin-gd-direction",),
        _PAIR.format(
            body='W = pair["W_star"]; E = _np.random.default_rng(0).standard_normal(W.shape); '
            'pair["W_star"] = W + 0.02 * _np.linalg.norm(W) * E / _np.linalg.norm(E)'
        ),
    ),
    Mutation(
        "lin-wmm-scaled",
        "max-margin",
        "lin",
        "the NTP-SVM solution W^mm (Def. 3) scaled by 1.05: its margins are 1.05, not 1",
        ("lin-toy-solutions",),
        _PAIR.format(body='pair["W_mm"] = 1.05 * pair["W_mm"]'),
    ),
    Mutation(
        "lin-wmm-perturbed",
        "max-margin",
        "lin",
        "W^mm moved by seeded noise of 5% of its norm",
        ("lin-gd-direction",),
        _PAIR.format(
            body='W = pair["W_mm"]; E = _np.random.default_rng(1).standard_normal(W.shape); '
            'pair["W_mm"] = W + 0.05 * _np.linalg.norm(W) * E / _np.linalg.norm(E)'
        ),
    ),
    Mutation(
        "lin-wmm-rows-swapped",
        "max-margin",
        "lin",
        "two rows (tokens) of W^mm swapped: the direction of another support pattern",
        ("lin-toy-geometry",),
        _PAIR.format(body='W = pair["W_mm"].copy(); W[[0, 1]] = W[[1, 0]]; pair["W_mm"] = W'),
    ),
    Mutation(
        "lin-support-moved",
        "support",
        "lin",
        "the synthetic set's first context gets another support: the mass of its first "
        "in-support token moves to an out-of-support token",
        ("lin-next-token-dists", "lin-gd-direction"),
        """
        import dataclasses as _dc
        import numpy as _np
        import ntpcore.lin as _lin

        _orig = _lin.make_synthetic


        def _mutated(*args, **kwargs):
            _applied()
            data = _orig(*args, **kwargs)
            P = data.P.copy()
            col = P[:, 0]
            on, off = _np.flatnonzero(col > 0)[0], _np.flatnonzero(col == 0)[0]
            col[off], col[on] = col[on], 0.0
            return _lin.NTPData(data.H, P, data.pi, data.info)


        _replace(_lin, "make_synthetic", _mutated)
        """,
    ),
    Mutation(
        "lin-gd-half-steps",
        "training",
        "lin",
        "GD trained for half its steps",
        ("lin-gd-direction",),
        _TRAIN.format(
            body='_applied(); kw["n_steps"] = kw.get("n_steps", 10_000) // 2; '
            'kw["record_steps"] = None'
        ),
    ),
    Mutation(
        "lin-gd-step-halved",
        "training",
        "lin",
        "GD with half the step size eta",
        ("lin-gd-direction",),
        _TRAIN.format(body='_applied(); kw["eta"] = 0.5 * kw.get("eta", 0.5)'),
    ),
    Mutation(
        "lin-adam-runs-gd",
        "training",
        "lin",
        "the run labelled Adam is plain GD",
        ("lin-ngd-adam",),
        _TRAIN.format(
            body='if kw.get("optimizer") == "adam":\n        _applied(); kw["optimizer"] = "gd"'
        ),
    ),
    Mutation(
        "lin-ngd-runs-gd",
        "training",
        "lin",
        "the run labelled NGD is plain GD (no normalisation)",
        ("lin-ngd-adam",),
        _TRAIN.format(
            body='if kw.get("optimizer") == "ngd":\n        _applied(); kw["optimizer"] = "gd"'
        ),
    ),
    Mutation(
        "lin-ce-without-entropy",
        "loss",
        "lin",
        "the excess loss CE - H computed without its entropy term (CE itself)",
        ("lin-gd-direction", "lin-reg-path"),
        """
        import ntpcore.lin as _lin

        _orig = _lin.ce_excess_W


        def _mutated(W, H, P, pi=None):
            _applied()
            return _lin.ce_W(W, H, P, pi)


        _replace(_lin, "ce_excess_W", _mutated)
        """,
    ),
    Mutation(
        "lin-loss-in-bits",
        "loss",
        "lin",
        "the training loss and its gradient in log base 2 (divided by ln 2) inside the trainer",
        ("lin-gd-direction",),
        """
        import math as _math
        import ntpcore.lin.training as _training

        _orig = _training.make_loss_grad


        def _mutated(*args, **kwargs):
            _applied()
            inner = _orig(*args, **kwargs)

            def loss_grad(W):
                loss, grad = inner(W)
                return loss / _math.log(2), grad / _math.log(2)

            return loss_grad


        _replace(_training, "make_loss_grad", _mutated)
        """,
    ),
    Mutation(
        "lin-toy-law",
        "data",
        "lin",
        "the toy's next-token probabilities drawn by another law (in-support order reversed)",
        ("lin-toy-solutions",),
        """
        import numpy as _np
        import ntpcore.lin as _lin

        _orig = _lin.make_toy


        def _mutated(*args, **kwargs):
            _applied()
            data = _orig(*args, **kwargs)
            P = data.P.copy()
            for j in range(P.shape[1]):
                on = _np.flatnonzero(P[:, j] > 0)
                P[on, j] = P[on[::-1], j]
            return _lin.NTPData(data.H, P, data.pi, data.info)


        _replace(_lin, "make_toy", _mutated)
        """,
    ),
    Mutation(
        "lin-regpath-scaled",
        "max-margin",
        "lin",
        "the regularization path's minimisers scaled by 1.05 (eq. (8))",
        ("lin-reg-path",),
        """
        import ntpcore.lin as _lin

        _orig = _lin.regularization_path


        def _mutated(*args, **kwargs):
            _applied()
            out = dict(_orig(*args, **kwargs))
            out["W"] = 1.05 * out["W"]
            out["norm"] = 1.05 * out["norm"]
            return out


        _replace(_lin, "regularization_path", _mutated)
        """,
    ),
    Mutation(
        "lin-separable-lp-flipped",
        "support",
        "lin",
        "the NTP-separability LP (Def. 2) answers the opposite",
        ("lin-separability-phase",),
        """
        import ntpcore.lin as _lin

        _orig = _lin.separability_lp


        def _mutated(*args, **kwargs):
            _applied()
            out = _orig(*args, **kwargs)
            if isinstance(out, bool):
                return not out
            if isinstance(out, dict) and "separable" in out:
                return {**out, "separable": not out["separable"]}
            return out


        _replace(_lin, "separability_lp", _mutated)
        """,
    ),
    Mutation(
        "lin-plot-labels-swapped",
        "plot",
        "lin",
        "panel (c) of the training plot: the legend labels of cos(W_k, W^mm) and "
        "cos(W_k - W*, W^mm) swapped",
        ("lin-gd-direction",),
        """
        import ntpcore.lin.plots as _plots

        _orig = _plots.draw_training


        def _mutated(axes, *args, **kwargs):
            _applied()
            _orig(axes, *args, **kwargs)
            c = axes.flat[2]
            lines = [ln for ln in c.get_lines() if not ln.get_label().startswith("_")]
            if len(lines) >= 2:
                a, b = lines[-2], lines[-1]
                la, lb = a.get_label(), b.get_label()
                a.set_label(lb)
                b.set_label(la)
                if c.get_legend() is not None:
                    c.legend()


        _replace(_plots, "draw_training", _mutated)
        """,
    ),
    Mutation(
        "lin-plot-other-run",
        "plot",
        "lin",
        "Fig. 5: the NGD panels show the GD run",
        ("lin-ngd-adam",),
        """
        import ntpcore.lin.plots as _plots

        _orig = _plots.draw_training


        _calls = []


        def _mutated(axes, res, *args, ref=None, **kwargs):
            _calls.append(1)
            if ref is not None and len(_calls) == 1:  # the first panel pair is NGD's
                _applied()
                res = ref
            return _orig(axes, res, *args, ref=ref, **kwargs)


        _replace(_plots, "draw_training", _mutated)
        """,
    ),
    Mutation(
        "lin-plot-line-late",
        "plot",
        "lin",
        "Fig. 4, panel (a): the CE curve drawn one recorded step late (each value at the next "
        "iteration)",
        ("lin-gd-direction",),
        """
        import numpy as _np
        import ntpcore.lin.plots as _plots

        _orig = _plots.draw_training


        def _mutated(axes, *args, **kwargs):
            _applied()
            _orig(axes, *args, **kwargs)
            for line in axes.flat[0].get_lines():
                if not line.get_label().startswith("_") and "entropy" not in line.get_label():
                    x, y = (_np.asarray(v, dtype=float) for v in line.get_data())
                    line.set_data(x[1:], y[:-1])


        _replace(_plots, "draw_training", _mutated)
        """,
    ),
    Mutation(
        "lin-plot-log-norm",
        "plot",
        "lin",
        "Fig. 4, panel (b): the norm ||W_k||, a linear quantity, drawn on a log y-axis",
        ("lin-gd-direction",),
        """
        import ntpcore.lin.plots as _plots

        _orig = _plots.draw_training


        def _mutated(axes, *args, **kwargs):
            _applied()
            _orig(axes, *args, **kwargs)
            axes.flat[1].set_yscale("log")


        _replace(_plots, "draw_training", _mutated)
        """,
    ),
    Mutation(
        "lin-plot-clim-dropped",
        "plot",
        "lin",
        "Fig. 2, left: the probability image without its colour limits 0 and 1 (scaled to its "
        "own entries)",
        ("lin-toy-solutions",),
        """
        import ntpcore.lin.plots as _plots

        _orig = _plots.draw_prob_heatmap


        def _mutated(*args, **kwargs):
            _applied()
            im = _orig(*args, **kwargs)
            im.autoscale()
            return im


        _replace(_plots, "draw_prob_heatmap", _mutated)
        """,
    ),
]
