"""LazyRows: a tensor left on disk and read by slices of rows, for streaming conversions.

It offers what writers use (``shape``, ``dtype``, ``len``, ``[start:stop]``) and turns into
a numpy array on demand, so a conversion holds a few slices at a time, never a whole file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
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
            return self._read(start, max(start, stop))
        return np.asarray(np.asarray(self)[key])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self._read(0, len(self))
        return whole if dtype is None else np.asarray(whole.astype(dtype))


def row_chunks(array: Any, chunk_bytes: int = CHUNK_BYTES) -> range:
    """Start rows of slices of about ``chunk_bytes`` each, covering the whole tensor."""
    rows = len(array)
    row_bytes = max(1, math.prod(array.shape[1:]) * array.dtype.itemsize)
    return range(0, rows, max(1, chunk_bytes // row_bytes))
