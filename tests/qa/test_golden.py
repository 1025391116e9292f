"""Golden outputs compared within measured tolerances (tools.qa.golden).

A printed key number that moves beyond its tolerance fails the check, one that moves within
the spread measured across floating-point configurations passes, and words, statuses and
counts must match exactly.  ``make golden`` says what moved and refuses a move beyond
tolerance without a reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from ntpcore.core import paths
from tools.qa import golden, golden_update, printed

CLAIM = (
    "PASS lin-x:ratio: Adam ends with a smaller CE than GD (ratio) [lin, App. A.2, Fig. 5]: "
    "ours {v} (≤ 1)"
)


def _executed(path, lines: list[str]):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    text = "\n".join(lines) + "\n"
    # prints the lines as a notebook does: a claim line as the ledger displays it
    check = nbformat.v4.new_code_cell(
        "from IPython.display import display\n"
        "from ntpcore.figure.claims import line_markdown\n"
        f"for line in {lines!r}:\n"
        "    md = line_markdown(line)\n"
        "    if md is None:\n"
        "        print(line)\n"
        "    else:\n"
        "        display({'text/plain': line, 'text/markdown': md}, raw=True)"
    )
    check.metadata["tags"] = [golden.TAG]
    check.outputs = golden.outputs(text)
    nb.cells = [nbformat.v4.new_code_cell("import math"), check]
    nbformat.write(nb, path)
    return path


# ------------------------------------------------------------------------ tokenizing
def test_a_claim_line_measures_only_its_value_and_a_known_deviation():
    line = printed.tokenize(
        CLAIM.format(v="0.0175") + " [known deviation (band in [0.0, 0.25]): up to 7.2% here]"
    )
    assert line.claim == "lin-x:ratio"
    assert [(n.text, n.measured) for n in line.numbers] == [
        ("5", False),  # the source's figure number
        ("0.0175", True),  # our value
        ("1", False),  # the bound
        ("0.0", False),  # the band of the known deviation
        ("0.25", False),
        ("7.2", True),  # the run's number quoted by the deviation
    ]
    assert line.numbers[1].floor == pytest.approx(1e-4)  # one unit in the last digit


def test_a_claim_value_printed_without_trailing_zeros_keeps_three_significant_digits():
    (value,) = [n for n in printed.tokenize(CLAIM.format(v="11")).numbers if n.measured]
    assert value.floor == pytest.approx(0.1)


def test_counts_are_exact_and_floats_are_measured_in_other_lines():
    line = printed.tokenize("k =  4: S~ = L_mm in  0/3 trials, median excess 7e-03, v2-s1")
    assert [(n.text, n.measured) for n in line.numbers] == [
        ("4", False),
        ("0", False),
        ("3", False),
        ("7e-03", True),
    ]
    assert line.words == "k =  #: S~ = L_mm in  #/# trials, median excess #, v2-s1"


# ------------------------------------------------------------------------ comparing
def _golden_cell(text: str) -> list[str]:
    return [text + "\n"]


def test_a_number_within_its_tolerance_passes_and_beyond_it_fails():
    gold = _golden_cell(CLAIM.format(v="⟦0.0175 ± 0.0007⟧"))
    assert golden.compare("lin-x", gold, _golden_cell(CLAIM.format(v="0.0173"))).ok
    out = golden.compare("lin-x", gold, _golden_cell(CLAIM.format(v="0.0183")))
    assert not out.ok
    (diff,) = out.differences
    assert diff.kind == "number" and "0.0175 -> 0.0183" in diff.describe()
    assert "+4.57%" in diff.describe() and "± 0.0007" in diff.describe()


def test_a_rounding_flip_in_the_last_digit_is_within_the_floor():
    line = CLAIM.format(v="0.0176")
    r = printed.tokenize(line)
    tol = printed.suggest_tolerance(r.numbers[1], None)
    gold = _golden_cell(CLAIM.format(v=f"⟦0.0175 ± {printed.fmt_tol(tol)}⟧"))
    assert golden.compare("lin-x", gold, _golden_cell(line)).ok


def test_words_statuses_and_counts_are_compared_exactly():
    gold = _golden_cell(CLAIM.format(v="⟦0.0175 ± 0.0007⟧"))
    failed = CLAIM.format(v="0.0175").replace("PASS", "FAIL", 1)
    assert golden.compare("lin-x", gold, _golden_cell(failed)).differences[0].kind == "text"
    bound = CLAIM.format(v="0.0175").replace("(≤ 1)", "(≤ 2)")
    assert golden.compare("lin-x", gold, _golden_cell(bound)).differences[0].kind == "exact"
    count = ["k =  1: S~ = L_mm in  3/3 trials\n"]
    assert golden.compare("g", count, ["k =  1: S~ = L_mm in  2/3 trials\n"]).differences
    assert golden.compare("g", count, ["k =  1: S~ = L_mm in  3/3 trials\n", "more\n"]).differences


def test_the_real_goldens_catch_a_move_beyond_tolerance_and_pass_one_within_the_spread():
    """On the committed golden file of Fig. 5: every measured number moved by its measured
    spread (tolerance / SAFETY) passes; one moved by 1.5 x its tolerance fails."""
    texts = golden.read_golden("lin-ngd-adam")
    lines = texts[0].splitlines()
    marked = [
        (j, g) for j, x in enumerate(lines) for g in [printed.parse_golden_line(x)] if g.numbers
    ]
    measured = [(j, i, n) for j, g in marked for i, n in enumerate(g.numbers) if n.tol]
    assert measured, "the golden file of lin-ngd-adam has measured numbers"

    def moved(j0: int, i0: int, factor: float) -> list[str]:
        out = []
        for j, x in enumerate(lines):
            nums = printed.parse_golden_line(x).numbers
            it = iter(range(len(nums)))

            def sub(m, j=j, nums=nums, it=it):
                i = next(it)
                n = nums[i]
                if (j, i) == (j0, i0):
                    return repr(n.value + factor * n.tol)
                return n.text

            out.append(printed.NUMBER.sub(sub, printed.plain(x)))
        return ["\n".join(out) + "\n"]

    for j, i, n in measured:
        assert golden.compare("lin-ngd-adam", texts, moved(j, i, 1 / printed.SAFETY)).ok
        bad = golden.compare("lin-ngd-adam", texts, moved(j, i, 1.5))
        assert [d.kind for d in bad.differences] == ["number"], (j, i, n)


# ------------------------------------------------------------------------ updating
def test_update_refuses_a_move_beyond_tolerance_without_a_reason(tmp_path, capsys):
    executed, gdir = tmp_path / "executed", tmp_path / "golden"
    executed.mkdir()
    gdir.mkdir()
    _executed(executed / "lin-x.ipynb", [CLAIM.format(v="0.0175"), "final 0.961"])
    with pytest.raises(printed.GoldenError, match="new figure"):
        golden_update.update(executed, gdir)
    golden_update.update(executed, gdir, reason="first golden")
    text = (gdir / "lin-x.txt").read_text()
    assert "ours ⟦0.0175 ± 0.0001⟧ (≤ 1)" in text and "final ⟦0.961 ± 0.001⟧" in text
    # within tolerance: written without a reason, and said
    _executed(executed / "lin-x.ipynb", [CLAIM.format(v="0.0176"), "final 0.961"])
    res = golden_update.update(executed, gdir)
    assert res.moved and "0.0175 -> 0.0176" in res.moved[0] and not res.changes
    # beyond: refused, nothing written, the move named
    _executed(executed / "lin-x.ipynb", [CLAIM.format(v="0.0190"), "final 0.961"])
    before = (gdir / "lin-x.txt").read_text()
    with pytest.raises(printed.GoldenError, match="1 change"):
        golden_update.update(executed, gdir)
    assert (gdir / "lin-x.txt").read_text() == before
    golden_update.update(executed, gdir, reason="Adam's step size changed")
    log = (gdir / golden_update.CHANGES).read_text()
    assert "Reason: Adam's step size changed" in log and "0.0176 -> 0.019" in log


def test_make_golden_exits_non_zero_and_names_what_moved(tmp_path, capsys):
    executed, gdir = tmp_path / "executed", tmp_path / "golden"
    executed.mkdir()
    gdir.mkdir()
    _executed(executed / "lin-x.ipynb", [CLAIM.format(v="0.0175")])
    golden_update.update(executed, gdir, reason="first")
    _executed(executed / "lin-x.ipynb", [CLAIM.format(v="0.0200")])
    assert golden_update.main(["--golden-dir", str(gdir), "update", str(executed)]) == 1
    out = capsys.readouterr()
    assert "BEYOND lin-x, cell 1, line 1 (lin-x:ratio): 0.0175 -> 0.0200" in out.out
    assert "make golden REASON=" in out.err


def _goldens_of(tmp_path, lines: list[str]):
    """Golden files written from one executed notebook ``lin-x`` printing ``lines``."""
    executed, gdir = tmp_path / "executed", tmp_path / "golden"
    executed.mkdir()
    gdir.mkdir()
    _executed(executed / "lin-x.ipynb", lines)
    golden_update.update(executed, gdir, reason="first")
    return gdir


def test_tolerances_come_from_a_reproducibility_report(tmp_path):
    gdir = _goldens_of(tmp_path, [CLAIM.format(v="0.0175"), "k = 3, final 0.961"])
    report = tmp_path / "report.json"
    report.write_text(
        '{"printed": {"lin-x/1/1/1": {"spread": 0.0002}, "lin-x/1/2/0": {"spread": 1.0},'
        ' "lin-x/1/2/1": {"spread": 0.0}}}'
    )
    changed = golden_update.apply_tolerances(report, gdir, reason="measured")
    text = (gdir / "lin-x.txt").read_text()
    assert "ours ⟦0.0175 ± 0.0006⟧" in text  # 3 x 2e-4
    assert "k = ⟦3 ± 3⟧, final ⟦0.961 ± 0.001⟧" in text  # a count that moved gets one too
    assert len(changed) == 2


def test_a_second_machine_only_widens_the_tolerances_unless_told_to_replace(tmp_path):
    gdir = _goldens_of(tmp_path, [CLAIM.format(v="0.0175"), "final 0.961"])
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text('{"printed": {"lin-x/1/1/1": {"spread": 0.0002}}}')
    golden_update.apply_tolerances(first, gdir, reason="machine A")
    # machine B: this number is bitwise equal across its configurations, the other one moves
    second.write_text(
        '{"printed": {"lin-x/1/1/1": {"spread": 0.0}, "lin-x/1/2/0": {"spread": 0.001}}}'
    )
    changed = golden_update.apply_tolerances(second, gdir, reason="machine B")
    text = (gdir / "lin-x.txt").read_text()
    assert "ours ⟦0.0175 ± 0.0006⟧" in text  # machine A's spread is kept
    assert "final ⟦0.961 ± 0.003⟧" in text  # machine B's is added
    assert changed == ["lin-x, cell 1, line 2: 0.961 ± 0.001 -> ± 0.003"]
    golden_update.apply_tolerances(second, gdir, reason="recomputed", replace=True)
    assert "ours ⟦0.0175 ± 0.0001⟧" in (gdir / "lin-x.txt").read_text()  # its floor


def test_a_spread_measured_before_the_words_of_its_line_changed_is_not_applied(tmp_path):
    gdir = _goldens_of(tmp_path, ["falls by at least 3 times, ratio 0.0175"])
    # measured when the line read "falls, ratio 0.0175": its number 0 was the ratio, which
    # is number 1 now (the "3" comes first)
    report = tmp_path / "report.json"
    report.write_text(
        '{"printed": {"lin-x/1/1/0": {"spread": 0.0002, "words": "falls, ratio #"},'
        ' "lin-x/1/1/1": {"spread": 0.0, "words": "falls, ratio #"}}}'
    )
    changed = golden_update.apply_tolerances(report, gdir, reason="stale")
    assert changed == ["lin-x, cell 1, line 1: skipped, its words changed"]
    assert "least 3 times, ratio ⟦0.0175 ± 0.0001⟧" in (gdir / "lin-x.txt").read_text()
    report.write_text(
        '{"printed": {"lin-x/1/1/1": {"spread": 0.0002, '
        '"words": "falls by at least # times, ratio #"}}}'
    )
    golden_update.apply_tolerances(report, gdir, reason="current")
    assert "least 3 times, ratio ⟦0.0175 ± 0.0006⟧" in (gdir / "lin-x.txt").read_text()


# ------------------------------------------------------------------------ nbval
def _nbval(path, replay=None) -> subprocess.CompletedProcess:
    """nbval on ``path``: executing every cell in a kernel, or, with ``replay`` (a folder of
    executed copies), answering each cell from its executed copy (``make test``'s way)."""
    replaying = ["-p", "tools.qa.nbval_replay", "--nbval-replay", str(replay)] if replay else []
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-o",
            "addopts=",
            "-p",
            "no:cacheprovider",
            *replaying,
            "--nbval-lax",
            "--nbval-current-env",
            "--nbval-sanitize-with",
            str(paths.ROOT / "tests" / "nbval_numbers.cfg"),
            "-q",
            str(path),
        ],
        cwd=paths.ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.long
