"""Mutations of the geometry paper (Zhao et al., COLM 2024): errors a run must catch.

Each entry replaces one function of ``ntpcore.geo`` wherever the package binds it
(``_replace``; narrowed with ``where=`` where the claims' own checks must keep the true
function), or one matplotlib call of one figure; see :mod:`tools.qa.mutations`.
"""

from __future__ import annotations

from tools.qa.mutations import Mutation

# The nuclear-norm NTP-SVM solver as convex.py (``g.solve_nuclear_svm``) and ``g.nuclear_svm``
# (``ntpcore.geo.svm.solve_nuclear_svm``) call it; ``{body}`` maps ``L`` (and may read ``S``)
# to the wrong solution, whose objective and violation are then recomputed honestly.
_SVM = """
import dataclasses as _dc
import numpy as _np
import ntpcore.geo as _geo
import ntpcore.geo.svm as _svm

_orig = _svm.solve_nuclear_svm


def _mutated(S, *args, **kwargs):
    _applied()
    res = _orig(S, *args, **kwargs)
    L = res.L
    {body}
    return _dc.replace(
        res,
        L=L,
        objective=float(_np.linalg.svd(L, compute_uv=False).sum()),
        violation=_svm.svm_constraint_violation(L, S),
    )


_replace(_geo, "solve_nuclear_svm", _mutated)
_replace(_svm, "solve_nuclear_svm", _mutated)
"""

# ``train_model`` (ntpcore.geo.train) as ntpcore.geo.experiments.training calls it; ``{body}``
# edits ``cfg``, the run's TrainerConfig (frozen: use dataclasses.replace).
_TRAIN = """
import dataclasses as _dc
import ntpcore.geo.train as _gt

_orig = _gt.train_model


def _mutated(ds, cfg, **kwargs):
    {body}
    return _orig(ds, cfg, **kwargs)


_replace(_gt, "train_model", _mutated)
"""

# ``g.regularization_path`` as convex.run_reg_path calls it.
_PATH = """
import numpy as _np
import ntpcore.geo as _geo

_orig = _geo.regularization_path


def _mutated(P, pi, lambdas, **kwargs):
    _applied()
    {body}


_replace(_geo, "regularization_path", _mutated)
"""

#: images drawn without their colour limits (each scaled on its own)
DROP_CLIM = """
import matplotlib.axes as _axes

_orig = _axes.Axes.imshow


def _mutated(self, X, *args, **kwargs):
    if "vmin" in kwargs or "vmax" in kwargs:
        _applied()
        kwargs.pop("vmin", None)
        kwargs.pop("vmax", None)
    return _orig(self, X, *args, **kwargs)


_axes.Axes.imshow = _mutated
"""

