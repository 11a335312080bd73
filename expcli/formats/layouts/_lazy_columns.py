"""Foreign HDF5 datasets left in the file, reshaped and derived a slice of rows at a time.

A layout that keeps one row per transition, ``(T, *feature)``, is read as env columns
``(T / N, N, *feature)`` (D4RL: one column, or equal blocks of rows env by env); here that
happens per slice (``LazyRows`` over the dataset), and so
does deriving ``next_observations`` from the row after within the episode, so that
``convert``, ``inspect`` and ``sample`` on a D4RL file hold a few slices, not the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from expcli.formats._hdf5_lazy import lazy_dataset, read_dataset_rows
from expcli.formats.layouts._episodes import load_array, native
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


def column_of(array: LazyRows, columns: int = 1) -> LazyRows:
    """``(T, *feature)`` rows in ``columns`` equal blocks, env by env, as env columns.

    The result is ``(T / columns, columns, *feature)`` (scalars get ``(1,)``): row ``r``
    of column ``j`` is row ``j * T / columns + r``.
    """
    length = len(array) // columns
    shape = (length, columns, *(array.shape[1:] or (1,)))
    starts = np.arange(columns, dtype=np.int64) * length

    def read(start: int, stop: int) -> np.ndarray:
        rows = np.arange(start, stop, dtype=np.int64)
        return _by_column(array, [rows + first for first in starts], shape)

    blocks = array.block_rows if columns == 1 else None  # a column's chunks: the source's
    return LazyRows(shape, array.dtype, read, block_rows=blocks)


def following_rows(observations: LazyRows, ends: np.ndarray, columns: int = 1) -> LazyRows:
    """Each row's next observation within its episode (``next_in_episode``) as env columns.

    Env columns as ``column_of`` makes them: ``observations`` are the source rows
    ``(T, *feature)`` and ``ends`` flags each source row's episode end, ``(T,)``; the last
    row of a column ends too.
    """
    length = len(observations) // columns
    starts = np.arange(columns, dtype=np.int64) * length
    shape = (length, columns, *(observations.shape[1:] or (1,)))

    def read(start: int, stop: int) -> np.ndarray:
        rows = np.arange(start, stop, dtype=np.int64)
        last = rows == length - 1
        index = [rows + first for first in starts]
        return _by_column(observations, [np.where(ends[i] | last, i, i + 1) for i in index], shape)

    return LazyRows(shape, observations.dtype, read)


def _by_column(source: LazyRows, index: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """Source rows ``index[j]`` as column ``j`` of ``(R, N, *shape[2:])`` rows.

    Read column by column (``take``, not a slice: no nested read ahead), each an
    ascending run.
    """
    if len(index) == 1:
        return source.take(index[0]).reshape(len(index[0]), 1, *shape[2:])
    out = np.empty((len(index[0]), len(index), *shape[2:]), source.dtype)
    for j, rows in enumerate(index):
        out[:, j] = source.take(rows).reshape(len(rows), *shape[2:])
    return out
