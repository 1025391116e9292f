"""The book's {ntpval} role and Claims tables read numbers from the runs' sidecars."""

from __future__ import annotations

import importlib
import importlib.util
import json

import pytest

from ntpcore.core import paths

_spec = importlib.util.spec_from_file_location(
    "ntpclaims", paths.BOOK_DIR / "_ext" / "ntpclaims.py"
)
ntpclaims = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ntpclaims)

SIDE = {
    "profile": "quick",
    "metrics": {"adam_ce_excess": 6.2e-5, "nested": {"corr": 0.98765}},
    "claims": [
        {"id": "lin-x:aligned", "status": "pass", "measured": 0.991},
        {"id": "lin-x:long", "status": "not-evaluated", "measured": 0.2},
    ],
}


@pytest.mark.parametrize(
    ("value", "spec", "text"),
    [
        (6.2e-5, ".1e", "6.2·10⁻⁵"),
        (0.98765, ".3g", "0.988"),
        (12, "d", "12"),
        (True, ".3g", "True"),
    ],
)
def test_numbers_are_formatted_as_the_book_prints_them(value, spec, text):
    assert ntpclaims.format_value(value, spec) == text


def test_lookup_reads_metrics_nested_metrics_and_evaluated_claims():
    assert ntpclaims._lookup(SIDE, "adam_ce_excess") == 6.2e-5
    assert ntpclaims._lookup(SIDE, "nested.corr") == 0.98765
    assert ntpclaims._lookup(SIDE, "claim:aligned") == 0.991
    # a parameter of a configuration made of parts is found in its part
    side = {"params": {"models": ["ufm"], "protocol": {"n_steps": 150}}}
    assert ntpclaims._lookup(side, "param:n_steps") == 150
    with pytest.raises(KeyError, match="no parameter 'n_epochs'"):
        ntpclaims._lookup(side, "param:n_epochs")
    with pytest.raises(KeyError, match="not evaluated"):
        ntpclaims._lookup(SIDE, "claim:long")
    with pytest.raises(KeyError, match="no metric"):
        ntpclaims._lookup(SIDE, "missing")


def test_the_summary_line_counts_every_status(tmp_path, monkeypatch):
    claims = [
        {"status": "pass", "profile": "paper"},
        {"status": "fail", "profile": "paper"},
        {"status": "not-evaluated", "profile": "paper"},
        {"status": "pass", "profile": "paper"},
    ]
    line = ntpclaims.summary_line(claims)
    assert "4 claims: 2 hold, 1 do not, 1 not evaluated" in line


def test_a_claim_is_counted_by_kind():
    from ntpcore.figure.claims import claim_kind

    assert claim_kind({"source": "[lin, Thm. 2]"}) == "theorem"
    assert claim_kind({"source": "[att, Conjecture 1]"}) == "theorem"
    assert claim_kind({"source": "[lin, Thm. 2]", "paper": 0.9}) == "paper number"
    assert claim_kind({"source": "[lin, App. A.2, Fig. 4]"}) == "figure statement"
    assert claim_kind({"source": "[lin, Thm. 2]", "sanity": True}) == "sanity"


def test_all_claims_collects_the_registered_figures_sidecars(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path))
    fig_id = "lin-toy-solutions"
    (tmp_path / f"{fig_id}.json").write_text(
        json.dumps({"profile": "quick", "claims": [{"id": f"{fig_id}:a", "status": "pass"}]})
    )
    found = ntpclaims.all_claims()
    assert [c["id"] for c in found] == [f"{fig_id}:a"]
    assert found[0]["paper_key"] == "lin"


def test_the_summary_line_counts_the_claims_that_print_the_papers_number():
    claims = [
        {"status": "pass", "profile": "quick", "paper_key": "lin", "paper": 1.445},
        {"status": "pass", "profile": "quick", "paper_key": "lin"},
        {"status": "pass", "profile": "quick", "paper_key": "att", "paper": "≈0.98 (plot)"},
        {"status": "not-evaluated", "profile": "quick", "paper_key": "att", "paper": 0.99},
        # a sanity check never counts, with or without a number
        {"status": "pass", "profile": "quick", "paper_key": "geo", "paper": 1.0, "sanity": True},
        {"status": "pass", "profile": "quick", "paper_key": "geo"},
    ]
    line = ntpclaims.summary_line(claims, per_paper=True)
    assert "3 of the 5 claims print the paper's own number" in line
    # kinds: the paper's numbers, then what the source names (none here names a theorem)
    assert "0 predictions of a theorem, lemma or conjecture, 3 numbers the paper prints" in line
    assert "(lin: 1 of 2; geo: 0 of 1; att: 2 of 2)" in line
    assert "(lin:" not in ntpclaims.summary_line(claims)


