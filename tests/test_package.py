"""The house: how the modules of ``ntpcore`` import each other, computed from the sources.

Layers, from the ground up: ``errors``; ``core`` (what the papers share, with the cache and
the sweeps); ``figure`` (the API a figure's notebook uses: claims ledger, provenance,
plotted data, plotting style); the papers ``lin``, ``geo``, ``att``; ``runner`` (the
checkout's notebook runner); the command ``reproduce``.  The QA tooling and the benchmarks
(``tools/``) are outside the package, and nothing in it imports them.  A module imports
only from its own layer or below, a paper never from another paper, and no module of a
paper imports its own paper's face (``ntpcore.<paper>``): it imports what it uses from the
module that defines it.  Every import counts, at the top of a module or inside a function,
so an import moved into a function cannot hide a loop.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1] / "ntpcore"
LAYERS = {
    "errors": 0,
    "install": 0,
    "core": 1,
    "figure": 2,
    "lin": 3,
    "geo": 3,
    "att": 3,
    "runner": 4,
}
PAPERS = ("lin", "geo", "att")
#: the longest a module of the package or of tools/ may be, in lines
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str) -> set[str]:
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("ntpcore")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            if not base.startswith("ntpcore"):
                continue
            for a in node.names:
                # "from ntpcore.att import compiled" imports the module and reads it from the
                # package: the package's __init__ (a paper's face) runs first, so the edge
                # goes to both -- a module of ntpcore.att that imports a sibling this way
                # depends on the face, which imports it back
                sub = f"{base}.{a.name}"
                out.add(base)
                if _is_module(sub):
                    out.add(sub)
    return out


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (ROOT.parent / rel).with_suffix(".py").exists() or (ROOT.parent / rel).is_dir()


def graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for path in ROOT.rglob("*.py"):
        name = _module_name(path)
        g.add_node(name)
        for target in _imports(path, name):
            if target != name:
                g.add_edge(name, target)
    return g


def _room(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(name: str) -> int | None:
    room = _room(name)
    if room == "reproduce":
        return 5
    return LAYERS.get(room)


def test_no_module_is_longer_than_the_limit():
    """The package's modules and the checkout's tooling beside it (``tools/``)."""
    long = {
        str(p.relative_to(ROOT.parent)): n
        for p in [*ROOT.rglob("*.py"), *(ROOT.parent / "tools").rglob("*.py")]
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules above {MAX_LINES} lines: {long}"


def test_every_module_has_a_layer():
    rooms = {_room(n) for n in graph() if n != "ntpcore"}
    assert rooms <= set(LAYERS) | {"reproduce"}, rooms - set(LAYERS)


def test_no_import_loop():
    g = graph()
    g.remove_nodes_from([n for n in list(g) if n == "ntpcore"])
    cycles = list(nx.simple_cycles(g))
    assert not cycles, "import loops: " + "; ".join(" -> ".join(c + c[:1]) for c in cycles[:5])


def test_no_import_from_a_lower_layer_to_a_higher_one_or_across_papers():
    bad = []
    for a, b in graph().edges:
        if "ntpcore" in (a, b):
            continue
        la, lb = _layer(a), _layer(b)
        if lb > la or (la == lb == 3 and _room(a) != _room(b)):
            bad.append(f"{a} -> {b}")
    assert not bad, bad


def test_no_module_of_a_paper_imports_its_own_face():
    bad = [
        f"{a} -> {b}"
        for a, b in graph().edges
        if b in {f"ntpcore.{p}" for p in PAPERS} and a.startswith(f"{b}.")
    ]
    assert not bad, bad


def test_the_graph_sees_imports_inside_functions(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    from ntpcore.core.io import write_atomic\n")
    assert _imports(mod, "ntpcore.x.m") == {"ntpcore.core.io"}


def test_the_graph_sees_a_sibling_imported_through_its_package(tmp_path):
    """``from ntpcore.att import compiled`` in a module of ``ntpcore.att`` runs the face
    ``ntpcore/att/__init__.py`` first: an edge to the face, which imports the module back."""
    mod = tmp_path / "m.py"
    mod.write_text("from ntpcore.att import compiled\n")
    assert _imports(mod, "ntpcore.att.descent") == {"ntpcore.att", "ntpcore.att.compiled"}
    g = nx.DiGraph(
        [
            ("ntpcore.att", "ntpcore.att.descent"),
            *(("ntpcore.att.descent", t) for t in _imports(mod, "ntpcore.att.descent")),
        ]
    )
    assert list(nx.simple_cycles(g)), "the loop through the face is seen"


def test_nothing_in_the_package_imports_the_checkouts_tooling():
    """``tools/`` (goldens, reproducibility, mutations, bench) is outside the wheel."""
    bad = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            bad += [
                f"{path.relative_to(ROOT.parent)}: {n}" for n in names if n.split(".")[0] == "tools"
            ]
    assert not bad, bad


def test_the_science_and_the_figure_api_load_no_runner_and_no_notebook_machinery():
    """``pip install ntpcore`` without extras: importing the papers' faces, their experiments
    and the figure API loads neither papermill, nbformat, ipykernel nor dask, and no module
    of the runner."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import ntpcore.lin, ntpcore.geo, ntpcore.att\n"
        "import ntpcore.lin.experiments, ntpcore.geo.experiments, ntpcore.att.experiments\n"
        "from ntpcore.figure import claims, plotting, provenance, sourcedata\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('papermill', 'nbformat', 'ipykernel', 'dask', 'distributed', 'tools', 'yaml') "
        "or m.startswith('ntpcore.runner'))\n"
        "print(' '.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", out.stdout
