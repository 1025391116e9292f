r"""The claims ledger: every claim a figure illustrates, checked by the run that makes it.

A *claim* is one statement of a paper that a notebook can test numerically: W* matches the
in-support log-odds [lin, eq. (4)], the GD iterates align with the NTP-SVM direction
[lin, Thm. 2], the Graph-SVM direction is reached by normalized GD [att, Thm. 2], ... .
A notebook opens a :class:`Ledger` for its figure and calls :meth:`Ledger.check` once per
claim with

* an id (kebab-case, unique within the figure; the ledger prefixes the figure id),
* the statement in words and its source in the paper (``"[lin, Thm. 2]"``),
* our measured value and the comparison that must hold (:func:`at_most`, :func:`at_least`,
  :func:`between`, :func:`close_to`, :func:`holds`),
* the paper's own number where the paper prints one (``paper=``, with ``paper_source=``),
  and, separately and labelled as such, a number from elsewhere (``reference=``,
  ``reference_source=``: e.g. an independent re-implementation),
* the profiles in which it must hold: a claim that needs paper-profile lengths is
  recorded as *not evaluated* in the quick profile,
* ``sanity=True`` for a check that mathematics or the construction guarantees (a cosine
  matrix has a unit diagonal, CE is at least the entropy): it is still checked and fails the
  run when it does not hold, but it is printed ``CHECK`` instead of ``PASS`` and is not
  counted among the claims of the paper,
* where our run is known not to reproduce the paper, ``known_deviation=``: the reason in
  the book's words, with ``band=(lo, hi)``: the range the honest run stays in (with where it
  comes from in the reason).  Such a claim is still evaluated and shown, as not holding, with
  the reason; it does not fail the run while its value stays in the band, and does when it
  leaves it (a collapse or a blow-up is an error, not the known deviation).  Every other
  failed claim fails the run.

Each check prints one line (the status, the measured value at the stated number of
significant digits, the comparison and the paper's number).  In a notebook the line is a
rich output: its plain text is the line (what the golden outputs compare), its Markdown
(:func:`line_markdown`) shows the statement's maths typeset, in the book and in JupyterLab.
The ledger is written to
``<output dir>/<fig_id>.claims.json`` after every check, atomically, so the record
survives a kernel that dies later.  :func:`ntpcore.figure.provenance.savefig` puts the
claims into the figure's sidecar; the runner (``python -m ntpcore.reproduce``) fails a
figure with any failed claim, names each one, and does not publish it.
"""

from __future__ import annotations

import html
import json
import math
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ntpcore.core import paths
from ntpcore.core.io import write_text_atomic
from ntpcore.core.params import PROFILES

__all__ = [
    "STATUSES",
    "Claim",
    "ClaimError",
    "Expect",
    "Ledger",
    "at_least",
    "at_most",
    "between",
    "close_to",
    "holds",
    "KINDS",
    "claim_kind",
    "is_blocking",
    "line_markdown",
    "report_html",
    "report_summary",
    "load_claims",
    "tally",
]

STATUSES = ("pass", "fail", "not-evaluated")
_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_SOURCE = re.compile(r"\[(lin|geo|att)\b")
#: A claim line (:meth:`Claim.line`): the statement is everything before the last bracketed
#: source that ends with ``]: ours`` (a source has no brackets inside; checked by the ledger).
_LINE = re.compile(
    r"^(?P<tag>PASS|FAIL|SKIP|CHECK) (?P<id>\S+): (?P<statement>.*?) "
    r"(?P<source>\[[^\[\]\n]*\]): ours (?P<rest>.*)$"
)
#: How a line opens a known deviation's reason: its band (constants), then the reason, which
#: quotes the run (also what the golden outputs read, :mod:`tools.qa.golden`).
DEVIATION = re.compile(r" \[known deviation \((?P<band>(?:outside the )?band [^)]*)\): ")
#: Markdown's special characters, escaped in the parts of a line the ledger writes (the
#: statement and a known deviation's text are the book's Markdown, kept as they are).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>$~|])")


class ClaimError(ValueError):
    """A claim is malformed (bad id, missing source, unknown profile, ...)."""


