"""Rows of the foreign layouts moved a bounded slice at a time, both ways.

Reading, a layout reorders its rows into expcli's ``(T, N, *feature)`` tensors (tianshou's
sub-buffers split into env columns and rotated oldest first, Minari's episodes put end to
end): ``gathered`` and ``joined`` describe such a reorder and apply it per slice of rows
when the source is ``LazyRows``, or at once to numpy arrays, giving the same values.
Writing, ``picked_rows`` walks the transitions a layout writes (row and env column of
each) a slice at a time, so that an HDF5 dataset is filled chunk by chunk from a lazy
source.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from expcli.formats.lazy import CHUNK_BYTES, LazyRows

__all__ = ["gathered", "joined", "picked_rows", "rows_of"]


def rows_of(array: Any, rows: np.ndarray) -> np.ndarray:
    """``array[rows]`` for a numpy array or ``LazyRows`` (reading only those rows)."""
    if isinstance(array, LazyRows):
        return array.take(np.asarray(rows, dtype=np.int64))
    return np.asarray(array[rows])


def gathered(source: Any, index: np.ndarray) -> Any:
    """Rows ``(T, *f)`` (scalars: ``(T,)``) arranged as ``(R, N, *f)`` by ``index`` ``(R, N)``
    of source rows (scalars get the feature ``(1,)``); lazy when ``source`` is ``LazyRows``."""
    feature = tuple(source.shape[1:]) or (1,)
    shape = (*index.shape, *feature)
    if not isinstance(source, LazyRows):
        return np.asarray(source)[index].reshape(shape)

    def read(start: int, stop: int) -> np.ndarray:
        part = index[start:stop]
        return source.take(part).reshape(*part.shape, *feature)

    return LazyRows(shape, source.dtype, read)


def joined(
    pieces: Sequence[tuple[int, int]],
    dtype: np.dtype[Any],
    feature: tuple[int, ...],
    read_piece: Callable[[int, int, int], np.ndarray],
) -> LazyRows:
    """Pieces of rows put end to end as one env column ``(sum of lengths, 1, *feature)``.

    Args:
        pieces: ``(piece id, length)`` in order.
        dtype: The dtype every piece is cast to.
        feature: The feature shape (``(1,)`` for scalars).
        read_piece: ``read_piece(piece id, start, stop)`` gives rows of one piece.
    """
    starts = [0]
    for _, length in pieces:
        starts.append(starts[-1] + length)

    def read(start: int, stop: int) -> np.ndarray:
        out = np.empty((stop - start, 1, *feature), dtype)
        first = max(0, bisect.bisect_right(starts, start) - 1)
        for number in range(first, len(pieces)):
            low, high = max(start, starts[number]), min(stop, starts[number + 1])
            if low >= stop:
                break
            if high > low:
                rows = read_piece(pieces[number][0], low - starts[number], high - starts[number])
                out[low - start : high - start, 0] = rows.reshape(high - low, *feature)
        return out

    return LazyRows((starts[-1], 1, *feature), dtype, read)


def picked_rows(
    array: Any, rows: np.ndarray, envs: np.ndarray | int
) -> Iterator[tuple[int, np.ndarray]]:
    """``(offset, array[rows[a:b], envs[a:b]])`` for consecutive slices covering ``rows``,
    each holding about ``CHUNK_BYTES`` of the source's rows (all env columns of a row)."""
    row_bytes = max(1, math.prod(array.shape[1:]) * np.dtype(array.dtype).itemsize)
    step = max(1, CHUNK_BYTES // row_bytes)
    for start in range(0, len(rows), step):
        part = rows[start : start + step]
        block = rows_of(array, part)
        env = envs if isinstance(envs, int) else envs[start : start + step]
        yield start, block[np.arange(len(part)), env]
