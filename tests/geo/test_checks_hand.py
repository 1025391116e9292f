r"""The worked example's checks (ntpcore.geo.checks.hand) pass the run and the closed forms
by hand, and fail a wrong :math:`L^{\mathrm{mm}}` (scaled by 1.01, by the solver or by
hand), a wrong :math:`L^{\mathrm{in}}` and a wrong limit; the reduction of the path to two
margins that ``raw-cos-below-one`` compares with gives the value the path solver measured at
the book's parameters."""

from __future__ import annotations

import numpy as np
import pytest

from ntpcore import geo
from ntpcore.figure import claims
from ntpcore.geo.checks import hand
from ntpcore.geo.experiments import HandExampleConfig, hand_data, run_hand_example

P_HIGH = 2.0 / 3.0


def _forms(p: float = P_HIGH) -> dict[str, np.ndarray | float]:
    """The closed forms of the book's derivation, typed as the notebook types them."""
    a = 0.5 * np.log(p / (1 - p))
    u_hat = np.array([1.0, 1.0, -2.0]) / np.sqrt(6)
    v_hat = np.array([1.0, 1.0, -1.0]) / np.sqrt(3)
    return {
        "L_mm": np.array([[1, 1, -1], [1, 1, -1], [-2, -2, 2]]) / 3,
        "G0": np.outer([1, 1, -2], [1, 1, -1]) / np.sqrt(18),
        "L_in": a * np.outer([1, -1, 0], [1, -1, 0]),
        "W_mm": 2**0.25 * u_hat[:, None],
        "H_mm": 2**0.25 * v_hat[None, :],
        "gap_limit": np.sqrt(2 * np.log(p / (1 - p))),
    }


@pytest.fixture()
def ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path))
    return claims.Ledger("geo-hand-example", "quick", defer=True)


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("NTP_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    try:
        yield run_hand_example(HandExampleConfig(log10_lam_min=-5.0, n_lambdas=9))
    finally:
        mp.undo()


def _status(ledger: claims.Ledger) -> dict[str, str]:
    return {c.id.split(":", 1)[1]: c.status for c in ledger.claims}


def test_the_checks_pass_the_run_and_the_closed_forms(ledger, path) -> None:
    f = _forms()
    S = hand_data(P_HIGH) > 0
    L_mm = geo.nuclear_svm(S)
    W_mm, H_mm = geo.mm_embeddings(L_mm)
    hand.check_lmm(ledger, S, L_mm, f["L_mm"], f["G0"])
    hand.check_closed_forms(
        ledger, geo.finite_logits(hand_data(P_HIGH)), W_mm, H_mm, f["L_in"], f["W_mm"], f["H_mm"]
    )
    hand.check_collapse(ledger, path, f["gap_limit"])
    hand.check_path_limits(ledger, path, f["L_mm"], f["L_in"])
    st = _status(ledger)
    assert not ledger.failed(), [c.line() for c in ledger.failed()]
    assert st["raw-cos-below-one"] == "pass"
    assert len(st) == 15


@pytest.mark.parametrize("which", ["solver", "hand"])
def test_a_wrong_lmm_fails(ledger, which) -> None:
    f = _forms()
    S = hand_data(P_HIGH) > 0
    L_mm, L_hand = geo.nuclear_svm(S), f["L_mm"]
    if which == "solver":
        hand.check_lmm(ledger, S, 1.01 * L_mm, L_hand, f["G0"])
        failed = {"lmm-closed-form", "nuclear-norm"}
    else:
        hand.check_lmm(ledger, S, L_mm, 1.01 * L_hand, f["G0"])
        failed = {"lmm-closed-form", "lmm-cvxpy", "certificate-gap"}
    assert {k for k, v in _status(ledger).items() if v == "fail"} == failed


def test_a_wrong_certificate_fails(ledger) -> None:
    f = _forms()
    S = hand_data(P_HIGH) > 0
    hand.check_lmm(ledger, S, geo.nuclear_svm(S), f["L_mm"], 1.01 * f["G0"])
    st = _status(ledger)
    assert st["certificate-feasible"] == st["certificate-gap"] == "fail"


def test_wrong_closed_forms_fail(ledger) -> None:
    f = _forms()
    L_mm = geo.nuclear_svm(hand_data(P_HIGH) > 0)
    W_mm, H_mm = geo.mm_embeddings(L_mm)
    L_in = geo.finite_logits(hand_data(P_HIGH))
    hand.check_closed_forms(ledger, L_in, W_mm, H_mm, 1.01 * f["L_in"], f["W_mm"], 1.01 * f["H_mm"])
    assert set(_status(ledger).values()) == {"fail"}


def test_the_path_checks_fail_a_wrong_finite_part_and_a_wrong_limit(ledger, path) -> None:
    f = _forms()
    hand.check_collapse(ledger, path, 1.001 * f["gap_limit"])
    hand.check_path_limits(ledger, path, f["L_mm"], 1.001 * f["L_in"])
    st = _status(ledger)
    assert st["gap-limit"] == st["finite-part"] == "fail"
    assert st["collapse-exact"] == st["direction-decreasing"] == "pass"


def test_a_path_that_is_not_collapsed_fails(ledger, path) -> None:
    """Contexts 1 and 2 moved apart in the max-margin coordinate: the collapse fails."""
    broken = dict(path)
    contexts = np.array(path["contexts"], copy=True)
    contexts[:, 1, 1] *= 1.01
    broken["contexts"] = contexts
    hand.check_collapse(ledger, broken, _forms()["gap_limit"])
    assert _status(ledger)["collapse-exact"] == "fail"


def test_the_two_margin_reduction_gives_the_measured_gap() -> None:
    # 1 - cos(h_1, h_2) measured by the path solver at p = 2/3, lambda = 1e-9 (before the
    # book's path stopped at 1e-8, where every floating-point configuration certifies it)
    assert hand.two_margin_gap(P_HIGH, 1e-9) == pytest.approx(0.0737968, rel=1e-6)
    # and it moves with lambda: the check compares with the reduction at the run's own lambda
    assert hand.two_margin_gap(P_HIGH, 1e-8) != pytest.approx(0.0737968, rel=1e-3)