def test_the_statements_table_lists_each_statement_with_the_status_of_its_claims():
    fig_id = "lin-gd-direction"
    entry = ntpclaims.load_registry()[fig_id]
    first = entry.claims[0]
    claims = [
        {"id": f"{fig_id}:{first.checked_by[0]}", "status": "pass"},
        {
            "id": f"{fig_id}:{entry.claims[1].checked_by[0]}",
            "status": "not-evaluated",
            "sanity": True,
        },
    ]
    rows = [r for r in ntpclaims.statements_rows("lin", claims) if fig_id in r[0]]
    assert [r[1] for r in rows] == [st.says for st in entry.claims]
    assert rows[0][2].startswith(f"`{first.checked_by[0]}` (holds)")
    assert rows[1][2].startswith(f"`{entry.claims[1].checked_by[0]}` (sanity check, not evaluated)")
    assert "(not run)" in rows[2][2]


def test_a_claims_row_fills_the_columns_the_phone_layout_labels():
    """Five columns: the claim names its figure, ours carries the comparison it must satisfy
    (not for a yes/no claim); on a phone each cell after the claim is labelled with its
    column's name by the stylesheet, which must name the same columns in the same order."""
    import re

    claim = {
        "id": "lin-x:ratio",
        "fig_id": "lin-x",
        "statement": "ratio $\\|W\\|$",
        "source": "[lin, Fig. 5]",
        "expect": "≤ 1",
        "measured": 0.5,
        "status": "pass",
        "paper": None,
    }
    row = ntpclaims.NTPClaims._row(claim, {"lin-x": "book/lin/index"})
    assert len(row) == len(ntpclaims.LEDGER_HEADER) == 5
    # the figure where the book shows it, and its notebook
    assert row[0].endswith(
        "({numref}`Fig. {number} <lin-x>`, {doc}`notebook </book/executed/lin-x>`)"
    )
    # a figure no page shows (the exercises): its notebook only
    assert ntpclaims.NTPClaims._row(claim, {})[0].endswith(
        "(`lin-x`, {doc}`notebook </book/executed/lin-x>`)"
    )
    assert row[3] == "0.5; must be ≤ 1"
    assert ntpclaims.NTPClaims._row({**claim, "expect": "holds", "measured": True})[3] == "True"
    css = (paths.BOOK_DIR / "_static" / "ntp.css").read_text()
    label = r'table\.ntp-ledger td:nth-child\((\d)\)::before \{ content: "(\w+): "'
    labels = re.findall(label, css)
    assert [(int(k), name) for k, name in labels] == [
        (k, name) for k, name in enumerate(ntpclaims.LEDGER_HEADER, 1) if k > 1
    ]


def test_lookup_reads_the_parameters_of_the_run():
    side = {"parameters": {"n_steps": 1500, "m_values": [50, 100, 400]}, "metrics": {}}
    assert ntpclaims._lookup(side, "param:n_steps") == 1500
    with pytest.raises(KeyError, match="no parameter"):
        ntpclaims._lookup(side, "param:lr")


@pytest.mark.parametrize(
    ("value", "spec", "text"),
    [
        ([50, 100, 400], "d", "50, 100, 400"),
        ([50, 100, 400], "range", "50–400"),
        ([7], "range", "7"),
    ],
)
def test_a_list_prints_item_by_item_or_as_its_range(value, spec, text):
    assert ntpclaims.format_value(value, spec) == text


def test_only_a_quick_run_that_the_quick_profile_changes_gets_the_banner():
    """A number of a quick run is marked for the page's banner only where the registry's
    ``quick`` overrides change the figure; a figure whose quick run is its paper run (the
    exercises, the worked example) is not."""
    assert ntpclaims.quick_differs("lin-gd-direction", {"profile": "quick"})
    assert not ntpclaims.quick_differs("lin-gd-direction", {"profile": "paper"})
    assert not ntpclaims.quick_differs("lin-exercises", {"profile": "quick"})


STEPS = [
    "corr, measured | corr_t{} | .2f | corr_final .3f ± corr_final_std .1f | bold",
    "corr, reference | = | 0.01 | 0.87 | 0.98 | 0.99",
]


