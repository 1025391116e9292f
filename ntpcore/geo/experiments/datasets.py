r"""The two datasets of the geometry paper's experiments, by name [geo, Sec. 3].

A dataset is summarised by its ``m`` distinct contexts and the counts :math:`n_{z,j}`
(:class:`~ntpcore.geo.data.ContextDataset`).  The experiments use two: ``"synthetic"``, the
project's templated set with the structure of the paper's synthetic set, and ``"text"``,
next-token data mined from a real English corpus (:mod:`ntpcore.geo.synthetic`,
:mod:`ntpcore.geo.text`).  :class:`DataConfig` names one of them; every experiment
configuration that reads a dataset has one (as a part, or extends it), and its field names
are the notebook's parameter names.  Cache keys carry a fingerprint of the data
(:func:`data_fingerprint`), so a change of the generators never serves results computed on
other data.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import numpy as np

from ntpcore.errors import DataError
from ntpcore.geo.data import ContextDataset, subset_contexts
from ntpcore.geo.synthetic import synthetic_dataset
from ntpcore.geo.text import text_dataset

DATASETS = ("synthetic", "text")


@dataclass(frozen=True)
class DataConfig:
    """Which dataset: the synthetic set or the real-text set."""

    dataset: str = "synthetic"  # synthetic | text
    data_seed: int = 0  # seed of the support fill / multiplicities
    max_contexts: int = 0  # 0 = all contexts; k > 0 keeps k, up to 3 per support group

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise DataError(f"dataset must be one of {DATASETS}, got {self.dataset!r}")
        if self.max_contexts < 0:
            raise DataError(f"max_contexts must be >= 0, got {self.max_contexts}")


def load_dataset(cfg: DataConfig) -> ContextDataset:
    """The dataset of ``cfg``: the synthetic set or the real-text set (default corpus) with
    seed ``cfg.data_seed``, cut to ``cfg.max_contexts`` contexts when that is positive."""
    return _load(cfg.dataset, cfg.data_seed, cfg.max_contexts)


@functools.lru_cache(maxsize=8)
def _load(dataset: str, data_seed: int, max_contexts: int) -> ContextDataset:
    ds = synthetic_dataset(data_seed) if dataset == "synthetic" else text_dataset(seed=data_seed)
    return subset_contexts(ds, max_contexts)


def data_fingerprint(ds: ContextDataset) -> str:
    """Short SHA-256 of a dataset's contexts, counts and vocabularies."""
    h = hashlib.sha256()
    for arr in (ds.contexts, ds.counts):
        h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
        h.update(str(arr.shape).encode())
    h.update("\x1f".join(ds.input_vocab + ("\x1e",) + ds.next_vocab).encode())
    return h.hexdigest()[:16]
