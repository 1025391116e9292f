r"""The exact toy of the conceptual figure of the self-attention paper (key ``att``): its
TPG, SCCs, priority levels, the retrieved SCC and the composition inside it, against trained
models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ntpcore.att.automaton import (
    automaton_predict,
    build_automaton,
)
from ntpcore.att.data import toy_dataset
from ntpcore.att.experiments.playground import automaton_state, model_output_batch
from ntpcore.core.cache import cached

__all__ = ["ConceptualConfig", "run_conceptual"]


# ============================================================================================
# conceptual figure and the automaton playground (book att-prop-automaton)
# ============================================================================================
@dataclass(frozen=True)
class ConceptualConfig:
    """Exact toy of the conceptual figure: TPG, SCCs, priority levels, retrieval, composition."""

    toy: str = "conceptual"  # a key of ntpcore.att.data.TOYS
    test_sequence: tuple = (0, 1, 4, 5)  # a test sequence (last entry = last token)
    undecided_sequence: tuple = (4, 5)  # a sequence whose retrieval the theory leaves open
    n_inits: int = 4  # random initialisations of the trained models
    n_steps: int = 6000  # NGD steps of the trained models
    lr: float = 0.01  # NGD step size
    init_seed: int = 0  # base seed of the initialisations


@cached
def run_conceptual(cfg: ConceptualConfig) -> dict:
    """W^svm, W^fin, SCCs and levels of the toy; the automaton on two test inputs next to
    models trained from ``n_inits`` random initialisations (one batch).

    The initialisations are not a sweep of :func:`ntpcore.core.sweep.map_runs`: they
    train as one batched numpy program, in which a step of all models costs about what one
    model's step costs alone.
    """
    data = toy_dataset(cfg.toy)
    out = automaton_state(
        data, cfg.test_sequence, cfg.n_steps, cfg.lr, cfg.init_seed, n_inits=cfg.n_inits
    )
    auto = build_automaton(data.E, data.tokens, data.labels)
    und = automaton_predict(auto, cfg.undecided_sequence)
    out.update(
        {
            "undecided_sequence": np.array(cfg.undecided_sequence),
            "undecided_composition": und.composition,
            "undecided_status": und.status,
            "undecided_notes": " | ".join(und.notes),
            "undecided_models": model_output_batch(out["W_all"], data.E, cfg.undecided_sequence),
        }
    )
    return out
