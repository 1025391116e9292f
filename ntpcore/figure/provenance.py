"""Save figures with a provenance sidecar.

:func:`savefig` writes ``<fig_id>.png`` (for the book), in the paper profile also
``<fig_id>.pdf`` (paper quality; the quick profile, for checks, makes none), and
``<fig_id>.json`` (the sidecar) to :func:`ntpcore.core.paths.output_dir`: the
folder the runner gives (``$NTP_FIGURE_DIR``), or, for a notebook run by hand,
``results/explore/<fig_id>/`` -- an explored run never replaces the book's figure -- and,
with the package installed without a checkout, ``ntp-outputs/<fig_id>/`` beside the notebook
(:mod:`ntpcore.core.paths`); an explored run says where its outputs went.  Figures are
byte-stable from run to run: the PNG/PDF metadata carry the figure id and the commit
but no dates or software versions.  The sidecar records the merged parameters, the
profile, the commit and dirty flag, package versions, seeds, wall time and the key
metrics the notebook reports.  Every file is written atomically.

In a notebook, the figure shown below the cell is the PNG just written (displayed at the
figure's on-screen size, and closed, so that ``plt.show()`` draws nothing more): one
rendering serves the file and the page.
"""

from __future__ import annotations

import dataclasses
import io
import json
import platform
import subprocess
import time
from importlib import metadata
from typing import Any

from matplotlib.figure import Figure

import ntpcore
from ntpcore.core import paths
from ntpcore.core.cache import _canonical
from ntpcore.core.io import write_atomic, write_text_atomic
from ntpcore.core.params import PROFILES
from ntpcore.figure import sourcedata
from ntpcore.figure.plotting import stamp_quick

_T0 = time.perf_counter()

PACKAGES = ("numpy", "scipy", "torch", "cvxpy", "clarabel", "scs", "networkx", "matplotlib")


def git_state() -> dict[str, Any]:
    """Commit SHA and dirty flag of the repository (``None`` outside a git checkout, and for
    an installed package, whose folder may sit inside someone else's repository)."""
    if not paths.CHECKOUT:
        return {"commit": None, "dirty": None}

    def _git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=paths.ROOT, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    sha = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": sha, "dirty": bool(status) if status is not None else None}


def versions() -> dict[str, str | None]:
    """Versions of python, ntpcore and the numerical libraries."""
    out: dict[str, str | None] = {
        "python": platform.python_version(),
        "ntpcore": ntpcore.__version__,
    }
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _params(cfg: Any) -> dict[str, Any] | None:
    if cfg is None:
        return None
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return _canonical(cfg)
    if isinstance(cfg, dict):
        return _canonical(cfg)
    raise TypeError(f"cfg must be a dataclass or a dict, got {type(cfg).__name__}")


def seeds_of(cfg: Any) -> dict[str, Any]:
    """The seeds of a configuration: its fields named ``*_seed``, its parts' included
    (``{"data_seed": 0, "init_seed": 0}``); a dict of parameters likewise."""
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        items = [(f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg)]
    elif isinstance(cfg, dict):
        items = list(cfg.items())
    else:
        return {}
    out: dict[str, Any] = {}
    for name, value in items:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out.update(seeds_of(value))
        elif str(name).endswith("_seed"):
            out[str(name)] = value
    return out


