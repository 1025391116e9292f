r"""The automaton playground (key ``att``): a reader's sequence on a toy or random dataset,
the SCC the automaton retrieves, its composition and the trained model's output, with the
text the notebook shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ntpcore.att.automaton import (
    automaton_predict,
    build_automaton,
    model_output,
    total_variation,
)
from ntpcore.att.data import TOYS, AttDataset, sample_dataset, toy_dataset
from ntpcore.att.descent import run_descent
from ntpcore.att.dynamics import make_problem
from ntpcore.att.experiments.trials import trial_rngs
from ntpcore.errors import DataError, NTPError

__all__ = [
    "PLAYGROUND_DATASETS",
    "PlaygroundConfig",
    "automaton_state",
    "describe_playground",
    "model_output_batch",
    "parse_sequence",
    "playground_answer",
    "playground_state",
]


def model_output_batch(Ws, E, sequence) -> np.ndarray:
    """f_W(X) (n_models, K) of several trained weight matrices on one sequence."""
    return np.array([model_output(W, E, [sequence])[0] for W in Ws])


def automaton_state(
    data: AttDataset, test_sequence, n_steps, lr, init_seed, n_inits: int = 1
) -> dict:
    E, tok, lab = data.E, data.tokens, data.labels
    K, d = E.shape
    auto = build_automaton(E, tok, lab)
    out = automaton_predict(auto, test_sequence)  # validates the sequence first
    k = out.k
    st = auto.structures[k]
    rngs = trial_rngs(init_seed, n_inits)
    W0 = np.array([r.uniform(-1.0, 1.0, (d, d)) / np.sqrt(d) for r in rngs])
    P = make_problem(
        np.repeat(E[None], n_inits, 0),
        np.repeat(tok[None], n_inits, 0),
        np.repeat(lab[None], n_inits, 0),
    )
    _, tr = run_descent(W0, P, eta=lr, n_steps=n_steps, record=[n_steps])
    W_all = tr[-1]  # (n_inits, d, d)
    auto_train = np.array([automaton_predict(auto, s).composition for s in tok])
    train_tv = max(
        0.5 * np.abs(model_output(W, E, tok) - auto_train).sum(axis=1).max() for W in W_all
    )
    return {
        "E": E,
        "tokens": tok,
        "labels": lab,
        "k": k,
        "W_svm": auto.W_svm,
        "W_fin": auto.W_fin,
        "W": W_all[0],
        "W_all": W_all,
        "W0_all": W0,  # the initialisations (for the checks: ntpcore.att.checks)
        "svm_scores": E @ auto.W_svm @ E[k],
        "fin_scores": E @ auto.W_fin @ E[k],
        "scc": st.scc,
        "level": st.level,
        "touched": st.touched,
        "reach": st.reach,
        "test_sequence": np.array(test_sequence),
        "retrieved": np.array(out.retrieved),
        "composition": out.composition,
        "model": model_output(W_all[0], E, [test_sequence])[0],
        "models": model_output_batch(W_all, E, test_sequence),
        "status": out.status,
        "notes": " | ".join(out.notes),
        "margin": out.margin,
        "train_tv_max": float(train_tv),
    }


def playground_state(
    dataset: str, test_sequence, *, n_steps: int = 3000, lr: float = 0.01, init_seed: int = 0
) -> dict:
    """State shown by the automaton playground (uncached; cheap).

    ``dataset``: a toy name of :data:`ntpcore.att.data.TOYS`, or ``"random-<seed>"`` for a random
    cyclic dataset (n=6, T=4, K=6, d=8).
    """
    if dataset.startswith("random-"):
        rng = np.random.default_rng(int(dataset.split("-", 1)[1]))
        data = sample_dataset(rng, 6, 4, 6, 8, graph="cyclic")
    else:
        data = toy_dataset(dataset)
    return automaton_state(data, tuple(int(t) for t in test_sequence), n_steps, lr, init_seed)


@dataclass(frozen=True)
class PlaygroundConfig:
    """The playground's static rendering: a dataset, a decided and an undecided test
    sequence, and the normalized-GD training of the model compared with the automaton."""

    dataset: str = "random-5"  # a toy name of TOYS, or random-SEED (a random cyclic set)
    decided_sequence: tuple[int, ...] = (4, 3, 5, 2)  # a sequence the theory decides
    undecided_sequence: tuple[int, ...] = (0, 1, 4, 3)  # a tie between incomparable SCCs
    n_steps: int = 3000  # normalized-GD steps of the trained model
    lr: float = 0.01  # normalized-GD step size
    init_seed: int = 0  # seed of the model's random initialisation

    def training(self) -> dict:
        """The keyword arguments of :func:`playground_state` and :func:`playground_answer`."""
        return {"n_steps": self.n_steps, "lr": self.lr, "init_seed": self.init_seed}


#: Datasets offered by the playground: the exact toys and ten random cyclic sets.
PLAYGROUND_DATASETS = tuple(sorted(TOYS)) + tuple(f"random-{s}" for s in range(10))


def parse_sequence(text: str) -> tuple[int, ...]:
    """Token ids typed as text (commas and/or spaces); DataError with the reason otherwise."""
    parts = str(text).replace(",", " ").split()
    if not parts:
        raise DataError("the sequence is empty: type token ids separated by commas or spaces")
    bad = [p for p in parts if not p.lstrip("-").isdigit()]
    if bad:
        raise DataError(f"{bad[0]!r} is not a token id: type integers separated by commas")
    return tuple(int(p) for p in parts)


def playground_answer(
    dataset: str, text: str, *, n_steps: int = 3000, lr: float = 0.01, init_seed: int = 0
) -> tuple[dict | None, str]:
    """What the playground shows for a dataset name and a typed sequence.

    Returns ``(state, description)`` (:func:`playground_state`, :func:`describe_playground`)
    when the input can be evaluated, and ``(None, reason)`` with a one-line reason otherwise
    (unknown dataset, empty or non-numeric text, token ids outside the vocabulary).
    """
    try:
        if dataset.startswith("random-") and not dataset[7:].isdigit():
            raise DataError(f"dataset {dataset!r}: use random-SEED with an integer SEED")
        seq = parse_sequence(text)
        state = playground_state(dataset, seq, n_steps=n_steps, lr=lr, init_seed=init_seed)
    except NTPError as exc:
        return None, str(exc).splitlines()[0]
    return state, describe_playground(state)


def describe_playground(state: dict) -> str:
    """Text summary of a :func:`playground_state`: retrieval status and margin, the W^svm scores
    of the tokens of X, automaton and model outputs, their total variation, and the warnings."""
    seq = state["test_sequence"].tolist()
    lines = [
        f"X = {seq}, last token k = {state['k']}: retrieval {state['status']}, "
        f"retrieved {state['retrieved'].tolist()}, margin {state['margin']:.3g}",
        f"  W_svm scores: { {int(j): round(float(state['svm_scores'][j]), 3) for j in set(seq)} }",
        f"  automaton: {np.round(state['composition'], 3).tolist()}",
        f"  model    : {np.round(state['model'], 3).tolist()}",
        f"  TV(model, automaton) = {total_variation(state['model'], state['composition']):.3f}",
    ]
    lines += [f"  warning: {note}" for note in filter(None, state["notes"].split(" | "))]
    return "\n".join(lines)
