"""Timing helpers for the benchmarks: repeated runs summarised by median, min and max; the
environment every timed child runs in (one CPU thread) and the BLAS it finds there."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

#: CPU threads of every timed child process: one, as the book's runs (each kernel on one
#: thread) and as the targets are stated ("on one thread").  numpy's and scipy's OpenBLAS
#: would otherwise take every core, and a 2-core machine's wall time would then measure
#: two threads (about twice the CPU time, and more under load).
THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}


def child_env() -> dict[str, str]:
    """This process's environment with :data:`THREAD_ENV`: what every timed child runs in."""
    return {**os.environ, **THREAD_ENV}


def blas_info() -> dict[str, str]:
    """The OpenBLAS kernels numpy's and scipy's own OpenBLAS libraries chose on this machine
    (``"SkylakeX"``: the AVX-512 kernels, ``"Haswell"`` / ``"Zen"``: AVX2) and the threads
    they use in this process, e.g. ``{"numpy": "SkylakeX, 1 thread", "scipy": "SkylakeX, 1
    thread"}``; the geometry solver's dense products run in numpy's, its eigendecompositions
    in scipy's.  Empty when the libraries are not the wheels' OpenBLAS (another BLAS, or none
    found)."""
    import ctypes
    import glob

    import numpy as np
    import scipy
    import scipy.linalg  # noqa: F401  (loads scipy's BLAS)

    out: dict[str, str] = {}
    for name, pkg, suffix in (("numpy", np, "64_"), ("scipy", scipy, "")):
        libs = os.path.join(os.path.dirname(os.path.dirname(pkg.__file__)), f"{name}.libs")
        for path in glob.glob(os.path.join(libs, "libscipy_openblas*.so")):
            try:
                lib = ctypes.CDLL(path)
                core = getattr(lib, f"scipy_openblas_get_corename{suffix}")
                threads = getattr(lib, f"scipy_openblas_get_num_threads{suffix}")
            except (OSError, AttributeError):
                continue
            core.restype = ctypes.c_char_p
            n = int(threads())
            out[name] = f"{core().decode()}, {n} thread{'s' * (n != 1)}"
    return out


def child_blas() -> dict[str, str]:
    """:func:`blas_info` as a timed child finds it (in :func:`child_env`): its kernels and its
    one thread; ``{}`` where the child cannot say."""
    import json
    import subprocess
    import sys

    code = "import json; from tools.bench.timing import blas_info; print(json.dumps(blas_info()))"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=root,
        timeout=120,
    )
    lines = proc.stdout.strip().splitlines()
    return json.loads(lines[-1]) if proc.returncode == 0 and lines else {}


@dataclass(frozen=True)
class Timing:
    """Wall times (seconds) of repeated runs of one callable."""

    times: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def max(self) -> float:
        return max(self.times)

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "repeats": len(self.times),
        }


def measure(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1) -> tuple[Timing, Any]:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times timed.

    Returns the timing and the result of the last run.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    result = None
    for _ in range(warmup):
        result = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return Timing(tuple(times)), result
