r"""Numbers and claims in the book, read from the runs that produced them.

Role ``{ntpval}`<fig-id>:<key>[|<format>]```
    Pastes a measured number from the provenance sidecar of a figure
    (``book/figures/<fig-id>.json``): ``<key>`` is a key of the sidecar's ``metrics``
    (e.g. ``{ntpval}`lin-ngd-adam:adam_ce_gap|.1e```), ``claim:<slug>`` for the measured
    value of one of the figure's claims, or ``param:<name>`` for a parameter the run used
    (``{ntpval}`att-cyclic-convergence:param:n_steps|d```: the last step, whatever the
    profile).  ``<format>`` is a Python format spec (default ``.3g``), applied to each item of
    a list (``param:m_values`` prints ``50, 100, 200, 400``), or ``range`` for a list's
    smallest and largest item (``50–400``); inside a Markdown table write the bar as ``\|``.
    Every number carries a tooltip naming the figure and the profile.  A number from a
    quick-profile run is not marked one by one: the page opens with one banner saying that
    its numbers and figures come from the quick profile (``book/_ext/ntpbook.py``).  A
    missing figure, metric or claim is a build warning, i.e. an error under ``-W``: the book
    never shows a number that no run made.

Role ``{ntprange}`<fig-id>:<low key>,<high key>[|<format>]```
    The range of a statistic over a run's trials: ``a to b``, or ``a`` alone when both ends
    print the same (``{ntprange}`att-cyclic-convergence:R_min,R_max|.0f```).

Directive ``{ntp-steps} <fig-id>``
    A table of a training run's statistics at given steps (``:steps:``) and at its last step,
    read from the sidecar (``<key>_t<step>``, the last step's own key), beside typed rows of
    reference numbers.  Its columns are the run's: a step the run did not reach is left out
    and the last column is headed by the run's own last step (the quick profile stops
    earlier than the paper); reference numbers at steps the run did not reach are given
    below the table instead.  Each row of the content is ``label | cells``, the cells
    separated by `` | ``:

    * measured: ``label | <key template with {}> | <format> | <last-step key> <format>
      [± <key> <format>] [| bold]``;
    * reference: ``label | = | <one value per step> | <value at the paper's last step>``.

Directive ``{ntp-claims}``
    The claims ledger as tables: with ``:paper: lin`` one table of that paper's claims
    (the claim and its figure, source in the paper, the paper's number, ours and the
    comparison it must satisfy, status), without options the summary line over all figures.
    Both count the claims that carry the paper's own number (``paper=``), the summary line
    per paper and in total.  Five columns keep every word whole at a laptop's width; on a
    phone each row reads as a card, each cell under its column's name (``table.ntp-ledger``
    in ``book/_static/ntp.css``).  With ``:paper: lin`` and ``:part: statements``, the table
    of what each figure of the paper claims (the registry's statements, ``figures.yml``) and
    the ledger claims that test each statement, with their status.

Directive ``{ntp-mutations}``
    The mutation score from ``results/mutations/report.json`` (``make mutations``): the
    score, the date and commit of the run, and a table of every mutation with what caught it.

Directive ``{ntp-mutants}``
    The code-level mutants' score from ``results/mutants/report.json`` (``make mutants``):
    the sample, its seed, the date and commit of the run, its time, what killed the mutants,
    and every survivor with its reason (or "unexplained"); a note saying it was not run when
    the file is missing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective, SphinxRole

from ntpcore.core import paths
from ntpcore.figure.claims import tally
from ntpcore.runner.bookrefs import figure_pages
from ntpcore.runner.registry import load_registry

logger = logging.getLogger(__name__)
PAPERS = {"lin": "Linear models", "geo": "Implicit geometry", "att": "Self-attention"}
STATUS_WORDS = {"pass": "holds", "fail": "**does not hold**", "not-evaluated": "not evaluated"}
#: the columns of a paper's claims table (on a phone, each cell is labelled with its column's
#: name by book/_static/ntp.css, table.ntp-ledger)
LEDGER_HEADER = ["claim", "source", "paper", "ours", "status"]


def _sidecar_path(fig_id: str) -> Path:
    return paths.figure_dir() / f"{fig_id}.json"


def _load(fig_id: str) -> dict | None:
    path = _sidecar_path(fig_id)
    return json.loads(path.read_text()) if path.exists() else None


def _lookup(side: dict, key: str) -> object:
    if key.startswith("param:"):
        name = key.removeprefix("param:")
        params = side.get("parameters") or side.get("params") or {}
        # a configuration made of parts (geo: data, protocol) records each part's fields
        parts = [params, *(v for v in params.values() if isinstance(v, dict))]
        for part in parts:
            if name in part:
                return part[name]
        raise KeyError(f"no parameter {name!r}")
    if key.startswith("claim:"):
        slug = key.removeprefix("claim:")
        for c in side.get("claims") or []:
            if c["id"].split(":", 1)[-1] == slug:
                if c["status"] == "not-evaluated":
                    raise KeyError(f"claim {slug!r} was not evaluated in this profile")
                return c["measured"]
        raise KeyError(f"no claim {slug!r}")
    metrics = side.get("metrics") or {}
    if key in metrics:
        return metrics[key]
    value: object = metrics
    for part in key.split("."):  # nested metrics: a.b.c
        if not isinstance(value, dict) or part not in value:
            raise KeyError(f"no metric {key!r}")
        value = value[part]
    return value


def format_value(value: object, spec: str) -> str:
    """A measured value as the book prints it (scientific notation typeset as x·10^k); a
    list item by item, or with ``spec == "range"`` as its smallest and largest item."""
    if isinstance(value, list | tuple):
        if spec == "range":
            lo, hi = min(value), max(value)
            return format_value(lo, "g") if lo == hi else f"{lo:g}–{hi:g}"
        return ", ".join(format_value(v, spec) for v in value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    text = format(value, spec)
    if "e" in text:
        mant, exp = text.split("e")
        return f"{mant}·10{_superscript(int(exp))}"
    return text


def _superscript(k: int) -> str:
    return str(k).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))


class NTPVal(SphinxRole):
    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        # inside a Markdown table the | of the format is written \| (else it splits the cell)
        text, _, spec = self.text.replace("\\|", "|").partition("|")
        fig_id, sep, key = text.strip().partition(":")
        spec = spec.strip() or ".3g"
        problem = None
        if not sep or not key:
            problem = f"ntpval: expected <fig-id>:<key>, got {self.text!r}"
        elif fig_id not in load_registry():
            problem = f"ntpval: {fig_id!r} is not in figures.yml"
        side = _load(fig_id) if problem is None else None
        if problem is None and side is None:
            problem = f"ntpval: {fig_id} has not been generated (python -m ntpcore.reproduce)"
        if problem is None:
            self.env.note_dependency(str(_sidecar_path(fig_id)))
            try:
                value = _lookup(side, key)
                shown = format_value(value, spec)
            except (KeyError, ValueError, TypeError) as exc:
                problem = f"ntpval: {fig_id}: {exc.args[0] if exc.args else exc}"
        if problem is not None:
            logger.warning(problem, location=self.get_location())
            return [nodes.inline(self.text, "??", classes=["ntpval-missing"])], []
        return [_number(shown, fig_id, side)], []


def quick_differs(fig_id: str, side: dict) -> bool:
    """Whether a run is of the quick profile *and* that profile changes the figure's
    parameters (registry ``quick``): only then does a page showing it get the quick banner
    (ntpbook.py); a figure whose quick run is its paper run gets none."""
    entry = load_registry().get(fig_id)
    return side.get("profile") == "quick" and bool(entry is not None and entry.quick)


def _number(shown: str, fig_id: str, side: dict) -> nodes.Node:
    """A number read from a run, with a tooltip naming the run; the class ``ntp-quick`` marks
    a number of a reduced quick run, so that its page gets the banner (ntpbook.py)."""
    profile = side.get("profile", "?")
    return nodes.abbreviation(
        shown,
        shown,
        explanation=f"measured by {fig_id} ({profile} profile)",
        classes=[
            "ntpval",
            f"ntpval-{profile}",
            *(["ntp-quick"] if quick_differs(fig_id, side) else []),
        ],
    )


class NTPRange(SphinxRole):
    """``{ntprange}`fig:low,high|fmt```: ``a to b``, or ``a`` when both ends print the same."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        text, _, spec = self.text.replace("\\|", "|").partition("|")
        fig_id, sep, keys = text.strip().partition(":")
        low, comma, high = keys.partition(",")
        spec = spec.strip() or ".3g"
        problem = None
        if not sep or not comma:
            problem = f"ntprange: expected <fig-id>:<low key>,<high key>, got {self.text!r}"
        elif fig_id not in load_registry():
            problem = f"ntprange: {fig_id!r} is not in figures.yml"
        side = _load(fig_id) if problem is None else None
        if problem is None and side is None:
            problem = f"ntprange: {fig_id} has not been generated (python -m ntpcore.reproduce)"
        if problem is None:
            self.env.note_dependency(str(_sidecar_path(fig_id)))
            try:
                a = format_value(_lookup(side, low.strip()), spec)
                b = format_value(_lookup(side, high.strip()), spec)
            except (KeyError, ValueError, TypeError) as exc:
                problem = f"ntprange: {fig_id}: {exc.args[0] if exc.args else exc}"
        if problem is not None:
            logger.warning(problem, location=self.get_location())
            return [nodes.inline(self.text, "??", classes=["ntpval-missing"])], []
        if a == b:
            return [_number(a, fig_id, side)], []
        return [_number(a, fig_id, side), nodes.Text(" to "), _number(b, fig_id, side)], []


