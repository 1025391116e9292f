"""The figures registry (``figures.yml``) and the notebooks' ``parameters`` cells.

The registry is the single source of truth: figure id -> notebook, parameter overrides
(``params``), quick-profile overrides (``quick``), paper and figure label as printed in
the paper, the statements the figure claims, each with the ids of the ledger claims that
test it (``claims``: ``[{says: "...", checked_by: [id, ...]}]``, see :class:`Statement` and
:func:`check_claim_map`), what the figure shows beyond them (``shown``: how the shown run
was chosen, what a band means), the name of the sidecar metric that best summarises it
(``key_metric``, shown on the *Reproducing this book* page), where the figure departs
from the paper's data or optimizer (``deviations``, rendered in the caption), and an
estimate of the memory and time a run needs from its parameters (``resources``: Python
arithmetic over the notebook's numeric parameters, e.g.
``memory_gb: "8e-9 * (n_steps + 1) * 3"``), which the runner checks before any kernel starts,
and the figures whose cached computations (trained models) a figure reads (``reuses``), from
which the runner orders a parallel run (:func:`ntpcore.runner.planning.order_jobs`); and,
for a notebook that serves several figures, the title of each figure's executed page
(``page_title``, in words), which the runner writes over the notebook's own title.

The syntax of a notebook's ``parameters`` cell, and the checks of the values, are
:mod:`ntpcore.runner.parameters` (re-exported here).
"""

from __future__ import annotations

import ast
import copy
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ntpcore.core import paths
from ntpcore.core.io import file_version
from ntpcore.runner.parameters import (
    ADDRESS,
    FLAGS,
    TEXT_FILE,
    ParamSpec,
    RegistryError,
    check_parameters,
    parameters_cell,
    parse_parameters,
    validate_overrides,
)

__all__ = [
    "ADDRESS",
    "FLAGS",
    "TEXT_FILE",
    "FigureEntry",
    "ParamSpec",
    "RegistryError",
    "Statement",
    "check_claim_map",
    "check_parameters",
    "evaluate",
    "load_registry",
    "parameters_cell",
    "parse_parameters",
    "validate_overrides",
]

PAPERS = {"lin": "linear", "geo": "geometry", "att": "attention", "perf": "performance"}
ID_RE = re.compile(r"^(lin|geo|att|perf)-[a-z0-9]+(-[a-z0-9]+)*$")
REQUIRED = ("paper", "paper_label", "title", "notebook", "claims")
OPTIONAL = ("params", "quick", "resources")
SCALARS = ("key_metric", "deviations", "reuses", "shown", "page_title")
STATEMENT_KEYS = ("says", "checked_by")
#: a ledger claim id as the notebooks write it (ntpcore.figure.claims), without the figure prefix
CLAIM_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
RESOURCE_KEYS = ("memory_gb", "minutes")


@dataclass(frozen=True)
class Statement:
    """One statement a figure claims (``says``, a sentence of the caption) and the ids of the
    figure's ledger claims that test it (``checked_by``, as the notebook's
    :meth:`ntpcore.figure.claims.Ledger.check` names them, without the figure prefix)."""

    says: str
    checked_by: tuple[str, ...]


@dataclass(frozen=True)
class FigureEntry:
    """One entry of figures.yml."""

    fig_id: str
    paper: str
    paper_label: str
    title: str
    notebook: str
    claims: tuple[Statement, ...]
    params: dict[str, Any] = field(default_factory=dict)
    quick: dict[str, Any] = field(default_factory=dict)
    key_metric: str = ""
    deviations: tuple[str, ...] = ()
    resources: dict[str, str] = field(default_factory=dict)
    #: Figures that compute cached results this figure reads (e.g. a trained model).
    reuses: tuple[str, ...] = ()
    #: what the figure shows beyond its claims (which run is drawn, what a band means)
    shown: str = ""
    #: the title of the executed notebook's page, in words (no maths), where the notebook's
    #: own title would not say which figure the page makes (a notebook serving several ids)
    page_title: str = ""

    @property
    def claim_text(self) -> str:
        """The statements as one paragraph (the caption's *Claim*)."""
        return " ".join(s.says for s in self.claims)

    def estimate(self, params: dict[str, Any]) -> dict[str, float]:
        """Evaluate the ``resources`` expressions with the run's parameters."""
        return {
            k: evaluate(expr, params, f"{self.fig_id}: resources.{k}")
            for k, expr in self.resources.items()
        }

    @property
    def notebook_path(self) -> Path:
        return paths.ROOT / self.notebook

    def overrides(self, profile: str) -> dict[str, Any]:
        """Registry overrides for a profile: ``params``, then ``quick`` on top."""
        merged = dict(self.params)
        if profile == "quick":
            merged.update(self.quick)
        return merged


#: the registry last read and checked in this process, by its file's version (path and
#: digest: the book's build asks for it once per claim role, 956 times, and spent most of
#: its time parsing figures.yml again)
_READ: dict[tuple[str, str], dict[str, FigureEntry]] = {}


