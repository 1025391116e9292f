"""The automaton playground answers every input a user can type: a state it can draw, or a
one-line reason (issue: empty TPGs and out-of-range ids used to raise inside the widget)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from ntpcore.att import experiments as att
from ntpcore.att import toy_dataset
from ntpcore.att.plots import draw_automaton

FAST = {"n_steps": 3, "lr": 0.01, "init_seed": 0}


def _vocab(dataset: str) -> int:
    if dataset.startswith("random-"):
        return 6  # random cyclic sets of the playground: K = 6
    return toy_dataset(dataset).E.shape[0]


@pytest.mark.parametrize("dataset", att.PLAYGROUND_DATASETS)
def test_every_last_token_gets_an_answer_that_draws(dataset):
    K = _vocab(dataset)
    for k in range(K):
        others = [t for t in range(K) if t != k][:2]
        text = ", ".join(map(str, [*others, k]))
        state, message = att.playground_answer(dataset, text, **FAST)
        assert state is not None, message
        assert int(state["k"]) == k
        # the composition is a distribution supported on the retrieved tokens
        comp = state["composition"]
        assert np.isclose(comp.sum(), 1.0) and set(np.flatnonzero(comp)) <= set(state["retrieved"])
        n_figs = len(plt.get_fignums())
        fig, axes = plt.subplots(1, 2)
        draw_automaton(axes[0], axes[1], state)
        plt.close(fig)
        assert len(plt.get_fignums()) == n_figs
        trained_on_k = bool(np.any(state["tokens"][:, -1] == k))
        assert trained_on_k or "no training sequence ends in token" in message


@pytest.mark.parametrize(
    ("dataset", "text", "words"),
    [
        ("cyclic", "0, 1, 4, 3", "outside the vocabulary 0..2"),
        ("conceptual", "7", "outside the vocabulary 0..5"),
        ("cyclic", "-1 2", "outside the vocabulary"),
        ("cyclic", "", "empty"),
        ("cyclic", " , ", "empty"),
        ("cyclic", "0, a, 2", "not a token id"),
        ("nonexistent", "0 1", "unknown toy"),
        ("random-x", "0 1", "random-SEED"),
    ],
)
def test_invalid_inputs_get_a_one_line_reason(dataset, text, words):
    state, reason = att.playground_answer(dataset, text, **FAST)
    assert state is None
    assert words in reason and "\n" not in reason


def test_parse_sequence_reads_commas_and_spaces():
    assert att.parse_sequence("0, 1 4,3") == (0, 1, 4, 3)
