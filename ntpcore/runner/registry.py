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
which the runner orders a parallel run (:func:`ntpcore.runner.planning.order_jobs`).

A notebook's parameters cell holds literal assignments only, one per line, each with a
comment.  The comment starts with the parameter's range, which the runner checks, on every
parameter's final value (the notebook's default, the registry's and ``--set`` overrides),
before any kernel starts::

    step_size = 0.5  # (0,inf) eta, the GD step size
    n_steps = 1000  # [1,inf] number of steps
    lr_gamma = 0.4  # (0,1] decay factor
    weight_decay = 1e-6  # [0,inf) decoupled weight decay
    support_size = 6  # [1,vocab_size] at most the vocabulary
    lr_milestones = [250, 500]  # [1,n_steps] {increasing} epochs where ...
    profile = "paper"  # [paper|quick] ...
    dataset = "random-5"  # [acyclic|cyclic|random-<int>] a toy or a random set
    scheduler = ""  # [|<address>] a dask scheduler, tcp://HOST:PORT, or empty

An interval has a square bracket on a closed end and a parenthesis on an open one; an end is
a number, ``inf``/``-inf``, or the name of another numeric parameter of the notebook (its
final value).  ``[>0]`` (and ``>=``, ``<``, ``<=``) is read as before.  Choices are names
separated by ``|`` (an empty one allows ``""``); a choice may hold ``<int>`` (any
non-negative integer there), and ``<address>`` takes a dask scheduler's address.  A list
takes at least one element (when its default has one) and each element is checked;
``{increasing}`` after the range asks them strictly increasing.  A comment that opens with a
parenthesis that is not an interval is help text.  Comments must not contain ``=``: papermill
cannot read such a line (write ``[1,inf]`` rather than ``[>=1]``).

A string parameter that also takes a file lists ``<text file>`` among its choices::

    corpus = "enwiki-shortened"  # [enwiki-shortened|lee_background|<text file>] ...

A value that is not one of the names must then be the path of a readable UTF-8 text file
(:func:`ntpcore.core.io.read_utf8_text`; the error names the file and, for bytes that are
not UTF-8, the offset of the first one and how to convert it).  A relative path is taken
from the directory the command runs in (a registry value: from the repository root), and
:func:`validate_overrides` returns it absolute, since the kernel runs in ``notebooks/``.

