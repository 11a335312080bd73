"""Foreign HDF5 datasets left in the file, reshaped and derived a slice of rows at a time.

A layout that keeps one row per transition, ``(T, *feature)``, is read as one env column
``(T, 1, *feature)``; here that happens per slice (``LazyRows`` over the dataset), and so
does deriving ``next_observations`` from the row after within the episode, so that
``convert``, ``inspect`` and ``sample`` on a D4RL file hold a few slices, not the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from expcli.formats._hdf5_lazy import lazy_dataset, read_dataset_rows
from expcli.formats.layouts._episodes import load_array, native, next_in_episode, one_column
from expcli.formats.lazy import LazyRows

__all__ = ["column_of", "following_rows", "lazy_native"]


def lazy_native(dataset: Any, path: Path, key: str) -> LazyRows | np.ndarray:
    """An h5py dataset as ``LazyRows`` that give native rows of a schema dtype.

    Read whole (``load_array``) when its dtype can only be checked on the values (uint64) or it is
    not an array of rows.

    Raises:
        FormatError, SchemaError: As ``load_array``.
    """
    if not dataset.shape or dataset.dtype.kind not in "biuf" or dataset.dtype.name == "uint64":
        return load_array(dataset, path, key)
    dtype = native(np.empty(0, dataset.dtype), path, key).dtype
    rows = lazy_dataset(dataset, path, key)

    def read(start: int, stop: int) -> np.ndarray:  # not rows[...]: it may run read ahead
        return native(read_dataset_rows(dataset, path, key, start, stop), path, key)

    return LazyRows(rows.shape, dtype, read, block_rows=rows.block_rows)


def column_of(array: LazyRows) -> LazyRows:
    """``(T, *feature)`` rows as one env column ``(T, 1, *feature)`` (scalars get ``(1,)``)."""
    shape = (len(array), 1, *(array.shape[1:] or (1,)))

    def read(start: int, stop: int) -> np.ndarray:
        return one_column(array.take(np.arange(start, stop)))  # no nested read ahead

    return LazyRows(shape, array.dtype, read, block_rows=array.block_rows)


def following_rows(observations: LazyRows, ends: np.ndarray) -> LazyRows:
    """Each row's next observation within its episode.

    ``next_in_episode``; by slices of one env column ``(T, 1, *feature)``; ``ends`` flags each row's
    episode end, ``(T,)``.
    """
    total = len(observations)

    def read(start: int, stop: int) -> np.ndarray:
        rows = observations.take(np.arange(start, min(stop + 1, total)))  # and the row after
        return next_in_episode(rows, ends[start : start + len(rows)])[: stop - start]

    return LazyRows(observations.shape, observations.dtype, read)
