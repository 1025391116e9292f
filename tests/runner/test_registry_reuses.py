"""The registry's ``reuses`` is true and complete for the trained models of the geometry
figures: a figure names another in ``reuses`` exactly when it reads a training run (same
configuration, hence the same cache key) that the other figure computes."""

from __future__ import annotations

import pytest

from ntpcore.figure import from_params
from ntpcore.geo.experiments import training as ex
from ntpcore.runner import registry

REG = registry.load_registry()


def training_runs(entry: registry.FigureEntry, profile: str) -> set[ex.RunConfig]:
    """The training runs a figure's notebook asks for, from its parameters in ``profile``
    (built as the notebook builds them: :func:`ntpcore.figure.from_params`)."""
    specs = registry.parse_parameters(entry.notebook_path)
    params = {k: s.default for k, s in specs.items()} | entry.overrides(profile)
    if "model" in params:
        return {from_params(ex.ModelConfig, params).run()}
    if "models" in params:
        cfg = from_params(ex.ModelsConfig, params)
        return {cfg.run(m) for m in cfg.models}
    return set()


@pytest.mark.parametrize("profile", ["paper", "quick"])
def test_reuses_names_the_figure_that_trains_each_shared_model(profile):
    runs = {fid: training_runs(e, profile) for fid, e in REG.items()}
    trained = {fid for fid, r in runs.items() if r}
    assert {"geo-trained-logits-text", "geo-training-curves-text"} <= trained
    needers: dict[ex.RunConfig, set[str]] = {}
    for fid, rs in runs.items():
        for r in rs:
            needers.setdefault(r, set()).add(fid)
    shared = {r: f for r, f in needers.items() if len(f) > 1}
    assert shared, "the geometry figures share trained models"
    for run, figs in shared.items():
        producers = [f for f in figs if not REG[f].reuses]
        assert len(producers) == 1, (run.data.dataset, run.trainer.model, sorted(figs))
        for f in figs - set(producers):
            assert producers[0] in REG[f].reuses, (f, run.data.dataset, run.trainer.model)
    for fid, e in REG.items():
        for other in e.reuses:  # every named figure trains a model this one reads
            assert runs[fid] & runs[other], (fid, other)
