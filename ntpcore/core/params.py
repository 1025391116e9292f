"""A notebook's parameters and the configuration built from them.

A figure's notebook declares its parameters once, in its ``parameters`` cell (papermill's
tag): one literal assignment a line, each with its help comment.  That cell is the one place
a default lives for the notebook; the experiment's frozen configuration is built from it
without typing a name again::

    cfg = from_params(experiments.GlobalConfig, globals())

:func:`from_params` takes every field of the dataclass from the notebook's namespace (or
from ``own``, the values the notebook computes itself, e.g. the seed of the draw it shows);
a field that is itself a dataclass (a part of a composed configuration: the dataset, the
training protocol) is built the same way from the same namespace.  It turns a list into a
tuple where the field is a tuple (a parameter cell writes lists; a
configuration must be hashable) and an ``int`` into a ``float`` where the field is a float
(so that ``lr = 1`` and ``lr = 1.0`` are one cache key), and refuses a field the namespace
lacks or a name in ``own`` the dataclass does not declare, with a
:class:`~ntpcore.errors.ParameterError` naming it.

:data:`PROFILES` are the valid values of every notebook's ``profile`` parameter, defined
here once: the claims ledger, the figure's provenance and the runner import them.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from ntpcore.errors import ParameterError

__all__ = ["PROFILES", "from_params"]

#: the profiles of a notebook run: ``"paper"`` reproduces the paper's figure, ``"quick"`` is
#: the continuous-integration profile (shorter runs, checked against the golden outputs)
PROFILES = ("paper", "quick")

C = TypeVar("C")


def _convert(value: Any, hint: Any) -> Any:
    """``value`` as a field annotated ``hint`` holds it: a list or tuple as a tuple (its
    items converted where the annotation says ``tuple[int, ...]`` or ``tuple[float, ...]``),
    an int as a float where the field is a float; anything else unchanged."""
    origin = typing.get_origin(hint) or hint
    if origin is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if origin is tuple and isinstance(value, (list, tuple)):
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0]) for v in value)
        return tuple(value)
    return value


def from_params(cls: type[C], namespace: Mapping[str, Any], /, **own: Any) -> C:
    """``cls`` (a dataclass) built from a notebook's parameters: every field from ``own``
    if given there, else from ``namespace`` (the notebook's ``globals()``).

    Raises
    ------
    ParameterError  a field found in neither (the notebook does not declare the parameter),
                    or a name in ``own`` that is not a field of ``cls``.
    """
    if not dataclasses.is_dataclass(cls) or not isinstance(cls, type):
        raise TypeError(f"from_params needs a dataclass, got {cls!r}")
    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = {f.name for f in fields}
    unknown = sorted(set(own) - names)
    if unknown:
        raise ParameterError(
            f"{cls.__name__} has no field {unknown[0]!r} (its fields: {', '.join(sorted(names))})"
        )
    hints = typing.get_type_hints(cls)
    missing = [
        f.name
        for f in fields
        if f.name not in own and f.name not in namespace and not _is_part(hints.get(f.name))
    ]
    if missing:
        raise ParameterError(
            f"{cls.__name__} needs the parameter {missing[0]!r}"
            + (f" (and {', '.join(map(repr, missing[1:]))})" if missing[1:] else "")
            + ": declare it in the notebook's parameters cell"
        )
    values = {}
    for f in fields:
        hint = hints.get(f.name)
        if f.name in own:
            values[f.name] = _convert(own[f.name], hint)
        elif _is_part(hint):  # a part of the configuration: built from the same namespace
            values[f.name] = from_params(hint, namespace)
        else:
            values[f.name] = _convert(namespace[f.name], hint)
    return cls(**values)


def _is_part(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)