@pytest.mark.parametrize("replay", [False, True], ids=["executing", "replaying"])
def test_nbval_compares_the_words_and_leaves_the_numbers_to_the_golden_check(tmp_path, replay):
    """The same verdicts whether nbval executes the cells in a kernel or replays the outputs
    of the executed copies (what ``make test`` does, so that no notebook runs twice)."""
    executed, gdir = tmp_path / "executed", tmp_path / "golden"
    executed.mkdir()
    _executed(executed / "lin-x.ipynb", [CLAIM.format(v="0.0175")])
    golden_update.update(executed, gdir, reason="first")
    # a number that moved: nbval passes (masked), the golden check fails
    _executed(executed / "lin-x.ipynb", [CLAIM.format(v="0.0200")])
    golden.inject_all(executed, tmp_path / "moved", gdir)
    assert _nbval(tmp_path / "moved", executed if replay else None).returncode == 0
    assert not all(c.ok for c in golden.check(executed, gdir))
    # a word that changed: nbval fails, naming the cell and showing the line
    _executed(executed / "lin-x.ipynb", [CLAIM.format(v="0.0175").replace("PASS", "FAIL", 1)])
    golden.inject_all(executed, tmp_path / "words", gdir)
    words = _nbval(tmp_path / "words", executed if replay else None)
    assert words.returncode != 0 and "FAIL lin-x:ratio" in words.stdout
    assert "Cell 1" in words.stdout


