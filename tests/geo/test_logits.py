"""Read-outs of the support pattern of logits (ntpcore.geo.logits), on hand-made inputs."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore import geo as g

pytestmark = pytest.mark.theory

# 4 words, 4 contexts; contexts 0 and 1 share the support {0, 1}, 2 and 3 differ
S = np.array(
    [
        [1, 1, 0, 1],
        [1, 1, 1, 0],
        [0, 0, 1, 0],
        [0, 0, 0, 1],
    ],
    dtype=bool,
)


def test_support_on_top_counts_contexts_with_support_words_on_top() -> None:
    # S~ and L_mm satisfy the NTP-SVM margins: every support word above every other word
    assert g.support_on_top(g.centered_support(S), S) == 1.0
    assert g.support_on_top(g.nuclear_svm(S), S) == 1.0
    # reversed order: no context has its support on top
    assert g.support_on_top(-g.centered_support(S), S) == 0.0
    # one context broken by hand: word 3 (off the support of context 0) above the rest
    L = g.centered_support(S).copy()
    L[3, 0] = 5.0
    assert g.support_on_top(L, S) == pytest.approx(3 / 4)


def test_support_on_top_is_invariant_to_column_shifts_and_positive_scaling() -> None:
    rng = np.random.default_rng(0)
    L = rng.standard_normal(S.shape)
    shifted = 3.0 * L + rng.standard_normal(S.shape[1])[None, :]
    assert g.support_on_top(shifted, S) == g.support_on_top(L, S)


def _brute_same_vs_other(L: np.ndarray, S: np.ndarray) -> tuple[float, float]:
    m = S.shape[1]
    C = np.corrcoef(L.T)
    same = [C[a, b] for a in range(m) for b in range(m) if a != b and (S[:, a] == S[:, b]).all()]
    other = [C[a, b] for a in range(m) for b in range(m) if not (S[:, a] == S[:, b]).all()]
    return (float(np.mean(same)) if same else np.nan), float(np.mean(other))


def test_same_vs_other_matches_pairwise_definition() -> None:
    rng = np.random.default_rng(1)
    L = rng.standard_normal(S.shape)
    np.testing.assert_allclose(g.same_vs_other(L, S), _brute_same_vs_other(L, S), rtol=1e-12)


def test_same_vs_other_on_the_max_margin_pattern() -> None:
    # identical supports give identical columns of S~ and L_mm: correlation exactly 1,
    # above the correlation of columns with different supports
    for L in (g.centered_support(S), g.nuclear_svm(S)):
        same, other = g.same_vs_other(L, S)
        assert same == pytest.approx(1.0) and other < same
    # Pearson correlation ignores positive scaling and shifts of each column
    L = np.random.default_rng(2).standard_normal(S.shape)
    affine = L * np.array([1.0, 2.0, 0.5, 3.0]) + np.array([1.0, -2.0, 0.0, 4.0])
    np.testing.assert_allclose(g.same_vs_other(affine, S), g.same_vs_other(L, S), rtol=1e-12)


def test_same_vs_other_without_same_support_pairs_is_nan() -> None:
    S3 = S[:, 1:]  # contexts 1, 2, 3: all supports distinct
    same, other = g.same_vs_other(g.centered_support(S3), S3)
    assert np.isnan(same) and -1.0 <= other <= 1.0
