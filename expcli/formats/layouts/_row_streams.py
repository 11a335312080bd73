"""Rows of the foreign layouts moved a bounded slice at a time, both ways.

Reading, a layout reorders its rows into expcli's ``(T, N, *feature)`` tensors (tianshou's
sub-buffers split into env columns and rotated oldest first): ``gathered`` describes such
a reorder and applies it per slice of rows
when the source is ``LazyRows``, or at once to numpy arrays, giving the same values.
Writing, ``picked_rows`` walks the transitions a layout writes (row and env column of
each) a slice at a time, so that an HDF5 dataset is filled chunk by chunk from a lazy
source.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from expcli.formats.lazy import SLICE_BYTES, LazyRows

__all__ = ["gathered", "picked_rows", "rows_of"]


def rows_of(array: Any, rows: np.ndarray) -> np.ndarray:
    """``array[rows]`` for a numpy array or ``LazyRows`` (reading only those rows)."""
    if isinstance(array, LazyRows):
        return array.take(np.asarray(rows, dtype=np.int64))
    return np.asarray(array[rows])


def gathered(source: Any, index: np.ndarray) -> Any:
    """Source rows ``(T, *f)`` arranged as ``(R, N, *f)`` by ``index`` ``(R, N)``.

    Scalars (``(T,)``) get the feature ``(1,)``; lazy when ``source`` is ``LazyRows``.
    """
    feature = tuple(source.shape[1:]) or (1,)
    shape = (*index.shape, *feature)
    if not isinstance(source, LazyRows):
        return np.asarray(source)[index].reshape(shape)

    def read(start: int, stop: int) -> np.ndarray:
        part = index[start:stop]
        return source.take(part).reshape(*part.shape, *feature)

    return LazyRows(shape, source.dtype, read)


def picked_rows(
    array: Any, rows: np.ndarray, envs: np.ndarray | int
) -> Iterator[tuple[int, np.ndarray]]:
    """``(offset, array[rows[a:b], envs[a:b]])`` for consecutive slices covering ``rows``.

    Each slice holds about ``SLICE_BYTES`` of the source's rows (all env columns of a row).
    """
    row_bytes = max(1, math.prod(array.shape[1:]) * np.dtype(array.dtype).itemsize)
    step = max(1, SLICE_BYTES // row_bytes)
    for start in range(0, len(rows), step):
        part = rows[start : start + step]
        block = rows_of(array, part)
        env = envs if isinstance(envs, int) else envs[start : start + step]
        yield start, block[np.arange(len(part)), env]
