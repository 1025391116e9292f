"""``{ntp-machines}``: the *Reproducibility across machines* page, read from a run.

Every number comes from ``results/reproducibility/report.json``, written by
``make reproducibility`` (:mod:`tools.qa.reproducibility`): the configurations that
ran and what each selected, each run's comparison with the goldens, how many digits of every
claim agree across the configurations, the printed numbers that moved and their tolerances,
and the figures whose pixels moved.  Without a report the page says so.

The text is built by pure functions of the report's contents (tested without Sphinx in
``tests/test_machines_page.py``).
"""

from __future__ import annotations

import json
import math

from docutils import nodes
from ntpbook import _list_table, _MystDirective

from ntpcore.core import paths

REPORT = paths.RESULTS_DIR / "reproducibility" / "report.json"
PAPERS = {"lin": "linear models", "geo": "implicit geometry", "att": "self-attention"}
#: relative tolerance beyond which a number is listed as not keeping "a few per cent"
LOOSE = 0.05
#: digit bands of the claims table (lower bounds)
BANDS = [(12, "≥ 12 digits"), (6, "6–12"), (3, "3–6"), (0, "< 3")]
#: a claim whose values are all below this is a residual at round-off level (a constraint
#: violation, a gradient norm): its relative spread says nothing
ROUNDOFF = 1e-6


def _roundoff(c: dict) -> bool:
    return max(abs(v) for v in c["values"].values()) < ROUNDOFF


def _paper(fig_or_claim: str) -> str:
    return fig_or_claim.split("-", 1)[0]


def _env(env: dict) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in env.items()) or "(none)"


def _selected(probe: dict) -> str:
    feats = ", ".join(probe.get("numpy_features") or []) or "–"  # wraps between features
    return (
        f"numpy {feats}; OpenBLAS {probe.get('openblas_core') or '?'}"
        f" ({probe.get('openblas_threads', '1')} thread(s)); torch {probe.get('torch_capability')}"
        + (f", products {probe['torch_products']}" if "torch_products" in probe else "")
    )


def _ok(x: bool) -> str:
    return "yes" if x else "**no**"


def configs_text(data: dict) -> str:
    m = data.get("machine", {})
    commit = (data.get("commit") or "unknown")[:10]
    lines = [
        f"Measured on {data.get('when', '?')[:10]} at commit `{commit}`"
        + (" (with uncommitted changes)" if data.get("dirty") else "")
        + f", on {m.get('cpu', '?')} ({m.get('machine', '?')}, {m.get('cpus', '?')} CPUs), "
        f"quick profile, each configuration from an empty cache.",
        "",
    ]
    rows = []
    for c in data.get("configs", []):
        chk = data.get("checks", {}).get(c["config"], {})
        rows.append(
            [
                f"`{c['config']}`",
                _env(c.get("env", {})),
                _selected(c.get("probe", {})),
                _ok(chk.get("run_ok", False)),
                f"{_ok(chk.get('golden_ok', False))} ({chk.get('numbers', 0)} numbers)",
                _ok(chk.get("images_ok", False)),
            ]
        )
    header = ["configuration", "sets", "selected", "claims hold", "goldens", "images"]
    return "\n".join(lines + _list_table(header, rows, "ntp-wide"))


def _band(digits: float | None) -> str:
    if digits is None:
        return "bitwise"
    return next(label for lo, label in BANDS if digits >= lo)


def claims_text(data: dict) -> str:
    claims = data.get("claims", {})
    rows = []
    for paper, name in [*PAPERS.items(), ("perf", "performance")]:
        mine = [c for k, c in claims.items() if _paper(k) == paper]
        if not mine:
            continue
        counts = {label: 0 for label in ["bitwise", *(b for _, b in BANDS), "round-off"]}
        for c in mine:
            band = _band(c.get("digits"))
            counts["round-off" if band != "bitwise" and _roundoff(c) else band] += 1
        rows.append([f"{paper} ({name})", str(len(mine)), *(str(v) for v in counts.values())])
    header = [
        "paper",
        "claims",
        "bitwise equal",
        *(b for _, b in BANDS),
        f"round-off level (< {ROUNDOFF:g})",
    ]
    n = len(data.get("configs", []))
    intro = (
        f"Each numeric claim's measured value, at full precision, in the {n} configurations: "
        "the number of decimal digits that agree is $-\\log_{10}$ of the relative spread "
        "(max − min over the largest magnitude). A value at round-off level (a constraint "
        "violation, a gradient norm: every value below $10^{-6}$) is counted apart: its "
        "digits say nothing, it reproduces to its absolute spread."
    )
    return "\n".join([intro, "", *_list_table(header, rows, "ntp-wide")])


