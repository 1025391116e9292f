"""Fixed locations of the project, independent of the working directory.

Notebooks run with different working directories under papermill (``notebooks/``),
nbval (``book/executed/``) and JupyterLab, so every path is resolved here from the
repository root.  These environment variables exist for the test-suite and the runner
only (notebooks never read them): ``NTP_FIGURE_DIR`` redirects figure output (the
runner uses it to stage a notebook's figures until the notebook has succeeded),
``NTP_EXECUTED_DIR`` redirects executed notebooks (``make test`` keeps its quick-profile
copies apart from the book's), ``NTP_CACHE_DIR`` redirects the computation cache and
``NTP_FAILED_DIR`` where the runner keeps failed runs (the mutation runs keep theirs apart).
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


def _env_dir(var: str, default: Path) -> Path:
    """``$var`` if set (a relative path is taken from the repository root), else default."""
    value = os.environ.get(var)
    return (ROOT / value).resolve() if value else default


def figure_dir() -> Path:
    """Where figures and their sidecars are written (``book/figures`` by default)."""
    return _env_dir("NTP_FIGURE_DIR", BOOK_DIR / "figures")


def explore_dir(fig_id: str) -> Path:
    """Where an explored run of ``fig_id`` goes: ``results/explore/<fig_id>/``.

    An explored run is any run that is not the runner reproducing the registry's figure:
    a notebook run by hand (e.g. *Run All* in JupyterLab) or a runner call with ``--set``.
    It never writes ``book/figures``, so the book never shows it as the paper's figure.
    """
    return RESULTS_DIR / "explore" / fig_id


def output_dir(fig_id: str) -> Path:
    """Where a notebook writes its figure: ``$NTP_FIGURE_DIR`` (set by the runner and the
    tests), else the explore folder of the figure."""
    value = os.environ.get("NTP_FIGURE_DIR")
    return (ROOT / value).resolve() if value else explore_dir(fig_id)


def executed_dir() -> Path:
    """Where the runner puts executed notebooks (``book/executed`` by default)."""
    return _env_dir("NTP_EXECUTED_DIR", EXECUTED_DIR)


def failed_dir(default: Path) -> Path:
    """Where the runner keeps a failed registry run: ``$NTP_FAILED_DIR``, else ``default``."""
    return _env_dir("NTP_FAILED_DIR", default)


def cache_dir() -> Path:
    """Root of the computation cache (``results/cache`` by default)."""
    return _env_dir("NTP_CACHE_DIR", RESULTS_DIR / "cache")


FIGURE_DIR = BOOK_DIR / "figures"
CACHE_DIR = RESULTS_DIR / "cache"
