"""Running a template notebook elsewhere: Colab and Binder links, and the cell that installs
the package where it is missing.

The repository's URL and branch are set in one place, ``_config.yml`` (``repository.url``
and ``repository.branch``, which Jupyter Book also reads for its repository button).  From
them come

* :func:`colab_url` and :func:`binder_url`: the links each executed page of the book gives
  to its *template* notebook under ``notebooks/`` (``book/_ext/ntpbook.py``; the executed
  copies are generated and not in the repository).  Binder builds the repository's own
  ``environment.yml`` (CPU torch first, the pins of ``requirements/constraints.txt``, the
  package installed from the checkout), so on Binder a notebook runs in a checkout and an
  explored run goes to ``results/explore/<fig_id>/``;
* :func:`install_cell`: the first code cell of every template, a few lines.  Where
  ``ntpcore`` cannot be imported (Colab) it installs the package alone from the repository
  (``--no-deps``), then its dependencies, CPU torch first (:mod:`ntpcore.install`, which
  holds the steps); where it can (a checkout, Binder, the book's runs, a wheel install) it
  does nothing and prints nothing, so the executed notebooks and the golden outputs do not
  change.  It is tagged
  ``remove-cell`` (the book does not show it) and :data:`INSTALL_TAG`.  With the package
  installed and no checkout, a notebook writes its outputs beside itself, in
  ``ntp-outputs/<fig_id>/``, and says so (:mod:`ntpcore.core.paths`).

The torch requirement installed is the package's (``pyproject.toml``) and the CPU index
the one of ``environment.yml`` (a test checks :data:`ntpcore.install.CPU_INDEX`).  Command
line (a test runs the check)::

    python -m ntpcore.runner.launch            # is every template's install cell current?
    python -m ntpcore.runner.launch --write    # write it (after a change to _config.yml)
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import quote

import nbformat
import yaml

from ntpcore.core import paths
from ntpcore.core.io import write_text_atomic
from ntpcore.errors import NTPError

__all__ = [
    "INSTALL_TAG",
    "LaunchError",
    "Repository",
    "binder_url",
    "colab_url",
    "install_cell",
    "main",
    "repository",
    "sync",
]

#: tag of the install cell of a template (with ``remove-cell``, which hides it in the book)
INSTALL_TAG = "ntp-install"
INSTALL_TAGS = ["remove-cell", INSTALL_TAG]
_GITHUB = re.compile(r"https://github\.com/(?P<owner>[\w.-]+)/(?P<name>[\w.-]+?)(?:\.git)?/?")


class LaunchError(NTPError):
    """The repository's URL, a notebook path or a template's install cell is unusable."""


@dataclass(frozen=True)
class Repository:
    """A GitHub repository and the branch the links and the install cell use."""

    url: str
    branch: str

    def __post_init__(self) -> None:
        if _GITHUB.fullmatch(self.url) is None:
            raise LaunchError(
                f"repository url {self.url!r}: Colab and Binder need "
                f"'https://github.com/<owner>/<name>' (_config.yml, repository.url)"
            )
        if not self.branch or not re.fullmatch(r"[\w.-]+", self.branch):
            raise LaunchError(
                f"repository branch {self.branch!r}: one name of letters, digits, '.', '-' "
                f"or '_' (_config.yml, repository.branch)"
            )

    @property
    def owner(self) -> str:
        return _GITHUB.fullmatch(self.url)["owner"]

    @property
    def name(self) -> str:
        return _GITHUB.fullmatch(self.url)["name"]


def repository(config: Path | None = None) -> Repository:
    """The repository and branch of ``_config.yml`` (``repository.url``, ``.branch``)."""
    config = config or paths.ROOT / "_config.yml"
    try:
        section = (yaml.safe_load(config.read_text()) or {}).get("repository") or {}
    except (OSError, yaml.YAMLError) as exc:
        raise LaunchError(f"{config}: cannot read the repository section ({exc})") from exc
    return Repository(str(section.get("url") or ""), str(section.get("branch") or ""))


def _notebook(path: str) -> str:
    """``path`` checked: a template notebook, relative to the repository root."""
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or p.suffix != ".ipynb" or "\\" in path:
        raise LaunchError(f"{path!r} is not a notebook path inside the repository")
    return str(p)


def colab_url(repo: Repository, notebook: str) -> str:
    """Colab's page opening ``notebook`` (e.g. ``notebooks/lin_toy.ipynb``) from
    GitHub, at the repository's branch."""
    path = quote(_notebook(notebook))
    return (
        f"https://colab.research.google.com/github/{repo.owner}/{repo.name}/blob/"
        f"{quote(repo.branch, safe='')}/{path}"
    )


def binder_url(repo: Repository, notebook: str) -> str:
    """mybinder.org's page that builds the repository at its branch (from its
    ``environment.yml``) and opens ``notebook`` in JupyterLab."""
    path = quote(_notebook(notebook), safe="")
    return (
        f"https://mybinder.org/v2/gh/{repo.owner}/{repo.name}/"
        f"{quote(repo.branch, safe='')}?labpath={path}"
    )


_CELL = """\
# Colab, or a Python without ntpcore: install it (a few minutes; ntpcore.install's steps).
import importlib.util, subprocess, sys
if importlib.util.find_spec("ntpcore") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--ignore-requires-python", "ntpcore @ git+{url}@{branch}"], check=True)
    importlib.invalidate_caches()
    importlib.import_module("ntpcore.install").install_dependencies()
"""  # noqa: E501 - the cell's pip call, one line


def install_cell(repo: Repository | None = None) -> str:
    """The source of the install cell of every template notebook."""
    repo = repo or repository()
    return _CELL.format(url=repo.url, branch=repo.branch).rstrip("\n")


def _with_install_cell(nb: nbformat.NotebookNode, source: str) -> nbformat.NotebookNode:
    """``nb`` with one install cell, right after its title cell, and cell ids renumbered
    0, 1, ... (as ``nbstripout`` writes them)."""
    nb = nbformat.from_dict(nb)
    cells = [c for c in nb.cells if INSTALL_TAG not in c.get("metadata", {}).get("tags", [])]
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": list(INSTALL_TAGS)})
    nb.cells = [*cells[:1], cell, *cells[1:]]
    for k, c in enumerate(nb.cells):
        c["id"] = str(k)
    return nb


def sync(write: bool = False, notebook_dir: Path | None = None, source: str | None = None):
    """The templates whose install cell is missing, differs or is misplaced (written with
    the current cell when ``write``)."""
    source = source if source is not None else install_cell()
    changed = []
    for path in sorted((notebook_dir or paths.NOTEBOOK_DIR).glob("*.ipynb")):
        text = path.read_text(encoding="utf-8")
        nb = nbformat.reads(text, as_version=4)
        new = nbformat.writes(_with_install_cell(nb, source)) + "\n"
        if new != text:
            changed.append(path)
            if write:
                write_text_atomic(path, new)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ntpcore.runner.launch",
        description="Check (or write) the install cell of every template notebook.",
    )
    parser.add_argument("--write", action="store_true", help="write the current cell")
    args = parser.parse_args(argv)
    try:
        changed = sync(write=args.write)
    except LaunchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in changed:
        verb = "wrote" if args.write else "install cell not current:"
        print(f"{verb} {path.relative_to(paths.ROOT)}")
    if changed and not args.write:
        print("run: python -m ntpcore.runner.launch --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