def load_registry(path: Path | None = None) -> dict[str, FigureEntry]:
    """Read and check figures.yml; raise :class:`RegistryError` naming the bad entry.

    A file read before and unchanged since is not parsed again; each call gets its own copy
    (a caller that changes an entry's parameters changes nobody else's)."""
    path = path or paths.REGISTRY
    if not path.is_file():
        raise RegistryError(
            f"{path} does not exist"
            + (
                ""
                if paths.CHECKOUT
                else ": the registry and the runner need a checkout of the repository; with "
                "the package installed, run a template notebook (it writes ntp-outputs/ "
                "beside itself)"
            )
        )
    data = path.read_bytes()
    key = file_version(path, data)
    if key not in _READ:
        entries = _read_registry(path, data.decode("utf-8"))
        _READ.clear()
        _READ[key] = entries
    return copy.deepcopy(_READ[key])


def _read_registry(path: Path, text: str) -> dict[str, FigureEntry]:
    """Parse and check the registry ``text`` read from ``path``."""
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path.name} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise RegistryError(f"{path.name} must map figure ids to entries")
    entries: dict[str, FigureEntry] = {}
    for fig_id, body in raw.items():
        if not isinstance(fig_id, str) or not ID_RE.match(fig_id):
            raise RegistryError(
                f"figure id {fig_id!r} must be '<paper>-<slug>' in kebab-case, "
                f"with paper in {sorted(PAPERS)}"
            )
        if not isinstance(body, dict):
            raise RegistryError(f"{fig_id}: entry must be a mapping")
        missing = [k for k in REQUIRED if k not in body]
        unknown = sorted(set(body) - set(REQUIRED) - set(OPTIONAL) - set(SCALARS))
        if "claim" in body:
            raise RegistryError(
                f"{fig_id}: 'claim' is now 'claims', a list of statements, each with the ledger "
                f'claims that test it: claims: [{{says: "...", checked_by: [<claim id>, ...]}}] '
                f"(descriptions of the shown run go under 'shown')"
            )
        if missing or unknown:
            raise RegistryError(f"{fig_id}: missing keys {missing}, unknown keys {unknown}")
        if body["paper"] != fig_id.split("-")[0]:
            raise RegistryError(f"{fig_id}: paper {body['paper']!r} does not match the id prefix")
        for key in OPTIONAL:
            if not isinstance(body.get(key) or {}, dict):
                raise RegistryError(f"{fig_id}: {key} must be a mapping of parameter overrides")
        entries[fig_id] = FigureEntry(
            fig_id=fig_id,
            paper=body["paper"],
            paper_label=str(body["paper_label"]),
            title=str(body["title"]),
            notebook=str(body["notebook"]),
            claims=_statements(fig_id, body["claims"]),
            params=dict(body.get("params") or {}),
            quick=dict(body.get("quick") or {}),
            key_metric=str(body.get("key_metric") or ""),
            deviations=_deviations(fig_id, body.get("deviations")),
            resources=_resources(fig_id, body.get("resources")),
            reuses=_reuses(fig_id, body.get("reuses")),
            shown=_shown(fig_id, body.get("shown")),
            page_title=_page_title(fig_id, body.get("page_title")),
        )
    _check_reuses(entries)
    return entries


def _statements(fig_id: str, raw: Any) -> tuple[Statement, ...]:
    """``claims``: a non-empty list of ``{says: <sentence>, checked_by: [<claim id>, ...]}``."""
    if not isinstance(raw, list) or not raw:
        raise RegistryError(
            f"{fig_id}: claims must be a non-empty list of statements "
            f"{{says: <sentence>, checked_by: [<claim id>, ...]}}"
        )
    out = []
    for k, item in enumerate(raw, 1):
        where = f"{fig_id}: claims[{k}]"
        if not isinstance(item, dict):
            raise RegistryError(f"{where} must be a mapping {{says: ..., checked_by: [...]}}")
        missing = [key for key in STATEMENT_KEYS if key not in item]
        unknown = sorted(set(item) - set(STATEMENT_KEYS))
        if missing or unknown:
            raise RegistryError(f"{where}: missing keys {missing}, unknown keys {unknown}")
        says = item["says"]
        if not isinstance(says, str) or not says.strip():
            raise RegistryError(f"{where}: says must be a sentence")
        ids = item["checked_by"]
        if not isinstance(ids, list) or not ids:
            raise RegistryError(
                f"{where} ({says[:40]!r}...): checked_by must name at least one ledger claim "
                f"of the figure that tests the statement"
            )
        bad = [i for i in ids if not isinstance(i, str) or not CLAIM_ID_RE.match(i)]
        if bad:
            raise RegistryError(
                f"{where}: checked_by ids must be the notebook's kebab-case claim ids without "
                f"the figure prefix, got {bad}"
            )
        if len(set(ids)) != len(ids):
            raise RegistryError(f"{where}: checked_by names a claim twice: {ids}")
        out.append(Statement(" ".join(says.split()), tuple(ids)))
    return tuple(out)


def _shown(fig_id: str, raw: Any) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str) or not raw.strip():
        raise RegistryError(f"{fig_id}: shown must be a sentence")
    return " ".join(raw.split())