def test_a_replayed_cell_must_be_the_executed_copys_cell(tmp_path):
    """Replaying answers a cell only from the same cell of the executed copy: a reference
    whose code differs is an error, never a comparison of unrelated outputs."""
    executed, gdir = tmp_path / "executed", tmp_path / "golden"
    executed.mkdir()
    _executed(executed / "lin-x.ipynb", [CLAIM.format(v="0.0175")])
    golden_update.update(executed, gdir, reason="first")
    golden.inject_all(executed, tmp_path / "ref", gdir)
    ref = nbformat.read(tmp_path / "ref" / "lin-x.ipynb", as_version=4)
    ref.cells[0].source = "import cmath"
    nbformat.write(ref, tmp_path / "ref" / "lin-x.ipynb")
    out = _nbval(tmp_path / "ref", executed)
    assert out.returncode != 0 and "not the executed copy's next cell" in out.stdout


KERNEL_CELL = r"""
from ntpcore.figure import claims
led = claims.Ledger("lin-x", "quick")
print("k = 4: two lines before,")
print("median excess 7e-03")
led.check("ratio", r"Adam ends with a smaller CE than GD: $\|W_T\|_*$ ratio", 0.0175,
          claims.at_most(1), source="[lin, App. A.2, Fig. 5]", paper="< 1")
led.check("in", r"$\cos(W_k, W^{\rm mm}) \in [0, 1]$", 1.02, claims.between(0.9, 1.1),
          source="[lin, Thm. 2]", reference=1.0, reference_source="an independent solver")
print("between *claims*")
led.check("dev", "norm ratio", 2.0, claims.at_most(1), source="[geo, Fig. 2(d)]",
          known_deviation=r"on the *Wikipedia* sets $\|S\|_*$ is larger", band=(0, 3))
led.check("ok", "a check", True, claims.holds(), source="[lin, Def. 3]", sanity=True)
print("end")
"""


