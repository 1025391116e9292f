"""Fixed locations of the project, independent of the working directory.

Notebooks run with different working directories under papermill (``notebooks/``),
nbval (``book/executed/``) and JupyterLab, so every path is resolved here from the
repository root.  These environment variables exist for the test-suite and the runner
only (notebooks never read them): ``NTP_FIGURE_DIR`` redirects figure output (the
runner uses it to stage a notebook's figures until the notebook has succeeded),
``NTP_EXECUTED_DIR`` redirects executed notebooks (``make test`` keeps its quick-profile
copies apart from the book's), ``NTP_CACHE_DIR`` redirects the computation cache and
``NTP_FAILED_DIR`` where the runner keeps failed runs (the mutation runs keep theirs apart).

**A checkout or an installed package.**  The package runs from a checkout of the repository
when the registry ``figures.yml`` sits beside it (:data:`CHECKOUT`): an editable install,
``PYTHONPATH``, Binder.  Installed from a wheel (``pip install``, Colab) there is no
repository: a notebook run is an exploration whose outputs (figure, sidecar, claims) go to
``ntp-outputs/<fig_id>/`` and the computation cache to ``ntp-outputs/cache/``, both in the
working directory -- the notebook's own folder under Jupyter and papermill -- and a
relative override above is taken from there.  The runner, the registry and the book need a
checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"
BOOK_DIR = ROOT / "book"
EXECUTED_DIR = BOOK_DIR / "executed"
REGISTRY = ROOT / "figures.yml"
RESULTS_DIR = ROOT / "results"
#: whether the package runs from a checkout of the repository (the registry beside it) and
#: not from an installed wheel
CHECKOUT = REGISTRY.is_file()
#: where an installed package's notebook runs write, in their working directory
INSTALLED_OUTPUTS = "ntp-outputs"


def _base() -> Path:
    """What relative overrides are taken from: the checkout, or (installed) the working
    directory."""
    return ROOT if CHECKOUT else Path.cwd()


def _env_dir(var: str, default: Path) -> Path:
    """``$var`` if set (a relative path is taken from the repository root), else default."""
    value = os.environ.get(var)
    return (_base() / value).resolve() if value else default


def figure_dir() -> Path:
    """Where figures and their sidecars are written (``book/figures`` by default)."""
    return _env_dir("NTP_FIGURE_DIR", BOOK_DIR / "figures")


def explore_dir(fig_id: str) -> Path:
    """Where an explored run of ``fig_id`` goes: ``results/explore/<fig_id>/`` in a checkout,
    ``ntp-outputs/<fig_id>/`` in the working directory of an installed package.

    An explored run is any run that is not the runner reproducing the registry's figure:
    a notebook run by hand (e.g. *Run All* in JupyterLab) or a runner call with ``--set``.
    It never writes ``book/figures``, so the book never shows it as the paper's figure.
    """
    if not CHECKOUT:
        return Path.cwd() / INSTALLED_OUTPUTS / fig_id
    return RESULTS_DIR / "explore" / fig_id


def output_dir(fig_id: str) -> Path:
    """Where a notebook writes its figure: ``$NTP_FIGURE_DIR`` (set by the runner and the
    tests), else the explore folder of the figure."""
    value = os.environ.get("NTP_FIGURE_DIR")
    return (_base() / value).resolve() if value else explore_dir(fig_id)


def executed_dir() -> Path:
    """Where the runner puts executed notebooks (``book/executed`` by default)."""
    return _env_dir("NTP_EXECUTED_DIR", EXECUTED_DIR)


def failed_dir(default: Path) -> Path:
    """Where the runner keeps a failed registry run: ``$NTP_FAILED_DIR``, else ``default``."""
    return _env_dir("NTP_FAILED_DIR", default)


def cache_dir() -> Path:
    """Root of the computation cache: ``results/cache`` in a checkout, ``ntp-outputs/cache``
    in the working directory of an installed package."""
    default = RESULTS_DIR / "cache" if CHECKOUT else Path.cwd() / INSTALLED_OUTPUTS / "cache"
    return _env_dir("NTP_CACHE_DIR", default)


FIGURE_DIR = BOOK_DIR / "figures"
CACHE_DIR = RESULTS_DIR / "cache"