def all_claims() -> list[dict]:
    """Every claim of every registered figure that has a sidecar, in registry order."""
    out = []
    for fig_id, entry in load_registry().items():
        side = _load(fig_id)
        for c in (side or {}).get("claims") or []:
            out.append({**c, "paper_key": entry.paper, "profile": side.get("profile")})
    return out


def with_paper_number(claims: list[dict]) -> list[dict]:
    """The claims (sanity checks left out) that print the paper's own number beside ours."""
    return [c for c in claims if not c.get("sanity") and c.get("paper") is not None]


def summary_line(claims: list[dict], per_paper: bool = False) -> str:
    """The counts of the paper's claims; sanity checks (guaranteed by mathematics or the
    construction, ``sanity=True``) are counted apart.  Then how many claims carry the paper's
    own number, and with ``per_paper`` how many of each paper's (by ``paper_key``)."""
    n = tally(claims)
    profiles = sorted({c["profile"] for c in claims}) or ["-"]
    numbered = with_paper_number(claims)
    line = (
        f"**{n['claims']} claims: {n['pass']} hold, {n['fail']} do not, "
        f"{n['not-evaluated']} not evaluated in this profile** "
        f"(profile of the runs: {', '.join(profiles)})"
        + (f"; and {n['sanity']} sanity checks, not counted as claims" if n["sanity"] else "")
        + f". **{len(numbered)} of the {n['claims']} claims print the paper's own number** "
        "beside ours"
        + f". By kind: {n['kind:theorem']} predictions of a theorem, lemma or conjecture, "
        f"{n['kind:paper number']} numbers the paper prints, {n['kind:figure statement']} "
        "statements of a figure or of the text"
    )
    if per_paper:
        parts = []
        for key in PAPERS:
            of_paper = [c for c in claims if c.get("paper_key") == key]
            if of_paper:
                parts.append(
                    f"{key}: {len(with_paper_number(of_paper))} of {tally(of_paper)['claims']}"
                )
        if parts:
            line += f" ({'; '.join(parts)})"
    return line + "."


