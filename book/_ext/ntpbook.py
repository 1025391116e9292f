"""Sphinx extension of the NTP companion book.

Directives (MyST pages only):

``{ntpfigure} <fig-id>``
    Includes ``book/figures/<fig-id>.png`` with a caption built from the registry
    (``figures.yml``): the title, where the figure stands in the paper (the book numbers its
    figures, the paper's number follows in parentheses), the optional content of the
    directive ("what to notice"), the claim (the registry's statements, each tested by
    ledger claims listed on the *Claims ledger* page), what is shown beyond it and where it
    departs from the paper; then, set apart in a small footer, how it was made: the executed
    notebook, the source data and the command that regenerates it.  The image's alternative
    text is the title in words (no TeX).
    An id missing from the registry, or a figure not generated yet, is a build warning
    (an error under ``-W``).

Quick builds: a page that shows a number or a figure of a quick-profile run opens with one
banner saying so (the numbers themselves carry no mark), as do the executed pages of
quick runs.

Navigation: every executed page says, under its title, which figure of which page it
makes (a link to the figure; an exercises page, which part it exercises), and every image
of the book links to its full-size file.

``{ntp-performance}``
    The tables and plot of the *Performance* page, from ``results/bench/bench.json``
    (written by ``make bench``); with ``:part: targets``, the table of the page's targets,
    each with its measured value and whether it is met, computed from the same file (a
    target without a measurement says so).  A note when no benchmark has been run.

``{ntp-reproducibility}``
    The table of the *Reproducing this book* page, built from the registry and the
    provenance sidecars: id and template notebook, paper label, the run (profile, commit,
    runtime), key metric.

Run the template: every executed page (``book/executed/<fig-id>``) opens, under its title,
with links that run its *template* notebook (``notebooks/...``, the registry's ``notebook``)
on Colab and on Binder (:mod:`ntpcore.runner.launch`), from the repository and branch of
``_config.yml`` (``repository:``, the one place they are set; Jupyter Book passes them as
the theme's ``repository_url`` and ``repository_branch``).  Plain links: nothing is fetched
when the page loads.

Links to statements: a Markdown link whose target is the label of a ``{prf:...}`` directive,
``[*Theorem: Implicit bias of gradient descent*](lin-thm-gd)`` (what the runner writes for a
notebook's ``[book: ...]`` references, :mod:`ntpcore.runner.bookrefs`), links to the
statement with its text as written (maths included).  MyST looks such a target up among the
standard labels, where sphinx-proof's are not; an unknown target stays a MyST warning.
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode
from sphinx.util.osutil import relative_uri

from ntpcore.core import paths
from ntpcore.runner import bookrefs, launch
from ntpcore.runner.registry import load_registry

logger = logging.getLogger(__name__)
PAPER_CITES = {
    "lin": "thrampoulidis2024implicit",
    "geo": "zhao2024geometry",
    "att": "li2024mechanics",
}


def _sidecar(fig_id: str) -> dict | None:
    path = paths.figure_dir() / f"{fig_id}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _data_link(fig_id: str, template: str, text: str | None = None) -> str:
    """A download link to the figure's source data (every panel's series), if it exists."""
    if not (paths.figure_dir() / f"{fig_id}.data.json").exists():
        return ""
    text = text or f"{fig_id}.data.json"
    return template.format(f"{{download}}`{text} </book/figures/{fig_id}.data.json>`")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _fmt_metric(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


class _MystDirective(SphinxDirective):
    def _parse(self, text: str) -> list[nodes.Node]:
        container = nodes.container()
        self.state.nested_parse(
            StringList(text.splitlines(), source=self.env.docname), self.content_offset, container
        )
        return container.children


#: TeX of the registry's titles, in words for an image's alternative text
_TEX_WORDS = {
    r"\\mathrm\{mm\}": "mm",
    r"\\mathrm\{in\}": "in",
    r"\\mathrm\{svm\}": "svm",
    r"\\mathrm\{fin\}": "fin",
    r"\\mathcal\{H\}": "H",
    r"\\mathcal\{F\}": "F",
    r"\\tilde S": "S̃",
    r"\\star": "*",
    r"\\lambda": "λ",
    r"\\Pi": "Π",
    r"\\cos": "cos",
    r"\\operatorname\{corr\}": "corr",
    r"\\mathrm\{CE\}": "CE",
    r"\\le\b": "≤",
    r"\\to\b": "→",
    r"\\\|": "‖",
    r"\\,": " ",
}


def tex_to_words(text: str) -> str:
    """A title with ``$...$`` maths as plain text (an image's alternative text, which a
    screen reader reads and a browser shows when the image is missing): no TeX left."""

    def words(m: re.Match) -> str:
        tex = m.group(1)
        for pattern, word in _TEX_WORDS.items():
            tex = re.sub(pattern, word, tex)
        tex = re.sub(r"\\[A-Za-z]+", "", tex)
        return re.sub(r"[{}^_\\$]", "", tex)

    return " ".join(re.sub(r"\$([^$]*)\$", words, text).split())


def figure_source(label: str, cite: str | None) -> str:
    """Where a figure stands in the paper, for its caption (after the title, in parentheses):
    ``Thrampoulidis [2024], Fig. 5``; ``beyond the paper's figures``; with a registry label
    ``— (Theorem 1)``: ``beyond the paper's figures; it illustrates Theorem 1 of ...``."""
    label = label.strip()
    ref = f"{{cite:t}}`{cite}`" if cite else "the paper"
    if label in ("-", "—", ""):
        return "beyond the paper's figures"
    m = re.match(r"^[-—]\s*\((?P<what>.+)\)$", label)
    if m:
        return f"beyond the paper's figures; it illustrates {m.group('what')} of {ref}"
    return f"{ref}, {label}"


class NTPFigure(_MystDirective):
    required_arguments = 1
    has_content = True

    def run(self) -> list[nodes.Node]:
        fig_id = self.arguments[0]
        registry = load_registry()
        if fig_id not in registry:
            logger.warning(
                "ntpfigure: %r is not in figures.yml", fig_id, location=self.get_location()
            )
            return []
        entry = registry[fig_id]
        side = _sidecar(fig_id)
        if side is None:
            logger.warning(
                "ntpfigure: %s has not been generated; run `python -m ntpcore.reproduce --only %s`",
                fig_id,
                fig_id,
                location=self.get_location(),
            )
            return []
        self.env.note_dependency(str(paths.figure_dir() / f"{fig_id}.json"))
        if side.get("explored"):
            logger.warning(
                "ntpfigure: book/figures/%s was made by an explored run (--set); rerun "
                "`python -m ntpcore.reproduce --only %s` to restore the paper figure",
                fig_id,
                fig_id,
                location=self.get_location(),
            )
            return []
        source = figure_source(entry.paper_label, PAPER_CITES.get(entry.paper))
        notice = _one_line("\n".join(self.content))
        caption = f"**{entry.title}** ({source}). {notice} *Claim:* {entry.claim_text}" + (
            f" *Shown:* {entry.shown}" if entry.shown else ""
        )
        if entry.deviations:
            caption += " *Differs from the paper:* " + " ".join(
                d.rstrip(".") + "." for d in entry.deviations
            )
        made = (
            f"How it was made: the {{doc}}`executed notebook </book/executed/{fig_id}>`"
            + _data_link(fig_id, ", its {}")
            + f"; regenerate with `python -m ntpcore.reproduce --only {fig_id}`."
        )
        classes = "ntp-figure" + (" ntp-quick" if _quick_differs(fig_id, side) else "")
        text = (
            f":::{{figure}} /book/figures/{fig_id}.png\n:name: {fig_id}\n"
            f":alt: {tex_to_words(entry.title)}\n:figclass: {classes}\n\n"
            f"{caption}\n\n{made}\n:::\n"
        )
        out = self._parse(text)
        for node in out:
            for legend in node.findall(nodes.legend):
                legend["classes"].append("ntp-made")
        return out