def _run(n_steps: int) -> dict:
    metrics = {"corr_t0": 0.1, "corr_t500": 0.8, "corr_t1000": 0.9, "corr_t2000": 0.9}
    return {
        "profile": "quick" if n_steps < 4000 else "paper",
        "parameters": {"n_steps": n_steps},
        "metrics": {**metrics, "corr_final": 0.95, "corr_final_std": 0.01},
    }


def test_a_steps_table_has_the_runs_columns():
    """The paper's run has every column; a shorter (quick) run loses the steps it did not
    reach, its last column is headed by its own last step, and the reference numbers at the
    steps it did not reach are given below the table, not beside numbers of another step."""
    options = {"steps": [0, 500, 2000], "final": 4000, "corner": "run"}
    paper = ntpclaims.steps_text("att-x", _run(4000), options, STEPS)
    assert "$\\tau=2000$" in paper and "$\\tau=4000$" in paper
    assert "  - 0.99" in paper and "This run stops" not in paper
    quick = ntpclaims.steps_text("att-x", _run(1500), options, STEPS)
    assert "$\\tau=2000$" not in quick and "$\\tau=1500$" in quick
    assert "  - –" in quick
    assert "values at $\\tau=$ 2000, 4000: corr, reference: 0.98, 0.99." in quick
    assert "0.95" in quick and "**" in quick  # the last step's value, bold


def test_a_steps_table_refuses_a_row_it_cannot_fill():
    options = {"steps": [0, 500], "final": 4000}
    with pytest.raises(ValueError, match="one value per step"):
        ntpclaims.steps_text("att-x", _run(4000), options, ["ref | = | 1 | 2"])
    with pytest.raises(ValueError, match="no metric"):
        ntpclaims.steps_text("att-x", _run(4000), options, ["m | other_t{} | .2f | corr_final .2f"])


def test_the_mutants_score_names_why_each_survivor_survives():
    def outcome(status, equivalent=None, read=None):
        return {
            "status": status,
            "file": "ntpcore/x.py",
            "line": 1,
            "function": "f",
            "before": "a - b",
            "after": "a + b",
            "equivalent": equivalent,
            "read": read,
        }

    report = {
        "commit": "0" * 40,
        "dirty": False,
        "sampled": 4,
        "equivalent": 1,
        "killed": 1,
        "score": 0.5,
        "seed": 0,
        "covered": 10,
        "population": 20,
        "date": "2026-11-28",
        "seconds": 60,
        "survived_unexplained": 1,
        "by_how": {"claim": 1},
        "outcomes": [
            outcome("killed"),
            outcome("survived", equivalent="never read"),
            outcome("survived", read="a printed summary"),
            outcome("survived"),
        ],
    }
    text = ntpclaims.mutants_text(report)
    assert "1/3 killed" in text
    assert "equivalent: never read" in text
    assert "counted as a survivor: a printed summary" in text
    assert "**unexplained**" in text


class _Env:
    docname = "book/page"

    def __init__(self):
        self.dependencies: list[str] = []
        self.temp_data: dict = {}

    def note_dependency(self, path):
        self.dependencies.append(str(path))


class _State:
    def __init__(self):
        self.parsed: list[str] = []

    def nested_parse(self, lines, offset, node):
        self.parsed.append("\n".join(lines))


@pytest.mark.parametrize(
    ("module", "directive", "constant"),
    [
        ("ntpbook", "NTPPerformance", "BENCH_JSON"),
        ("ntpclaims", "NTPMutations", "MUTATIONS_JSON"),
        ("ntpclaims", "NTPMutants", "MUTANTS_JSON"),
        ("ntpmachines", "NTPMachines", "REPORT"),
    ],
)
def test_a_page_of_results_depends_on_its_file_before_it_exists(
    module, directive, constant, tmp_path, monkeypatch
):
    """A page that shows a results file (the benchmarks, the mutation scores, the
    reproducibility report) depends on it also while it is missing: built before `make bench`
    (or `make mutations`, ...) wrote it, the page is rebuilt once it exists, not left with its
    'not run' note until a clean build."""
    import types

    monkeypatch.syspath_prepend(str(paths.BOOK_DIR / "_ext"))
    mod = importlib.import_module(module)
    missing = tmp_path / "results" / "report.json"
    monkeypatch.setattr(mod, constant, missing)
    cls = getattr(mod, directive)
    fake = types.SimpleNamespace(
        env=_Env(), state=_State(), options={}, content_offset=0, get_location=lambda: ""
    )
    fake._parse = types.MethodType(cls._parse, fake) if hasattr(cls, "_parse") else None
    cls.run(fake)
    assert fake.env.dependencies == [str(missing)]
    assert "{note}" in fake.state.parsed[0]  # the page says it was not run