def statements_rows(paper: str, claims: list[dict]) -> list[list[str]]:
    """One row per statement of each figure of ``paper`` in the registry: the figure, the
    statement, and the ledger claims that test it, each with its status in this build
    ("not run" where the figure has no sidecar)."""
    by_id = {c["id"]: c for c in claims}
    pages = figure_pages()
    rows = []
    for fig_id, entry in load_registry().items():
        if entry.paper != paper:
            continue
        for st in entry.claims:
            tested = []
            for short in st.checked_by:
                c = by_id.get(f"{fig_id}:{short}")
                word = "not run" if c is None else STATUS_WORDS[c["status"]]
                if c is not None and c.get("sanity"):
                    word = f"sanity check, {word}"
                tested.append(f"`{short}` ({word})")
            rows.append([figure_links(fig_id, pages), st.says, "; ".join(tested)])
    return rows


def figure_links(fig_id: str, pages: dict[str, str] | None = None) -> str:
    """Links to a figure where the book shows it (``Fig. N``) and to its executed notebook
    (MyST); the notebook alone for a figure no page shows (the exercises)."""
    pages = figure_pages() if pages is None else pages
    notebook = f"{{doc}}`notebook </book/executed/{fig_id}>`"
    if fig_id not in pages:
        return f"`{fig_id}`, {notebook}"
    return f"{{numref}}`Fig. {{number}} <{fig_id}>`, {notebook}"


