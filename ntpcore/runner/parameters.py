"""The notebooks' ``parameters`` cells: their syntax, and the checks of the values the runner
makes before any kernel starts (re-exported by :mod:`ntpcore.runner.registry`).

A notebook's parameters cell holds literal assignments only, one per line, each with a
comment.  The comment starts with the parameter's range, which the runner checks, on every
parameter's final value (the notebook's default, the registry's and ``--set`` overrides),
before any kernel starts::

    lr = 0.5  # (0,inf) eta, the GD step size
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from ntpcore.core.io import read_utf8_text
from ntpcore.errors import DataError, ParameterError


class RegistryError(ValueError):
    """figures.yml is malformed or inconsistent with the notebooks."""


#: The choice of a string parameter's constraint that admits the path of a UTF-8 text file.
TEXT_FILE = "<text file>"


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
