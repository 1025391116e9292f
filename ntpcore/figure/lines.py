r"""The printed form of a claim, and how a figure's checks are shown.

A claim prints one line (:meth:`ntpcore.figure.claims.Claim.line`)::

    PASS lin-x:corr-end: the statement [lin, Thm. 2]: ours 0.94 (in [0.9, 1]); paper 0.943

:data:`LINE` reads it back (the statement is everything before the last bracketed source
that ends with ``]: ours``); :func:`line_markdown` is its Markdown (maths typeset), for a
ledger that shows each claim as it is checked.  :meth:`ntpcore.figure.claims.Ledger.report`
shows every claim of a figure at once: a summary line (:func:`report_summary`: how many
checks hold, do not, were not evaluated in the profile), then the claim lines.  Its plain
text is what the golden outputs compare; its HTML (:func:`report_html`, a function of the
plain text alone, so that the golden outputs give back what a kernel displayed) is a
``<details>`` block collapsed behind the summary and opened when a check fails, with the
statements' maths as ``\\(...\\)`` for MathJax (the book and JupyterLab).
"""

from __future__ import annotations

import html
import re
import sys
from typing import Any

__all__ = [
    "DEVIATION",
    "LINE",
    "STATUSES",
    "ipython_shell",
    "line_markdown",
    "report_html",
    "report_summary",
]

STATUSES = ("pass", "fail", "not-evaluated")

#: A claim line (:meth:`Claim.line`): the statement is everything before the last bracketed
#: source that ends with ``]: ours`` (a source has no brackets inside; checked by the ledger).
LINE = re.compile(
    r"^(?P<tag>PASS|FAIL|SKIP|CHECK) (?P<id>\S+): (?P<statement>.*?) "
    r"(?P<source>\[[^\[\]\n]*\]): ours (?P<rest>.*)$"
)
#: How a line opens a known deviation's reason: its band (constants), then the reason, which
#: quotes the run (also what the golden outputs read, :mod:`tools.qa.golden`).
DEVIATION = re.compile(r" \[known deviation \((?P<band>(?:outside the )?band [^)]*)\): ")
#: Markdown's special characters, escaped in the parts of a line the ledger writes (the
#: statement and a known deviation's text are the book's Markdown, kept as they are).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>$~|])")


def _md_escape(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", text)


def line_markdown(line: str) -> str | None:
    """The Markdown of a claim line, or ``None`` for a line that is not one.

    A function of the printed line alone, so that the golden outputs (plain text) give back
    the very Markdown a kernel displayed (:func:`tools.qa.golden.inject`).  The
    status is bold, the id is code, the statement and a known deviation's text are kept as
    written (MyST/Markdown with ``$...$`` maths); the source, our value, the comparison and
    the paper's and reference numbers are escaped (``[lin, Thm. 2]``, ``in [0.9, 1.1]``).
    """
    m = LINE.match(line)
    if m is None:
        return None
    dev = DEVIATION.search(m.group("rest"))
    rest = m.group("rest")[: dev.start()] if dev else m.group("rest")
    text = (
        f"**{m.group('tag')}** `{m.group('id')}`: {m.group('statement')} "
        f"{_md_escape(m.group('source'))}: ours {_md_escape(rest)}"
    )
    if dev:
        deviation = m.group("rest")[dev.end() :]
        if not deviation.endswith("]"):
            return None
        text += f" \\[known deviation ({_md_escape(dev['band'])}): {deviation[:-1]}\\]"
    return text


#: the first line of a report (:meth:`Ledger.report`)
_SUMMARY = re.compile(
    r"^Checks of this figure: (?P<hold>\d+) hold, (?P<fail>\d+) do not, "
    r"(?P<skip>\d+) not evaluated in the (?P<profile>\w+) profile$"
)
_MATH = re.compile(r"\$([^$]+)\$")
_CODE = re.compile(r"`([^`]+)`")
_EMPH = re.compile(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])")


def report_summary(records: list[dict[str, Any]], profile: str) -> str:
    """The first line of a report: how many checks hold, do not, were not evaluated."""
    n = {s: sum(c["status"] == s for c in records) for s in STATUSES}
    return (
        f"Checks of this figure: {n['pass']} hold, {n['fail']} do not, "
        f"{n['not-evaluated']} not evaluated in the {profile} profile"
    )


def _html_text(text: str) -> str:
    """A statement's Markdown as HTML: maths as ``\\(...\\)`` for MathJax, code, emphasis."""
    out, last = [], 0
    for m in _MATH.finditer(text):
        out.append(_html_words(text[last : m.start()]))
        out.append("\\(" + html.escape(m.group(1), quote=False) + "\\)")
        last = m.end()
    out.append(_html_words(text[last:]))
    return "".join(out)


def _html_words(text: str) -> str:
    text = html.escape(text, quote=False)
    text = _CODE.sub(r"<code>\1</code>", text)
    return _EMPH.sub(r"<em>\1</em>", text)


def report_html(text: str) -> str | None:
    """The HTML of a report (:meth:`Ledger.report`), a function of its plain text alone
    (so the golden outputs give back what a kernel displayed): a ``<details>`` block whose
    summary says how many checks hold, opened when one does not; ``None`` for a text that is
    not a report."""
    lines = text.split("\n")
    head = _SUMMARY.match(lines[0])
    if head is None:
        return None
    items = []
    for line in lines[1:]:
        m = LINE.match(line)
        if m is None:
            return None
        tag = m.group("tag")
        dev = DEVIATION.search(m.group("rest"))
        rest = m.group("rest")[: dev.start()] if dev else m.group("rest")
        body = (
            f"<b>{tag}</b> <code>{html.escape(m.group('id'))}</code>: "
            f"{_html_text(m.group('statement'))} {html.escape(m.group('source'))}: "
            f"ours {html.escape(rest, quote=False)}"
        )
        if dev:
            body += (
                f" [known deviation ({html.escape(dev['band'])}): "
                f"{_html_text(m.group('rest')[dev.end() : -1])}]"
            )
        items.append(f'<li class="ntp-{tag.lower()}">{body}</li>')
    hold, fail, skip = (int(head[k]) for k in ("hold", "fail", "skip"))
    total = hold + fail + skip
    if fail:
        title = f"{fail} of {total} checks do not hold"
    else:
        title = f"{hold} checks hold" + (
            f", {skip} not evaluated in the {head['profile']} profile" if skip else ""
        )
    state = " open" if fail else ""
    mark = "&#10008;" if fail else "&#10004;"
    return (
        # mathjax_process: the book's MathJax typesets only inside the classes MyST names
        f'<details class="ntp-checks mathjax_process{" ntp-checks-fail" if fail else ""}"{state}>'
        f'<summary>{mark} {title} <span class="ntp-show">(show)</span></summary>'
        f'<ul class="ntp-checks-list">{"".join(items)}</ul></details>'
    )


def ipython_shell():
    """The running IPython shell (a notebook kernel), or ``None`` in plain Python."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None
