"""The geometry part's worked example (ntpcore.geo.experiments.hand): its closed forms, and
the path's two-dimensional embeddings in which the subspace collapse is exact."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore import geo
from ntpcore.errors import DataError
from ntpcore.geo.experiments import HandExampleConfig, hand_data, run_hand_example


def test_the_closed_forms_by_hand_are_the_solvers_answers():
    P = hand_data(2 / 3)
    S = P > 0
    L_mm = geo.nuclear_svm(S)
    assert np.allclose(L_mm, np.array([[1, 1, -1], [1, 1, -1], [-2, -2, 2]]) / 3, atol=1e-6)
    assert geo.nuclear_norm(L_mm) == pytest.approx(np.sqrt(2), abs=1e-6)
    a = 0.5 * np.log(2)
    assert np.allclose(geo.finite_logits(P), a * np.outer([1, -1, 0], [1, -1, 0]), atol=1e-12)
    assert geo.polar_certificate(S)["max_off"] == pytest.approx(-1 / np.sqrt(18), abs=1e-12)


def test_the_path_has_rank_two_and_collapses_exactly_in_the_max_margin_direction(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path))
    res = run_hand_example(HandExampleConfig(log10_lam_min=-5.0, n_lambdas=5))
    assert np.max(res["sigma_third"] / res["sigma"].max(axis=1)) < 1e-6
    contexts, words = res["contexts"], res["words"]
    # contexts 1 and 2 (and words 1 and 2): the same max-margin coordinate, opposite
    # in-support ones, to the accuracy the path certifies (its optimality conditions to
    # 1e-5, relative; at lambda = 1e-5 the in-support coordinates agreed to 2e-6 on an AMD
    # EPYC of family 26, to below 1e-6 on family 25); the logits are the inner products of
    # the two coordinates
    tol = 1e-5
    assert np.allclose(contexts[:, 0, 1], contexts[:, 1, 1], rtol=tol, atol=0)
    assert np.allclose(contexts[:, 0, 0], -contexts[:, 1, 0], rtol=tol, atol=0)
    assert np.allclose(np.einsum("kzc,kjc->kzj", words, contexts), res["L"], atol=1e-8)
    # the in-support coordinates settle at +-sqrt(a), a = log(p/(1-p))/2
    assert contexts[-1, 0, 0] == pytest.approx(np.sqrt(0.5 * np.log(2)), rel=1e-3)


@pytest.mark.parametrize("p", [0.5, 1.0, 0.3])
def test_the_example_needs_a_probability_above_one_half(p):
    with pytest.raises(DataError, match="p_high"):
        hand_data(p)
