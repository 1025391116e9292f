"""The claims ledger: a claim that stops holding fails the run, names itself, and is kept
for reading; every claim lands in the sidecar with both numbers."""

from __future__ import annotations

import json
import sys

import pytest
from nbutil import write_notebook

from ntpcore.figure import claims
from ntpcore.runner import planning, registry, staging

PARAMS = 'fig_id = "lin-claimtest"  # key\nprofile = "quick"  # [paper|quick] profile\n'


@pytest.fixture
def figdir(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path / "figures"))
    return tmp_path / "figures"


def test_comparisons_hold_exactly_where_they_should():
    assert claims.at_most(1.0).holds(1.0) and not claims.at_most(1.0).holds(1.0 + 1e-12)
    assert claims.at_least(0.95).holds(0.95) and not claims.at_least(0.95).holds(0.9499)
    assert claims.between(1, 2).holds(1.5) and not claims.between(1, 2).holds(2.5)
    near = claims.close_to(0.8811, atol=5e-3)
    assert near.holds(0.884) and not near.holds(0.887)
    assert not claims.at_most(1.0).holds(float("nan"))
    with pytest.raises(claims.ClaimError):
        claims.close_to(1.0)
    with pytest.raises(claims.ClaimError):
        claims.between(2, 1)


def test_ledger_records_pass_fail_and_not_evaluated(figdir, capsys):
    ledger = claims.Ledger("lin-claimtest", "quick")
    ledger.check("small", "a small error", 1e-12, claims.at_most(1e-10), source="[lin, eq. (4)]")
    ledger.check(
        "corr",
        "correlation near one",
        0.9,
        claims.at_least(0.95),
        source="[att, Fig. 3]",
        paper=0.986,
        paper_source="[att, Sec. 5]",
    )
    ledger.check(
        "long",
        "needs long runs",
        0.0,
        claims.at_least(1.0),
        source="[geo, Sec. 4]",
        profiles=("paper",),
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("PASS lin-claimtest:small") and "ours 1.00e-12" in lines[0]
    assert lines[1].startswith("FAIL lin-claimtest:corr") and "paper 0.986" in lines[1]
    assert lines[2].startswith("SKIP lin-claimtest:long")
    assert [c.status for c in ledger.claims] == ["pass", "fail", "not-evaluated"]
    assert ledger.failed()[0].measured == 0.9
    on_disk = claims.load_claims(figdir / "lin-claimtest.claims.json")
    assert [c["status"] for c in on_disk] == ["pass", "fail", "not-evaluated"]
    assert on_disk[1]["paper"] == 0.986 and on_disk[1]["measured"] == 0.9


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"claim_id": "Bad_Id"}, "kebab-case"),
        ({"source": "somewhere"}, "must name the paper"),
        ({"profiles": ("fast",)}, "profiles"),
        ({"reference": 0.5}, "reference_source"),
        ({"measured": [1.0, 2.0]}, "number or a bool"),
    ],
)
def test_malformed_claims_are_rejected(figdir, kwargs, match):
    args = {"claim_id": "ok", "statement": "s", "measured": 1.0, "expect": claims.at_most(2)}
    args.update({k: v for k, v in kwargs.items() if k in args})
    opts = {"source": "[lin, Thm. 2]"}
    opts.update({k: v for k, v in kwargs.items() if k not in args})
    with pytest.raises(claims.ClaimError, match=match):
        claims.Ledger("lin-claimtest", "quick").check(*args.values(), **opts)


def test_a_claim_checked_twice_or_nan_is_caught(figdir):
    ledger = claims.Ledger("lin-claimtest", "paper")
    assert ledger.check("x", "s", float("nan"), claims.at_most(1), source="[lin, Thm. 1]") is None
    assert ledger.claims[-1].status == "fail"
    with pytest.raises(claims.ClaimError, match="twice"):
        ledger.check("x", "s", 0.0, claims.at_most(1), source="[lin, Thm. 1]")


BODY = """\
from matplotlib import pyplot as plt
from ntpcore.figure import claims
from ntpcore.figure import provenance
ledger = claims.Ledger(fig_id, profile)
ledger.check("holds", "one is small", 1e-12, claims.at_most(1e-10), source="[lin, eq. (4)]")
ledger.check("breaks", "W* matches the log-odds", {value}, claims.at_most(1e-10),
             source="[lin, Def. 1]", paper=0.0, paper_source="[lin, Sec. 2]")
fig = plt.figure()
provenance.savefig(fig, fig_id, {{}}, profile=profile, claims=ledger)
"""


def _run(tmp_path, monkeypatch, value: str):
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path / "figures"))
    monkeypatch.setenv("NTP_EXECUTED_DIR", str(tmp_path / "executed"))
    monkeypatch.setattr(staging, "FAILED_DIR", tmp_path / "failed")
    nb = write_notebook(tmp_path / "lin_claimtest.ipynb", PARAMS, BODY.format(value=value))
    entry = registry.FigureEntry("lin-claimtest", "lin", "-", "t", str(nb), ())
    job = planning.Job(entry, "quick", {"fig_id": "lin-claimtest", "profile": "quick"})
    return staging.run_job(job, progress=False)