def _normalized(outputs):
    return [
        {k: v for k, v in dict(o).items() if k in ("output_type", "name", "text", "data")}
        for o in outputs
    ]


def _executed_tagged_cell(source: str) -> nbformat.NotebookNode:
    """A one-cell notebook, its cell tagged for the goldens, executed in a new kernel."""
    import nbclient

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.metadata["kernelspec"]["language"] = "python"
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = [golden.TAG]
    nb.cells = [cell]
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=120).execute()
    return nb


def test_injected_outputs_are_those_a_kernel_gives(tmp_path, monkeypatch, capsys):
    """The golden text of a tagged cell, injected for nbval, gives back the very outputs its
    kernel run gave (claim lines displayed with their Markdown, the prints between them as
    streams), and the plain text of those outputs is what the ledger prints outside IPython."""
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path / "kernel"))
    nb = _executed_tagged_cell(KERNEL_CELL)
    kernel = nb.cells[0].outputs
    assert [o.output_type for o in kernel] == [
        "stream",
        "display_data",
        "display_data",
        "stream",
        "display_data",
        "display_data",
        "stream",
    ]
    (text,) = golden.extract(nb)
    assert _normalized(golden.outputs(text)) == _normalized(kernel)
    injected = golden.inject(nb, [text], "lin-x").cells[0].outputs
    assert _normalized(injected) == _normalized(kernel)
    # outside IPython the ledger prints the same text (what the golden files hold)
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path / "plain"))
    capsys.readouterr()
    exec(KERNEL_CELL, {})
    assert capsys.readouterr().out == text


