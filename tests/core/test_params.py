"""A notebook's parameters, typed once: :func:`ntpcore.core.params.from_params` builds a
configuration from the notebook's namespace, and the profiles are defined in one place."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from ntpcore.core.params import PROFILES, from_params
from ntpcore.errors import ParameterError


@dataclass(frozen=True)
class _Config:
    dim: int = 8
    lr: float = 0.5
    radii: tuple[float, ...] = (1.0,)
    losses: tuple = ("ce",)
    name: str = "x"


def test_the_fields_come_from_the_namespace_lists_as_tuples_ints_as_floats():
    ns = {"dim": 4, "lr": 1, "radii": [1, 2.5], "losses": ["ce", "squared"], "name": "y"}
    cfg = from_params(_Config, {**ns, "profile": "quick", "fig_id": "lin-x", "other": object()})
    assert cfg == _Config(4, 1.0, (1.0, 2.5), ("ce", "squared"), "y")
    assert isinstance(cfg.lr, float) and all(isinstance(r, float) for r in cfg.radii)
    hash(cfg)  # a configuration is a cache key


def test_own_values_win_over_the_namespace():
    ns = {"dim": 4, "lr": 0.1, "radii": [1.0], "losses": ["ce"], "name": "y"}
    assert from_params(_Config, ns, dim=5).dim == 5


def test_a_field_the_notebook_does_not_declare_is_refused():
    with pytest.raises(ParameterError, match="'radii'"):
        from_params(_Config, {"dim": 4, "lr": 0.1, "losses": [], "name": "y"})


def test_an_unknown_own_name_is_refused():
    ns = {"dim": 4, "lr": 0.1, "radii": [1.0], "losses": ["ce"], "name": "y"}
    with pytest.raises(ParameterError, match="no field 'seed'"):
        from_params(_Config, ns, seed=0)


def test_the_profiles_are_defined_once():
    """Every module that checks a profile imports :data:`PROFILES`; no other module of the
    package spells the pair as a literal."""
    root = Path(__file__).resolve().parents[2] / "ntpcore"
    literal = {PROFILES, PROFILES[::-1]}
    bad = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Tuple | ast.List | ast.Set) and all(
                isinstance(e, ast.Constant) for e in node.elts
            ):
                if tuple(e.value for e in node.elts) in literal and path.name != "params.py":
                    bad.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    assert not bad, bad
