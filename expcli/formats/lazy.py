"""LazyRows: a tensor left on disk and read by slices of rows, for streaming conversions.

It offers what writers use (``shape``, ``dtype``, ``len``, ``[start:stop]``) and turns into
a numpy array on demand, so a conversion holds a few slices at a time, never a whole file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["CHUNK_BYTES", "LazyRows", "row_chunks"]

CHUNK_BYTES = 16 * 1024 * 1024


class LazyRows:
    """Rows ``[start, stop)`` of a ``(T, N, *feature)`` tensor come from ``read(start, stop)``."""

    def __init__(
        self, shape: tuple[int, ...], dtype: np.dtype[Any], read: Callable[[int, int], np.ndarray]
    ) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self._read = read
        self._ahead: tuple[tuple[int, int], Future[np.ndarray]] | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(len(self))
            return self._slice(start, max(start, stop))
        return np.asarray(np.asarray(self)[key])

    def _slice(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start..stop``; the next slice of the same size is read ahead meanwhile,
        so that reading the file overlaps with whatever the caller does with these rows."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == (start, stop):
            rows = ahead[1].result()
        else:
            rows = self._read(start, stop)
        following = (stop, min(len(self), 2 * stop - start))
        if stop < len(self) and stop > start:
            self._ahead = (following, _reader().submit(self._read, *following))
        return rows

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self._read(0, len(self))
        return whole if dtype is None else np.asarray(whole.astype(dtype))


_READ_AHEAD: ThreadPoolExecutor | None = None


def _reader() -> ThreadPoolExecutor:
    global _READ_AHEAD
    if _READ_AHEAD is None:
        _READ_AHEAD = ThreadPoolExecutor(1, thread_name_prefix="expcli-read-ahead")
    return _READ_AHEAD


def row_chunks(array: Any, chunk_bytes: int = CHUNK_BYTES) -> range:
    """Start rows of slices of about ``chunk_bytes`` each, covering the whole tensor."""
    rows = len(array)
    row_bytes = max(1, math.prod(array.shape[1:]) * array.dtype.itemsize)
    return range(0, rows, max(1, chunk_bytes // row_bytes))