REPORT_CELL = r"""
from ntpcore.figure import claims
led = claims.Ledger("lin-x", "quick", defer=True)
print("computed")
led.check("ratio", r"Adam ends with a smaller CE than GD: $\|W_T\|_*$ ratio", 0.0175,
          claims.at_most(1), source="[lin, App. A.2, Fig. 5]", paper="< 1")
led.check("dev", "norm ratio", 2.0, claims.at_most(1), source="[geo, Fig. 2(d)]",
          known_deviation=r"on the *Wikipedia* sets $\|S\|_*$ is larger", band=(0, 3))
led.check("later", "a paper-only claim", 1.0, claims.at_most(2), source="[lin, Thm. 2]",
          profiles=("paper",))
led.report()
"""


def test_a_report_injected_is_what_the_kernel_displayed(tmp_path, monkeypatch, capsys):
    """A ledger that defers shows its claims in one report (a summary line, then the claim
    lines; collapsed HTML): the golden text gives back that very output, and outside IPython
    the report prints the same text."""
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path / "kernel"))
    nb = _executed_tagged_cell(REPORT_CELL)
    kernel = nb.cells[0].outputs
    assert [o.output_type for o in kernel] == ["stream", "display_data"]
    assert (
        kernel[1]
        .data["text/plain"]
        .startswith(
            "Checks of this figure: 1 hold, 1 do not, 1 not evaluated in the quick profile\n"
        )
    )
    assert "<details" in kernel[1].data["text/html"] and "open" in kernel[1].data["text/html"]
    (text,) = golden.extract(nb)
    assert _normalized(golden.outputs(text)) == _normalized(kernel)
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path / "plain"))
    capsys.readouterr()
    exec(REPORT_CELL, {})
    assert capsys.readouterr().out == text


def test_a_figure_without_golden_outputs_is_an_error(tmp_path):
    executed = tmp_path / "executed"
    executed.mkdir()
    _executed(executed / "lin-x.ipynb", ["key 0.5"])
    with pytest.raises(printed.GoldenError, match="no golden outputs for lin-x"):
        golden.inject_all(executed, tmp_path / "out", tmp_path / "empty")


