"""The package's compiled extensions (C, built by ``pip install -e .`` from ``setup.py``),
loaded through :mod:`ctypes`.

Each is optional: without a C compiler at install, or with ``NTP_COMPILED=0``, the code that
uses one runs its numpy (or torch) path instead, which the tests compare it with.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os

__all__ = ["enabled", "load"]


def enabled() -> bool:
    """False when ``NTP_COMPILED=0`` switches the compiled extensions off."""
    return os.environ.get("NTP_COMPILED", "1") != "0"


def load(module: str, signatures: dict[str, tuple]) -> tuple[ctypes.CDLL | None, str]:
    """The shared library of the extension ``module`` with the argument types of its
    functions set (``name -> (restype, argtypes)``), or ``(None, reason)``."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return None, f"the extension {module} was not built (no C compiler at install?)"
    try:
        lib = ctypes.CDLL(spec.origin)
        for name, (restype, argtypes) in signatures.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, list(argtypes)
    except (OSError, AttributeError) as exc:
        return None, f"the extension {spec.origin} could not be loaded: {exc}"
    return lib, ""
