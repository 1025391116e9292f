"""The checks of the convex side (ntpcore.geo.checks.convex) pass the true objects and fail
wrong ones: a scaled or shrunk L^mm, factors that are not balanced, an uncentred proxy, a
finite part off by a constant; and their supports, read from the raw training pairs, agree
with the data set's."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore.figure import claims
from ntpcore.geo import (
    centered_support,
    finite_logits,
    mm_embeddings,
    solve_nuclear_svm,
)
from ntpcore.geo.checks import convex
from ntpcore.geo.experiments import DataConfig, load_dataset


@pytest.fixture(scope="module")
def synth():
    return load_dataset(DataConfig("synthetic"))


@pytest.fixture()
def ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path))
    return claims.Ledger("geo-support-lmm", "quick")


def _status(ledger):
    return {c.id.split(":", 1)[1]: c.status for c in ledger.claims}


def test_raw_supports_agree_with_the_dataset(synth) -> None:
    raw = convex.raw_supports(synth)
    assert np.array_equal(raw.S, synth.S)
    assert np.array_equal(raw.counts, synth.counts)
    assert [list(g) for g in raw.groups] == [g.tolist() for g in synth.support_groups]
    assert len(raw.pairs) == 2


def test_lmm_checks_pass_the_solution_and_fail_scaled_ones(synth, ledger) -> None:
    sol = solve_nuclear_svm(synth.S)
    convex.check_lmm(ledger, synth, sol.L, sol.G)
    convex.check_lmm(ledger, synth, sol.L, prefix="resolved-")
    convex.check_lmm(ledger, synth, 1.01 * sol.L, sol.G, prefix="up-")
    convex.check_lmm(ledger, synth, 0.99 * sol.L, sol.G, prefix="down-")
    st = _status(ledger)
    assert st["lmm-feasible"] == st["lmm-certified"] == "pass"
    assert st["resolved-lmm-certified"] == "pass"
    assert st["up-lmm-feasible"] == "pass" and st["up-lmm-certified"] == "fail"
    assert st["down-lmm-feasible"] == "fail" and st["down-lmm-certified"] == "fail"


def test_a_certificate_is_made_feasible_before_it_bounds(synth) -> None:
    """A certificate scaled up (op norm 2) bounds no more than the true one."""
    sol = solve_nuclear_svm(synth.S)
    raw = convex.raw_supports(synth)
    assert convex.certified_dual(2.0 * sol.G, raw) == pytest.approx(
        convex.certified_dual(sol.G, raw), rel=1e-9
    )
    assert convex.certified_dual(sol.G, raw) <= sol.objective * (1 + 1e-12)


def test_factor_proxy_and_finite_part_checks(synth, ledger) -> None:
    L = solve_nuclear_svm(synth.S).L
    W, H = mm_embeddings(L)
    convex.check_factors(ledger, L, W, H)
    convex.check_factors(ledger, L, 2.0 * W, 0.5 * H, prefix="unbalanced-")
    convex.check_proxy(ledger, synth, centered_support(synth.S))
    convex.check_proxy(ledger, synth, synth.S.astype(float), prefix="raw-")
    L_in = finite_logits(synth.P)
    convex.check_finite_part(ledger, synth, L_in)
    convex.check_finite_part(ledger, synth, L_in + 0.01 * synth.S, prefix="shifted-")
    st = _status(ledger)
    assert st["factors-balanced"] == st["proxy-centred"] == st["finite-part"] == "pass"
    assert st["unbalanced-factors-balanced"] == "fail"
    assert st["raw-proxy-centred"] == "fail"
    assert st["shifted-finite-part"] == "fail"


def test_the_raw_supports_do_not_read_the_support_matrix(synth, monkeypatch) -> None:
    """A support matrix that disagrees with the pairs (one entry flipped) does not change the
    raw supports, so the checks compare the solution with the data, not with itself."""
    from ntpcore.geo.data import ContextDataset

    true_S = synth.S.copy()
    flipped = true_S.copy()
    flipped[np.flatnonzero(flipped[:, 0])[0], 0] = False
    monkeypatch.setattr(ContextDataset, "S", property(lambda self: flipped))
    raw = convex.raw_supports(synth)
    assert np.array_equal(raw.S, true_S)
    L = solve_nuclear_svm(synth.S).L  # the solution of the flipped support
    assert convex.svm_violation(L, raw) > 0.5