def _cell(x: object) -> str:
    if x is None:
        return "—"
    return format_value(x, ".4g") if isinstance(x, int | float) else str(x)


class NTPClaims(SphinxDirective):
    has_content = False
    option_spec = {"paper": lambda s: s.strip(), "part": lambda s: s.strip()}

    def _parse(self, text: str) -> list[nodes.Node]:
        container = nodes.container()
        self.state.nested_parse(
            StringList(text.splitlines(), source=self.env.docname), self.content_offset, container
        )
        return container.children

    def run(self) -> list[nodes.Node]:
        out = self._run()
        if any(quick_differs(c["fig_id"], c) for c in all_claims()):
            for node in out:  # the page's quick banner (ntpbook.py)
                if isinstance(node, nodes.Element):
                    node["classes"].append("ntp-quick")
        return out

    def _run(self) -> list[nodes.Node]:
        for fig_id in load_registry():
            self.env.note_dependency(str(_sidecar_path(fig_id)))
        claims = all_claims()
        paper = self.options.get("paper")
        if paper is None:
            return self._parse(summary_line(claims, per_paper=True))
        if paper not in PAPERS:
            logger.warning("ntp-claims: unknown paper %r", paper, location=self.get_location())
            return []
        part = self.options.get("part", "claims")
        if part == "statements":
            return self._parse(self._statements(paper, claims))
        if part != "claims":
            logger.warning("ntp-claims: unknown part %r", part, location=self.get_location())
            return []
        rows = [c for c in claims if c["paper_key"] == paper]
        if not rows:
            return self._parse(":::{note}\nNo figure of this paper has been run yet.\n:::")
        lines = [
            summary_line(rows),
            "",
            ":::{list-table}",
            ":header-rows: 1",
            ":class: ntp-claims ntp-ledger longtable",
            ":widths: 34 16 12 18 20",
            "",
        ]
        header = LEDGER_HEADER
        pages = figure_pages()
        for row in [header, *(self._row(c, pages) for c in rows)]:
            lines.append(f"* - {row[0]}")
            lines.extend(f"  - {cell}" for cell in row[1:])
        lines.append(":::")
        return self._parse("\n".join(lines))

    @staticmethod
    def _statements(paper: str, claims: list[dict]) -> str:
        lines = [
            ":::{list-table}",
            ":header-rows: 1",
            ":class: ntp-claims longtable",
            ":widths: 18 42 40",
            "",
        ]
        header = ["figure", "the figure claims", "tested by (ledger claims of the figure)"]
        for row in [header, *statements_rows(paper, claims)]:
            lines.append(f"* - {row[0]}")
            lines.extend(f"  - {cell}" for cell in row[1:])
        lines.append(":::")
        return "\n".join(lines)

    @staticmethod
    def _row(c: dict, pages: dict[str, str] | None = None) -> list[str]:
        paper = _cell(c.get("paper"))
        if c.get("paper_source"):
            paper += f" {c['paper_source']}"
        ours = "—" if c["status"] == "not-evaluated" else _cell(c.get("measured"))
        if c.get("reference") is not None:
            ours += f"; reference {_cell(c['reference'])} ({c['reference_source']})"
        status = STATUS_WORDS[c["status"]]
        if c["status"] == "fail" and c.get("known_deviation"):
            band = f", band {c['band']}" if c.get("band") else ""
            status += f" (known deviation{band}: {c['known_deviation']})"
        if c.get("note"):
            status += f": {c['note']}"
        if c["status"] == "not-evaluated":
            status += " (needs the paper profile)"
        fig_id = c["fig_id"]
        statement = " ".join(str(c["statement"]).split())
        if c.get("sanity"):
            statement = f"*(sanity check)* {statement}"
        if c["expect"] != "holds":  # a yes/no claim: "True" says it
            ours += f"; must be {c['expect']}"
        return [
            f"{statement} ({figure_links(fig_id, pages)})",
            c["source"],
            paper,
            ours,
            status,
        ]