def least_text(data: dict, k: int = 12) -> str:
    claims = data.get("claims", {})
    moving = sorted(
        ((cid, c) for cid, c in claims.items() if c.get("digits") is not None and not _roundoff(c)),
        key=lambda kv: kv[1]["digits"],
    )[:k]
    if not moving:
        return "Every claim's value is bitwise equal in every configuration."
    rows = []
    for cid, c in moving:
        v = list(c["values"].values())
        rows.append(
            [
                f"`{cid}`",
                f"{min(v):.6g}",
                f"{max(v):.6g}",
                f"{c['spread']:.2g}",
                f"{c['digits']:.1f}",
            ]
        )
    header = ["claim", "smallest", "largest", "spread", "digits that agree"]
    return "\n".join(_list_table(header, rows, "ntp-wide"))


def _pct(x: float) -> str:
    """A fraction as a percentage with two significant digits (0.0003 -> "0.03%")."""
    return f"{100 * x:.2g}%"


def _rel(tol: float | None, value: float) -> str:
    if tol is None:
        return "exact"
    return _pct(tol / abs(value)) if value else f"± {tol:.2g}"


def printed_text(data: dict) -> str:
    printed = data.get("printed", {})
    moved = [(k, r) for k, r in printed.items() if r.get("spread")]
    words = [(k, r) for k, r in printed.items() if r.get("spread") is None]
    lines = [
        f"Of the {len(printed)} numbers the checked cells print (at the digits they print), "
        f"{len(moved)} differ between configurations"
        + (f" and {len(words)} sit in a line whose words differ" if words else "")
        + ":",
        "",
    ]
    rows, loose = [], []
    for key, r in sorted(moved, key=lambda kv: kv[0]):
        vals = [float(v) for v in r["values"].values()]
        ref = vals[0]
        rel_spread = r["spread"] / abs(ref) if ref else math.inf
        fig = key.split("/", 1)[0]
        where = r["where"].replace(f"({fig}:", "(").replace("()", "")
        rows.append(
            [
                f"`{fig}`",
                where,
                f"{min(vals):.4g} – {max(vals):.4g}",
                _pct(rel_spread) if math.isfinite(rel_spread) else f"{r['spread']:.2g}",
                f"± {r['tol']:.2g} ({_rel(r['tol'], ref)})" if r.get("tol") else "exact",
            ]
        )
        if r.get("tol") and ref and r["tol"] / abs(ref) > LOOSE:
            claim = where.split("(", 1)[1].rstrip(")") if "(" in where else where
            loose.append(f"`{fig}` ({claim})")
    header = ["figure", "where", "range", "relative spread", "golden tolerance"]
    lines += _list_table(header, rows, "ntp-wide") if rows else ["(none)", ""]
    lines.append(
        f"Numbers whose tolerance exceeds {LOOSE:.0%} of their value: "
        + (", ".join(loose) if loose else "none")
        + ". Such numbers are poor goldens: the claims that print them hold in every "
        "configuration above (their comparisons are on the figures' pages) and carry the "
        "science; the goldens only guard them against larger moves."
        if loose
        else f"Every number keeps a tolerance of at most {LOOSE:.0%} of its value."
    )
    return "\n".join(lines)


def images_text(data: dict) -> str:
    imgs = data.get("images", {})
    moved = {f: r for f, r in imgs.items() if r.get("spread")}
    rows = [
        [
            f"`{f}`",
            f"{r['spread']:.3g}",
            f"{max((x for x in r['baseline_rms'].values() if x is not None), default=0):.3g}",
            f"{r['tol']:.3g}",
        ]
        for f, r in sorted(moved.items())
    ]
    head = (
        f"{len(imgs) - len(moved)} of {len(imgs)} figures are pixel-identical in every "
        "configuration; the others differ by this root-mean-square pixel difference "
        "(0–255):"
    )
    header = [
        "figure",
        "largest RMS between configurations",
        "largest RMS from baseline",
        "tolerance",
    ]
    return "\n".join([head, "", *(_list_table(header, rows, "ntp-wide") if rows else ["(none)"])])


def page_text(data: dict, part: str) -> str:
    return {
        "configs": configs_text,
        "claims": claims_text,
        "least": least_text,
        "printed": printed_text,
        "images": images_text,
    }[part](data)


class NTPMachines(_MystDirective):
    """``{ntp-machines}`` with ``:part: configs|claims|least|printed|images``."""

    has_content = False
    option_spec = {"part": lambda s: s.strip()}

    def run(self) -> list[nodes.Node]:
        part = self.options.get("part", "configs")
        self.env.note_dependency(str(REPORT))  # also missing: rebuilt until it is written
        if not REPORT.exists():
            if part != "configs":  # the section is left out of the page (ntpbook.py)
                return [nodes.comment("", "ntp-empty-section")]
            return self._parse(
                ":::{note}\nNo reproducibility report in this build: the configurations, how "
                "many digits of each claim agree across them, the printed numbers that move "
                "and the figures' differences appear here after `make reproducibility` and "
                "`make html`.\n:::\n"
            )
        return self._parse(page_text(json.loads(REPORT.read_text()), part))


def setup(app):
    app.add_directive("ntp-machines", NTPMachines)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
