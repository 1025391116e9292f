"""The reproducible-book pipeline: registry lint, parameter validation, runner, cache,
provenance, and the environment files kept in step."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import tomllib
from pathlib import Path

import nbformat
import numpy as np
import pytest
import yaml
from matplotlib import pyplot as plt
from nbutil import write_notebook

from ntpcore.core import cache, paths
from ntpcore.core.io import write_text_atomic
from ntpcore.errors import ParameterError
from ntpcore.figure import provenance
from ntpcore.runner import planning, registry, staging
from ntpcore.runner import runner as reproduce

ROOT = paths.ROOT
REG = registry.load_registry()


# ----------------------------------------------------------------------------- registry lint


def test_registry_entries_point_at_notebooks_with_matching_fig_id():
    assert REG, "figures.yml is empty"
    defaults: dict[str, set[str]] = {}
    for fig_id, entry in REG.items():
        assert entry.notebook_path.exists(), f"{fig_id}: {entry.notebook} is missing"
        specs = registry.parse_parameters(entry.notebook_path)
        assert {"fig_id", "profile"} <= set(specs), f"{entry.notebook} lacks fig_id/profile"
        defaults.setdefault(entry.notebook, set()).add(fig_id)
        # every override of the registry fits the notebook's parameters cell
        registry.validate_overrides(specs, entry.params, "params", fig_id)
        registry.validate_overrides(specs, entry.quick, "quick", fig_id)
    for nb, ids in defaults.items():
        default_id = registry.parse_parameters(ROOT / nb)["fig_id"].default
        assert default_id in ids, f"{nb}: default fig_id {default_id!r} is not one of {ids}"


def test_every_notebook_is_registered():
    registered = {Path(e.notebook).name for e in REG.values()}
    on_disk = {p.name for p in paths.NOTEBOOK_DIR.glob("*.ipynb")}
    assert on_disk - registered == set(), f"notebooks not in figures.yml: {on_disk - registered}"


def test_notebooks_are_committed_clean_and_follow_the_template():
    for nb_path in sorted(paths.NOTEBOOK_DIR.glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        assert nb.metadata.get("kernelspec", {}).get("name") == "python3", nb_path.name
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs, f"{nb_path.name}: committed with outputs"
                assert cell.execution_count is None, f"{nb_path.name}: execution counts"
        tags = [t for c in nb.cells for t in c.get("metadata", {}).get("tags", [])]
        assert "nbval-check-output" in tags, f"{nb_path.name}: no invariant cell to check"
        assert nb_path.stem.split("_")[0] in registry.PAPERS, nb_path.name
        src = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "os.environ" not in src and "MPLBACKEND" not in src, nb_path.name
        assert re.search(r"\b(provenance|ledger)\.savefig\(", src), f"{nb_path.name}: no savefig"


def test_every_figure_the_book_includes_is_registered():
    pages = list((ROOT / "book").rglob("*.md"))
    used = set()
    for page in pages:
        text = page.read_text()
        used |= set(re.findall(r"```\{ntpfigure\}\s+([\w-]+)", text))
        for path in re.findall(r"figures/([\w-]+)\.png", text):
            used.add(path)
    assert used, "the book includes no figure"
    assert used - set(REG) == set(), (
        f"figures in the book but not in figures.yml: {used - set(REG)}"
    )


def test_registry_rejects_bad_entries(tmp_path):
    bad = tmp_path / "figures.yml"
    bad.write_text(
        "lin-x:\n  paper: geo\n  paper_label: a\n  title: t\n  notebook: n\n"
        "  claims: [{says: c, checked_by: [a]}]\n"
    )
    with pytest.raises(registry.RegistryError, match="does not match"):
        registry.load_registry(bad)
    bad.write_text("Not_An_Id:\n  paper: lin\n")
    with pytest.raises(registry.RegistryError, match="kebab-case"):
        registry.load_registry(bad)
    bad.write_text("lin-x:\n  paper: lin\n")
    with pytest.raises(registry.RegistryError, match="missing keys"):
        registry.load_registry(bad)


STATEMENT_BODY = "lin-x:\n  paper: lin\n  paper_label: a\n  title: t\n  notebook: n\n"


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ("  claim: c\n", "'claim' is now 'claims'"),
        ("  claims: []\n", "non-empty list of statements"),
        ("  claims: c\n", "non-empty list of statements"),
        ("  claims: [c]\n", "must be a mapping"),
        ("  claims: [{says: c}]\n", "missing keys ['checked_by']"),
        ("  claims: [{says: c, checked_by: [a], why: b}]\n", "unknown keys ['why']"),
        ("  claims: [{says: '', checked_by: [a]}]\n", "says must be a sentence"),
        ("  claims: [{says: c, checked_by: []}]\n", "must name at least one ledger claim"),
        ("  claims: [{says: c, checked_by: a}]\n", "must name at least one ledger claim"),
        ("  claims: [{says: c, checked_by: ['lin-x:a']}]\n", "without the figure prefix"),
        ("  claims: [{says: c, checked_by: [a, a]}]\n", "names a claim twice"),
        ("  claims: [{says: c, checked_by: [a]}]\n  shown: ''\n", "shown must be a sentence"),
    ],
)
def test_registry_rejects_bad_statements(tmp_path, claims, message):
    bad = tmp_path / "figures.yml"
    bad.write_text(STATEMENT_BODY + claims)
    with pytest.raises(registry.RegistryError, match=re.escape(message)):
        registry.load_registry(bad)


def test_registry_reads_statements_and_what_is_shown(tmp_path):
    good = tmp_path / "figures.yml"
    good.write_text(
        STATEMENT_BODY
        + '  claims:\n    - says: "One."\n      checked_by: [a, b-c]\n'
        + '    - says: "Two."\n      checked_by: [d]\n  shown: "the median draw."\n'
    )
    entry = registry.load_registry(good)["lin-x"]
    assert entry.claims == (
        registry.Statement("One.", ("a", "b-c")),
        registry.Statement("Two.", ("d",)),
    )
    assert entry.claim_text == "One. Two." and entry.shown == "the median draw."


def test_a_registry_read_again_is_the_files_current_text_and_each_callers_own(tmp_path):
    """The registry is parsed once while its bytes are unchanged: a rewrite of the same size
    (within one tick of the file system's clock) is read anew, and an entry one caller
    changes is not what the next caller gets."""
    good = tmp_path / "figures.yml"
    text = STATEMENT_BODY + '  claims:\n    - says: "One."\n      checked_by: [a]\n'
    good.write_text(text)
    first = registry.load_registry(good)
    first["lin-x"].params["changed"] = 1
    assert "changed" not in registry.load_registry(good)["lin-x"].params
    good.write_text(text.replace('"One."', '"Two."'))  # same size
    assert registry.load_registry(good)["lin-x"].claim_text == "Two."


def _ledger_of(fig_id: str) -> dict[str, str]:
    from tools.qa import golden

    return golden.claim_tags(fig_id)


def test_every_statement_of_the_registry_is_tested_by_claims_of_its_figure():
    # Every sentence a figure claims (figures.yml, claims:) names ledger claims of its own
    # notebook, read from the golden file, which holds every claim line of the quick profile
    # (paper-only claims as SKIP); at least one of them is not a sanity check (CHECK).
    ledger = {fig_id: _ledger_of(fig_id) for fig_id in REG}
    problems = registry.check_claim_map(REG, ledger)
    assert not problems, "\n".join(problems)


def test_the_claim_map_check_finds_untested_statements():
    st = registry.Statement
    entry = registry.FigureEntry(
        "lin-x",
        "lin",
        "-",
        "t",
        "n",
        (
            st("Tested.", ("a",)),
            st("Sanity only.", ("s",)),
            st("Unknown.", ("z", "a")),
            st("Empty.", ()),
        ),
    )
    problems = registry.check_claim_map({"lin-x": entry}, {"lin-x": {"a": "SKIP", "s": "CHECK"}})
    assert len(problems) == 3, problems
    assert "claims[2]" in problems[0] and "sanity checks ['s']" in problems[0]
    assert "claims[3]" in problems[1] and "names ['z']" in problems[1]
    assert "claims[4]" in problems[2] and "names no ledger claim" in problems[2]
    # a sanity check beside a claim that can fail is fine; a figure without a ledger is not
    mixed = dataclasses.replace(entry, claims=(st("Both.", ("s", "a")),))
    assert registry.check_claim_map({"lin-x": mixed}, {"lin-x": {"a": "PASS", "s": "CHECK"}}) == []
    assert "no ledger claims" in registry.check_claim_map({"lin-x": mixed}, {})[0]


def test_golden_claim_tags_read_every_claim_line_with_its_tag(tmp_path):
    from tools.qa import golden, printed

    (tmp_path / "lin-x.txt").write_text(
        "# header\n=== cell 1\nsome printed line 0.5\n"
        "PASS lin-x:a: statement [lin, Thm. 2]: ours ⟦0.9 ± 0.01⟧ (≥ 0.5)\n"
        "SKIP lin-x:b-c: long run [lin, Thm. 2]: ours not evaluated in this profile (≤ 1)\n"
        "=== cell 2\n"
        "CHECK lin-x:s: a cosine matrix [lin, Sec. 2]: ours within (≤ 1.00e-12)\n"
    )
    assert golden.claim_tags("lin-x", tmp_path) == {"a": "PASS", "b-c": "SKIP", "s": "CHECK"}
    (tmp_path / "lin-y.txt").write_text(
        "=== cell 1\nPASS lin-x:a: statement [lin, Thm. 2]: ours 0.9 (≥ 0.5)\n"
    )
    with pytest.raises(printed.GoldenError, match="another figure"):
        golden.claim_tags("lin-y", tmp_path)


@pytest.mark.parametrize(
    ("reuses", "message"),
    [
        ({"lin-a": "lin-b"}, "non-empty list"),
        ({"lin-a": []}, "non-empty list"),
        ({"lin-a": ["lin-z"]}, "unknown figure 'lin-z'"),
        ({"lin-a": ["lin-a"]}, "cannot reuse itself"),
        ({"lin-a": ["lin-b"], "lin-b": ["lin-c"]}, "which itself reuses ['lin-c']"),
    ],
)
def test_registry_rejects_reuses_that_name_no_computing_figure(tmp_path, reuses, message):
    body = (
        "  paper: lin\n  paper_label: a\n  title: t\n  notebook: n\n"
        "  claims: [{says: c, checked_by: [a]}]\n"
    )
    text = "".join(
        f"{fid}:\n{body}" + (f"  reuses: {json.dumps(reuses[fid])}\n" if fid in reuses else "")
        for fid in ("lin-a", "lin-b", "lin-c")
    )
    bad = tmp_path / "figures.yml"
    bad.write_text(text)
    with pytest.raises(registry.RegistryError, match=re.escape(message)):
        registry.load_registry(bad)


# ----------------------------------------------------------------------------- parameters


PARAMS = """\
fig_id = "lin-test"  # key
profile = "paper"  # [paper|quick] profile
step_size = 0.5  # [>0] eta
n_steps = 100  # [1,inf] steps
frac = 0.2  # [0,1] a fraction
flag = False  # a flag
seeds = [0, 1]  # [0,inf] seeds
"""


@pytest.fixture()
def specs(tmp_path):
    return registry.parse_parameters(write_notebook(tmp_path / "lin_test.ipynb", PARAMS))


def test_parameters_cell_is_parsed_with_types_help_and_constraints(specs):
    assert specs["step_size"].default == 0.5 and specs["step_size"].constraint == ">0"
    assert specs["step_size"].help == "eta"
    assert specs["profile"].constraint == "paper|quick"
    assert specs["flag"].constraint is None and specs["flag"].type_name == "bool"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"no_such_parameter": 1}, "unknown parameter 'no_such_parameter'"),
        ({"step_size": -0.1}, "'step_size'.*must be > 0"),
        ({"step_size": "fast"}, "'step_size'.*expected float"),
        ({"n_steps": 1.5}, "'n_steps'.*expected int"),
        ({"n_steps": True}, "'n_steps'.*expected int"),
        ({"frac": 1.5}, r"'frac'.*\[0, 1\]"),
        ({"profile": "fast"}, "'profile'.*one of"),
        ({"flag": 1}, "'flag'.*expected bool"),
        ({"seeds": [0, -1]}, r"'seeds'.*\[0, inf\]"),
        ({"step_size": float("nan")}, "'step_size'.*finite"),
    ],
)
def test_bad_overrides_name_the_parameter(specs, overrides, message):
    with pytest.raises(ParameterError, match=message):
        registry.validate_overrides(specs, overrides, "--set", "lin-test")


RANGES = """\
fig_id = "lin-ranges"  # key
profile = "paper"  # [paper|quick] profile
tol = 1e-5  # (0,1) open at both ends
lr = 2e-3  # (0,inf) positive
gamma = 0.4  # (0,1] half-open
decay = 1e-6  # [0,inf) half-open the other way
vocab_size = 10  # [2,inf] V
support_size = 6  # [1,vocab_size] at most V
n_steps = 100  # [1,inf] steps
milestones = [25, 50]  # [1,n_steps) {increasing} where the rate falls
angle = 10.0  # [0,360) degrees
note = 1  # (the paper's value) a parenthesis that is not an interval is help
dataset = "random-5"  # [acyclic|cyclic|random-<int>] a toy or a random set
scheduler = ""  # [|<address>] empty, or a dask scheduler
"""


@pytest.fixture()
def ranges(tmp_path):
    return registry.parse_parameters(write_notebook(tmp_path / "lin_ranges.ipynb", RANGES))


def test_open_and_half_open_intervals_and_qualifiers_are_parsed(ranges):
    assert ranges["tol"].constraint == "(0,1)" and ranges["tol"].help == "open at both ends"
    assert ranges["decay"].constraint == "[0,inf)"
    assert ranges["support_size"].bound_names == ["vocab_size"]
    assert ranges["milestones"].flags == ("increasing",)
    assert ranges["milestones"].help == "where the rate falls"
    assert ranges["note"].constraint is None
    assert (
        ranges["note"].help == "(the paper's value) a parenthesis that is not an interval is help"
    )
    assert ranges["scheduler"].choices == ["", "<address>"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"tol": 0.0}, r"'tol'.*must lie in \(0, 1\), got 0.0"),
        ({"tol": 1}, r"'tol'.*must lie in \(0, 1\), got 1"),
        ({"lr": -1}, r"'lr'.*must lie in \(0, inf\), got -1"),
        ({"gamma": -1}, r"'gamma'.*must lie in \(0, 1\], got -1"),
        ({"gamma": 0}, r"'gamma'.*\(0, 1\]"),
        ({"decay": -1e-9}, r"'decay'.*\[0, inf\)"),
        ({"support_size": 11}, r"'support_size'.*\[1, vocab_size\] \(vocab_size = 10 here\)"),
        ({"vocab_size": 5}, r"'support_size' \(lin-ranges, the notebook's default\).*= 5 here"),
        ({"milestones": [50, 25]}, r"'milestones'.*strictly increasing"),
        ({"milestones": [25, 100]}, r"'milestones'.*\[1, n_steps\) \(n_steps = 100 here\)"),
        ({"milestones": []}, r"'milestones'.*at least one element"),
        ({"angle": 360.0}, r"'angle'.*\[0, 360\)"),
        ({"dataset": "random-x"}, r"'dataset'.*one of \['acyclic', 'cyclic', 'random-<int>'\]"),
        ({"scheduler": "host:8786"}, r"'scheduler'.*one of \['\"\"', '<address>'\]"),
    ],
)
def test_a_value_out_of_its_range_is_refused_naming_where_it_came_from(ranges, overrides, message):
    params = {k: s.default for k, s in ranges.items()}
    with pytest.raises(ParameterError, match=message):
        given = registry.validate_overrides(ranges, overrides, "--set", "lin-ranges")
        sources = {k: "--set" for k in given}
        registry.check_parameters(ranges, params | given, sources, "lin-ranges")


def test_values_inside_their_ranges_pass(ranges):
    params = {k: s.default for k, s in ranges.items()}
    good = {
        "tol": 0.5,
        "gamma": 1,
        "decay": 0,
        "support_size": 10,
        "dataset": "random-12",
        "scheduler": "tcp://10.0.0.5:8786",
        "milestones": [1, 99],
        "angle": 0,
    }
    given = registry.validate_overrides(ranges, good, "--set", "lin-ranges")
    registry.check_parameters(ranges, params | given, {}, "lin-ranges")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("n = 1  # [1,m] m is not a parameter", "names 'm', which is no numeric parameter"),
        ('n = 1  # [1,s] s\ns = "a"  # [a|b] s', "names 's', which is no numeric parameter"),
        ("n = [1]  # [1,inf] {sorted} n", r"unknown qualifier\(s\) \['sorted'\]"),
    ],
)
def test_a_range_that_cannot_be_read_is_a_registry_error(tmp_path, line, message):
    nb = write_notebook(tmp_path / "lin_bad.ipynb", f"fig_id = 'lin-bad'  # id\n{line}\n")
    with pytest.raises(registry.RegistryError, match=message):
        registry.parse_parameters(nb)


def test_comments_with_equals_signs_are_rejected(tmp_path):
    nb = write_notebook(tmp_path / "lin_eq.ipynb", "fig_id = 'lin-eq'  # id\nn = 1  # [>=1] n\n")
    with pytest.raises(registry.RegistryError, match=r"\[1,inf\]"):
        registry.parse_parameters(nb)


def test_good_overrides_pass(specs):
    registry.validate_overrides(
        specs,
        {"step_size": 1, "n_steps": 3, "frac": 1.0, "profile": "quick", "seeds": [2]},
        "--set",
        "lin-test",
    )


def test_set_values_are_read_as_typed_yaml():
    got = planning.parse_set(["a=1", "b=0.5", "c=1e-3", "d=true", "e=abc", "f=[1, 2]"])
    assert got == {"a": 1, "b": 0.5, "c": 1e-3, "d": True, "e": "abc", "f": [1, 2]}
    assert isinstance(got["a"], int) and isinstance(got["c"], float)
    with pytest.raises(ParameterError, match="KEY=VALUE"):
        planning.parse_set(["novalue"])


def test_runner_rejects_bad_overrides_before_any_kernel_starts(monkeypatch, capsys):
    started = []
    monkeypatch.setattr(reproduce, "execute", lambda jobs, n: started.append(jobs) or [])
    fig_id = next(iter(REG))
    for bad in ("no_such_parameter=1", "profile=fast"):
        rc = reproduce.main(["--only", fig_id, "--profile", "quick", "--set", bad])
        assert rc == 2
        assert bad.split("=")[0] in capsys.readouterr().err
    assert reproduce.main(["--only", "lin-does-not-exist"]) == 2
    assert started == [], "a kernel was started despite invalid input"


# ----------------------------------------------------------------------------- runner


def test_failing_notebook_leaves_no_figure_and_names_the_cell(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path / "figures"))
    monkeypatch.setenv("NTP_EXECUTED_DIR", str(tmp_path / "executed"))
    monkeypatch.setattr(staging, "FAILED_DIR", tmp_path / "failed")
    body = (
        "from matplotlib import pyplot as plt\nfrom ntpcore.figure import provenance\n"
        "fig = plt.figure(); provenance.savefig(fig, fig_id, {}, profile=profile)\n"
        "raise RuntimeError('boom after saving')\n"
    )
    nb = write_notebook(tmp_path / "lin_fail.ipynb", PARAMS.replace("lin-test", "lin-fail"), body)
    entry = registry.FigureEntry("lin-fail", "lin", "-", "t", str(nb), ())
    outcome = staging.run_job(
        planning.Job(entry, "quick", {"fig_id": "lin-fail", "profile": "quick"}), progress=False
    )
    assert not outcome.ok
    assert (
        "cell 2 of the executed copy" in outcome.message
        and "RuntimeError: boom after saving" in outcome.message
    )
    assert not (tmp_path / "figures").exists() or not any((tmp_path / "figures").iterdir())
    assert not (tmp_path / "executed" / "lin-fail.ipynb").exists()
    assert (tmp_path / "failed" / "lin-fail.ipynb").exists(), "the traceback copy is kept"


def test_quick_profile_cells_have_a_time_limit():
    fig_id = next(iter(REG))
    (quick,) = planning.plan([fig_id], "quick", {}, REG)
    (paper,) = planning.plan([fig_id], "paper", {}, REG)
    assert quick.cell_timeout and quick.cell_timeout > 0 and paper.cell_timeout is None


# ----------------------------------------------------------------------------- cache


@dataclasses.dataclass(frozen=True)
class _Cfg:
    n: int
    scale: float = 1.0
    name: str = "x"


CALLS: list[int] = []


@cache.cached
def _compute(cfg: _Cfg) -> dict:
    CALLS.append(cfg.n)
    return {"x": np.arange(cfg.n) * cfg.scale, "total": float(cfg.n * cfg.scale), "tag": cfg.name}


def test_cache_hits_return_the_same_result_and_keys_depend_on_inputs(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_CACHE_DIR", str(tmp_path))
    CALLS.clear()
    first = _compute(_Cfg(4))
    second = _compute(_Cfg(4))
    assert CALLS == [4]
    assert first.keys() == second.keys() and first["total"] == second["total"] == 4.0
    np.testing.assert_array_equal(first["x"], second["x"])
    _compute(_Cfg(4, scale=2.0))
    assert CALLS == [4, 4], "a different config must miss the cache"
    assert cache.cache_key("q", _Cfg(4)) != cache.cache_key("q", _Cfg(4, name="y"))
    assert cache.cache_key("q", _Cfg(4)) != cache.cache_key("other", _Cfg(4))
    with pytest.raises(TypeError, match="dataclass"):
        _compute({"n": 4})


def test_interrupted_write_leaves_no_file(tmp_path):
    target = tmp_path / "out.json"

    def boom(fh):
        fh.write(b"partial")
        raise KeyboardInterrupt

    from ntpcore.core.io import write_atomic

    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, boom)
    assert list(tmp_path.iterdir()) == []
    write_text_atomic(target, "ok")
    assert target.read_text() == "ok"


# ----------------------------------------------------------------------------- provenance


def test_savefig_is_byte_stable_and_records_provenance(tmp_path, monkeypatch):
    monkeypatch.setenv("NTP_FIGURE_DIR", str(tmp_path))
    digests = []
    for _ in range(2):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        side = provenance.savefig(
            fig, "lin-probe", {"a": 1}, profile="paper", metrics={"m": np.float64(0.25)}, seeds=[0]
        )
        plt.close(fig)
        digests.append(
            tuple(
                hashlib.sha256((tmp_path / f"lin-probe.{s}").read_bytes()).hexdigest()
                for s in ("png", "pdf")
            )
        )
    assert digests[0] == digests[1]
    on_disk = json.loads((tmp_path / "lin-probe.json").read_text())
    assert on_disk["metrics"] == {"m": 0.25} and on_disk["profile"] == "paper"
    assert on_disk["versions"]["numpy"] == np.__version__
    assert {"commit", "dirty"} <= set(on_disk["git"]) and side["params"] == {"a": 1}
    with pytest.raises(ValueError, match="profile"):
        provenance.savefig(plt.figure(), "lin-probe", profile="fast")


# ----------------------------------------------------------------------------- environment


def test_environment_yml_constraints_and_pyproject_agree():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    constraints = (ROOT / "requirements" / "constraints.txt").read_text().splitlines()
    pins = dict(line.split("==", 1) for line in constraints if "==" in line)
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda_python = next(
        d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python=")
    )
    assert pyproject["project"]["requires-python"] == f"=={conda_python.split('=')[1]}.*"
    torch_dep = next(d for d in pyproject["project"]["dependencies"] if d.startswith("torch"))
    assert torch_dep in pip_section, "environment.yml must pin torch like pyproject.toml"
    assert pins["torch"].split("+")[0] == torch_dep.split("==")[1]
    extras = set(pyproject["project"]["optional-dependencies"])
    assert "-e .[book,runner,test]" in pip_section and {"book", "runner", "test"} == extras
    assert "-c requirements/constraints.txt" in pip_section
    assert pip_section.index(torch_dep) < pip_section.index("-e .[book,runner,test]")
    book_pin = next(
        d
        for d in pyproject["project"]["optional-dependencies"]["book"]
        if d.startswith("jupyter-book")
    )
    assert pins["jupyter-book"] == book_pin.split("==")[1]
    assert pins["jupyter-book"].startswith("1."), "the book needs Jupyter Book 1.x"


def test_executed_notebooks_are_prepared_for_the_static_book(tmp_path):
    nb = nbformat.v4.new_notebook()
    injected = nbformat.v4.new_code_cell("fig_id = 'lin-x'")
    injected.metadata["tags"] = ["injected-parameters"]
    widget = nbformat.v4.new_code_cell("for _ in tqdm(range(3)): pass")
    widget.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={staging.WIDGET_MIME: {"model_id": "abc"}, "text/plain": "HBox()"},
        ),
        nbformat.v4.new_output("stream", name="stdout", text="done\n"),
    ]
    nb.cells = [injected, widget]
    nb.metadata["widgets"] = {"state": {}}
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, path)
    staging._finish_notebook(path)
    out = nbformat.read(path, as_version=4)
    assert "hide-input" in out.cells[0].metadata["tags"]
    assert [o.output_type for o in out.cells[1].outputs] == ["stream"]
    assert "widgets" not in out.metadata


def test_relative_environment_overrides_resolve_from_the_repository_root(monkeypatch):
    monkeypatch.chdir(paths.NOTEBOOK_DIR)  # where papermill kernels run
    monkeypatch.setenv("NTP_FIGURE_DIR", "_build/test/figures")
    monkeypatch.setenv("NTP_CACHE_DIR", "/tmp/ntp-cache")
    assert paths.figure_dir() == ROOT / "_build" / "test" / "figures"
    assert paths.cache_dir() == Path("/tmp/ntp-cache")


def test_the_table_of_contents_lists_every_figure_once_in_the_papers_order():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [  # an executed page is a section of its part's notebooks, or a chapter (exercises)
        s["file"]
        for part in toc["parts"]
        for ch in part["chapters"]
        for s in [ch, *ch.get("sections", [])]
        if s.get("file", "").startswith("book/executed/")
    ]
    ids = [f.removeprefix("book/executed/") for f in files]
    assert sorted(ids) == sorted(REG), "every registered figure appears once in _toc.yml"
    for paper in ("lin", "geo", "att"):
        numbered = [
            int(REG[i].paper_label.split()[1].rstrip(","))
            for i in ids
            if i.startswith(paper) and REG[i].paper_label.startswith("Fig. ")
        ]
        assert numbered == sorted(numbered), f"{paper}: figures out of the paper's order"


def test_titles_and_claims_typeset_their_maths():
    # Captions are parsed as MyST: maths outside $...$ shows as plain ASCII beside typeset
    # symbols, and a bare '*' turns the rest of the caption into emphasis.
    ascii_math = re.compile(r"\^|->|\|\||\*|~")
    for fig_id, entry in REG.items():
        for field in ("title", "claim_text", "shown"):
            text = getattr(entry, field)
            assert text.count("$") % 2 == 0, f"{fig_id} {field}: unbalanced '$' in {text!r}"
            prose = re.sub(r"\$[^$]*\$", " ", text)
            found = ascii_math.search(prose)
            assert found is None, (
                f"{fig_id} {field}: {found.group()!r} outside $...$ in {text!r}; typeset it"
            )


def test_notebook_titles_are_words_not_ascii_maths():
    """A notebook's title is its page title and its sidebar entry, where maths does not
    render: no ASCII maths (``W^mm``, ``W*``, ``W_R``) and no ``$...$``, say it in words."""
    ascii_math = re.compile(r"\^|\*|_|\$|\\|->")
    for nb_path in sorted(paths.NOTEBOOK_DIR.glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        title = nb.cells[0].source.splitlines()[0]
        assert title.startswith("# "), f"{nb_path.name}: first line is not a title"
        found = ascii_math.search(title)
        assert found is None, f"{nb_path.name}: {found.group()!r} in the title {title!r}"


def test_notebook_markdown_reads_the_same_in_jupyterlab_as_in_the_book():
    """JupyterLab knows neither the book's MathJax macros (defined in _config.yml) nor MyST
    roles: a notebook's Markdown must use neither."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    macros = config["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"]
    macro_re = re.compile(
        r"\\(" + "|".join(sorted(macros, key=len, reverse=True)) + r")(?![A-Za-z])"
    )
    for nb_path in sorted(paths.NOTEBOOK_DIR.glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "markdown":
                continue
            role = re.search(r"\{(prf:ref|cite[:a-z]*|doc|ref|numref|eq)\}`", cell.source)
            assert role is None, f"{nb_path.name}: MyST role {role.group(0)} in Markdown"
            macro = macro_re.search(cell.source)
            assert macro is None, f"{nb_path.name}: book-only macro {macro.group(0)} in Markdown"


def test_notebooks_import_only_the_paper_faces_and_the_figure_api():
    """A notebook reaches the package through a paper's face (``ntpcore.lin``, ``.geo``,
    ``.att``) and its public ``experiments``/``checks``/``plots``/``scale`` modules, and the figure
    API (``ntpcore.figure``); never ``ntpcore.core``, the runner, an inner module, or a
    private name."""
    allowed = re.compile(
        r"^ntpcore(\.(lin|geo|att)(\.(experiments(\.\w+)?|checks(\.\w+)?|plots|scale))?|\.figure)?$"
    )
    for nb_path in sorted(paths.NOTEBOOK_DIR.glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        src = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        for module, names in re.findall(r"^from (ntpcore[\w.]*) import ([^\n]+)", src, re.M):
            assert allowed.match(module), f"{nb_path.name}: imports from {module}"
            for name in re.split(r"[,\s()]+", names):
                assert not name.startswith("_"), f"{nb_path.name}: private name {name}"
        for module in re.findall(r"^import (ntpcore[\w.]*)", src, re.M):
            assert allowed.match(module), f"{nb_path.name}: imports {module}"
        assert not re.search(r"\b\w+\._[a-z]\w*\(", src), f"{nb_path.name}: calls a private name"


# ------------------------------------------------------------------- a parameter that takes a file

FILE_PARAMS = """\
fig_id = "geo-test"  # key
profile = "paper"  # [paper|quick] profile
corpus = "builtin"  # [builtin|other|<text file>] a name or a text file
"""


@pytest.fixture()
def file_specs(tmp_path):
    return registry.parse_parameters(write_notebook(tmp_path / "geo_test.ipynb", FILE_PARAMS))


def test_a_file_parameter_takes_its_names_or_a_text_file_made_absolute(
    file_specs, tmp_path, monkeypatch
):
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "mine.txt").write_text("the cat sat on the mat .\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # the directory the command runs in
    got = registry.validate_overrides(file_specs, {"corpus": "texts/mine.txt"}, "--set", "geo-test")
    assert got == {"corpus": str(tmp_path / "texts" / "mine.txt")}
    assert registry.validate_overrides(file_specs, {"corpus": "other"}, "--set", "x") == {
        "corpus": "other"
    }
    # a registry value is taken from the base it is given (the runner: the repository root)
    base = tmp_path / "texts"
    got = registry.validate_overrides(file_specs, {"corpus": "mine.txt"}, "params", "x", base)
    assert got["corpus"] == str(base / "mine.txt")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, r"'corpus'.*neither one of \['builtin', 'other'\] nor an existing file"),
        (b"caf\xe9 au lait\n", r"'corpus'.*bad.txt' is not UTF-8 text: byte 0xe9 at offset 3"),
        (b"\n \n", r"'corpus'.*bad.txt' is empty"),
    ],
)
def test_a_file_parameter_is_refused_before_any_kernel_starts(
    file_specs, tmp_path, monkeypatch, content, message
):
    if content is not None:
        (tmp_path / "bad.txt").write_bytes(content)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ParameterError, match=message):
        registry.validate_overrides(file_specs, {"corpus": "bad.txt"}, "--set", "geo-test")


