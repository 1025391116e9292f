"""One vocabulary across the three papers, written down once: the table in the package's
docstring (``ntpcore/__init__.py``, *Vocabulary*).

* every public configuration field and every notebook parameter avoids the names the table
  says a quantity is never called (``d`` for ``dim``, ``step_size`` for ``lr``, ``n_epochs``
  for ``n_steps``, ...), so no two of them name one documented quantity differently;
* no configuration field and no notebook parameter is a bare ``seed`` (every paper has more
  than one seed), and every seed is one the table names;
* the faces' shared names have one contract: ``tests/core/test_faces.py``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import ntpcore

ROOT = Path(__file__).resolve().parents[1]
#: the protocols, named by what they hold (the other configurations end in ``Config``)
PROTOCOLS = ("InitAndRecording", "AdamWProtocol", "DescentSteps")


def _table() -> dict[str, set[str]]:
    """name -> the names it is never called, from the package docstring's table."""
    doc = ntpcore.__doc__ or ""
    lines = doc[doc.index("Vocabulary\n----------") :].splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("name ")) + 2
    rows = {}
    for ln in lines[start:]:
        if not ln.strip():
            break
        cells = re.split(r"\s{2,}", ln.strip())
        rows[cells[0]] = {x.strip() for x in cells[-1].split(",")}
    return rows


TABLE = _table()
NEVER = {alias: name for name, aliases in TABLE.items() for alias in aliases}
SEEDS = {name for name in TABLE if name.endswith("_seed")}


def _modules():
    for info in pkgutil.walk_packages(ntpcore.__path__, "ntpcore."):
        if ".runner" in info.name or info.name.endswith("reproduce"):
            continue
        yield importlib.import_module(info.name)


def _configurations() -> dict[str, type]:
    """Every public configuration dataclass of the package, by qualified name."""
    out = {}
    for mod in _modules():
        for name, obj in vars(mod).items():
            if (
                isinstance(obj, type)
                and dataclasses.is_dataclass(obj)
                and obj.__module__ == mod.__name__
                and not name.startswith("_")
                and (name.endswith("Config") or name in PROTOCOLS)
            ):
                out[f"{mod.__name__}.{name}"] = obj
    return out


CONFIGS = _configurations()


def _parameters() -> dict[str, list[str]]:
    """Every notebook's parameter names (its ``parameters`` cell)."""
    import nbformat

    out = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        out[path.stem] = [t.id for node in ast.parse(cell.source).body for t in node.targets]
    return out


PARAMETERS = _parameters()


def _problems(name: str) -> list[str]:
    bad = []
    if name == "seed":
        bad.append(f"a bare 'seed': say which, one of {sorted(SEEDS)}")
    elif name in NEVER:
        bad.append(f"{name!r} is never used: say {NEVER[name]!r}")
    for alias, canonical in NEVER.items():  # per-optimiser forms: gd_step_size -> gd_lr
        if len(alias) > 2 and alias != "seed" and name.endswith(f"_{alias}"):
            bad.append(f"{name!r}: {alias!r} is never used, say {canonical!r}")
    if name.endswith("seed") and name not in SEEDS:
        bad.append(f"{name!r} is not one of the documented seeds {sorted(SEEDS)}")
    return bad


def test_the_table_names_the_quantities_of_the_brief():
    assert {"dim", "vocab_size", "n_contexts", "n_samples", "seq_len", "lr", "n_steps"} <= set(
        TABLE
    )
    assert {"data_seed", "init_seed", "trial_seed"} <= SEEDS
    assert {"d", "step_size", "n_epochs", "seed"} <= set(NEVER)


def test_the_configurations_are_found():
    names = {c.rsplit(".", 1)[1] for c in CONFIGS}
    assert {"GDConfig", "ModelsConfig", "GlobalConfig", *PROTOCOLS} <= names
    assert len(CONFIGS) >= 30


@pytest.mark.parametrize("qualname", sorted(CONFIGS))
def test_a_configuration_speaks_the_vocabulary(qualname):
    bad = [p for f in dataclasses.fields(CONFIGS[qualname]) for p in _problems(f.name)]
    assert not bad, f"{qualname}: {bad}"


@pytest.mark.parametrize("notebook", sorted(PARAMETERS))
def test_a_notebook_speaks_the_vocabulary(notebook):
    bad = [p for name in PARAMETERS[notebook] for p in _problems(name)]
    assert not bad, f"{notebook}: {bad}"


def test_a_parameter_a_configuration_takes_has_the_configurations_name():
    """A notebook parameter that names a configuration field is that field: the names the
    notebooks and the configurations use are one set (``from_params`` relies on it)."""
    fields = {f.name for cls in CONFIGS.values() for f in dataclasses.fields(cls)}
    used = {name for names in PARAMETERS.values() for name in names}
    runner = {"fig_id", "profile", "n_workers", "scheduler"}  # how a notebook runs
    unknown = sorted(used - fields - runner)
    # what the notebooks take for themselves (figure choices and the page a view describes,
    # draws, displayed sequences)
    assert set(unknown) <= {"experiment", "first_seed", "n_seeds", "view"}, unknown


@pytest.mark.parametrize(
    "name", ["seed", "d", "step_size", "gd_step_size", "n_epochs", "snapshot_epochs", "x_seed"]
)
def test_the_check_refuses_what_the_table_rules_out(name):
    assert _problems(name)


@pytest.mark.parametrize("name", ["dim", "lr", "gd_lr", "n_steps", "snapshot_steps", "data_seed"])
def test_the_check_accepts_the_vocabulary(name):
    assert not _problems(name)


def test_no_notebook_retypes_a_parameter():
    """Every parameter is typed once, in the parameters cell: a notebook builds its
    configuration with ``from_params`` (never a ``...Config(name=name, ...)`` call) and hands
    no parameter on under its own name (``name=name``, ``{"name": name}``) -- but the
    runner's, which say how a notebook runs (``fig_id``, ``profile``, ``n_workers``,
    ``scheduler``)."""
    import nbformat

    runner = {"fig_id", "profile", "n_workers", "scheduler"}
    bad = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        names = set(PARAMETERS[path.stem]) - runner
        for c in nb.cells:
            if c.cell_type != "code" or c is cell:
                continue
            for node in ast.walk(ast.parse(c.source)):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr.endswith("Config")
                ):
                    bad.append(f"{path.stem}: {node.func.attr}(...) instead of from_params")
                pairs = []
                if isinstance(node, ast.keyword) and node.arg:
                    pairs = [(node.arg, node.value)]
                elif isinstance(node, ast.Dict):
                    pairs = [
                        (k.value, v)
                        for k, v in zip(node.keys, node.values, strict=True)
                        if isinstance(k, ast.Constant)
                    ]
                bad += [
                    f"{path.stem}: {k} retyped"
                    for k, v in pairs
                    if k in names and isinstance(v, ast.Name) and v.id == k
                ]
    assert not bad, bad