def _step_cells(row: list[str], side: dict, steps: list[int], fig_id: str) -> list[str] | None:
    """The cells of a measured row at ``steps`` and at the run's last step (MyST text)."""
    template, fmt, last, *flags = row
    metrics = side.get("metrics") or {}
    tip = f"measured by {fig_id} ({side.get('profile', '?')} profile)"

    def val(key: str, spec: str) -> str:
        if key not in metrics:
            raise KeyError(key)
        return f"{{abbr}}`{format_value(metrics[key], spec)} ({tip})`"

    cells = [val(template.replace("{}", str(t)), fmt) for t in steps]
    parts = last.split("±")
    end = " ± ".join(val(*part.split()) for part in parts)
    cells.append(f"**{end}**" if "bold" in flags else end)
    return cells


class NTPSteps(SphinxDirective):
    """``{ntp-steps}``: a run's statistics at given steps and at its last step (see the module
    docstring)."""

    required_arguments = 1
    has_content = True
    option_spec = {
        "steps": lambda s: [int(x) for x in s.split()],
        "final": int,
        "corner": lambda s: s.strip(),
        "step-param": lambda s: s.strip(),
    }

    def run(self) -> list[nodes.Node]:
        fig_id = self.arguments[0]
        side = _load(fig_id)
        if side is None or fig_id not in load_registry():
            logger.warning(
                "ntp-steps: %s has not been generated or is not in figures.yml",
                fig_id,
                location=self.get_location(),
            )
            return []
        self.env.note_dependency(str(_sidecar_path(fig_id)))
        try:
            text = steps_text(fig_id, side, self.options, list(self.content))
        except ValueError as exc:
            logger.warning("ntp-steps: %s", exc, location=self.get_location())
            return []
        container = nodes.container()
        self.state.nested_parse(
            StringList(text.splitlines(), source=self.env.docname), self.content_offset, container
        )
        out = container.children
        if quick_differs(fig_id, side):
            for node in out:
                node["classes"].append("ntp-quick")
        return out