@dataclass(frozen=True)
class Expect:
    """A comparison a measured value must satisfy."""

    op: str  # "<=", ">=", "in", "~", "true"
    lo: float | None = None
    hi: float | None = None
    target: float | None = None
    rtol: float = 0.0
    atol: float = 0.0

    def holds(self, x: float | bool) -> bool:
        if self.op == "true":
            return bool(x)
        x = float(x)
        if math.isnan(x):
            return False
        if self.op == "<=":
            return x <= self.hi
        if self.op == ">=":
            return x >= self.lo
        if self.op == "in":
            return self.lo <= x <= self.hi
        return abs(x - self.target) <= self.atol + self.rtol * abs(self.target)

    def describe(self) -> str:
        if self.op == "true":
            return "holds"
        if self.op == "<=":
            return f"≤ {_fmt(self.hi, 3)}"
        if self.op == ">=":
            return f"≥ {_fmt(self.lo, 3)}"
        if self.op == "in":
            return f"in [{_fmt(self.lo, 3)}, {_fmt(self.hi, 3)}]"
        tol = self.atol + self.rtol * abs(self.target)
        return f"= {_fmt(self.target, 4)} ± {_fmt(tol, 2)}"


def at_most(bound: float) -> Expect:
    """``measured <= bound``."""
    return Expect("<=", hi=float(bound))


def at_least(bound: float) -> Expect:
    """``measured >= bound``."""
    return Expect(">=", lo=float(bound))


def between(lo: float, hi: float) -> Expect:
    """``lo <= measured <= hi``."""
    if not lo <= hi:
        raise ClaimError(f"between: empty interval [{lo}, {hi}]")
    return Expect("in", lo=float(lo), hi=float(hi))


def close_to(target: float, *, rtol: float = 0.0, atol: float = 0.0) -> Expect:
    """``|measured - target| <= atol + rtol |target|``."""
    if rtol < 0 or atol < 0 or rtol == atol == 0:
        raise ClaimError("close_to needs a positive rtol or atol")
    return Expect("~", target=float(target), rtol=float(rtol), atol=float(atol))


def holds() -> Expect:
    """A yes/no claim: ``measured`` is a boolean that must be true."""
    return Expect("true")


@dataclass(frozen=True)
class Claim:
    """One checked claim, as recorded in the sidecar."""

    id: str
    fig_id: str
    statement: str
    source: str
    expect: str
    measured: float | bool | None
    shown: str
    status: str
    profiles: tuple[str, ...]
    paper: float | str | None = None
    paper_source: str | None = None
    reference: float | str | None = None
    reference_source: str | None = None
    note: str | None = None
    known_deviation: str | None = None
    sanity: bool = False
    band: str | None = None  # a known deviation's band, e.g. "in [0.7, 0.9]"
    blocking: bool = False  # fails the run: failed, and not a known deviation inside its band

    @property
    def kind(self) -> str:
        """What the claim is, for the counts of the Claims page: ``"sanity"`` (guaranteed by
        mathematics or the construction), ``"paper number"`` (the paper prints the number
        it reproduces), ``"theorem"`` (a theorem's, lemma's, proposition's or conjecture's
        prediction), else ``"figure statement"`` (what a figure or the text states)."""
        return claim_kind(asdict(self))

    def line(self) -> str:
        """The one line a check prints (also what the golden outputs compare)."""
        tag = {"pass": "PASS", "fail": "FAIL", "not-evaluated": "SKIP"}[self.status]
        if self.sanity and self.status == "pass":
            tag = "CHECK"
        ours = "not evaluated in this profile" if self.status == "not-evaluated" else self.shown
        text = f"{tag} {self.id}: {self.statement} {self.source}: ours {ours} ({self.expect})"
        if self.paper is not None:
            text += f"; paper {self.paper}"
        if self.reference is not None:
            text += f"; reference {self.reference} ({self.reference_source})"
        if self.status == "fail" and self.known_deviation:
            where = "outside the band" if self.blocking else "band"
            text += f" [known deviation ({where} {self.band}): {self.known_deviation}]"
        return text


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
    m = _LINE.match(line)
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
        m = _LINE.match(line)
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
        f'<details class="ntp-checks{" ntp-checks-fail" if fail else ""}"{state}>'
        f'<summary>{mark} {title} <span class="ntp-show">(show)</span></summary>'
        f'<ul class="ntp-checks-list">{"".join(items)}</ul></details>'
    )


