"""What a floating-point configuration of :mod:`tools.qa.reproducibility` really selects:
numpy's dispatched SIMD features, OpenBLAS's core type and threads, torch's CPU capability,
and whose products the geometry paper's transformer and LSTM take, each read in a fresh
interpreter under the configuration's environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

__all__ = ["probe"]

_PROBE = r"""
import json, os, subprocess, sys
import numpy as np
try:
    from numpy._core._multiarray_umath import __cpu_features__ as feats
except ImportError:
    feats = {}
import torch
from ntpcore.geo.models.fused import product
names = ["X86_V2", "X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR", "ASIMD", "SVE"]
print(json.dumps({
    "numpy_features": [n for n in names if feats.get(n)],
    "torch_capability": torch.backends.cpu.get_cpu_capability(),
    "torch_products": product(),
    "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "1"),
}))
a = np.ones((64, 64)); a @ a
"""


def probe(env: dict[str, str]) -> dict:
    """What numpy, OpenBLAS and torch select under ``env`` (read in a fresh interpreter),
    and whose products the transformer and the LSTM take
    (:func:`~ntpcore.geo.models.fused.product`)."""
    full = {**os.environ, **env, "OPENBLAS_VERBOSE": "2"}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=full, capture_output=True, text=True, timeout=300
    )
    if out.returncode != 0:
        raise RuntimeError(f"probe failed under {env}: {out.stderr.strip()[-500:]}")
    info = json.loads(out.stdout.strip().splitlines()[0])
    cores = [
        ln.split(":", 1)[1].strip() for ln in out.stderr.splitlines() if ln.startswith("Core:")
    ]
    info["openblas_core"] = cores[0] if cores else None
    return info