def test_runner_fails_a_figure_whose_claim_does_not_hold(tmp_path, monkeypatch):
    outcome = _run(tmp_path, monkeypatch, "0.05")
    assert not outcome.ok
    assert "lin-claimtest:breaks" in outcome.message
    assert "W* matches the log-odds" in outcome.message
    assert "expected ≤ 1.00e-10, measured 0.05" in outcome.message
    # nothing published as if it were good ...
    assert not (tmp_path / "figures" / "lin-claimtest.png").exists()
    # ... and every claim kept for reading, in the sidecar
    sidecar = json.loads((tmp_path / "failed" / "lin-claimtest" / "lin-claimtest.json").read_text())
    assert [c["status"] for c in sidecar["claims"]] == ["pass", "fail"]
    assert sidecar["claims"][1]["paper"] == 0.0 and sidecar["claims"][1]["measured"] == 0.05
    assert (tmp_path / "failed" / "lin-claimtest.ipynb").exists()


def test_runner_publishes_a_figure_whose_claims_hold(tmp_path, monkeypatch):
    outcome = _run(tmp_path, monkeypatch, "0.0")
    assert outcome.ok, outcome.message
    assert outcome.claims_summary() == "2 claims: 2 hold"
    sidecar = json.loads((tmp_path / "figures" / "lin-claimtest.json").read_text())
    assert [c["status"] for c in sidecar["claims"]] == ["pass", "pass"]
    assert not (tmp_path / "figures" / "lin-claimtest.claims.json").exists()


def test_a_stated_deviation_is_shown_but_does_not_fail_the_run(tmp_path, monkeypatch):
    body = BODY.replace(
        'paper=0.0, paper_source="[lin, Sec. 2]")',
        'paper=0.0, paper_source="[lin, Sec. 2]",\n'
        '             known_deviation="our toy draw differs from the paper\'s", band=(0.0, 0.1))',
    )
    monkeypatch.setattr(sys.modules[__name__], "BODY", body)
    outcome = _run(tmp_path, monkeypatch, "0.05")
    assert outcome.ok, outcome.message
    sidecar = json.loads((tmp_path / "figures" / "lin-claimtest.json").read_text())
    broken = sidecar["claims"][1]
    assert broken["status"] == "fail" and broken["known_deviation"].startswith("our toy")
    assert broken["band"] == "in [0.0, 0.1]" and broken["blocking"] is False


def test_a_known_deviation_outside_its_band_fails_the_run(tmp_path, monkeypatch, capsys):
    # issue 21: a collapse (or a blow-up) is not the known deviation
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path))
    ledger = claims.Ledger("geo-bandtest", "quick")
    for k, value in enumerate((0.85, 0.0, 0.95)):  # in the band, collapsed, the claim holds
        ledger.check(
            f"sc-{k}", "structural correlation", value, claims.at_least(0.9),
            source="[geo, Fig. 2(d)]", known_deviation="the word geometry lags", band=(0.7, 0.9),
        )  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert [c.id for c in ledger.failed()] == ["geo-bandtest:sc-1"]
    assert lines[0].endswith("[known deviation (band in [0.7, 0.9]): the word geometry lags]")
    assert "[known deviation (outside the band in [0.7, 0.9]): " in lines[1]
    assert lines[2].startswith("PASS") and "known deviation" not in lines[2]
    assert [claims.is_blocking(r) for r in ledger.records()] == [False, True, False]
    # records written before bands existed keep their meaning
    assert not claims.is_blocking({"status": "fail", "known_deviation": "why"})
    assert claims.is_blocking({"status": "fail"})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"known_deviation": "why"}, "needs band="),
        ({"band": (0.0, 1.0)}, "band= belongs to a known deviation"),
        ({"known_deviation": "why", "band": (1.0, 0.0)}, "empty interval"),
    ],
)
def test_a_band_goes_with_a_known_deviation(tmp_path, monkeypatch, kwargs, message):
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path))
    ledger = claims.Ledger("geo-bandtest", "quick")
    with pytest.raises(claims.ClaimError, match=message):
        ledger.check("x", "x", 0.5, claims.at_least(0.9), source="[geo, Fig. 2]", **kwargs)
    with pytest.raises(claims.ClaimError, match="yes/no claim cannot be a known deviation"):
        ledger.check(
            "y", "y", False, claims.holds(), source="[geo, Fig. 2]",
            known_deviation="why", band=(0.0, 1.0),
        )  # fmt: skip