def steps_text(fig_id: str, side: dict, options: dict, content: list[str]) -> str:
    """The MyST text of an ``{ntp-steps}`` table (a pure function, tested): the columns are
    the requested steps the run reached and its last step; reference values at the steps it
    did not reach go into a sentence below the table.  Raises ValueError on a bad row."""
    params = side.get("parameters") or side.get("params") or {}
    last = int(params.get(options.get("step-param", "n_steps"), 0))
    final = options.get("final", last)
    all_steps = options.get("steps", [])
    steps = [t for t in all_steps if t < last]
    missing = [t for t in all_steps if t >= last] + ([final] if last != final else [])
    header = [options.get("corner", ""), *(f"$\\tau={t}$" for t in steps), f"$\\tau={last}$"]
    rows, beyond = [], []
    for line in content:
        if not line.strip():
            continue
        label, *cells = (c.strip() for c in line.split(" | "))
        if cells and cells[0] == "=":
            values = cells[1:]
            if len(values) != len(all_steps) + 1:
                raise ValueError(f"{label!r} needs one value per step and one at the last step")
            by_step = dict(zip([*all_steps, final], values, strict=True))
            at_last = by_step[final] if last == final else "–"
            rows.append([label, *(by_step[t] for t in steps), at_last])
            if missing:
                beyond.append(f"{label}: " + ", ".join(by_step[t] for t in missing))
            continue
        try:
            rows.append([label, *_step_cells(cells, side, steps, fig_id)])
        except KeyError as exc:
            raise ValueError(f"{fig_id} has no metric {exc}") from exc
    lines = [":::{list-table}", ":header-rows: 1", ":class: ntp-steps", ""]
    for row in [header, *rows]:
        lines.append(f"* - {row[0]}")
        lines.extend(f"  - {cell}" for cell in row[1:])
    lines.append(":::")
    if beyond:
        at = ", ".join(str(t) for t in missing)
        lines += [
            "",
            f"This run stops at $\\tau={last}$, before the steps of the reference runs; their "
            f"values at $\\tau=$ {at}: " + "; ".join(beyond) + ".",
        ]
    return "\n".join(lines)


MUTATIONS_JSON = paths.RESULTS_DIR / "mutations" / "report.json"


def mutations_text(data: dict) -> str:
    """The score line and the table of the mutation run (a pure function, tested)."""
    real = [o for o in data["outcomes"] if o["kind"] != "control"]
    when = data.get("when", "?")[:10]
    commit = (data.get("commit") or "unknown")[:10]
    explained = [o for o in real if o["applied"] and not o["killed"] and o.get("explained")]
    lines = [
        f"**Mutation score: {data['killed']}/{data['total']} killed** "
        f"(run on {when} at commit `{commit}`, {data.get('profile', 'quick')} profile"
        + (f"; {len(explained)} survivor(s) explained below" if explained else "")
        + ").",
        "",
        ":::{list-table}",
        ":header-rows: 1",
        ":class: ntp-mutations longtable",
        "",
        "* - mutation",
        "  - what is wrong",
        "  - figures",
        "  - caught by",
    ]
    for o in data["outcomes"]:
        if o["kind"] == "control":
            caught = "nothing (a control: it must pass)" if not o["by"] else "; ".join(o["by"])
        elif not o["applied"]:
            caught = "**not applied**"
        elif o["killed"]:
            # as code: a runner's error message quotes TeX with escaped backslashes
            caught = "; ".join(f"`{b}`" for b in o["by"])
        else:
            caught = f"**survived**: {o.get('explained') or 'no check caught it'}"
        lines += [
            f"* - `{o['name']}`",
            f"  - {o['what']}",
            f"  - {', '.join(o['figures'])}",
            f"  - {caught}",
        ]
    lines.append(":::")
    return "\n".join(lines)