Types come from the literal default: an ``int`` is accepted where the default is a
``float``; ``bool`` is never taken for a number.
"""

from __future__ import annotations

import ast
import io
import itertools
import math
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import yaml

from ntpcore.core import paths
from ntpcore.core.io import read_utf8_text
from ntpcore.errors import DataError, ParameterError

PAPERS = {"lin": "linear", "geo": "geometry", "att": "attention", "perf": "performance"}
ID_RE = re.compile(r"^(lin|geo|att|perf)-[a-z0-9]+(-[a-z0-9]+)*$")
REQUIRED = ("paper", "paper_label", "title", "notebook", "claims")
OPTIONAL = ("params", "quick", "resources")
SCALARS = ("key_metric", "deviations", "reuses", "shown")
STATEMENT_KEYS = ("says", "checked_by")
#: a ledger claim id as the notebooks write it (ntpcore.figure.claims), without the figure prefix
CLAIM_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
RESOURCE_KEYS = ("memory_gb", "minutes")
#: The choice of a string parameter's constraint that admits the path of a UTF-8 text file.
TEXT_FILE = "<text file>"


class RegistryError(ValueError):
    """figures.yml is malformed or inconsistent with the notebooks."""


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


def load_registry(path: Path | None = None) -> dict[str, FigureEntry]:
    """Read and check figures.yml; raise :class:`RegistryError` naming the bad entry."""
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
    try:
        raw = yaml.safe_load(path.read_text()) or {}
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


# --------------------------------------------------------------------------- parameters


#: The qualifiers a range may carry in braces after it.
FLAGS = ("increasing",)
_BOUND = r"(-?inf|-?[0-9.]+(?:[eE][+-]?[0-9]+)?|[A-Za-z_][A-Za-z0-9_]*)"
#: ``lo,hi`` (a closed interval, as ``[lo,hi]`` writes it) and a full ``(lo,hi]``-style one
_CLOSED = re.compile(rf"^\s*{_BOUND}\s*,\s*{_BOUND}\s*$")
_INTERVAL = re.compile(rf"^([\[(])\s*{_BOUND}\s*,\s*{_BOUND}\s*([\])])$")
_CMP = re.compile(r"^(>=|<=|>|<)\s*(-?[0-9.eE+-]+)$")
#: a range at the start of a comment, then optional {flags}, then the help text
_LEADING = re.compile(r"^(\[[^\]]*\]|\([^()\]]*[\])]|\[[^\])]*\))\s*(?:\{([^}]*)\})?\s*(.*)$")
_INT_SLOT = "<int>"
ADDRESS = "<address>"


@dataclass(frozen=True)
class ParamSpec:
    """A parameter declared in a notebook's parameters cell.

    ``constraint`` is the text of its range: the inside of ``[...]`` (``"paper|quick"``,
    ``">0"``, ``"1,inf"``), or a whole interval with an open end (``"(0,1]"``); ``flags`` the
    qualifiers in braces after it (``("increasing",)``)."""

    name: str
    default: Any
    help: str
    constraint: str | None
    flags: tuple[str, ...] = ()

    @property
    def type_name(self) -> str:
        return type(self.default).__name__

    @property
    def choices(self) -> list[str]:
        """The names a ``[a|b|c]`` constraint allows (``[]`` for other constraints)."""
        c = (self.constraint or "").strip()
        if _is_choices(c):
            return [s.strip() for s in c.split("|")]
        return []

    @property
    def bound_names(self) -> list[str]:
        """The other parameters an interval's ends name."""
        ends = _interval(self.constraint or "")
        return [e for e in ends[1:3] if isinstance(e, str)] if ends else []

    def takes_file(self, value: Any) -> bool:
        """Whether ``value`` is a file path here: the constraint lists ``<text file>`` and
        ``value`` is a string that is none of its names."""
        choices = self.choices
        return TEXT_FILE in choices and isinstance(value, str) and value not in choices

    def check(
        self,
        value: Any,
        source: str,
        base: Path | None = None,
        env: dict[str, Any] | None = None,
    ) -> Any:
        """Raise :class:`ParameterError` if ``value`` does not fit this parameter; return
        it, a file path made absolute (relative to ``base``, default the current directory).
        ``env`` holds the other parameters' values, for an interval whose end names one;
        without it such an end is not checked (the runner checks it once all are known)."""
        where = f"parameter {self.name!r} ({source})"
        _check_type(self.default, value, where)
        if self.takes_file(value):
            if not value.strip():
                names = [c for c in self.choices if c != TEXT_FILE]
                raise ParameterError(f"{where}: empty; give one of {names} or a text file")
            path = Path(base or Path.cwd()) / Path(value).expanduser()
            names = [c for c in self.choices if c != TEXT_FILE]
            if not path.exists():
                raise ParameterError(
                    f"{where}: {value!r} is neither one of {names} nor an existing file "
                    f"({path} does not exist)"
                )
            try:
                read_utf8_text(path, "text file")
            except DataError as exc:
                raise ParameterError(f"{where}: {exc}") from exc
            return str(path.resolve())
        if isinstance(value, list | tuple):
            if isinstance(self.default, list | tuple) and self.default and not value:
                raise ParameterError(f"{where}: takes at least one element, got []")
            if "increasing" in self.flags and any(
                _numeric(a) and _numeric(b) and not a < b for a, b in itertools.pairwise(value)
            ):
                raise ParameterError(f"{where}: must be strictly increasing, got {value!r}")
        if self.constraint:
            items = value if isinstance(value, list | tuple) else [value]
            for item in items:
                _check_constraint(self.constraint, item, where, env)
        return value


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_type(default: Any, value: Any, where: str) -> None:
    if default is None:
        return
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if ok and not math.isfinite(value):
            raise ParameterError(f"{where}: must be finite, got {value!r}")
    elif isinstance(default, str):
        ok = isinstance(value, str)
    elif isinstance(default, list | tuple):
        ok = isinstance(value, list | tuple)
        if ok and default:
            for item in value:
                _check_type(default[0], item, where + " element")
    else:
        ok = type(value) is type(default)
    if not ok:
        raise ParameterError(
            f"{where}: expected {type(default).__name__} like the default {default!r}, "
            f"got {type(value).__name__} {value!r}"
        )


