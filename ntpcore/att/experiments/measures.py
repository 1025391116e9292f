r"""Array helpers of the self-attention experiments' metrics (key ``att``): trajectories as
trial-major rows, padded subspace bases, and cosines from inner products and norms.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cos_rows", "padded_bases", "trial_rows"]


def trial_rows(W) -> np.ndarray:
    """A trajectory (S, B, d, d) as trial-major rows (B, S, d*d); a view when ``W`` is the
    transposed trial-major array :func:`ntpcore.att.descent.descend` returns."""
    S, B, d, _ = W.shape
    return np.asarray(W, dtype=float).transpose(1, 0, 2, 3).reshape(B, S, d * d)


def padded_bases(bases) -> np.ndarray:
    """Row-orthonormal bases (r_b, p) stacked into (B, r_max, p), zero rows padding."""
    p = bases[0].shape[1]
    out = np.zeros((len(bases), max([b.shape[0] for b in bases] + [1]), p))
    for i, b in enumerate(bases):
        out[i, : b.shape[0]] = b
    return out


def cos_rows(dot, norm_a, norm_b) -> np.ndarray:
    """:func:`ntpcore.core.metrics.cos` from inner products and norms (0 where a norm is 0)."""
    den = norm_a * norm_b
    return np.divide(dot, den, out=np.zeros(np.broadcast(dot, den).shape), where=den > 0)
