"""Timing helpers for the benchmarks: repeated runs summarised by median, min and max."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


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