def test_a_sanity_check_fails_the_run_but_is_not_counted_as_a_claim(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path))
    ledger = claims.Ledger("lin-claimtest", "quick")
    ledger.check(
        "diag", "unit diagonal", 0.0, claims.at_most(1e-12), source="[geo, Fig. 2]", sanity=True
    )
    ledger.check("corr", "correlation", 0.99, claims.at_least(0.9), source="[geo, Fig. 2]")
    ledger.check(
        "sym", "symmetric", 1.0, claims.at_most(1e-12), source="[geo, Fig. 2]", sanity=True
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("CHECK lin-claimtest:diag") and lines[2].startswith("FAIL")
    assert [c.id for c in ledger.failed()] == ["lin-claimtest:sym"]  # still fails the run
    assert ledger.summary() == (
        "1 claims: 1 hold, 0 do not, 0 not evaluated in the quick profile; 2 sanity check(s)"
    )
    with pytest.raises(claims.ClaimError, match="sanity check cannot be a known deviation"):
        ledger.check(
            "x",
            "x",
            1.0,
            claims.at_most(0.0),
            source="[geo, Fig. 2]",
            sanity=True,
            known_deviation="why",
        )


def test_a_claim_line_renders_its_statement_as_markdown_and_escapes_the_rest():
    line = (
        r"FAIL geo-x:excess: $\|\tilde S\|_*$ is *close* to $L^{mm}$ [geo, Fig. 2(d)]: ours "
        r"0.0728 (in [0.9, 1.1]); paper <1%; reference a_b (the *authors'* logs) "
        r"[known deviation (band in [0.0, 0.25]): on the *Wikipedia* sets "
        r"$\|\tilde S\|_*$ is larger]"
    )
    md = claims.line_markdown(line)
    assert md == (
        r"**FAIL** `geo-x:excess`: $\|\tilde S\|_*$ is *close* to $L^{mm}$ \[geo, Fig. 2(d)\]: "
        r"ours 0.0728 (in \[0.9, 1.1\]); paper \<1%; reference a\_b (the \*authors'\* logs) "
        r"\[known deviation (band in \[0.0, 0.25\]): on the *Wikipedia* sets "
        r"$\|\tilde S\|_*$ is larger\]"
    )
    # the statement's brackets do not end it: the source is the bracket before ": ours"
    inner = r"PASS lin-x:c: $\cos \in [0, 1]$ [lin, Thm. 2]: ours True (holds)"
    assert claims.line_markdown(inner).startswith(r"**PASS** `lin-x:c`: $\cos \in [0, 1]$ \[lin")
    assert claims.line_markdown("k = 4: rank 3 [lin]: ours") is None
    assert claims.line_markdown("rank = 4") is None


def test_a_claim_whose_line_cannot_be_read_back_is_refused(figdir):
    ledger = claims.Ledger("lin-claimtest", "quick")
    with pytest.raises(claims.ClaimError, match="cannot be read back"):
        ledger.check("a", "x", 1.0, claims.at_most(2), source="[lin, Thm. 2 [b]]")
    with pytest.raises(claims.ClaimError, match="cannot be read back"):
        ledger.check("b", "two\nlines", 1.0, claims.at_most(2), source="[lin, Thm. 2]")
    assert ledger.claims == []


def test_every_golden_claim_line_has_its_markdown():
    from tools.qa import golden, printed

    lines = [
        printed.plain(x)
        for path in sorted(golden.GOLDEN_DIR.glob("*.txt"))
        for x in path.read_text(encoding="utf-8").splitlines()
        if x.split(" ", 1)[0] in ("PASS", "FAIL", "SKIP", "CHECK")
    ]
    assert len(lines) > 300
    assert all(claims.line_markdown(x) for x in lines)


def test_the_ledger_saves_its_figure_with_the_configurations_seeds(tmp_path, monkeypatch):
    """``ledger.savefig(fig, cfg)``: the ledger's fig_id and profile, its claims, and the
    seeds of the configuration (its parts' included), none of them typed again."""
    import dataclasses

    from matplotlib import pyplot as plt

    from ntpcore.figure import provenance

    @dataclasses.dataclass(frozen=True)
    class Data:
        data_seed: int = 3

    @dataclasses.dataclass(frozen=True)
    class Cfg:
        data: Data = Data()
        init_seed: int = 5
        lr: float = 0.5

    assert provenance.seeds_of(Cfg()) == {"data_seed": 3, "init_seed": 5}
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path))
    ledger = claims.Ledger("lin-x", "quick")
    ledger.check("small", "a small number", 0.1, claims.at_most(1.0), source="[lin, Thm. 1]")
    side = ledger.savefig(plt.figure(), Cfg(), metrics={"m": 1.0})
    assert (side["fig_id"], side["profile"]) == ("lin-x", "quick")
    assert side["seeds"] == {"data_seed": 3, "init_seed": 5}
    assert [c["id"] for c in side["claims"]] == ["lin-x:small"]
    assert ledger.savefig(plt.figure(), Cfg(), seeds=[0, 1])["seeds"] == [0, 1]