def _ipython():
    """The running IPython shell (a notebook kernel), or ``None`` in plain Python."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def _show(line: str) -> None:
    """Print a claim line; in IPython display it with its Markdown (plain text: the line)."""
    if _ipython() is None:
        print(line)
        return
    from IPython.display import display

    display({"text/plain": line, "text/markdown": line_markdown(line)}, raw=True)


def _fmt(x: float, digits: int) -> str:
    if x == 0 or not math.isfinite(x):
        return str(x)
    if 1e-3 <= abs(x) < 1e4:
        return f"{x:.{digits}g}"
    return f"{x:.{max(digits - 1, 0)}e}"


def _jsonable(x: Any) -> Any:
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, float, np.integer, np.floating)):
        v = float(x)
        return v if math.isfinite(v) else str(v)
    return x


class Ledger:
    """The claims of one figure, checked in one run.

    Parameters
    ----------
    fig_id : the figure's registry id (the notebook's ``fig_id`` parameter)
    profile : ``"paper"`` or ``"quick"`` (the notebook's ``profile`` parameter)
    """

    def __init__(self, fig_id: str, profile: str, *, defer: bool = False) -> None:
        if profile not in PROFILES:
            raise ClaimError(f"profile must be one of {PROFILES}, got {profile!r}")
        if not fig_id or "/" in fig_id:
            raise ClaimError(f"invalid fig_id {fig_id!r}")
        self.fig_id = fig_id
        self.profile = profile
        #: show the claims together, collapsed, when :meth:`report` is called (else each
        #: line as it is checked)
        self.defer = defer
        self.claims: list[Claim] = []

    def check(
        self,
        claim_id: str,
        statement: str,
        measured: Any,
        expect: Expect,
        *,
        source: str,
        paper: float | str | None = None,
        paper_source: str | None = None,
        reference: float | str | None = None,
        reference_source: str | None = None,
        profiles: tuple[str, ...] = PROFILES,
        digits: int = 3,
        note: str | None = None,
        known_deviation: str | None = None,
        band: tuple[float, float] | None = None,
        sanity: bool = False,
    ) -> None:
        """Check one claim, print its line and record it (``ledger.claims[-1]``).

        Returns nothing, so that a check ending a notebook cell displays nothing more than
        its line in every kernel (nbval runs cells without history, where a trailing ``;``
        does not suppress a displayed result).

        ``digits`` is the number of significant digits printed (and compared by the golden
        outputs); ``digits=0`` prints only the outcome, for values at round-off level.
        A failed claim does not raise here, so that every claim of the figure is evaluated
        and recorded; the runner fails the figure.
        """
        if not _ID.match(claim_id):
            raise ClaimError(f"claim id {claim_id!r} must be kebab-case (a-z, 0-9, -)")
        full_id = f"{self.fig_id}:{claim_id}"
        if any(c.id == full_id for c in self.claims):
            raise ClaimError(f"claim {full_id!r} checked twice")
        if not _SOURCE.search(source or ""):
            raise ClaimError(
                f"claim {full_id!r}: source {source!r} must name the paper, e.g. '[lin, Thm. 2]'"
            )
        if not profiles or any(p not in PROFILES for p in profiles):
            raise ClaimError(f"claim {full_id!r}: profiles must be a subset of {PROFILES}")
        if reference is not None and not reference_source:
            raise ClaimError(f"claim {full_id!r}: a reference number needs reference_source")
        if not isinstance(expect, Expect):
            raise ClaimError(f"claim {full_id!r}: expect must come from at_most/at_least/...")
        value = _jsonable(np.asarray(measured).item() if np.ndim(measured) == 0 else measured)
        if not isinstance(value, (bool, float, str)):
            raise ClaimError(f"claim {full_id!r}: measured must be a number or a bool")
        if sanity and known_deviation:
            raise ClaimError(f"claim {full_id!r}: a sanity check cannot be a known deviation")
        if known_deviation and (isinstance(value, bool) or expect.op == "true"):
            raise ClaimError(f"claim {full_id!r}: a yes/no claim cannot be a known deviation")
        if known_deviation and band is None:
            raise ClaimError(
                f"claim {full_id!r}: a known deviation needs band=(lo, hi), the range the "
                f"honest run stays in"
            )
        in_band = between(*band) if band is not None else None
        if in_band is not None and not known_deviation:
            raise ClaimError(f"claim {full_id!r}: band= belongs to a known deviation")
        if self.profile not in profiles:
            status, shown = "not-evaluated", ""
        else:
            if isinstance(value, str):  # nan / inf
                ok = False
            elif expect.op == "true":
                ok = isinstance(value, bool) and value
            else:
                ok = not isinstance(value, bool) and expect.holds(value)
            status = "pass" if ok else "fail"
            if isinstance(value, bool) or isinstance(value, str):
                shown = str(value)
            elif digits == 0:
                shown = "within" if ok else f"{_fmt(value, 3)}, outside"
            else:
                shown = _fmt(value, digits)
        blocking = status == "fail" and not (
            known_deviation and not isinstance(value, str) and in_band.holds(value)
        )
        claim = Claim(
            id=full_id,
            fig_id=self.fig_id,
            statement=statement,
            source=source,
            expect=expect.describe(),
            measured=value,
            shown=shown,
            status=status,
            profiles=tuple(profiles),
            paper=_jsonable(paper),
            paper_source=paper_source,
            reference=_jsonable(reference),
            reference_source=reference_source,
            note=note,
            known_deviation=known_deviation,
            sanity=bool(sanity),
            band=in_band.describe() if in_band is not None else None,
            blocking=blocking,
        )
        line = claim.line()
        m = _LINE.match(line)
        one_line = len(line.splitlines()) == 1
        if not one_line or m is None or (m["statement"], m["source"]) != (statement, source):
            raise ClaimError(
                f"claim {full_id!r}: its line cannot be read back (one line, a source in "
                f"brackets with none inside, e.g. '[lin, Thm. 2]'): {line!r}"
            )
        self.claims.append(claim)
        if not self.defer:
            _show(line)
        self._write()

    def report(self) -> None:
        """Show the figure's checks: one summary line, then every claim line.

        In a notebook, one output whose plain text is those lines (what the golden outputs
        compare) and whose HTML is a collapsed block behind the summary
        (:func:`report_html`), opened when a claim fails; in plain Python the lines are
        printed.  Returns nothing (see :meth:`check`).
        """
        text = self.report_text()
        if _ipython() is None:
            print(text)
            return
        from IPython.display import display

        display({"text/plain": text, "text/html": report_html(text)}, raw=True)

    def report_text(self) -> str:
        """The summary line and the claim lines, as :meth:`report` shows them."""
        return "\n".join(
            [report_summary(self.records(), self.profile)] + [c.line() for c in self.claims]
        )

    # ------------------------------------------------------------------------- records
    def records(self) -> list[dict[str, Any]]:
        """The claims as JSON-ready dicts (the sidecar's ``claims`` list)."""
        return [{**asdict(c), "profiles": list(c.profiles)} for c in self.claims]

    def failed(self) -> list[Claim]:
        """The claims that fail the run (failed, and not a known deviation inside its band)."""
        return [c for c in self.claims if c.blocking]

    def summary(self) -> str:
        n = tally(self.records())
        return (
            f"{n['claims']} claims: {n['pass']} hold, {n['fail']} do not, "
            f"{n['not-evaluated']} not evaluated in the {self.profile} profile"
            + (f"; {n['sanity']} sanity check(s)" if n["sanity"] else "")
        )

    def savefig(self, fig: Any, cfg: Any = None, **kwargs: Any) -> dict[str, Any]:
        """Save this ledger's figure with its claims: :func:`ntpcore.figure.provenance.savefig`
        under the ledger's ``fig_id`` and ``profile`` (a notebook types neither again; the
        seeds are ``cfg``'s unless ``seeds`` says otherwise)."""
        from ntpcore.figure.provenance import savefig

        return savefig(fig, self.fig_id, cfg, profile=self.profile, claims=self, **kwargs)

    def _write(self) -> None:
        out = paths.output_dir(self.fig_id) / f"{self.fig_id}.claims.json"
        payload = {"fig_id": self.fig_id, "profile": self.profile, "claims": self.records()}
        write_text_atomic(out, json.dumps(payload, indent=2, sort_keys=True))


#: a source naming a theorem-like statement of the paper
_THEOREM = re.compile(r"\b(Thm|Theorem|Lemma|Lem|Prop|Proposition|Cor|Corollary|Conjecture)\b")
KINDS = ("theorem", "paper number", "figure statement", "sanity")


def claim_kind(record: dict[str, Any]) -> str:
    """The kind of a claim record (see :attr:`Claim.kind`)."""
    if record.get("sanity"):
        return "sanity"
    if record.get("paper") is not None:
        return "paper number"
    if _THEOREM.search(record.get("source") or ""):
        return "theorem"
    return "figure statement"


def is_blocking(record: dict[str, Any]) -> bool:
    """Whether a claim record (a sidecar dict) fails the run: failed, and not a known
    deviation inside its band.  Records written before bands existed count a failed known
    deviation as not blocking, as they were then."""
    if "blocking" in record:
        return bool(record["blocking"])
    return record["status"] == "fail" and not record.get("known_deviation")


def tally(records: list[dict[str, Any]]) -> dict[str, int]:
    """Counts of claim records (sidecar dicts): ``claims`` (the paper's, sanity checks left
    out), one count per status of those, and ``sanity`` (the checks counted apart)."""
    paper = [c for c in records if not c.get("sanity")]
    return {
        "claims": len(paper),
        **{s: sum(c["status"] == s for c in paper) for s in STATUSES},
        "sanity": len(records) - len(paper),
        **{f"kind:{k}": sum(claim_kind(c) == k for c in records) for k in KINDS},
    }


def load_claims(path) -> list[dict[str, Any]]:
    """Read a ``<fig_id>.claims.json`` file written by a :class:`Ledger`."""
    data = json.loads(Path(path).read_text())
    claims = data.get("claims")
    if not isinstance(claims, list):
        raise ClaimError(f"{path}: no claims list")
    return claims
