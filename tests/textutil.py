"""A small English text for the tests of a reader's own corpus: random sentences of a tiny
grammar (subject, verb, object, end mark), paragraphs separated by blank lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np

SUBJECTS = ["the cat", "the dog", "a bird", "my friend", "the old man", "a child", "the teacher"]
VERBS = ["sat on", "looked at", "walked to", "ran past", "waited near", "slept under"]
OBJECTS = ["the mat", "the door", "a tree", "the river", "the house", "a car", "the garden"]
ENDS = [".", ",", " and then", " !"]


def story(n_paragraphs: int, seed: int = 0) -> str:
    """``n_paragraphs`` paragraphs of 3 to 7 sentences each."""
    rng = np.random.default_rng(seed)
    paras = []
    for _ in range(n_paragraphs):
        sents = [
            f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
            f"{rng.choice(ENDS)}"
            for _ in range(int(rng.integers(3, 8)))
        ]
        paras.append(" ".join(sents))
    return "\n\n".join(paras) + "\n"


def write_story(path: Path, n_paragraphs: int, seed: int = 0) -> Path:
    path.write_text(story(n_paragraphs, seed), encoding="utf-8")
    return path