def _is_choices(c: str) -> bool:
    return "|" in c or c.isidentifier() or (c.startswith("<") and c.endswith(">"))


def _end(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text  # the name of another parameter


def _interval(c: str) -> tuple[bool, float | str, float | str, bool] | None:
    """``(closed_low, low, high, closed_high)`` of an interval constraint, else ``None``."""
    c = c.strip()
    if m := _INTERVAL.match(c):
        return m.group(1) == "[", _end(m.group(2)), _end(m.group(3)), m.group(4) == "]"
    if m := _CLOSED.match(c):
        return True, _end(m.group(1)), _end(m.group(2)), True
    return None


def _resolve(end: float | str, env: dict[str, Any] | None, where: str) -> float | None:
    """A bound's value: a number, or the value of the parameter it names (``None`` when the
    other parameters are not known yet)."""
    if isinstance(end, float):
        return end
    if env is None:
        return None
    value = env.get(end)
    if not _numeric(value):
        raise RegistryError(f"{where}: the range names {end!r}, which is no numeric parameter")
    return float(value)


def _check_constraint(
    constraint: str, value: Any, where: str, env: dict[str, Any] | None = None
) -> None:
    c = constraint.strip()
    if m := _CMP.match(c):
        op, bound = m.group(1), float(m.group(2))
        if not _numeric(value):
            return
        ok = {">": value > bound, ">=": value >= bound, "<": value < bound, "<=": value <= bound}[
            op
        ]
        if not ok:
            raise ParameterError(f"{where}: must be {op} {m.group(2)}, got {value!r}")
    elif (ends := _interval(c)) is not None:
        if not _numeric(value):
            return
        closed_lo, lo_end, hi_end, closed_hi = ends
        lo, hi = _resolve(lo_end, env, where), _resolve(hi_end, env, where)
        below = lo is not None and (value < lo if closed_lo else value <= lo)
        above = hi is not None and (value > hi if closed_hi else value >= hi)
        if below or above:
            named = [f"{e} = {env[e]!r}" for e in (lo_end, hi_end) if isinstance(e, str) and env]
            raise ParameterError(
                f"{where}: must lie in {_show_interval(ends)}"
                f"{' (' + ', '.join(named) + ' here)' if named else ''}, got {value!r}"
            )
    elif _is_choices(c):
        choices = [s.strip() for s in c.split("|")]
        if not any(_matches(choice, value) for choice in choices):
            shown = [ch if ch else '""' for ch in choices]
            raise ParameterError(f"{where}: must be one of {shown}, got {value!r}")
    else:
        raise RegistryError(f"{where}: cannot read the constraint [{constraint}]")


def _show_interval(ends: tuple[bool, float | str, float | str, bool]) -> str:
    closed_lo, lo, hi, closed_hi = ends

    def text(e: float | str) -> str:
        return e if isinstance(e, str) else f"{e:g}"

    return f"{'[' if closed_lo else '('}{text(lo)}, {text(hi)}{']' if closed_hi else ')'}"


def _matches(choice: str, value: Any) -> bool:
    """Whether ``value`` is the choice ``choice`` (``<int>`` in it: any non-negative
    integer there; ``<address>``: a dask scheduler's address)."""
    text = str(value)
    if choice == ADDRESS:
        from ntpcore.runner.cluster import ADDRESS as PATTERN

        m = PATTERN.match(text)
        return bool(m) and 0 < int(m["port"]) < 65536
    if _INT_SLOT in choice:
        pattern = re.escape(choice).replace(re.escape(_INT_SLOT), "[0-9]+")
        return re.fullmatch(pattern, text) is not None
    return text == choice


def parameters_cell(nb_path: Path) -> str:
    """Source of the cell tagged ``parameters`` (exactly one must exist)."""
    nb = nbformat.read(nb_path, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise RegistryError(
            f"{nb_path.name}: expected one cell tagged 'parameters', found {len(cells)}"
        )
    return cells[0].source


def parse_parameters(nb_path: Path) -> dict[str, ParamSpec]:
    """Read the parameters cell: literal assignments with their comments."""
    source = parameters_cell(nb_path)
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    specs: dict[str, ParamSpec] = {}
    for node in ast.parse(source).body:
        if not (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and isinstance(
                node.targets[0] if isinstance(node, ast.Assign) else node.target, ast.Name
            )
        ):
            raise RegistryError(
                f"{nb_path.name}: parameters cell line {node.lineno} is not a simple assignment"
            )
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        try:
            default = ast.literal_eval(node.value)
        except ValueError as exc:
            raise RegistryError(
                f"{nb_path.name}: parameter {target.id!r} must be a literal (line {node.lineno})"
            ) from exc
        comment = comments.get(node.lineno, "")
        if "=" in comment:
            raise RegistryError(
                f"{nb_path.name}: the comment of parameter {target.id!r} contains '=', which "
                f"papermill cannot parse; write [1,inf] instead of [>=1]"
            )
        constraint, flags = None, ()
        if m := _LEADING.match(comment):
            token = m.group(1)
            if token.startswith("[") and token.endswith("]"):
                constraint = token[1:-1]
            elif _INTERVAL.match(token):
                constraint = token
            if constraint is not None:
                flags = tuple(f.strip() for f in (m.group(2) or "").split(",") if f.strip())
                comment = m.group(3)
            unknown = sorted(set(flags) - set(FLAGS))
            if unknown:
                raise RegistryError(
                    f"{nb_path.name}: parameter {target.id!r}: unknown qualifier(s) {unknown}; "
                    f"known: {list(FLAGS)}"
                )
        specs[target.id] = ParamSpec(target.id, default, comment, constraint, flags)
    for spec in specs.values():
        for name in spec.bound_names:
            if name not in specs or not _numeric(specs[name].default):
                raise RegistryError(
                    f"{nb_path.name}: the range of {spec.name!r} names {name!r}, which is no "
                    f"numeric parameter of the notebook"
                )
    return specs


def validate_overrides(
    specs: dict[str, ParamSpec],
    overrides: dict[str, Any],
    source: str,
    fig_id: str,
    base: Path | None = None,
) -> dict[str, Any]:
    """Check override keys, types and ranges; raise :class:`ParameterError` naming the key.

    Returns the overrides with file paths made absolute (relative ones are taken from
    ``base``, default the current directory).
    """
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in specs:
            known = ", ".join(sorted(specs))
            raise ParameterError(
                f"{fig_id}: unknown parameter {key!r} ({source}); the notebook declares: {known}"
            )
        out[key] = specs[key].check(value, f"{fig_id}, {source}", base)
    return out


def check_parameters(
    specs: dict[str, ParamSpec], params: dict[str, Any], sources: dict[str, str], fig_id: str
) -> None:
    """Check every parameter's final value (``params``: the notebook's defaults with every
    override on top) against its range, the ends that name other parameters included;
    raise :class:`ParameterError` naming the parameter and where its value came from
    (``sources``: key -> "--set", "registry params", ...; the notebook's default
    otherwise).  File parameters were checked, and made absolute, by
    :func:`validate_overrides`."""
    for key, spec in specs.items():
        if key not in params or spec.takes_file(params[key]):
            continue
        source = sources.get(key, "the notebook's default")
        spec.check(params[key], f"{fig_id}, {source}", env=params)