def test_inject_refuses_a_golden_file_that_does_not_fit(tmp_path):
    nb = nbformat.read(_executed(tmp_path / "lin-x.ipynb", ["0.5"]), as_version=4)
    with pytest.raises(printed.GoldenError, match="1 tagged cells but 2 golden outputs"):
        golden.inject(nb, ["a\n", "b\n"], "lin-x")


def test_render_and_parse_round_trip():
    texts = ["PASS a: ...\nkey ⟦1.23 ± 0.01⟧\n", "", "line\n"]
    assert golden.parse(golden.render("lin-x", texts)) == texts


# ------------------------------------------------------------------ the paper profile's claims
def _skipped() -> dict[str, list[str]]:
    """Per registered figure, the claims its quick golden file says SKIP (not evaluated)."""
    from ntpcore.runner.registry import load_registry

    return {
        fig: sorted(k for k, tag in golden.claim_tags(fig).items() if tag == "SKIP")
        for fig in load_registry()
    }


def test_every_claim_the_quick_profile_leaves_out_held_in_a_recorded_paper_run():
    """CI runs the quick profile only: a claim it leaves out (paper-only, or at a step the
    quick run does not reach) lands only with the record of a complete paper run where it
    held (tests/golden/paper-claims.json, `golden_update paper`), and the record names no
    claim that is gone."""
    record = json.loads(golden_update.PAPER_RECORD.read_text(encoding="utf-8"))["figures"]
    for fig, skipped in _skipped().items():
        held = record.get(fig, {}).get("claims", {})
        assert set(skipped) <= set(held), (
            f"{fig}: never held in a recorded paper run: {sorted(set(skipped) - set(held))}; "
            "run the paper profile, then `python -m tools.qa.golden_update paper book/figures`"
        )
        assert set(held) <= set(skipped), f"{fig}: recorded claims gone: {set(held) - set(skipped)}"
        assert set(held.values()) <= {"pass", "known deviation"}
        assert record[fig]["commit"] and record[fig]["dirty"] is False


def test_the_paper_record_refuses_an_incomplete_run_another_profile_and_a_failed_claim(tmp_path):
    def sidecars(**change) -> Path:
        folder = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        for fig, skipped in _skipped().items():
            claims = [{"id": f"{fig}:{k}", "status": "pass"} for k in skipped]
            data = {"profile": "paper", "claims": claims, "git": {"commit": "c0", "dirty": False}}
            data = change.get(fig, lambda d: d)(data)
            if data is not None:
                (folder / f"{fig}.json").write_text(json.dumps(data))
        return folder

    out = tmp_path / "golden"
    out.mkdir()
    for path in golden.GOLDEN_DIR.glob("*.txt"):
        (out / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    record = golden_update.record_paper_run(sidecars(), out / "paper-claims.json")
    fig = next(f for f, s in _skipped().items() if s)
    assert set(record["figures"][fig]["claims"]) == set(_skipped()[fig])

    def deviate(data, blocking=False):
        data["claims"][0].update(status="fail", known_deviation="why", blocking=blocking)
        return data

    record = golden_update.record_paper_run(sidecars(**{fig: deviate}), out / "paper-claims.json")
    assert "known deviation" in record["figures"][fig]["claims"].values()
    bad = {
        "a failed claim": lambda d: {**d, "claims": [{**d["claims"][0], "status": "fail"}]},
        "outside its band": lambda d: deviate(d, blocking=True),
        "not evaluated": lambda d: {**d, "claims": [{**d["claims"][0], "status": "not-evaluated"}]},
        "another profile": lambda d: {**d, "profile": "quick"},
        "a missing figure": lambda d: None,
        "a missing claim": lambda d: {**d, "claims": []},
    }
    for what, change in bad.items():
        with pytest.raises(printed.GoldenError, match=fig):
            golden_update.record_paper_run(sidecars(**{fig: change}), out / "paper-claims.json")
        assert json.loads((out / "paper-claims.json").read_text())["figures"], what
