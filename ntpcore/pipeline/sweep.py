"""Run the independent runs of a sweep (seeds, sizes, a phase diagram) through dask.

By default the runs go to dask's local multiprocessing scheduler (``n_workers``
processes on this machine; ``n_workers=1`` runs them in-process, which is what the quick
profile and the tests use).  Given the address of a ``dask.distributed`` scheduler, the
same runs go to that cluster instead::

    results = map_runs(run_one, configs, n_workers=2)                      # local processes
    results = map_runs(run_one, configs, scheduler="tcp://10.0.0.5:8786")  # a cluster

``func`` must be a module-level function (it is pickled to the workers).  Results come
back in the order of ``items``.  Combine with :func:`ntpcore.pipeline.cache.cached` on ``func`` so
that an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import dask
from dask.callbacks import Callback
from tqdm.auto import tqdm

from ntpcore.core.progress import progress_bar

T = TypeVar("T")


class _TqdmCallback(Callback):
    """Advance a tqdm bar as dask finishes the tasks of a local computation."""

    def __init__(self, bar: tqdm) -> None:
        super().__init__()
        self._bar = bar

    def _posttask(self, key, result, dsk, state, worker_id) -> None:  # noqa: ARG002
        self._bar.update()


def map_runs(
    func: Callable[[T], Any],
    items: Sequence[T],
    *,
    n_workers: int = 1,
    scheduler: str | None = None,
    desc: str = "runs",
    progress: bool = True,
) -> list[Any]:
    """Apply ``func`` to every item, in parallel, and return the results in order.

    Parameters
    ----------
    func : module-level function of one argument (a config, a seed, ...)
    items : the independent runs
    n_workers : local worker processes (ignored when ``scheduler`` is given); 1 = in-process
    scheduler : address of a ``dask.distributed`` scheduler, e.g. ``"tcp://host:8786"``
    desc : label of the progress bar
    """
    if n_workers < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    items = list(items)
    if not items:
        return []
    bar = progress_bar(total=len(items), desc=desc, enabled=progress)
    try:
        if scheduler:
            from distributed import Client, as_completed

            with Client(scheduler) as client:
                futures = client.map(func, items, pure=False)
                index = {f.key: i for i, f in enumerate(futures)}
                results: list[Any] = [None] * len(items)
                for fut in as_completed(futures):
                    results[index[fut.key]] = fut.result()
                    bar.update()
                return results
        tasks = [dask.delayed(func, pure=False)(item) for item in items]
        mode = "synchronous" if n_workers == 1 else "processes"
        with _TqdmCallback(bar):
            return list(dask.compute(*tasks, scheduler=mode, num_workers=n_workers))
    finally:
        bar.close()
