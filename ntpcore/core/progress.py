"""Progress bars of long computations, one switch for all.

``progress_bar(...)`` is :class:`tqdm.auto.tqdm` (a widget in a notebook, text on a terminal),
turned off when the caller asks (``enabled=False``) or when ``NTP_PROGRESS=0`` is in the
environment.  The runner sets it for the kernels it starts, and the nbval checks set it for
the kernels they start: a bar in a notebook run by a program is seen by no one, and its
widget output (which the book cannot show and a re-execution writes anew) would differ
between the run and its check.  A reader's own notebook run shows its bars.
"""

from __future__ import annotations

import os
from typing import Any

from tqdm.auto import tqdm

__all__ = ["progress_bar", "progress_enabled"]


def progress_enabled(enabled: bool = True) -> bool:
    """``enabled``, unless the environment turns every bar off (``NTP_PROGRESS=0``)."""
    return enabled and os.environ.get("NTP_PROGRESS", "1") != "0"


def progress_bar(*args: Any, enabled: bool = True, **kwargs: Any) -> tqdm:
    """A :class:`tqdm.auto.tqdm` bar, disabled as :func:`progress_enabled` says."""
    return tqdm(*args, disable=not progress_enabled(enabled), **kwargs)