def test_an_empty_file_parameter_is_refused_as_empty(file_specs, tmp_path, monkeypatch):
    """Issue 32: --set corpus= said "'/path/to/checkout' is not a file"."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ParameterError) as info:
        registry.validate_overrides(file_specs, {"corpus": ""}, "--set", "geo-test")
    assert str(info.value) == (
        "parameter 'corpus' (geo-test, --set): empty; give one of ['builtin', 'other'] or a "
        "text file"
    )


def test_the_runner_gives_the_kernel_an_absolute_path(tmp_path, monkeypatch):
    """The kernel runs in notebooks/: a path relative to where the command runs is resolved
    by the runner before any kernel starts, and the exploration records it absolute."""
    (tmp_path / "mine.txt").write_text("the cat sat on the mat .\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    (job,) = planning.plan(["geo-corpus-scale"], "quick", {"corpus": "mine.txt"}, REG)
    assert job.parameters["corpus"] == job.adhoc["corpus"] == str(tmp_path / "mine.txt")
    (job,) = planning.plan(["geo-corpus-scale"], "quick", {"corpus": "lee_background"}, REG)
    assert job.parameters["corpus"] == "lee_background"
    (job,) = planning.plan(["geo-corpus-scale"], "quick", {}, REG)
    assert "corpus" not in job.parameters  # the registry figure keeps the notebook's default


def test_figures_that_share_a_notebook_have_distinct_page_titles():
    """The executed page of a notebook that serves several figures takes its title from the
    registry (``page_title``): two pages with one title are indistinguishable in the sidebar
    and in search."""
    by_notebook: dict[str, list] = {}
    for entry in registry.load_registry().values():
        by_notebook.setdefault(str(entry.notebook), []).append(entry)
    titles = []
    for entries in by_notebook.values():
        if len(entries) > 1:
            assert all(e.page_title for e in entries), [e.fig_id for e in entries]
            titles += [e.page_title for e in entries]
    assert len(titles) == len(set(titles)), titles


# ---------------------------------------------------------------- one template, several views
def _views(nb_path: Path) -> tuple[list[str], str | None]:
    spec = registry.parse_parameters(nb_path).get("view")
    return ([] if spec is None else spec.choices), (None if spec is None else spec.default)


def test_a_template_with_views_declares_them_and_guards_every_view_cell():
    """A ``view-<name>`` cell belongs to a view the parameters cell offers; every view has
    cells of its own; a view's code cell tests ``view`` itself, so that the template run as
    it is (JupyterLab, papermill without the runner) draws the chosen view only; and the
    figures of such a template each name a view it has (or take its default)."""
    with_views = 0
    for nb_path in sorted(paths.NOTEBOOK_DIR.glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        choices, default = _views(nb_path)
        tagged = [(c, staging.cell_views(c)) for c in nb.cells if staging.cell_views(c)]
        if not tagged:
            assert not choices, f"{nb_path.name}: a view parameter and no view cells"
            continue
        with_views += 1
        assert default in choices, nb_path.name
        assert set().union(*(v for _, v in tagged)) == set(choices), nb_path.name
        for cell, views in tagged:
            if cell.cell_type == "code":
                (view,) = views
                assert cell.source.startswith(f'if view == "{view}":\n'), cell.source[:80]
    assert with_views >= 3  # geo's trained models, att's global convergence, lin's toy
    for fig_id, entry in REG.items():
        choices, default = _views(entry.notebook_path)
        if choices:
            assert entry.params.get("view", default) in choices, fig_id


def test_a_figure_page_keeps_its_own_view_and_the_shared_cells():
    nb = nbformat.v4.new_notebook()
    shared = nbformat.v4.new_markdown_cell("# Title")
    a = nbformat.v4.new_code_cell('if view == "a":\n    x = 1')
    a.metadata["tags"] = ["hide-input", "view-a"]
    b = nbformat.v4.new_markdown_cell("about b")
    b.metadata["tags"] = ["view-b"]
    both = nbformat.v4.new_markdown_cell("about a and b")
    both.metadata["tags"] = ["view-a", "view-b"]
    nb.cells = [shared, a, b, both]
    kept = staging.keep_view(nbformat.from_dict(nb), "a").cells
    assert [c.source for c in kept] == ["# Title", a.source, "about a and b"]
    assert len(staging.keep_view(nbformat.from_dict(nb), None).cells) == 4
    assert [c.source for c in staging.keep_view(nbformat.from_dict(nb), "c").cells] == ["# Title"]


def test_the_runner_prunes_a_page_to_the_view_of_its_figure(tmp_path):
    """The view comes from the job's parameters, else the template's default."""
    entry = REG["geo-geometry-grid"]
    job = planning.Job(entry, "quick", {"view": "grid"})
    assert staging._view(job) == "grid"
    default = planning.Job(REG["geo-trained-logits"], "quick", {})
    assert staging._view(default) == "logits"
    assert staging._view(planning.Job(REG["lin-reg-path"], "quick", {})) is None
    template = nbformat.read(entry.notebook_path, as_version=4)
    path = tmp_path / "grid.ipynb"
    nbformat.write(template, path)
    staging._finish_notebook(path, entry.page_title, "grid")
    out = nbformat.read(path, as_version=4)
    assert out.cells[0].source.startswith(f"# {entry.page_title}")
    views = set().union(*(staging.cell_views(c) for c in out.cells))
    assert views == {"grid"}
    assert sum("nbval-check-output" in c.metadata.get("tags", []) for c in out.cells) == 1
