"""Sphinx extension of the NTP companion book.

Directives (MyST pages only):

``{ntpfigure} <fig-id>``
    Includes ``book/figures/<fig-id>.png`` with a caption built from the registry
    (``figures.yml``): title, paper label, the optional content of the directive ("what
    to notice"), the claim, a link to the executed notebook and the command that
    regenerates the figure.  A figure made in the quick profile gets a visible note.
    An id missing from the registry, or a figure not generated yet, is a build warning
    (an error under ``-W``).

``{ntp-performance}``
    The tables and plot of the *Performance* page, from ``results/bench/bench.json``
    (written by ``make bench``); a note when no benchmark has been run.

``{ntp-reproducibility}``
    The table of the *Reproducing this book* page, built from the registry and the
    provenance sidecars: id, paper label, notebook, profile, commit, runtime, key metric.
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from ntpcore.pipeline import paths
from ntpcore.pipeline.registry import load_registry

logger = logging.getLogger(__name__)
PAPER_CITES = {
    "lin": "thrampoulidis2024implicit",
    "geo": "zhao2024geometry",
    "att": "li2024mechanics",
}


def _sidecar(fig_id: str) -> dict | None:
    path = paths.figure_dir() / f"{fig_id}.json"
    return json.loads(path.read_text()) if path.exists() else None


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
        label = entry.paper_label if entry.paper_label not in ("-", "—", "") else "beyond the paper"
        cite = PAPER_CITES.get(entry.paper)
        source = f"{label} of {{cite:t}}`{cite}`" if cite and label != "beyond the paper" else label
        notice = _one_line("\n".join(self.content))
        quick = side.get("profile") == "quick"
        caption = (
            f"**{entry.title}** ({source}). {notice} "
            f"*Claim:* {entry.claim} "
            f"Notebook: {{doc}}`/book/executed/{fig_id}`. "
            f"Regenerate: `python -m ntpcore.reproduce --only {fig_id}`."
        )
        if entry.deviations:
            caption += " *Differs from the paper:* " + " ".join(
                d.rstrip(".") + "." for d in entry.deviations
            )
        if quick:
            caption += " **Quick profile:** reduced settings, not the paper figure."
        text = (
            f":::{{figure}} /book/figures/{fig_id}.png\n:name: {fig_id}\n"
            f":alt: {entry.title}\n\n{caption}\n:::\n"
        )
        return self._parse(text)


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
            rows.append(
                [
                    f"{{doc}}`{fig_id} </book/executed/{fig_id}>`" if side else fig_id,
                    _paper_label(entry.paper_label),
                    f"`{Path(entry.notebook).name}`",
                    side.get("profile", "not run"),
                    f"`{commit[:10]}`{dirty}",
                    f"{runtime:.1f} s" if isinstance(runtime, int | float) else "-",
                    f"`{key[0]}` = {_fmt_metric(key[1])}" if key else "-",
                ]
            )
        header = [
            "figure (executed notebook)",
            "paper label",
            "template notebook",
            "profile",
            "commit",
            "runtime",
            "key metric",
        ]
        # Fixed column widths (book/_static/ntp.css, table.ntp-repro) keep the table inside
        # the content column; long identifiers wrap.
        lines = [":::{list-table}", ":header-rows: 1", ":class: ntp-repro"]
        lines += [":widths: 19 14 18 8 12 9 20", ""]
        for row in [header, *rows]:
            lines.append(f"* - {row[0]}")
            lines.extend(f"  - {cell}" for cell in row[1:])
        lines.append(":::")
        return self._parse("\n".join(lines))


def _fmt_s(entry: dict | None) -> str:
    if not entry:
        return "-"
    med = entry.get("median")
    if med is None:
        return str(entry.get("status", "failed"))
    spread = f" [{entry['min']:.3g}, {entry['max']:.3g}]" if entry.get("repeats", 1) > 1 else ""
    return f"{med:.3g} s{spread}"


def _fmt_num(x: object, fmt: str = ".1e") -> str:
    return format(x, fmt) if isinstance(x, int | float) else "-"


def _list_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = [":::{list-table}", ":header-rows: 1", ""]
    for row in [header, *rows]:
        lines.append(f"* - {row[0]}")
        lines.extend(f"  - {cell}" for cell in row[1:])
    return [*lines, ":::", ""]


BENCH_JSON = paths.RESULTS_DIR / "bench" / "bench.json"
SOLVER_PLOT = paths.RESULTS_DIR / "bench" / "solvers.png"


class NTPPerformance(_MystDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        if not BENCH_JSON.exists():
            return self._parse(
                ":::{note}\nNo benchmark results in this build. Run `make bench`, then "
                "`make html`, to fill this page.\n:::\n"
            )
        self.env.note_dependency(str(BENCH_JSON))
        data = json.loads(BENCH_JSON.read_text())
        git = data.get("git") or {}
        out = [
            f"Measured on `{data['machine']['platform']}` with {data['machine']['cpus']} "
            f"CPU(s), commit `{(git.get('commit') or '-')[:10]}`"
            f"{' (dirty)' if git.get('dirty') else ''}, started {data.get('started', '?')}"
            f"{', **quick mode**' if data.get('quick') else ''}. "
            "Times are medians over repeated runs, [min, max] in brackets.",
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
                    dims = ", ".join(f"{k}={v}" for k, v in r["dims"].items())
                    table.append(
                        [
                            f"{dims}<br>{r['label']}" if r["label"] else dims,
                            f"{r['n_vars']:,}",
                            _fmt_s(sp),
                            _fmt_s(r.get("CLARABEL")),
                            _fmt_s(r.get("SCS")),
                            " / ".join(
                                f"{r[k]['speedup']:.1f}x" if r.get(k, {}).get("speedup") else "-"
                                for k in ("CLARABEL", "SCS")
                            ),
                            _fmt_num(sp.get("rel_gap")),
                            f"{_fmt_num(sp.get('violation'))} / "
                            + " / ".join(
                                _fmt_num(r.get(k, {}).get("violation")) for k in ("CLARABEL", "SCS")
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
        trainers = data.get("trainers") or []
        if trainers:
            out += ["### Trainers", ""]
            out += _list_table(
                ["setting", "implementation", "steps / s", "ratio to baseline"],
                [
                    [
                        r["group"],
                        r["name"] + (" (baseline)" if r.get("baseline") else ""),
                        f"{r['steps_per_s']:.4g}",
                        f"{r['ratio_to_baseline']:.1f}x" if "ratio_to_baseline" in r else "-",
                    ]
                    for r in trainers
                ],
            )
        exps = data.get("experiments") or {}
        if exps:
            out += ["### Attention experiments (PERFORMANCE.md protocols)", ""]
            rows = []
            for name, r in exps.items():
                items = r.items() if "median" not in r else [("", r)]
                for sub, rr in items:
                    speed = rr.get("speedup_vs_authors") or rr.get("speedup_vs_authors_per_loss")
                    rows.append(
                        [f"{name} {sub}".strip(), _fmt_s(rr), f"{speed:.1f}x" if speed else "-"]
                    )
            out += _list_table(["experiment", "time", "speed-up vs the authors' time"], rows)
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
                    "(notebook wall time, including kernel start-up).",
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
        return self._parse("\n".join(out))


def setup(app):
    app.add_directive("ntp-performance", NTPPerformance)
    app.add_directive("ntpfigure", NTPFigure)
    app.add_directive("ntp-reproducibility", NTPReproducibility)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