def _key_metric(name: str, metrics: dict) -> tuple[str, object] | None:
    """The registry's ``key_metric`` among a sidecar's metrics.

    ``prefix_*`` names a family whose members end in a number (e.g. one metric per
    recorded epoch): the member with the largest number is taken.
    """
    if name.endswith("*"):
        family = [k for k in metrics if k.startswith(name[:-1]) and k[len(name) - 1 :].isdigit()]
        name = max(family, key=lambda k: int(k[len(name) - 1 :]), default="")
    return (name, metrics[name]) if name in metrics else None


def _paper_label(label: str) -> str:
    """The registry's paper label for a table cell ("-" would start a nested bullet list)."""
    label = label.strip()
    return "beyond the paper" if label in ("-", "—", "") else label


class NTPReproducibility(_MystDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        rows = []
        for fig_id, entry in load_registry().items():
            side = _sidecar(fig_id) or {}
            key = _key_metric(entry.key_metric, side.get("metrics") or {})
            commit = (side.get("git") or {}).get("commit") or "-"
            dirty = " (dirty)" if (side.get("git") or {}).get("dirty") else ""
            runtime = side.get("notebook_wall_time_s")
            figure = (
                f"{{doc}}`{fig_id} </book/executed/{fig_id}>`" + _data_link(fig_id, " ({})", "data")
                if side
                else fig_id
            )
            run = side.get("profile", "not run")
            if side:
                run += f", `{commit[:10]}`{dirty}"
            if isinstance(runtime, int | float):
                run += f", {runtime:.1f} s"
            rows.append(
                [
                    # the template notebook under the figure, as its own paragraph
                    f"{figure}\n\n    `{Path(entry.notebook).name}`",
                    _paper_label(entry.paper_label),
                    run,
                    f"`{key[0]}` = {_fmt_metric(key[1])}" if key else "-",
                ]
            )
        header = [
            "figure (executed notebook) and template notebook",
            "paper label",
            "run: profile, commit, runtime",
            "key metric",
        ]
        quick = any(_quick_differs(f, _sidecar(f) or {}) for f in load_registry())
        # Four columns, as wide as their words need (book/_static/ntp.css, table.ntp-repro):
        # no identifier is cut at a laptop's width; on a phone the table scrolls sideways.
        # the quick banner; in the PDF the table runs over pages (longtable)
        classes = "ntp-repro longtable" + (" ntp-quick" if quick else "")
        lines = [":::{list-table}", ":header-rows: 1", f":class: {classes}", ""]
        for row in [header, *rows]:
            lines.append(f"* - {row[0]}")
            lines.extend(f"  - {cell}" for cell in row[1:])
        lines.append(":::")
        return self._parse("\n".join(lines))


# ----------------------------------------------------------------------------- Performance page
#
# Pure functions from the contents of ``results/bench/bench.json`` to MyST text, so that the
# tables can be checked without Sphinx (tests/test_performance_page.py).

BENCH_JSON = paths.RESULTS_DIR / "bench" / "bench.json"
SOLVER_PLOT = paths.RESULTS_DIR / "bench" / "solvers.png"
NOT_MEASURED = "not measured in this build (`make bench`)"
SPEEDUP_TARGET = 10.0  # "at least 10x faster", every speed-up target of the page
TOL = 1e-6  # equal accuracy: relative objective gap and worst constraint violation
#: size labels of the benchmark that name a file the reader does not have, as the page shows them
_LABELS = {"PERFORMANCE.md anchor": "anchor size (generic-solver time known)"}


def _fmt_s(entry: dict | None) -> str:
    if not entry:
        return "–"
    med = entry.get("median")
    if med is None:
        return str(entry.get("status", "failed"))
    spread = f" [{entry['min']:.3g}, {entry['max']:.3g}]" if entry.get("repeats", 1) > 1 else ""
    return f"{med:.3g} s{spread}{_fmt_cpu(entry)}{_fmt_mem(entry)}"


def _fmt_cpu(entry: dict) -> str:
    """``, CPU 41 s at load 7.2`` when the runs recorded their CPU times (one thread: the
    time on a core of its own) and the load before them, else nothing."""
    cpu = entry.get("cpu_times")
    if not cpu:
        return ""
    load = entry.get("load_before")
    at = f" at load {load:.1f}" if isinstance(load, int | float) else ""
    return f", CPU {sorted(cpu)[len(cpu) // 2]:.3g} s{at}"


def _fmt_mem(entry: dict) -> str:
    """``, peak 1.2 GB`` when the run recorded its peak resident memory, else nothing."""
    mb = entry.get("peak_rss_mb")
    if mb is None:
        return ""
    return f", peak {mb / 1024:.2g} GB" if mb >= 1024 else f", peak {mb:.0f} MB"


def _fmt_num(x: object, fmt: str = ".1e") -> str:
    return format(x, fmt) if isinstance(x, int | float) else "–"  # "-" would start a list


def _list_table(header: list[str], rows: list[list[str]], cls: str | None = None) -> list[str]:
    lines = [":::{list-table}", ":header-rows: 1", *([f":class: {cls}"] if cls else []), ""]
    for row in [header, *rows]:
        lines.append(f"* - {row[0]}")
        lines.extend(f"  - {cell}" for cell in row[1:])
    return [*lines, ":::", ""]


def _dur(seconds: float) -> str:
    """A duration as the page prints it: ms below 1 s, min from 2 min on."""
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    if seconds < 120:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min"


def _ratio(x: float) -> str:
    return f"{x:.2g}×" if x < 10 else f"{x:.0f}×"


def _timeout(entry: dict) -> float | None:
    """The time limit a solve ran past ("timeout after 600 s"), else None."""
    status = str(entry.get("status", ""))
    if entry.get("median") is None and status.startswith("timeout after "):
        return float(status.removeprefix("timeout after ").split()[0])
    return None


def _solver_row(data: dict, problem: str, dims: dict, law: str = "") -> dict | None:
    """The row of one size; ``law`` names the instance law of sizes that have several (a row
    without one is the problem's default law)."""
    for row in data.get("solvers") or []:
        if row["problem"] == problem and row["dims"] == dims and row.get("law", "") == law:
            return row
    return None


def _dims(row: dict) -> str:
    text = ", ".join(f"{k}={v}" for k, v in row["dims"].items())
    return f"{text} ({_law_name(row['law'])})" if row.get("law") else text


def _accuracy(row: dict) -> bool | None:
    """Equal accuracy of the specialised solution: True, False, or None (not checkable:
    no reference objective, or a reference that itself violates the constraints)."""
    sp = row["specialised"]
    if sp.get("median") is None or (sp.get("violation") or 0.0) > TOL:
        return False
    gap = sp.get("rel_gap")
    if gap is None:
        return None
    if gap <= TOL:
        return True
    ref = row.get(row.get("reference", "CLARABEL")) or {}
    return None if (ref.get("violation") or 0.0) > TOL else False


def _speedup_at(row: dict) -> tuple[str, bool | None]:
    """One size against cvxpy: its text, and whether the specialised solver is at least
    ``SPEEDUP_TARGET`` times faster than every generic backend at equal accuracy (None: not
    decidable from this run)."""
    sp = row["specialised"]
    if sp.get("median") is None:
        return f"specialised solver: {sp.get('status', 'failed')}", False
    t = sp["median"]
    parts, ratios, bounds = [], [], []
    for key, name in (("CLARABEL", "Clarabel"), ("SCS", "SCS")):
        entry = row.get(key) or {}
        limit = _timeout(entry)
        if entry.get("median") is not None:
            ratios.append(entry["median"] / t)
            parts.append(f"{name} {_dur(entry['median'])} ({_ratio(ratios[-1])})")
        elif limit is not None:
            bounds.append(limit / t)
            parts.append(f"{name} past its {_dur(limit)} limit (> {_ratio(bounds[-1])})")
        elif entry:
            parts.append(f"{name}: {entry.get('status', 'failed')}")
    text = f"{_dur(t)} vs " + ("; ".join(parts) if parts else "no generic solve")
    acc = _accuracy(row)
    if acc is False:
        return f"{text}; accuracy **not** equal", False
    if any(r < SPEEDUP_TARGET for r in ratios):
        return text, False
    if not ratios + bounds or any(b < SPEEDUP_TARGET for b in bounds) or acc is None:
        return text + ("" if acc else "; accuracy not checkable"), None
    return text, True


def _verdict(results: list[tuple[str, bool | None]]) -> str:
    """'yes' / '**no**' over several sizes, naming the sizes where they differ."""
    met = [m for _, m in results]
    if all(m is True for m in met):
        return "yes"
    if all(m is False for m in met):
        return "**no**"
    if all(m is None for m in met):
        return "undecided in this run"
    words = {True: "yes", False: "**no**", None: "undecided"}
    return "; ".join(f"{words[m]} at {name}" for name, m in results)


def _speedup_target(data: dict, problem: str, sizes: list[tuple[dict, str]]) -> tuple[str, str]:
    cells, results = [], []
    for dims, name in sizes:
        row = _solver_row(data, problem, dims)
        if row is None:
            cells.append(f"{name}: {NOT_MEASURED}")
            continue
        text, met = _speedup_at(row)
        cells.append(f"{name}: {text}")
        results.append((name, met))
    return "<br>".join(cells), _verdict(results) if results else NOT_MEASURED


def _within(
    data: dict,
    problem: str,
    dims: dict,
    limit_s: float,
    *,
    gap_tol: float | None = None,
    law: str = "",
) -> tuple[str, str]:
    """A certified specialised solve at one size within ``limit_s`` seconds; with
    ``gap_tol``, the certified relative duality gap the run recorded (``gap``) must be at
    most ``gap_tol`` too."""
    row = _solver_row(data, problem, dims, law)
    if row is None:
        return NOT_MEASURED, NOT_MEASURED
    sp = row["specialised"]
    generic = "; ".join(
        f"{k.title() if k == 'CLARABEL' else k} {_fmt_s(row.get(k))}"
        for k in ("CLARABEL", "SCS")
        if row.get(k) and "not run" not in str(row[k].get("status", ""))
    )
    generic = f" (cvxpy: {generic})" if generic else ""
    if sp.get("median") is not None:
        ok = sp["median"] <= limit_s and (sp.get("violation") or 0.0) <= TOL
        runs = sp.get("repeats", 1)
        spread = f" [{_dur(sp['min'])}, {_dur(sp['max'])}] ({runs} runs)" if runs > 1 else ""
        text = _dur(sp["median"]) + spread + _fmt_cpu(sp)
        if gap_tol is not None:
            gap = sp.get("gap")
            if gap is None:  # a run from before the bench recorded the certificate
                return f"{text}, gap not recorded{_fmt_mem(sp)}{generic}", (
                    "not measured: the run recorded no certified gap"
                )
            text += f", certified gap {gap:.1e}"
            ok = ok and gap <= gap_tol
        return f"{text}{_fmt_mem(sp)}{generic}", "yes" if ok else "**no**"
    limit = _timeout(sp)
    if limit is not None and limit >= limit_s:
        return f"past the {_dur(limit)} limit{generic}", "**no**"
    status = sp.get("status", "failed")
    if limit is not None or str(status).startswith("skipped"):
        return f"{status}{generic}", "not measured: the run's time limit was shorter"
    return f"{status}{generic}", "**no**"


#: the instance laws of the nuclear-norm ladder (``tools.bench.solvers.geo_supports``) as
#: the page names them
_LAWS = (
    ("", "ladder instance"),
    ("distinct", "all supports distinct"),
    ("zipf1.1-k4", "1-4 words, Zipf exponent 1.1"),
    ("zipf1.5-k4", "1-4 words, Zipf exponent 1.5"),
    ("zipf1.1-k8", "1-8 words, Zipf exponent 1.1"),
    ("wiki", "the Wikipedia sample's supports"),
)


def _law_name(law: str) -> str:
    return dict(_LAWS).get(law, law)


def _within_laws(
    data: dict,
    problem: str,
    dims: dict,
    limit_s: float,
    gap_tol: float,
    laws: tuple[str, ...] = ("", "distinct"),
) -> tuple[str, str]:
    """:func:`_within` on every instance law ``laws`` of one size: met if met on each; an
    instance the run did not measure says so (the target covers every law)."""
    cells, verdicts = [], []
    for law in laws:
        name = _law_name(law)
        row = _solver_row(data, problem, dims, law)
        text, met = _within(data, problem, dims, limit_s, gap_tol=gap_tol, law=law)
        n = (row or {}).get("distinct_supports")
        cells.append(f"{name}{f' ({n:,} distinct supports)' if n else ''}: {text}")
        verdicts.append((name, met))
    if all(met == NOT_MEASURED for _, met in verdicts):
        return NOT_MEASURED, NOT_MEASURED
    if len({met for _, met in verdicts}) == 1:
        return "<br>".join(cells), verdicts[0][1]
    grouped: dict[str, list[str]] = {}
    for name, met in verdicts:  # the laws grouped by verdict, in the order of the first
        grouped.setdefault(met, []).append(name)
    return "<br>".join(cells), "; ".join(f"{met} ({', '.join(n)})" for met, n in grouped.items())


def _agreement_target(data: dict, problem: str, reference: str) -> tuple[str, str]:
    """The specialised solver's relative objective gap (``rel_gap``, written by the bench
    against the run's reference) at every size where ``reference`` was that reference."""
    rows = [r for r in data.get("solvers") or [] if r["problem"] == problem]
    done = [
        r
        for r in rows
        if r.get("reference") == reference
        and (r.get(reference) or {}).get("objective")
        and r["specialised"].get("rel_gap") is not None
    ]
    if not done:
        return NOT_MEASURED, NOT_MEASURED
    gaps = [r["specialised"]["rel_gap"] for r in done]
    text = "<br>".join(f"{_dims(r)}: {g:.1e}" for r, g in zip(done, gaps, strict=True))
    others = len(rows) - len(done)
    if others:
        text += f"<br>({others} larger sizes: {reference} did not finish)"
    return text, "yes" if max(gaps) <= TOL else "**no**"


def _scale_target(
    data: dict, problem: str, anchor_vars: int, factor: float, limit_s: float
) -> tuple[str, str]:
    """The largest size of ``problem`` with at least ``factor`` times ``anchor_vars``
    variables solved (certified) in less than ``limit_s`` seconds."""
    rows = [r for r in data.get("solvers") or [] if r["problem"] == problem]
    big = [r for r in rows if r["n_vars"] >= factor * anchor_vars]
    if not big:
        return NOT_MEASURED, NOT_MEASURED
    fast = [
        r
        for r in big
        if r["specialised"].get("median") is not None
        and r["specialised"]["median"] < limit_s
        and (r["specialised"].get("violation") or 0.0) <= TOL
    ]
    row = max(fast or big, key=lambda r: r["n_vars"])
    text, _ = _within(data, problem, row["dims"], limit_s)
    times = row["n_vars"] / anchor_vars
    return f"{_dims(row)} ({row['n_vars']:,} variables, {times:.0f}× the anchor): {text}", (
        "yes" if fast else "**no**"
    )


def _trainer_rows(data: dict) -> dict[tuple[str, str], dict]:
    """Trainer rows by (data set, model) for this project's formulation."""
    out = {}
    for r in data.get("trainers") or []:
        if "ratio_to_baseline" in r and ": " in r["name"]:
            out[(r["group"].split(" set")[0], r["name"].split(":")[0])] = r
    return out


def _trainers_target(data: dict) -> tuple[str, str]:
    rows = _trainer_rows(data)
    if not rows:
        return NOT_MEASURED, NOT_MEASURED
    cells, verdict = [], []
    for (ds, model), r in rows.items():
        ms = 1e3 / r["steps_per_s"]
        ratio = r["ratio_to_baseline"]
        device = r.get("device", "cpu").upper()
        name = {"ufm": "UFM", "lstm": "LSTM"}.get(model, model)
        cells.append(f"{name}, {ds} set: {ms:.3g} ms/epoch, {_ratio(ratio)} ({device})")
        if ds == "synthetic" and model in ("ufm", "transformer"):
            ok = ratio >= SPEEDUP_TARGET
            verdict.append(f"{name} {'yes' if ok else '**no**'} on {device}")
    return "<br>".join(cells), ", ".join(verdict) or NOT_MEASURED


def _linear_trainers(data: dict) -> tuple[str, str]:
    rows = [
        r
        for r in data.get("trainers") or []
        if r["group"].startswith("linear") and "ratio_to_baseline" in r
    ]
    if not rows:
        return NOT_MEASURED, "–"
    text = " / ".join(f"{r['name'].split()[-1]} {r['ratio_to_baseline']:.2g}×" for r in rows)
    return f"{text} the loop's steps per second", "– (no target)"


#: The published experiments timed against their reference formulations (``make bench``,
#: :mod:`tools.bench.paired`), as the page names them.
PAIRED_NAMES = {"att_cyclic": "cyclic", "att_local": "local convergence", "ufm": "UFM"}


def _paired(data: dict, case: str) -> dict | None:
    """The paired measurement of ``case`` (reference against the project, cold), or None
    when this ``bench.json`` has none (or only the old comparison with typed times)."""
    entry = (data.get("experiments") or {}).get(case)
    return entry if isinstance(entry, dict) and "ratio" in entry else None


def _same_statistics(entry: dict) -> str:
    """'same statistics' or what differs beyond its tolerance, from the bench's comparison."""
    bad = [k for k, v in (entry.get("statistics") or {}).items() if not v.get("within")]
    if not entry.get("statistics"):
        return "statistics not compared"
    if bad:
        return "statistics **differ**: " + ", ".join(bad)
    return "same statistics"


def _paired_cell(case: str, entry: dict) -> str:
    ref, ours = entry["reference"], entry["ours"]
    return (
        f"{PAIRED_NAMES.get(case, case)}: reference {_dur(ref['median'])}, ours "
        f"{_dur(ours['median'])} cold, {_ratio(entry['ratio'])} ({_same_statistics(entry)})"
    )


def _paired_target(data: dict, cases: list[str]) -> tuple[str, str]:
    """Measured cell and verdict of a paired target: met when the ratio of the median CPU
    times reaches the case's target and every compared statistic is within its tolerance."""
    cells, results = [], []
    for case in cases:
        entry = _paired(data, case)
        if entry is None:
            cells.append(f"{PAIRED_NAMES.get(case, case)}: {NOT_MEASURED}")
            results.append((PAIRED_NAMES.get(case, case), None))
            continue
        cells.append(_paired_cell(case, entry))
        results.append((PAIRED_NAMES.get(case, case), bool(entry.get("met"))))
    if all(m is None for _, m in results):
        return NOT_MEASURED, NOT_MEASURED
    return "<br>".join(cells), _verdict(results)


def _attention_target(data: dict) -> tuple[str, str]:
    return _paired_target(data, ["att_cyclic", "att_local"])


def _gpu(data: dict) -> str | None:
    """The GPU of the benchmark machine: its name, "" for none, None if not recorded."""
    machine = data.get("machine") or {}
    if "gpu" not in machine:
        return None
    return machine["gpu"] or ""


def _gpu_target(data: dict) -> tuple[str, str]:
    gpu = _gpu(data)
    if not gpu:
        reason = "no GPU in this build" if gpu == "" else "this build recorded no GPU"
        text = f"not measured: {reason}"
    else:
        text = (
            f"not measured: a GPU ({gpu}) was present, but the project has not timed the "
            "paper profile of the geometry training figures on a GPU"
        )
    # the newest cold run with the lock: without it two workers trained the same model at
    # once, each on one core, which does not time the training alone
    cold = _whole_runs(data, "paper", cold=True, lock=True) or _whole_runs(data, "paper", cold=True)
    if cold and "geo-trained-logits-text" in cold[0]["figures"]:
        text += (
            ". On the CPU, `geo-trained-logits-text` (which trains the real-text transformer) "
            f"took {_dur(cold[0]['figures']['geo-trained-logits-text'])} in the cold-cache "
            f"paper-profile run of {cold[0]['started']}"
        )
    return text, "not measured"


def _order(run: dict) -> str:
    """The job order of a run record (records from before ``--order`` ran in registry order)."""
    return run.get("order", "registry")


def _whole_runs(data: dict, profile: str, order: str | None = None, **cache: object) -> list[dict]:
    """The runner's records of complete runs of ``profile`` without failures whose cache
    state matches ``cache`` (e.g. ``cold=True, lock=False``) and, if given, whose job order
    is ``order``, newest first."""
    return [
        r
        for r in reversed(data.get("runs") or [])
        if r["profile"] == profile
        and r["complete"]
        and not r["failed"]
        and (order is None or _order(r) == order)
        and all(r["cache"].get(k) == v for k, v in cache.items())
    ]


def _run_text(run: dict) -> str:
    git = run.get("git") or {}
    return (
        f"{_dur(run['wall_time_s'])} ({run['n_ok']} figures, `--jobs {run['jobs']}`, "
        f"{run['machine']['cpus']} CPUs, commit `{(git.get('commit') or '-')[:10]}`"
        f"{' (dirty)' if git.get('dirty') else ''}, {run['started']})"
    )


def _compare_runs(pair: list[tuple[str, list[dict]]]) -> tuple[str, str]:
    """Two cold paper runs, "before" then "after": the measured cell and the saving."""
    cells, times, setups = [], [], set()
    for name, runs in pair:
        if runs:
            times.append(runs[0]["wall_time_s"])
            setups.add((runs[0]["machine"]["cpus"], runs[0]["jobs"]))
            cells.append(f"{name}: {_run_text(runs[0])}")
        else:
            cells.append(f"{name}: not measured in this build")
    if not times:
        return NOT_MEASURED, NOT_MEASURED
    if len(times) < 2:
        return "; ".join(cells), "not measured (both runs are needed)"
    if len(setups) > 1:
        return "; ".join(cells), "not comparable: the two runs differ in CPUs or `--jobs`"
    saved = times[0] - times[1]
    verdict = "yes" if saved > 0 else "**no**"
    return "; ".join(cells), f"{verdict}: {_dur(abs(saved))} {'less' if saved > 0 else 'more'}"


def _lock_target(data: dict) -> tuple[str, str]:
    """The paper profile from a cold cache, with the per-key cache lock and without, both
    in the job order of the newest run without the lock."""
    off = _whole_runs(data, "paper", cold=True, lock=False)
    order = _order(off[0]) if off else None
    return _compare_runs(
        [
            ("without the lock", off),
            ("with the lock", _whole_runs(data, "paper", order, cold=True, lock=True)),
        ]
    )


def _order_target(data: dict) -> tuple[str, str]:
    """The paper profile from a cold cache with the lock, in the registry's order and in
    the runner's order (``--order reuse``)."""
    return _compare_runs(
        [
            (
                "registry order",
                _whole_runs(data, "paper", "registry", cold=True, lock=True),
            ),
            (
                "computations others reuse first",
                _whole_runs(data, "paper", "reuse", cold=True, lock=True),
            ),
        ]
    )


#: The paper profile's target on 2 cores (issue: the main job in 45 minutes).
PAPER_TARGET_S = 45 * 60


def _two_core_runs(data: dict) -> list[dict]:
    """Complete cold paper runs with the lock, on 2 CPUs with ``--jobs 2``, newest first."""
    return [
        r
        for r in _whole_runs(data, "paper", cold=True, lock=True)
        if r["machine"]["cpus"] == 2 and r["jobs"] == 2
    ]


def _paper_time_target(data: dict) -> tuple[str, str]:
    """The newest cold paper run on 2 cores against 45 minutes, the one before it beside."""
    runs = _two_core_runs(data)
    if not runs:
        return NOT_MEASURED, NOT_MEASURED
    text = f"this run: {_run_text(runs[0])}; the previous one: " + (
        _run_text(runs[1]) if len(runs) > 1 else "no earlier record in this build"
    )
    return text, "yes" if runs[0]["wall_time_s"] <= PAPER_TARGET_S else "**no**"


def timeline_text(data: dict) -> str:
    """MyST text of the timeline part: which worker ran each figure of the newest complete
    cold paper run that recorded a timeline, from when to when, and how long each figure
    took in the complete cold paper run before it."""
    runs = [r for r in reversed(data.get("runs") or []) if r["profile"] == "paper"]
    runs = [r for r in runs if r["complete"] and r["cache"].get("cold")]
    timed = [r for r in runs if r.get("timeline")]
    if not timed:
        return (
            "No complete cold-cache paper-profile run with a timeline in this build: run "
            "`rm -rf results/cache && make notebooks`, then `make bench` and `make html`."
        )
    run = timed[0]
    before = next(iter(runs[runs.index(run) + 1 :]), None)
    slots = sorted(run["timeline"].items(), key=lambda kv: (kv[1]["worker"], kv[1]["start_s"]))
    lines = [
        f"The newest complete cold-cache paper-profile run: {_run_text(run)}"
        + (f", **failed**: {', '.join(run['failed'])}" if run["failed"] else "")
        + ". Each worker runs one notebook at a time; times are from the start of the run; "
        + (
            f"the last column is the figure's wall time in the cold run before it, "
            f"{_run_text(before)}."
            if before
            else "this build holds no record of a cold run before it."
        ),
        "",
    ]
    for worker in sorted({slot["worker"] for _, slot in slots}):
        mine = [slot for _, slot in slots if slot["worker"] == worker]
        busy = sum(slot["end_s"] - slot["start_s"] for slot in mine)
        last = max(slot["end_s"] for slot in mine)
        lines.append(
            f"- worker {worker}: {len(mine)} figure{'s' * (len(mine) != 1)}, busy {_dur(busy)} of "
            f"{_dur(run['wall_time_s'])}, its last figure ended at {_dur(last)}."
        )
    rows = [
        [
            str(slot["worker"]),
            f"`{fig}`",
            _dur(slot["start_s"]) if slot["start_s"] >= 1 else "0 s",
            _dur(slot["end_s"]),
            _dur(slot["end_s"] - slot["start_s"]),
            _dur(before["figures"][fig]) if before and fig in before["figures"] else "–",
        ]
        for fig, slot in slots
    ]
    lines += [
        "",
        *_list_table(["worker", "figure", "start", "end", "wall time", "run before"], rows),
    ]
    return "\n".join(lines)


def _quick_profile_target(data: dict) -> tuple[str, str]:
    runs = _whole_runs(data, "quick")
    if runs:
        text = f"elapsed {_run_text(runs[0])}"
        return text, "yes" if runs[0]["wall_time_s"] <= 300 else "**no**"
    rows = [r for r in data.get("pipeline") or [] if r["profile"] == "quick"]
    if not rows:
        return NOT_MEASURED, NOT_MEASURED
    total = sum(r["wall_time_s"] for r in rows)
    text = (
        f"{len(rows)} notebooks, {_dur(total)} one after another (sum of their wall times; "
        "the elapsed time of a parallel run is not recorded)"
    )
    return text, "yes" if total <= 300 else "**no** one after another"


def performance_targets(data: dict) -> list[list[str]]:
    """The targets table of the Performance page: ``[target, measured, met?]`` per row,
    every value read from ``data`` (the contents of ``bench.json``)."""
    lin_anchor = {"V": 50, "d": 240, "m": 200}
    rows = [
        [
            "NTP-SVM $\\ge 10\\times$ cvxpy at the largest paper-like size "
            "($V=50$, $d=240$, $m=200$)",
            *_speedup_target(data, "ntp-svm", [(lin_anchor, "V=50, d=240, m=200")]),
        ],
        [
            "nuclear-norm SVM $\\ge 10\\times$ cvxpy at the papers' sizes",
            *_speedup_target(
                data,
                "nuclear-svm",
                [
                    ({"V": 30, "m": 16}, "16×30 (synthetic set)"),
                    ({"V": 60, "m": 150}, "60×150"),
                    ({"V": 104, "m": 403}, "104×403 (real-text size)"),
                ],
            ),
        ],
        [
            "Graph-SVM $\\ge 10\\times$ cvxpy",
            *_speedup_target(
                data,
                "graph-svm",
                [
                    ({"n": 6, "T": 4, "K": 6, "d": 8}, "K=6, d=8 (cyclic experiment)"),
                    ({"n": 4, "T": 6, "K": 8, "d": 8}, "K=8, d=8 (acyclic experiment)"),
                    ({"n": 40, "T": 6, "K": 16, "d": 16}, "K=d=16, n=40"),
                    ({"n": 200, "T": 8, "K": 32, "d": 32}, "K=d=32, n=200"),
                ],
            ),
        ],
        [
            "NTP-SVM on $\\ge 10\\times$ more variables than the anchor in < 60 s",
            *_scale_target(data, "ntp-svm", 50 * 240, 10, 60),
        ],
        [
            "nuclear-norm SVM $1000\\times5000$ certified (gap $10^{-6}$) in $\\le$ 60 s "
            "(median of repeated runs, one thread), on every support law of the ladder: its "
            "instance, all supports distinct, three Zipf laws and the Wikipedia sample's supports",
            *_within_laws(
                data, "nuclear-svm-scale", {"V": 1000, "m": 5000}, 60, 1e-6, tuple(dict(_LAWS))
            ),
        ],
        [
            "nuclear-norm SVM $2000\\times10000$ certified (gap $10^{-6}$) in $\\le$ 10 min, "
            "on the ladder's instance and on one whose supports are all distinct",
            *_within_laws(data, "nuclear-svm-scale", {"V": 2000, "m": 10000}, 600, 1e-6),
        ],
        [
            "nuclear-norm SVM: the largest $m$ ($V=1000$) one machine of 24 GB certifies "
            "(gap $10^{-6}$) in 10 minutes, per support law",
            *_largest_m_target(data),
        ],
        [
            "nuclear-norm SVM at vocabulary scale agrees with cvxpy + SCS within $10^{-6}$ "
            "(relative objective) at every size SCS finishes",
            *_agreement_target(data, "nuclear-svm-scale", "SCS"),
        ],
        [
            "Graph-SVM at growing sizes: $K=d=64$, $n=1000$ in < 60 s",
            *_within(data, "graph-svm", {"n": 1000, "T": 8, "K": 64, "d": 64}, 60),
        ],
        [
            "trainers (see {doc}`geo/training`) $\\ge 10\\times$ per epoch against the "
            "per-sample formulation (UFM and transformer, synthetic set)",
            *_trainers_target(data),
        ],
        [
            "GD / NGD / Adam on the linear model vs a plain numpy GD loop",
            *_linear_trainers(data),
        ],
        [
            "attention experiments ({doc}`att/experiments`: cyclic TPGs, local convergence) "
            "$\\ge 100\\times$ their reference formulation (the authors' loops re-derived: "
            "torch autograd, one trial after another, a loop over samples for the reduced runs), "
            "cold, with the same statistics",
            *_attention_target(data),
        ],
        [
            "UFM training ({doc}`geo/training`: 30k epochs, synthetic set) $\\ge 10\\times$ a "
            "lean torch loop of the authors' formulation (the samples one-hot, autograd, AdamW), "
            "cold, with the same statistics",
            *_paired_target(data, ["ufm"]),
        ],
        [
            "real-text transformer: paper profile $\\le$ 15 min on one GPU",
            *_gpu_target(data),
        ],
        [
            "paper profile from a cold cache: a computation two notebooks need at the same "
            "time is done once (the per-key cache lock), and the whole run is faster for it",
            *_lock_target(data),
        ],
        [
            "paper profile from a cold cache: the figures whose trained models other figures "
            "read start first and those readers last (`--order reuse`), so no worker waits "
            "on a model another worker is training",
            *_order_target(data),
        ],
        [
            "paper profile from a cold cache (`make notebooks`: the lock, `--order reuse`) "
            "$\\le$ 45 min on 2 cores with `--jobs 2`; the previous such run beside it",
            *_paper_time_target(data),
        ],
        ["quick profile of the whole book $\\le$ 5 min on 2 cores", *_quick_profile_target(data)],
    ]
    return rows


def _machine_line(data: dict) -> str:
    machine = data.get("machine") or {}
    git = data.get("git") or {}
    gpu = _gpu(data)
    gpu_text = {None: "GPU not recorded", "": "no GPU"}.get(gpu, f"GPU {gpu} (not used)")
    limit = data.get("solver_time_limit_s")
    limit_text = f", each solve limited to {_dur(limit)}" if limit else ""
    wall = data.get("bench_wall_time_s")
    wall_text = f"; the run took {_dur(wall)}" if wall else ""
    steps, adamw = machine.get("att_steps"), machine.get("ufm_adamw")
    steps_text = (
        ""
        if steps is None
        else ", attention steps compiled"
        if steps == "compiled"
        else f", attention steps on numpy ({steps})"
    ) + (f", UFM AdamW step {adamw}" if adamw else "")
    return (
        f"Measured on `{machine.get('platform', '?')}` with {machine.get('cpus', '?')} "
        f"CPU(s), {gpu_text}{steps_text}, commit `{(git.get('commit') or '-')[:10]}`"
        f"{' (dirty)' if git.get('dirty') else ''}, started {data.get('started', '?')}"
        f"{', **quick mode**' if data.get('quick') else ''}{limit_text}{wall_text}."
    )


def _accuracy_line(data: dict) -> str:
    rows = [r for r in data.get("solvers") or [] if r["specialised"].get("median") is not None]
    gaps = [
        r["specialised"]["rel_gap"] for r in rows if r["specialised"].get("rel_gap") is not None
    ]
    if not gaps:
        return ""
    worst = {
        key: max(
            (r[key]["violation"] for r in rows if (r.get(key) or {}).get("violation") is not None),
            default=None,
        )
        for key in ("specialised", "CLARABEL", "SCS")
    }
    held = max(gaps) <= TOL and (worst["specialised"] or 0.0) <= TOL
    return (
        f"*Equal accuracy* {'held' if held else '**did not hold**'} everywhere a generic "
        f"solver finished: the specialised objectives are within "
        f"{_fmt_num(max(gaps))} (relative) of the reference, their worst constraint violation "
        f"is {_fmt_num(worst['specialised'])} (Clarabel {_fmt_num(worst['CLARABEL'])}, "
        f"SCS {_fmt_num(worst['SCS'])})."
    )


def targets_text(data: dict) -> str:
    """MyST text of the targets part: the run, equal accuracy, the targets table."""
    out = [_machine_line(data), "", _accuracy_line(data), ""]
    out += _list_table(["target", "measured", "met?"], performance_targets(data))
    return "\n".join(out)


def tables_text(data: dict) -> str:
    """MyST text of the tables part: every measurement of ``bench.json``."""
    out = [
        _machine_line(data) + " Times are medians over repeated runs, [min, max] in brackets.",
        "",
    ]
    solvers = data.get("solvers") or []
    if solvers:
        out += ["### Max-margin solvers against cvxpy", ""]
        if SOLVER_PLOT.exists():
            out += [
                "```{image} /results/bench/solvers.png\n:alt: solver times\n:width: 100%\n```",
                "",
            ]
        for problem in dict.fromkeys(r["problem"] for r in solvers):
            rows = [r for r in solvers if r["problem"] == problem]
            out += [f"**{rows[0]['title']}**", ""]
            table = []
            for r in rows:
                sp = r["specialised"]
                label = _LABELS.get(r["label"], r["label"])
                if r.get("distinct_supports"):
                    n = r["distinct_supports"]
                    label = f"{label}<br>" * bool(label) + f"{n:,} distinct supports"
                cert = f", certified gap {sp['gap']:.1e}" if sp.get("gap") is not None else ""
                table.append(
                    [
                        f"{_dims(r)}<br>{label}" if label else _dims(r),
                        f"{r['n_vars']:,}",
                        _fmt_s(sp) + cert,
                        _fmt_s(r.get("CLARABEL")),
                        _fmt_s(r.get("SCS")),
                        " / ".join(
                            f"{r[k]['speedup']:.1f}x" if (r.get(k) or {}).get("speedup") else "–"
                            for k in ("CLARABEL", "SCS")
                        ),
                        _fmt_num(sp.get("rel_gap")),
                        f"{_fmt_num(sp.get('violation'))} / "
                        + " / ".join(
                            _fmt_num((r.get(k) or {}).get("violation")) for k in ("CLARABEL", "SCS")
                        ),
                    ]
                )
            out += _list_table(
                [
                    "instance",
                    "variables",
                    "specialised",
                    "cvxpy + Clarabel",
                    "cvxpy + SCS",
                    "speed-up (Clarabel / SCS)",
                    "objective gap (vs reference)",
                    "worst violation (ours / Cl. / SCS)",
                ],
                table,
            )
    out += scaling_text(data)
    trainers = data.get("trainers") or []
    if trainers:
        out += ["### Trainers", ""]
        out += _list_table(
            ["setting", "implementation", "device", "steps / s", "ratio to baseline"],
            [
                [
                    r["group"],
                    r["name"] + (" (baseline)" if r.get("baseline") else ""),
                    r.get("device", "cpu").upper(),
                    f"{r['steps_per_s']:.4g}",
                    f"{r['ratio_to_baseline']:.1f}x" if "ratio_to_baseline" in r else "–",
                ]
                for r in trainers
            ],
        )
    paired = [(c, e) for c in PAIRED_NAMES if (e := _paired(data, c)) is not None]
    if paired:
        out += [
            "### Published experiments against their reference formulations",
            "",
            "Each run is cold (a fresh process; libraries imported, nothing computed or cached "
            "before the clock starts), on one thread; times are CPU seconds, reference and "
            "project runs alternating. The statistics are those of the last pair, at the last "
            "step, with the largest difference and the tolerance it is held to.",
            "",
        ]
        rows = []
        for case, e in paired:
            stats = "<br>".join(
                f"{k}: {_fmt_num(v.get('max_diff_final', v.get('rel_diff')), '.1e')} "
                f"(≤ {_fmt_num(v.get('tol'), '.0e')}){'' if v.get('within') else ' **no**'}"
                for k, v in (e.get("statistics") or {}).items()
            )
            rows.append(
                [
                    e.get("title", case),
                    e.get("reference_formulation", "–"),
                    _fmt_s(e["reference"]),
                    _fmt_s(e["ours"]),
                    f"{_ratio(e['ratio'])} (target {_ratio(e['target'])})",
                    stats,
                ]
            )
        out += _list_table(
            [
                "experiment",
                "reference formulation",
                "reference",
                "ours (cold)",
                "ratio",
                "largest difference of each statistic (its tolerance)",
            ],
            rows,
        )
    pipeline = data.get("pipeline") or []
    if pipeline:
        out += ["### Figures: wall time per notebook", ""]
        for profile in ("quick", "paper"):
            rows = sorted(
                (r for r in pipeline if r["profile"] == profile),
                key=lambda r: -r["wall_time_s"],
            )
            if not rows:
                continue
            total = sum(r["wall_time_s"] for r in rows)
            out += [
                f"**{profile} profile**: {len(rows)} figures, {total:.0f} s in total "
                "(notebook wall time, including kernel start-up), slowest first.",
                "",
            ]
            out += _list_table(
                ["figure", "wall time", "of which compute"],
                [
                    [
                        f"`{r['fig_id']}`",
                        f"{r['wall_time_s']:.1f} s",
                        _fmt_num(r.get("compute_s"), ".1f") + " s",
                    ]
                    for r in rows
                ],
            )
    return "\n".join(out)


def _scaling_cell(entry: dict) -> str:
    """One point of the scaling table: median wall time [min, max] over its runs, the CPU
    time, peak memory, iterations and the reduced size."""
    if entry.get("median") is None:
        return str(entry.get("status", "failed"))
    n = entry.get("repeats", 1)
    spread = f" [{_dur(entry['min'])}, {_dur(entry['max'])}], {n} runs" if n > 1 else ", 1 run"
    cpu = entry.get("cpu_times")
    cpu_text = f", CPU {_dur(sorted(cpu)[len(cpu) // 2])}" if cpu else ""
    shape = entry.get("reduced_shape")
    size = f", {shape[0]:,}×{shape[1]:,} reduced" if shape else ""
    its = f", {entry['iterations']} it." if entry.get("iterations") else ""
    return f"{_dur(entry['median'])}{spread}{cpu_text}{_fmt_mem(entry)}{its}{size}"


def _largest_m_text(law: str, fit: dict) -> str:
    if fit.get("largest_m") is None:
        return f"{_law_name(law)}: not decidable from this run"
    how = (
        f"extrapolated from the measured points: CPU time per iteration ∝ "
        f"m^{fit.get('time_exponent_used', fit['time_exponent']):.2f} (fitted "
        f"{fit['time_exponent']:.2f} through the two largest points), times "
        f"{fit.get('iterations_max', '?')} iterations (the most seen), memory + "
        f"{fit.get('memory_mb_per_1000', float('nan')):.0f} MB per 1,000 contexts; the "
        f"{fit.get('limited_by', 'time')} bound"
        if fit.get("extrapolated")
        else "measured"
    )
    return f"{_law_name(law)}: m ≈ {fit['largest_m']:,} ({how})"


def scaling_text(data: dict) -> list[str]:
    """The time and peak memory of the nuclear-norm SVM solver against ``m`` per support law
    (``python -m tools.bench --only geo-scaling``) and the largest ``m`` certified in 10
    minutes on a 24 GB machine, extrapolated where no point reached it."""
    sc = data.get("geo_scaling") or {}
    rows = sc.get("rows") or []
    if not rows:
        return []
    laws = list(dict.fromkeys(r["law"] for r in rows))
    ms = sorted({r["m"] for r in rows})
    table = []
    for m in ms:
        cells = [f"{m:,}"]
        for law in laws:
            row = next((r for r in rows if r["law"] == law and r["m"] == m), None)
            cells.append(_scaling_cell(row["specialised"]) if row else "–")
        table.append(cells)
    out = [
        f"### Nuclear-norm SVM: time and memory against the number of contexts (V = {sc['V']:,})",
        "",
        "The large-vocabulary solver certified to a relative duality gap of "
        f"{sc.get('tol', 1e-6):.0e} on one thread, each point in a process of its own (peak: "
        "its resident memory), started "
        f"{sc.get('started', '?')}. Wall time: median [min, max] of the runs; the CPU time "
        "beside it is the median run's CPU time, which the load of a shared machine moves "
        "far less than the wall time. The largest m is that of a core of its own: the CPU "
        "times are fitted.",
        "",
    ]
    out += _list_table(["m", *[_law_name(law) for law in laws]], table)
    growth = sc.get("growth") or {}
    if growth:
        out += [
            "Largest m certified within 10 minutes on one machine of 24 GB: "
            + "; ".join(_largest_m_text(law, fit) for law, fit in growth.items())
            + ".",
            "",
        ]
    return out


def _largest_m_target(data: dict) -> tuple[str, str]:
    growth = (data.get("geo_scaling") or {}).get("growth") or {}
    if not growth:
        return NOT_MEASURED + " (`python -m tools.bench --only geo-scaling`)", NOT_MEASURED
    return "<br>".join(_largest_m_text(law, fit) for law, fit in growth.items()), "– (no target)"


class NTPPerformance(_MystDirective):
    """``{ntp-performance}``: the measured tables; with ``:part: targets`` the targets table,
    with ``:part: timeline`` the timeline of the newest cold paper run."""

    has_content = False
    option_spec = {"part": lambda s: s.strip()}

    def run(self) -> list[nodes.Node]:
        part = self.options.get("part", "tables")
        if part not in ("tables", "targets", "timeline"):
            logger.warning("ntp-performance: unknown part %r", part, location=self.get_location())
            return []
        # noted whether or not the file exists yet: a missing dependency rebuilds the page on
        # every build, so the page shows the results as soon as `make bench` writes them
        self.env.note_dependency(str(BENCH_JSON))
        if not BENCH_JSON.exists():
            shown = self.env.temp_data.setdefault("ntp_bench_note", False)
            if shown:  # one note per page; the other parts' sections are left out
                return [empty_marker()]
            self.env.temp_data["ntp_bench_note"] = True
            return self._parse(
                ":::{note}\nNo benchmark results in this build: the measured targets, the "
                "solvers' and trainers' timings and the paper run's timeline appear on this "
                "page after `make bench` and `make html`.\n:::\n"
            )
        data = json.loads(BENCH_JSON.read_text())
        text = {"targets": targets_text, "timeline": timeline_text, "tables": tables_text}[part]
        return self._parse(text(data))


EMPTY = "ntp-empty-section"


def empty_marker() -> nodes.comment:
    """What a directive returns when its data are not in this build: the section around it
    is then left out of the page (:func:`_drop_empty_sections`), rather than shown with a
    heading over nothing."""
    return nodes.comment("", EMPTY)


def _drop_empty_sections(app, doctree) -> None:
    """``doctree-read``: remove each section (below the page's title) that holds a marker of
    :func:`empty_marker`."""
    doomed: list[nodes.Node] = []
    for marker in list(doctree.findall(nodes.comment)):
        if marker.astext() != EMPTY:
            continue
        section = marker.parent
        while section is not None and not isinstance(section, nodes.section):
            section = section.parent
        if section is not None and isinstance(section.parent, nodes.section):
            doomed.append(section)
        else:
            marker.parent.remove(marker)
    for section in dict.fromkeys(doomed):  # each once, outer ones first
        if section.parent is not None and section in section.parent.children:
            section.parent.remove(section)


def _dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    """Drop repeated ``<script>`` entries of a page.  sphinx-thebe 0.3.1 registers its inline
    configuration (``const THEBE_JS_URL = ...``) twice, so every page logged "Identifier
    'THEBE_JS_URL' has already been declared" in the browser."""
    seen, kept = set(), []
    for js in context.get("script_files", []):
        attrs = getattr(js, "attributes", {}) or {}
        key = (  # an inline script has filename None or "" depending on who added it
            getattr(js, "filename", str(js)) or "",
            tuple(sorted((k, str(v)) for k, v in attrs.items())),
        )
        if key not in seen:
            seen.add(key)
            kept.append(js)
    context["script_files"] = kept


class StatementLinks(SphinxPostTransform):
    """``[text](label)`` with the label of a ``{prf:...}`` statement: a link to it."""

    default_priority = 8  # before MyST's resolver of Markdown links (9)

    def run(self, **kwargs) -> None:
        proofs = getattr(self.env, "proof_list", {})
        for node in list(self.document.findall(addnodes.pending_xref)):
            target = node.get("reftarget", "")
            if node.get("reftype") != "myst" or node.get("refdomain") or target not in proofs:
                continue
            ref = make_refnode(
                self.app.builder,
                node.get("refdoc", self.env.docname),
                proofs[target]["docname"],
                target,
                node[0].deepcopy(),
            )
            node.replace_self(ref)


EXECUTED_PREFIX = "book/executed/"


def _python_value(value: object) -> str:
    """A registry override as the notebook's parameters cell writes it."""
    return json.dumps(value) if isinstance(value, (str, list)) else repr(value)


def launch_paragraph(
    notebook: str, repo: launch.Repository, params: dict | None = None
) -> nodes.paragraph:
    """The paragraph under an executed page's title: its template, on Colab and on Binder,
    and the registry's overrides (``params``) that make this page's figure from it."""
    para = nodes.paragraph(classes=["ntp-launch"])
    para += nodes.Text("Run the template notebook ")
    para += nodes.literal(text=notebook)
    para += nodes.Text(" yourself: ")
    para += nodes.reference("", "open in Colab", refuri=launch.colab_url(repo, notebook))
    para += nodes.Text(" (installs the package first) or ")
    para += nodes.reference("", "launch on Binder", refuri=launch.binder_url(repo, notebook))
    para += nodes.Text(" (builds the repository’s environment). ")
    if params:
        para += nodes.Text("For this figure, set ")
        for k, (name, value) in enumerate(params.items()):
            para += nodes.Text(", " if k else "")
            para += nodes.literal(text=f"{name} = {_python_value(value)}")
        para += nodes.Text(" in its parameters cell (its defaults make another figure); ")
    else:
        para += nodes.Text("Its defaults make this figure; ")
    para += nodes.Text("a run there is an exploration and says where its outputs went.")
    return para


def _add_launch_links(app, doctree) -> None:
    """``doctree-read``: the launch paragraph under the title of an executed page."""
    docname = app.env.docname
    if not docname.startswith(EXECUTED_PREFIX):
        return
    fig_id = docname[len(EXECUTED_PREFIX) :]
    entry = load_registry().get(fig_id)
    section = next(iter(doctree.findall(nodes.section)), None)
    if entry is None or section is None or not isinstance(section[0], nodes.title):
        logger.warning(
            "ntpbook: %s is not a registered figure with a title; no Colab/Binder links",
            docname,
            location=docname,
        )
        return
    options = app.config.html_theme_options or {}
    try:
        repo = launch.Repository(
            str(options.get("repository_url") or ""), str(options.get("repository_branch") or "")
        )
    except launch.LaunchError as exc:
        logger.warning("ntpbook: no Colab/Binder links: %s", exc, location=docname)
        return
    section.insert(1, launch_paragraph(entry.notebook, repo, entry.params))
    section.insert(1, backlink_paragraph(fig_id, entry.paper))


# ----------------------------------------------------------------------------- quick banner

QUICK_CLASSES = {"ntp-quick"}
QUICK_BANNER = (
    "The figures and measured numbers on this page come from the *quick* profile: shorter "
    "runs and smaller sets than the papers', which test the book in a few minutes. "
    "`make book` (the paper profile) makes every figure with the papers' settings."
)


def _quick_differs(fig_id: str, side: dict) -> bool:
    """A quick-profile run that the quick profile changes (registry ``quick`` not empty)."""
    entry = load_registry().get(fig_id)
    return side.get("profile") == "quick" and bool(entry is not None and entry.quick)


def _add_quick_banner(app, doctree) -> None:
    """``doctree-read``: one banner under the title of a page that shows numbers or figures
    of quick-profile runs that differ from the paper profile's (the numbers themselves carry
    no mark): an executed page of such a run, or a page with such a number, figure or table.
    """
    docname = app.env.docname
    fig_id = docname[len(EXECUTED_PREFIX) :] if docname.startswith(EXECUTED_PREFIX) else ""
    quick = _quick_differs(fig_id, _sidecar(fig_id) or {}) if fig_id else False
    quick = quick or any(
        QUICK_CLASSES & set(node.get("classes", ())) for node in doctree.findall(nodes.Element)
    )
    section = next(iter(doctree.findall(nodes.section)), None)
    if not quick or section is None or not isinstance(section[0], nodes.title):
        return
    banner = nodes.admonition("", classes=["ntp-quick-banner"])
    banner += nodes.title("", "Quick build")
    para = nodes.paragraph()
    for k, piece in enumerate(QUICK_BANNER.split("`")):
        para += nodes.literal(text=piece) if k % 2 else _emphasised(piece)
    banner += para
    section.insert(1, banner)


def _emphasised(text: str) -> list[nodes.Node]:
    out = []
    for k, piece in enumerate(text.split("*")):
        out.append(nodes.emphasis(text=piece) if k % 2 else nodes.Text(piece))
    return out


# ----------------------------------------------------------------------------- navigation


def backlink_paragraph(fig_id: str, paper: str) -> nodes.paragraph:
    """The paragraph under an executed page's title that links back to the book: the figure
    this notebook makes (``Fig. N``, on its page), or, for a notebook whose figure stands on
    no page (the exercises), the part it belongs to."""
    para = nodes.paragraph(classes=["ntp-backlink"])
    page = bookrefs.figure_pages().get(fig_id)
    titles = {doc: title for title, doc in bookrefs.pages().items()}
    if page is not None:
        para += nodes.Text("This notebook makes ")
        para += addnodes.pending_xref(
            "",
            nodes.inline("", "Fig. {number}"),
            refdomain="std",
            reftype="numref",
            reftarget=fig_id,
            refexplicit=True,
            refwarn=True,
        )
        para += nodes.Text(" of the page ")
    else:
        page = f"book/{paper}/index"
        para += nodes.Text("Exercises of the part that opens with ")
    para += addnodes.pending_xref(
        "",
        nodes.emphasis("", titles.get(page, page)),
        refdomain="std",
        reftype="doc",
        reftarget=f"/{page}",
        refexplicit=True,
        refwarn=True,
    )
    para += nodes.Text(".")
    return para


def _link_images(app, doctree, docname) -> None:
    """``doctree-resolved``: every image (a figure, a notebook's plot) links to its file at
    full size, which a phone can zoom (Sphinx links only images scaled by an option)."""
    if app.builder.format != "html" or not hasattr(app.builder, "imagedir"):
        return
    imgpath = relative_uri(app.builder.get_target_uri(docname), app.builder.imagedir)
    for image in list(doctree.findall(nodes.image)):
        if isinstance(image.parent, nodes.reference):
            continue
        uri = image.get("candidates", {}).get("image/png") or image["uri"]
        if uri not in app.env.images:
            continue
        ref = nodes.reference(
            "",
            "",
            internal=True,
            refuri=posixpath.join(imgpath, app.env.images[uri][1]),
            reftitle="Open the image at full size",
            classes=["image-reference", "ntp-full-size"],
        )
        image.replace_self(ref)
        ref.append(image)


def _plain_numbers(app, doctree, docname) -> None:
    """``doctree-resolved``, for the PDF: a number read from a run prints as the number (the
    LaTeX writer would print its tooltip, the run that measured it, beside it)."""
    if app.builder.format != "latex":
        return
    for node in list(doctree.findall(nodes.abbreviation)):
        if str(node.get("explanation", "")).startswith("measured by "):
            node.replace_self(nodes.inline("", node.astext(), classes=node["classes"]))


def _latex_macros(app, config) -> None:
    """``config-inited``: the MathJax macros of ``_config.yml`` (``\\Wmm``, ``\\hb``, ...)
    defined for LaTeX as well, so that the PDF (``make pdf``) typesets the same symbols; one
    list of macros for both."""
    macros = ((config.mathjax3_config or {}).get("tex") or {}).get("macros") or {}
    lines = [f"\\def\\{name}{{{body}}}" for name, body in macros.items() if isinstance(body, str)]
    elements = dict(config.latex_elements or {})
    elements["preamble"] = elements.get("preamble", "") + "\n" + "\n".join(lines) + "\n"
    config.latex_elements = elements


def setup(app):
    # MathJax on every page: Sphinx adds it only where the page's own text has maths, and the
    # checks report of an executed page (a notebook output) has maths of its own
    app.set_html_assets_policy("always")
    app.connect("config-inited", _latex_macros)
    app.connect("html-page-context", _dedupe_scripts, priority=1000)  # after the others
    app.connect("doctree-read", _add_launch_links)
    app.connect("doctree-read", _add_quick_banner, priority=900)  # after the launch links
    app.connect("doctree-resolved", _link_images)
    app.connect("doctree-resolved", _plain_numbers)
    # before the collectors of the page's table of contents (priority 500) read the sections
    app.connect("doctree-read", _drop_empty_sections, priority=100)
    app.add_post_transform(StatementLinks)
    app.add_directive("ntp-performance", NTPPerformance)
    app.add_directive("ntpfigure", NTPFigure)
    app.add_directive("ntp-reproducibility", NTPReproducibility)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
