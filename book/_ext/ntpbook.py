"""Sphinx extension of the NTP companion book.

Directives (MyST pages only):

``{ntpfigure} <fig-id>``
    Includes ``book/figures/<fig-id>.png`` with a caption built from the registry
    (``figures.yml``): title, paper label, the optional content of the directive ("what
    to notice"), the claim, a link to the executed notebook and the command that
    regenerates the figure.  A figure made in the quick profile gets a visible note.
    An id missing from the registry, or a figure not generated yet, is a build warning
    (an error under ``-W``).

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

from ntpcore import paths
from ntpcore.registry import load_registry

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
        if quick:
            caption += " **Quick profile:** reduced settings, not the paper figure."
        text = (
            f":::{{figure}} /book/figures/{fig_id}.png\n:name: {fig_id}\n"
            f":alt: {entry.title}\n\n{caption}\n:::\n"
        )
        return self._parse(text)


class NTPReproducibility(_MystDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        rows = []
        for fig_id, entry in load_registry().items():
            side = _sidecar(fig_id) or {}
            metrics = side.get("metrics") or {}
            key = next(iter(sorted(metrics.items())), None)
            commit = (side.get("git") or {}).get("commit") or "-"
            dirty = " (dirty)" if (side.get("git") or {}).get("dirty") else ""
            runtime = side.get("notebook_wall_time_s")
            rows.append(
                [
                    f"`{fig_id}`",
                    entry.paper_label,
                    f"{{doc}}`{Path(entry.notebook).stem} </book/executed/{fig_id}>`"
                    if side
                    else entry.notebook,
                    side.get("profile", "not run"),
                    f"`{commit[:10]}`{dirty}",
                    f"{runtime:.1f} s" if isinstance(runtime, int | float) else "-",
                    f"{key[0]} = {_fmt_metric(key[1])}" if key else "-",
                ]
            )
        header = ["figure", "paper label", "notebook", "profile", "commit", "runtime", "key metric"]
        lines = [":::{list-table}", ":header-rows: 1", ":widths: auto", ""]
        for row in [header, *rows]:
            lines.append(f"* - {row[0]}")
            lines.extend(f"  - {cell}" for cell in row[1:])
        lines.append(":::")
        return self._parse("\n".join(lines))


def setup(app):
    app.add_directive("ntpfigure", NTPFigure)
    app.add_directive("ntp-reproducibility", NTPReproducibility)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