def savefig(
    fig: Figure,
    fig_id: str,
    cfg: Any = None,
    *,
    profile: str,
    metrics: dict[str, float] | None = None,
    seeds: Any = None,
    extra: dict[str, Any] | None = None,
    claims: Any = None,
    series: dict[tuple[int, str], tuple[Any, Any]] | None = None,
    panels: sourcedata.Panels | None = None,
) -> dict[str, Any]:
    """Save ``fig`` as PNG + PDF with a JSON provenance sidecar and the figure's source data
    (``<fig_id>.data.json``: every panel's series, :mod:`ntpcore.figure.sourcedata`);
    return the sidecar.

    Parameters
    ----------
    fig : the matplotlib figure
    fig_id : registry id, e.g. ``"lin-gd-direction"``; names every output file
    cfg : the experiment configuration (dataclass or dict of the notebook parameters)
    profile : ``"paper"`` or ``"quick"``; a quick figure gets a visible stamp
    metrics : key numbers the notebook reports (shown on the *Reproducing* page)
    seeds : the seeds used (int or list); by default ``cfg``'s (:func:`seeds_of`)
    extra : anything else worth recording (solver status, infeasible draws, ...)
    claims : the figure's :class:`ntpcore.figure.claims.Ledger`; its claims go into the sidecar
        (the runner refreshes them from the ledger file after the notebook finishes)
    series : ``{(panel, label): (x, y)}``: labelled lines checked against the computed
        results they name before anything is written (a swapped label or a series from
        another run raises :class:`~ntpcore.figure.sourcedata.FigureDataError`)
    panels : what every panel must show (:class:`~ntpcore.figure.sourcedata.Panels`: axis
        scales, every labelled line, band, bar series and point set, every image with its
        colour limits), checked before anything is written; a difference raises
        :class:`~ntpcore.figure.sourcedata.FigureDataError`
    """
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    if not fig_id or "/" in fig_id or fig_id.startswith("."):
        raise ValueError(f"invalid fig_id {fig_id!r}")
    n_series = sourcedata.check_series(fig, series or {})
    if panels is not None:
        n_series += sourcedata.check(fig, panels)
    data = sourcedata.extract(fig)
    if profile == "quick":
        stamp_quick(fig)
    git = git_state()
    outdir = paths.output_dir(fig_id)
    sha = git["commit"] or "unknown"

    png = io.BytesIO()
    fig.savefig(png, format="png", metadata={"Software": None, "Title": fig_id, "Source": sha})
    files = {f"{fig_id}.png": png.getvalue()}
    if profile == "paper":  # paper quality; the quick profile's figures are checks
        pdf = io.BytesIO()
        fig.savefig(
            pdf,
            format="pdf",
            metadata={
                "CreationDate": None,
                "Creator": None,
                "Producer": None,
                "Title": fig_id,
                "Subject": f"commit {sha}",
            },
        )
        files[f"{fig_id}.pdf"] = pdf.getvalue()
    sidecar = {
        "fig_id": fig_id,
        "profile": profile,
        "params": _params(cfg),
        "metrics": _canonical(metrics or {}),
        "seeds": _canonical(seeds_of(cfg) if seeds is None else seeds),
        "extra": _canonical(extra or {}),
        "claims": claims.records() if claims is not None else [],
        "git": git,
        "versions": versions(),
        "compute_wall_time_s": round(time.perf_counter() - _T0, 3),
        "files": [*files, f"{fig_id}.data.json"],
        "series_checked": n_series,
        "panels_checked": panels is not None,
    }
    for name, content in files.items():
        write_atomic(outdir / name, lambda fh, content=content: fh.write(content))
    write_text_atomic(outdir / f"{fig_id}.data.json", json.dumps({"fig_id": fig_id, **data}))
    write_text_atomic(outdir / f"{fig_id}.json", json.dumps(sidecar, indent=2, sort_keys=True))
    if outdir == paths.explore_dir(fig_id):
        print(explored_line(fig_id, outdir))
    _show_png(fig, png.getvalue())
    return sidecar


def _show_png(fig: Figure, png: bytes) -> None:
    """In a notebook kernel: display the PNG just written, at the size the figure has on
    screen, and close the figure (the inline backend would otherwise render it again at the
    end of the cell).  Outside IPython: nothing."""
    from ntpcore.figure.claims import _ipython

    if _ipython() is None:
        return
    from IPython.display import Image, display
    from matplotlib import pyplot as plt

    width = _png_width(png)
    saved_dpi = plt.rcParams["savefig.dpi"]  # "figure": the figure's own dpi
    scale = 1.0 if saved_dpi == "figure" else fig.dpi / float(saved_dpi)
    display(Image(data=png, format="png", width=round(width * scale) if width else None))
    plt.close(fig)


def _png_width(png: bytes) -> int | None:
    """Pixel width of a PNG, read from its IHDR chunk."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        return None
    return int.from_bytes(png[16:20], "big")


def explored_line(fig_id: str, outdir) -> str:
    """The line an explored run prints: where its outputs went, and that they are not the
    book's figure."""
    if not paths.CHECKOUT:
        return (
            f"Exploration (ntpcore {ntpcore.__version__} installed, no checkout): figure, "
            f"sidecar and claims written to {outdir}/, beside this notebook; the book's "
            f"figures are made in a checkout by python -m ntpcore.reproduce."
        )
    return (
        f"Explored run: figure and sidecar written to {outdir}; the book's figure "
        f"(python -m ntpcore.reproduce --only {fig_id}) is unchanged."
    )
