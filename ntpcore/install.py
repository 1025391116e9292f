"""Installing the package's dependencies where only the package is installed (Colab).

The install cell of every template notebook (:func:`ntpcore.runner.launch.install_cell`, a
few lines) does nothing where ``ntpcore`` imports (a checkout, Binder, the book's runs, a
wheel install).  Elsewhere -- Colab, any Python without the package -- it installs the
package alone from the repository (``pip install --no-deps``: quick, and no resolver picks
a torch for it) and calls :func:`install_dependencies`, which

1. installs torch at the package's pin from the PyTorch CPU index (:data:`CPU_INDEX`; a
   resolver's choice would pull CUDA wheels, gigabytes a notebook does not use);
2. installs the package's other requirements (its metadata's ``Requires-Dist``, extras
   left out), ignoring the Python pin of the wheels' metadata (the package is tested on
   Python 3.11; Colab's may be newer);
3. checks that the kernel has not already imported an older version of one of them (Colab
   imports numpy, matplotlib, torch at start-up): the kernel must then be restarted.

Only the standard library: this module runs before any dependency is there.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import subprocess
import sys
from collections.abc import Callable, Sequence

__all__ = ["CPU_INDEX", "install_dependencies", "requirements", "stale_modules"]

#: the PyTorch CPU wheels (the index of ``environment.yml``; a test checks they agree)
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
#: the import name of a requirement whose distribution name differs
_MODULE = {"pyyaml": "yaml"}


def requirement_name(requirement: str) -> str:
    """The distribution name of a requirement string (``"torch==2.13.0"`` -> ``"torch"``)."""
    m = _NAME.match(requirement)
    if m is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return m.group(1).lower().replace("_", "-")


def requirements(distribution: str = "ntpcore") -> list[str]:
    """The runtime requirements of the installed ``distribution`` (no extras)."""
    reqs = importlib.metadata.requires(distribution) or []
    return [r for r in reqs if "extra ==" not in r.replace('"', "").replace("'", "")]


def stale_modules(reqs: Sequence[str]) -> list[str]:
    """The requirements whose module this process imported before an install changed their
    version (compared without local labels such as ``+cpu``)."""
    stale = []
    for req in reqs:
        name = requirement_name(req)
        module = sys.modules.get(_MODULE.get(name, name.replace("-", "_")))
        if module is None:
            continue
        try:
            installed = importlib.metadata.version(name).split("+")[0]
        except importlib.metadata.PackageNotFoundError:
            continue
        loaded = str(getattr(module, "__version__", installed)).split("+")[0]
        if loaded != installed:
            stale.append(name)
    return stale


def install_dependencies(
    distribution: str = "ntpcore", run: Callable[[list[str]], object] | None = None
) -> None:
    """CPU torch at the pin, then the other requirements of ``distribution``; raises
    ``RuntimeError`` when the kernel must be restarted to see them."""
    run = run or (lambda cmd: subprocess.run(cmd, check=True))
    reqs = requirements(distribution)
    torch = [r for r in reqs if requirement_name(r) == "torch"]
    others = [r for r in reqs if requirement_name(r) != "torch"]
    pip = [sys.executable, "-m", "pip", "install", "--quiet"]
    print(f"installing the dependencies of {distribution} (CPU torch) ...", flush=True)
    if torch:
        run([*pip, *torch, "--index-url", CPU_INDEX])
    if others:
        run([*pip, "--ignore-requires-python", *others])
    importlib.invalidate_caches()
    stale = stale_modules(reqs)
    if stale:
        raise RuntimeError(
            f"{distribution} is installed, but the kernel had imported an older "
            f"{', '.join(stale)}: restart it (Colab: Runtime > Restart session), then run the "
            f"notebook again"
        )
