r"""Numbers and claims in the book, read from the runs that produced them.

Role ``{ntpval}`<fig-id>:<key>[|<format>]```
    Pastes a measured number from the provenance sidecar of a figure
    (``book/figures/<fig-id>.json``): ``<key>`` is a key of the sidecar's ``metrics``
    (e.g. ``{ntpval}`lin-ngd-adam:adam_ce_gap|.1e```), or ``claim:<slug>`` for the measured
    value of one of the figure's claims.  ``<format>`` is a Python format spec (default
    ``.3g``); inside a Markdown table write the bar as ``\|``.  A number from a
    quick-profile run is marked *(quick)*; every number carries a tooltip naming the figure
    and the profile.  A missing figure, metric or claim is a build warning, i.e. an error
    under ``-W``: the book never shows a number that no run made.

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
    """A measured value as the book prints it (scientific notation typeset as x·10^k)."""
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
        profile = side.get("profile", "?")
        node = nodes.abbreviation(
            shown,
            shown,
            explanation=f"measured by {fig_id} ({profile} profile)",
            classes=["ntpval", f"ntpval-{profile}"],
        )
        if profile == "paper":
            return [node], []
        # the number and its mark stay on one line (book/_static/ntp.css, .ntpval-group)
        quick = nodes.emphasis(" (quick)", " (quick)", classes=["ntpval-quick"])
        return [nodes.inline("", "", node, quick, classes=["ntpval-group"])], []


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
            rows.append(
                [f"{{doc}}`{fig_id} </book/executed/{fig_id}>`", st.says, "; ".join(tested)]
            )
    return rows


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
            ":class: ntp-claims ntp-ledger",
            ":widths: 34 16 12 18 20",
            "",
        ]
        header = LEDGER_HEADER
        for row in [header, *(self._row(c) for c in rows)]:
            lines.append(f"* - {row[0]}")
            lines.extend(f"  - {cell}" for cell in row[1:])
        lines.append(":::")
        return self._parse("\n".join(lines))

    @staticmethod
    def _statements(paper: str, claims: list[dict]) -> str:
        lines = [
            ":::{list-table}",
            ":header-rows: 1",
            ":class: ntp-claims",
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
    def _row(c: dict) -> list[str]:
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
            f"{statement} (figure {{doc}}`{fig_id} </book/executed/{fig_id}>`)",
            c["source"],
            paper,
            ours,
            status,
        ]


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
        ":class: ntp-mutations",
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
        if MUTATIONS_JSON.exists():
            self.env.note_dependency(str(MUTATIONS_JSON))
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
        f"that no longer shows what it declares: {how.get('panel', 0)}; by an error the change "
        f"caused: {how.get('crash', 0)}; by a time limit: {how.get('timeout', 0)}. "
        f"{data['equivalent']} survivors change nothing a run can show (equivalent, each with "
        f"its reason in `tests/mutants/equivalent.yaml`) and are left out of the score; "
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
                f"  - {o['equivalent'] or '**unexplained**'}",
            ]
        lines.append(":::")
    return "\n".join(lines)


class NTPMutants(SphinxDirective):
    """``{ntp-mutants}``: the code-level mutants' score (or a note saying it was not run)."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        if MUTANTS_JSON.exists():
            self.env.note_dependency(str(MUTANTS_JSON))
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
    app.add_directive("ntp-claims", NTPClaims)
    app.add_directive("ntp-mutations", NTPMutations)
    app.add_directive("ntp-mutants", NTPMutants)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