MUTATIONS = [
    Mutation(
        "geo-control",
        "control",
        "geo",
        "nothing changed: the figure must pass (the harness's negative control)",
        ("geo-support-lmm",),
        "pass\n",
    ),
    Mutation(
        "geo-lmm-scaled",
        "max-margin",
        "geo",
        "the nuclear-norm SVM solution L^mm scaled by 1.02: its margins are 1.02, not 1",
        ("geo-support-lmm",),
        _SVM.format(body="L = 1.02 * L"),
    ),
    Mutation(
        "geo-lmm-perturbed",
        "max-margin",
        "geo",
        "L^mm moved by seeded noise of 0.1% of its norm",
        ("geo-support-lmm",),
        _SVM.format(
            body="E = _np.random.default_rng(0).standard_normal(L.shape); "
            "L = L + 1e-3 * _np.linalg.norm(L) * E / _np.linalg.norm(E)"
        ),
    ),
    Mutation(
        "geo-support-flipped",
        "support",
        "geo",
        "the support matrix S with one entry flipped: the first next word of the first "
        "context is left out of its support",
        ("geo-support-lmm",),
        """
        import numpy as _np
        import ntpcore.geo.data as _data

        _orig = _data.ContextDataset.S


        def _mutated(self):
            _applied()
            S = _orig.fget(self).copy()
            S[_np.flatnonzero(S[:, 0])[0], 0] = False
            return S


        _data.ContextDataset.S = property(_mutated)
        """,
    ),
    Mutation(
        "geo-ufm-half-epochs",
        "training",
        "geo",
        "the UFM trained for half its epochs",
        ("geo-trained-logits",),
        _TRAIN.format(
            body='if cfg.model == "ufm":\n'
            "        _applied()\n"
            "        half = _dc.replace(cfg.protocol, n_steps=cfg.protocol.n_steps // 2)\n"
            "        cfg = _dc.replace(cfg, protocol=half)"
        ),
    ),
    Mutation(
        "geo-lr-halved",
        "training",
        "geo",
        "every model trained with half the learning rate",
        ("geo-trained-logits",),
        _TRAIN.format(
            body="_applied(); p = cfg.protocol\n"
            "    cfg = _dc.replace(cfg, protocol=_dc.replace(p, lr=0.5 * p.lr))"
        ),
    ),
    Mutation(
        "geo-loss-no-entropy",
        "loss",
        "geo",
        "the regularization path reports CE instead of CE - H (the entropy term missing)",
        ("geo-reg-path",),
        _PATH.format(
            body="res = _orig(P, pi, lambdas, **kwargs)\n"
            '    res["excess"] = res["excess"] + _geo.entropy(P, pi)\n'
            "    return res"
        ),
    ),
    Mutation(
        "geo-loss-log2",
        "loss",
        "geo",
        "the training curves record CE - H in bits (log base 2) instead of nats",
        ("geo-training-curves-synthetic",),
        """
        import math as _math
        import ntpcore.core.logits as _logits
        import ntpcore.geo.train

        _orig = _logits.ce_excess


        def _mutated(*args, **kwargs):
            _applied()
            return _orig(*args, **kwargs) / _math.log(2.0)


        # the trainers' records only (the claims' own checks keep the true function)
        _replace(_logits, "ce_excess", _mutated, where=("ntpcore.geo.train",))
        """,
    ),
    Mutation(
        "geo-lr-too-small",
        "training",
        "geo",
        "the trainers step with a learning rate 100 times too small (the models barely train)",
        ("geo-training-curves-synthetic",),
        """
        import ntpcore.geo.train.protocol as _protocol

        _orig = _protocol.lr_at


        def _mutated(protocol, step):
            _applied()
            return _orig(protocol, step) / 100.0


        _replace(_protocol, "lr_at", _mutated)
        """,
    ),
    Mutation(
        "geo-synthetic-law",
        "data",
        "geo",
        "the synthetic set's multiplicities drawn uniform in {1..8} instead of {1..4}",
        ("geo-datasets",),
        """
        import ntpcore.geo.experiments.convex as _convex
        import ntpcore.geo.experiments.datasets as _expdata
        import ntpcore.geo.synthetic as _synth

        _orig = _synth.synthetic_dataset


        def _mutated(seed=0, **kwargs):
            _applied()
            kwargs["max_repeat"] = 8
            return _orig(seed, **kwargs)


        _replace(_synth, "synthetic_dataset", _mutated)
        _replace(_expdata, "synthetic_dataset", _mutated)
        _replace(_convex, "synthetic_dataset", _mutated)
        """,
    ),
    Mutation(
        "geo-proxy-not-centred",
        "max-margin",
        "geo",
        "the proxy S~ is the raw support S, not centred by (I - 11^T/V)",
        ("geo-proxy-exactness", "geo-support-lmm"),
        """
        import numpy as _np
        import ntpcore.geo as _geo


        def _mutated(S):
            _applied()
            return _np.asarray(S, dtype=_np.float64)


        _replace(_geo, "centered_support", _mutated)
        """,
    ),
    Mutation(
        "geo-reg-path-lambda-scaled",
        "loss",
        "geo",
        "the regularization path solved at 2 lambda but reported at lambda",
        ("geo-reg-path",),
        _PATH.format(
            body="res = _orig(P, pi, 2.0 * _np.asarray(lambdas), **kwargs)\n"
            '    res["lambdas"] = _np.asarray(lambdas, dtype=float)\n'
            "    return res"
        ),
    ),
    Mutation(
        "geo-reg-path-legend-swapped",
        "plot",
        "geo",
        "the legend labels of panel (d) of the regularization path swapped (to L^mm / to S~)",
        ("geo-reg-path",),
        """
        import matplotlib.axes as _axes

        _orig = _axes.Axes.semilogx
        _SWAP = {
            r"to $L^{\\mathrm{mm}}$": r"to $\\tilde S$",
            r"to $\\tilde S$": r"to $L^{\\mathrm{mm}}$",
        }


        def _mutated(self, *args, **kwargs):
            if kwargs.get("label") in _SWAP:
                _applied()
                kwargs["label"] = _SWAP[kwargs["label"]]
            return _orig(self, *args, **kwargs)


        _axes.Axes.semilogx = _mutated
        """,
    ),
    Mutation(
        "geo-reg-path-line-late",
        "plot",
        "geo",
        "panel (b) of the regularization path draws the loss-gap ratio one sample late (each "
        "value at the next lambda)",
        ("geo-reg-path",),
        """
        import matplotlib.axes as _axes

        _orig = _axes.Axes.semilogx


        def _mutated(self, x, y, *args, **kwargs):
            if "CE" in str(kwargs.get("label", "")):
                _applied()
                x, y = x[1:], y[:-1]
            return _orig(self, x, y, *args, **kwargs)


        _axes.Axes.semilogx = _mutated
        """,
    ),
    Mutation(
        "geo-reg-path-log-axis",
        "plot",
        "geo",
        "panel (c) of the regularization path, the nuclear norm against log(1/lambda), drawn on "
        "a log y-axis (the theory's law is linear there)",
        ("geo-reg-path",),
        """
        import matplotlib.axes as _axes

        _orig = _axes.Axes.set_title


        def _mutated(self, label, *args, **kwargs):
            if str(label).startswith("(c) nuclear-norm growth"):
                _applied()
                self.set_yscale("log")
            return _orig(self, label, *args, **kwargs)


        _axes.Axes.set_title = _mutated
        """,
    ),
    Mutation(
        "geo-support-lmm-clim-dropped",
        "plot",
        "geo",
        "the images of the support figure drawn without their colour limits (each scaled on "
        "its own: L^mm no longer centred on zero)",
        ("geo-support-lmm",),
        DROP_CLIM,
    ),
    Mutation(
        "geo-trained-panel-swapped",
        "plot",
        "geo",
        "the Transformer panel of the trained-logits figure shows the UFM's logits",
        ("geo-trained-logits",),
        """
        import matplotlib.axes as _axes

        _orig = _axes.Axes.set_title
        _SEEN = {}


        def _mutated(self, label, *args, **kwargs):
            if label == "UFM: $L=WH$" and self.images:
                _SEEN["ufm"] = self.images[-1].get_array()
            elif label == "Transformer: $L=WH$" and self.images and "ufm" in _SEEN:
                _applied()
                self.images[-1].set_data(_SEEN["ufm"])
                self.images[-1].autoscale()
            return _orig(self, label, *args, **kwargs)


        _axes.Axes.set_title = _mutated
        """,
    ),
    Mutation(
        "geo-curve-late-sample",
        "plot",
        "geo",
        "the transformer's curves of panels (a) and (c) of the training curves drawn one "
        "sample late (each value at the next record epoch)",
        ("geo-training-curves-synthetic",),
        """
        import numpy as _np
        import matplotlib.axes as _axes

        _orig = _axes.Axes.loglog


        def _mutated(self, x, y, *args, **kwargs):
            if kwargs.get("label") == "Transformer":
                _applied()
                y = _np.asarray(y, dtype=float)
                y = _np.concatenate([y[:1], y[:-1]])
            return _orig(self, x, y, *args, **kwargs)


        _axes.Axes.loglog = _mutated
        """,
    ),
    Mutation(
        "geo-curve-log-axis",
        "plot",
        "geo",
        "panel (d) of the training curves (the structural correlation, a linear quantity) "
        "drawn on a log y axis",
        ("geo-training-curves-synthetic",),
        """
        import matplotlib.axes as _axes


        def _mutated(self, *args, **kwargs):
            _applied()
            return self.loglog(*args, **kwargs)


        _axes.Axes.semilogx = _mutated
        """,
    ),
    Mutation(
        "geo-grid-colour-limits-dropped",
        "plot",
        "geo",
        "the images of the geometry grid drawn without their colour limits (each panel "
        "scaled on its own, the cosine maps no longer on [-1, 1])",
        ("geo-geometry-grid-synthetic",),
        DROP_CLIM,
    ),
]
