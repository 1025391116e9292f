"""Run the independent runs of a sweep (seeds, sizes, a phase diagram), in order.

By default the runs are computed in this process (``n_workers=1``, what the quick profile
and the tests use); ``n_workers > 1`` spreads them over that many local processes (the
standard library's :class:`concurrent.futures.ProcessPoolExecutor`, started by ``spawn`` so
that no worker inherits a half-initialised thread pool).  Given the address of a
``dask.distributed`` scheduler, the same runs go to that cluster instead (dask is needed only
then: the package's ``runner`` extra installs it)::

    results = map_runs(run_one, configs, n_workers=2)                      # local processes
    results = map_runs(run_one, configs, scheduler="tcp://10.0.0.5:8786")  # a cluster

``func`` must be a module-level function (it is pickled to the workers).  Results come
back in the order of ``items``.  Combine with :func:`ntpcore.core.cache.cached` on ``func``
so that an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

from ntpcore.core.progress import progress_bar
from ntpcore.errors import ParameterError

T = TypeVar("T")

__all__ = ["map_runs"]


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
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
        raise ParameterError(f"n_workers must be an integer >= 1, got {n_workers!r}")
    items = list(items)
    if not items:
        return []
    results: list[Any] = [None] * len(items)
    bar = progress_bar(total=len(items), desc=desc, enabled=progress)
    try:
        if scheduler:
            try:
                from distributed import Client
                from distributed import as_completed as dask_completed
            except ImportError as err:  # pragma: no cover - the runner extra is missing
                raise ParameterError(
                    "a dask scheduler was given, but dask.distributed is not installed "
                    "(pip install 'ntpcore[runner]')"
                ) from err
            with Client(scheduler) as client:
                futures = client.map(func, items, pure=False)
                index = {f.key: i for i, f in enumerate(futures)}
                for fut in dask_completed(futures):
                    results[index[fut.key]] = fut.result()
                    bar.update()
            return results
        if n_workers == 1 or len(items) == 1:
            for i, item in enumerate(items):
                results[i] = func(item)
                bar.update()
            return results
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(n_workers, len(items)), mp_context=ctx) as pool:
            index = {pool.submit(func, item): i for i, item in enumerate(items)}
            for fut in as_completed(index):
                results[index[fut]] = fut.result()
                bar.update()
        return results
    finally:
        bar.close()