class NTPMutations(SphinxDirective):
    """``{ntp-mutations}``: the mutation score and table (or a note when never run)."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        self.env.note_dependency(str(MUTATIONS_JSON))  # also missing: rebuilt until it is written
        if MUTATIONS_JSON.exists():
            text = mutations_text(json.loads(MUTATIONS_JSON.read_text()))
        else:
            text = (
                ":::{note}\nNo mutation run in this build. `make mutations` runs the "
                "catalogue and `make html` shows its score here.\n:::"
            )
        container = nodes.container()
        self.state.nested_parse(
            StringList(text.splitlines(), source=self.env.docname), self.content_offset, container
        )
        return container.children


MUTANTS_JSON = paths.RESULTS_DIR / "mutants" / "report.json"


def _survivor_reason(o: dict) -> str:
    """Why a mutant survives: equivalent (with the reason), read and left (a run could show
    it: the reason it is left), or unexplained."""
    if o.get("equivalent"):
        return f"equivalent: {o['equivalent']}"
    if o.get("read"):
        return f"counted as a survivor: {o['read']}"
    return "**unexplained**"


def mutants_text(data: dict) -> str:
    """The score line and the survivors of a ``make mutants`` run (pure)."""
    commit = (data.get("commit") or "unknown")[:10]
    dirty = " with uncommitted changes" if data.get("dirty") else ""
    scored = data["sampled"] - data["equivalent"]
    how = data.get("by_how") or {}
    minutes = data.get("seconds", 0) / 60
    lines = [
        f"**Code-level mutants, the figures as the test: {data['killed']}/{scored} killed "
        f"({100 * data['score']:.0f}%)**, a sample of {data['sampled']} (seed {data['seed']}) "
        f"from the {data['covered']} mutants on lines a figure executes "
        f"({data['population']} in all), run on {data['date']} at commit `{commit}`{dirty} "
        f"in {minutes:.0f} minutes. Killed by a claim: {how.get('claim', 0)}; by a panel "
        f"that no longer shows what it declares: {how.get('panel', 0)}; by a printed number or "
        f"word beyond its golden tolerance: {how.get('golden', 0)}; by the figure's pixels "
        f"beyond their baseline's: {how.get('image', 0)}; by an error the change "
        f"caused: {how.get('crash', 0)}; by a time limit: {how.get('timeout', 0)}. "
        f"{data['equivalent']} survivors change nothing a run can show (equivalent, each with "
        f"its reason in `tests/mutants/equivalent.yaml`) and are left out of the score; "
        f"{sum(1 for o in data['outcomes'] if o.get('read'))} survive that a run could show "
        f"(read, counted in the score, each with the reason it is left); "
        f"{data['survived_unexplained']} survive unexplained.",
    ]
    survivors = [o for o in data["outcomes"] if o["status"] == "survived"]
    if survivors:
        lines += [
            "",
            ":::{list-table} Survivors",
            ":header-rows: 1",
            ":class: ntp-mutations",
            "",
            "* - where",
            "  - change",
            "  - why it survives",
        ]
        for o in survivors:
            before, after = (
                x.replace("`", "'").replace("\n", " ")[:60] for x in (o["before"], o["after"])
            )
            lines += [
                f"* - `{o['file']}:{o['line']}` ({o['function'] or 'module level'})",
                f"  - `{before}` → `{after}`",
                f"  - {_survivor_reason(o)}",
            ]
        lines.append(":::")
    return "\n".join(lines)


class NTPMutants(SphinxDirective):
    """``{ntp-mutants}``: the code-level mutants' score (or a note saying it was not run)."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        self.env.note_dependency(str(MUTANTS_JSON))  # also missing: rebuilt until it is written
        if MUTANTS_JSON.exists():
            text = mutants_text(json.loads(MUTANTS_JSON.read_text()))
        else:
            text = (
                ":::{note}\nCode-level mutants: not run in this build. `make mutants` runs "
                "them and `make html` shows the score here.\n:::"
            )
        container = nodes.container()
        self.state.nested_parse(
            StringList(text.splitlines(), source=self.env.docname), self.content_offset, container
        )
        return container.children


def setup(app):
    app.add_role("ntpval", NTPVal())
    app.add_role("ntprange", NTPRange())
    app.add_directive("ntp-claims", NTPClaims)
    app.add_directive("ntp-steps", NTPSteps)
    app.add_directive("ntp-mutations", NTPMutations)
    app.add_directive("ntp-mutants", NTPMutants)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