def _page_title(fig_id: str, raw: Any) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str) or not raw.strip() or re.search(r"[$\\^_*]", raw):
        raise RegistryError(
            f"{fig_id}: page_title must be words without maths (it is the page's title in the "
            f"sidebar, where maths does not render), got {raw!r}"
        )
    return " ".join(raw.split())


def check_claim_map(
    entries: dict[str, FigureEntry], ledger: dict[str, dict[str, str]]
) -> list[str]:
    """What is wrong with the map from the registry's statements to the ledger's claims.

    ``ledger`` maps a figure id to its claims, short id -> the tag its line prints
    (``PASS``, ``FAIL``, ``SKIP`` or ``CHECK``; the golden files hold every claim of the quick
    profile, paper-only ones as ``SKIP``: :func:`tools.qa.golden.claim_tags`).  A
    statement must name at least one claim, every name must be a claim of the figure, and a
    statement checked only by sanity checks (``CHECK``: guaranteed by mathematics or the
    construction) is not tested.  Returns one line per problem (empty: the map is sound).
    """
    problems = []
    for fig_id, entry in entries.items():
        tags = ledger.get(fig_id)
        if tags is None:
            problems.append(f"{fig_id}: no ledger claims recorded for the figure")
            continue
        for k, st in enumerate(entry.claims, 1):
            where = f"{fig_id}: claims[{k}] ({st.says[:50]!r})"
            if not st.checked_by:
                problems.append(f"{where}: names no ledger claim")
            unknown = [i for i in st.checked_by if i not in tags]
            if unknown:
                problems.append(
                    f"{where}: checked_by names {unknown}, which the figure's ledger does not "
                    f"check (its claims: {', '.join(sorted(tags))})"
                )
            known = [i for i in st.checked_by if i in tags]
            if known and all(tags[i] == "CHECK" for i in known):
                problems.append(
                    f"{where}: checked only by sanity checks {known}, which test no claim of the "
                    f"paper; name a claim that can fail"
                )
    return problems


def _reuses(fig_id: str, raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw) or not raw:
        raise RegistryError(f"{fig_id}: reuses must be a non-empty list of figure ids")
    return tuple(raw)


def _check_reuses(entries: dict[str, FigureEntry]) -> None:
    """A figure reuses registry figures other than itself, which reuse nothing (one level:
    the figure that computes a shared result is the one that starts first)."""
    for fig_id, e in entries.items():
        for other in e.reuses:
            if other not in entries:
                raise RegistryError(f"{fig_id}: reuses unknown figure {other!r}")
            if other == fig_id:
                raise RegistryError(f"{fig_id}: a figure cannot reuse itself")
            if entries[other].reuses:
                raise RegistryError(
                    f"{fig_id}: reuses {other}, which itself reuses {list(entries[other].reuses)}; "
                    f"name the figure that computes the shared result"
                )


def _deviations(fig_id: str, raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not all(isinstance(s, str) and s.strip() for s in items):
        raise RegistryError(f"{fig_id}: deviations must be a sentence or a list of sentences")
    return tuple(s.strip() for s in items)


def _resources(fig_id: str, raw: Any) -> dict[str, str]:
    raw = raw or {}
    unknown = sorted(set(raw) - set(RESOURCE_KEYS))
    if unknown:
        raise RegistryError(f"{fig_id}: unknown resources {unknown}; known: {RESOURCE_KEYS}")
    out = {k: str(v) for k, v in raw.items()}
    for k, expr in out.items():
        _parse_expression(expr, f"{fig_id}: resources.{k}")
    return out


_FUNCS = {"min": min, "max": max, "log2": math.log2, "log10": math.log10, "sqrt": math.sqrt}
_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Pow: lambda a, b: a**b,
}


def _parse_expression(expr: str, where: str) -> ast.Expression:
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise RegistryError(f"{where}: {expr!r} is not an arithmetic expression") from exc
    for node in ast.walk(tree):
        ok = isinstance(
            node,
            ast.Expression
            | ast.BinOp
            | ast.UnaryOp
            | ast.Constant
            | ast.Name
            | ast.Load
            | ast.Call
            | ast.operator
            | ast.unaryop,
        )
        if isinstance(node, ast.Call):
            ok = isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords
        if isinstance(node, ast.Constant):
            ok = isinstance(node.value, int | float) and not isinstance(node.value, bool)
        if not ok:
            raise RegistryError(f"{where}: only arithmetic is allowed, got {expr!r}")
    return tree


def evaluate(expr: str, params: dict[str, Any], where: str) -> float:
    """Evaluate a ``resources`` expression over numeric parameters (no other Python)."""

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            value = params.get(node.id)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise RegistryError(f"{where}: {node.id!r} is not a numeric parameter")
            return float(value)
        if isinstance(node, ast.UnaryOp):
            return -ev(node.operand) if isinstance(node.op, ast.USub) else ev(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Call):
            return float(_FUNCS[node.func.id](*(ev(a) for a in node.args)))
        raise RegistryError(f"{where}: unsupported expression")

    return ev(_parse_expression(expr, where))
