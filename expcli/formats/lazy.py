"""LazyRows: a tensor left on disk and read by slices of rows, for streaming conversions.

It offers what writers use (``shape``, ``dtype``, ``len``, ``[start:stop]``) and turns into
a numpy array on demand, so a conversion holds a few slices at a time, never a whole file.
``RowSpill`` serves such slices for sources that store rows, not tensors (CSV).
"""

from __future__ import annotations

import bisect
import math
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.errors import ConfigError, InvalidValueError
from expcli.formats.row_gather import cells_by_rows, take_rows
from expcli.thread_pools import shared_pool

if TYPE_CHECKING:
    from expcli.formats.block_cache import CachedBlocks

__all__ = ["SLICE_BYTES", "LazyRows", "RowSpill", "row_chunks"]

SLICE_BYTES = 16 << 20
"""Bytes of rows that lazy readers and writers move per slice: the bound on what a read holds."""


class LazyRows:
    """Rows ``[start, stop)`` of a ``(T, N, *feature)`` tensor come from ``read(start, stop)``.

    ``file_offset``: where the tensor's bytes start in its file, when they lie there whole
    in C order (as ``dtype`` says), so that a reader may map them instead.
    ``block_rows``: rows of one storage block (an HDF5 chunk), read together by ``take``.
    ``blocks``: the tensor's decoded blocks kept in a ``BlockCache``, which ``take`` and
    ``take_cells`` then read (``read`` should read through them too).
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
        read: Callable[[int, int], np.ndarray],
        file_offset: int | None = None,
        block_rows: int | None = None,
        blocks: CachedBlocks | None = None,
    ) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self._read = read
        self.file_offset = file_offset
        self.block_rows = block_rows
        self.blocks = blocks
        self._ahead: tuple[tuple[int, int], Future[np.ndarray], int] | None = None

    @property
    def ndim(self) -> int:
        """Number of dimensions, as numpy's."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements, as numpy's."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of all rows once read, as numpy's."""
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(len(self))
            return self._slice(start, max(start, stop))
        if isinstance(key, int | np.integer | list | np.ndarray):
            rows = np.asarray(key)
            if rows.dtype.kind in "iu" or rows.size == 0:
                return self.take(rows.astype(np.int64))
        return np.asarray(np.asarray(self)[key])

    def window(self, start: int, stop: int) -> LazyRows:
        """Rows ``start..stop`` as a lazy tensor of their own, read only when sliced.

        What a writer of part of a file takes (a folder's shard), so that it reads its
        rows a slice at a time as it writes them, never the part whole.
        """
        start, stop, _ = slice(start, stop).indices(len(self))
        stop = max(start, stop)
        offset = self.file_offset
        if offset is not None:
            offset += start * math.prod(self.shape[1:]) * self.dtype.itemsize
        read = self._read
        return LazyRows(
            (stop - start, *self.shape[1:]),
            self.dtype,
            lambda first, last: read(start + first, start + last),
            offset,
            self.block_rows,
        )

    def take(self, index: np.ndarray) -> np.ndarray:
        """Rows ``index`` (integers, any shape, in that order) as ``(*index.shape, *shape[1:])``.

        Only those rows are read: sorted, neighbours (and rows of one storage block) in one
        slice, each slice bounded in bytes (``row_gather.take_rows``); or, with ``blocks``,
        each block touched looked up once in the cache.

        Raises:
            IndexError: An index is not an integer or lies outside the rows.
        """
        if self.blocks is not None:
            return self.blocks.take(index)
        return take_rows(self._read, self.shape, self.dtype, index, self.block_rows)

    def take_cells(self, index: np.ndarray) -> np.ndarray:
        """The cells at flat ``index`` (``t * N + env``, any shape), ``(*index.shape, *shape[2:])``.

        With ``blocks``, only those cells are copied out of the cached blocks; else their
        whole rows are read (``take``) and the cells picked out.

        Raises:
            IndexError: An index is not an integer or lies outside ``T * N``.
        """
        if self.blocks is not None:
            return self.blocks.take_cells(index)
        return cells_by_rows(self.take, self.shape, self.dtype, index)

    def _slice(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start..stop``.

        The next slice of the same size is read ahead meanwhile, so that reading the file overlaps
        with whatever the caller does with these rows.
        """
        ahead, self._ahead = self._ahead, None
        # On the read-ahead thread (a LazyRows read through another), a future not done yet
        # is queued behind the running task on that one thread: waiting would never end. Nor
        # would it in a process forked since (a DataLoader worker): its thread is not there.
        future = None
        if ahead is not None and ahead[0] == (start, stop) and ahead[2] == _GENERATION[0]:
            future = ahead[1]
        if future is not None and (future.done() or not getattr(_ON_READER, "yes", False)):
            rows = future.result()
        else:
            rows = self._read(start, stop)
        following = (stop, min(len(self), 2 * stop - start))
        if stop < len(self) and stop > start:
            submitted = _reader().submit(self._read, *following)
            self._ahead = (following, submitted, _GENERATION[0])
        return rows

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self._read(0, len(self))
        return whole if dtype is None else np.asarray(whole.astype(dtype))


_ON_READER = threading.local()  # ``yes`` on the read-ahead thread


def _mark_reader() -> None:
    _ON_READER.yes = True


def _reader() -> ThreadPoolExecutor:
    return shared_pool("expcli-read-ahead", 1, _mark_reader)


_GENERATION = [0]  # the process's: a forked child starts a new one


def _forget_in_child() -> None:
    """A forked child has none of its parent's threads (``thread_pools`` makes new ones)."""
    _GENERATION[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def row_chunks(array: Any, chunk_bytes: int = SLICE_BYTES) -> range:
    """Start rows of slices of about ``chunk_bytes`` each, covering the whole tensor."""
    rows = len(array)
    row_bytes = max(1, math.prod(array.shape[1:]) * array.dtype.itemsize)
    return range(0, rows, max(1, chunk_bytes // row_bytes))


class RowSpill:
    """Rows that a source yields for every tensor at once, set aside to be read per tensor.

    A CSV file holds rows, but writers take one tensor at a time (an npz member, an HDF5
    dataset) by slices of rows. The source is parsed once, chunk by chunk, into an unnamed
    scratch file, and ``read`` serves any tensor's rows from there: memory holds a chunk,
    whatever the file size. The scratch file lies in the temporary folder (``TMPDIR``),
    never beside the source, which reading must not change; it is private, and unlinked
    from the start, so it vanishes on ``close`` or when the process ends, however it ends.

    Example::

        spill = RowSpill([4, 1])  # two column groups, 4 and 1 wide
        spill.append([observations, actions])  # (rows, 4) and (rows, 1), any dtypes
        first_rows = spill.read(0, 0, 100)
    """

    def __init__(self, widths: Sequence[int], folder: str | os.PathLike[str] | None = None) -> None:
        """Create the scratch file in ``folder``, by default the temporary folder.

        Raises:
            ConfigError: No scratch file can be created there.
        """
        self.widths = list(widths)
        self._folder = folder
        try:
            self._file = tempfile.TemporaryFile(dir=folder)
        except OSError as e:
            raise self._trouble(e) from e
        self._lock = threading.Lock()
        self._starts = [0]  # first row of each chunk, then the row count
        self._pieces: list[list[tuple[int, np.dtype[Any]]]] = [[] for _ in self.widths]
        self._end = 0

    @property
    def rows(self) -> int:
        """Rows appended so far."""
        return self._starts[-1]

    def append(self, arrays: Sequence[np.ndarray]) -> None:
        """Add rows: one ``(rows, width)`` array per group, the same number of rows in each."""
        count = len(arrays[0]) if arrays else 0
        if count == 0:
            return
        with self._lock:
            for pieces, width, array in zip(self._pieces, self.widths, arrays, strict=True):
                if array.shape != (count, width):
                    raise InvalidValueError(
                        f"expected rows shaped ({count}, {width}), got {array.shape}"
                    )
                data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))
                pieces.append((self._end, data.dtype))
                try:
                    self._file.seek(self._end)
                    self._file.write(data.reshape(-1).view(np.uint8).data)
                except OSError as e:
                    raise self._trouble(e) from e
                self._end += data.nbytes
            self._starts.append(self.rows + count)

    def read(self, group: int, start: int, stop: int) -> np.ndarray:
        """Rows ``start`` to ``stop`` of a group, their chunks' dtypes promoted to one.

        Float64 when there are none.

        Raises:
            ValueError: The spill is closed.
        """
        if self._file.closed:
            raise InvalidValueError("the scratch file of these rows is closed")
        stop = max(start, min(stop, self.rows))
        first = max(0, bisect.bisect_right(self._starts, start) - 1)
        last = bisect.bisect_left(self._starts, stop)
        pieces = self._pieces[group][first:last]
        dtype = np.result_type(*(d for _, d in pieces)) if pieces else np.dtype(np.float64)
        out = np.empty((stop - start, self.widths[group]), dtype)
        for chunk, (offset, stored) in enumerate(pieces, first):
            low = max(start, self._starts[chunk])
            high = min(stop, self._starts[chunk + 1])
            rows = out[low - start : high - start]
            target = rows if stored == dtype else np.empty(rows.shape, stored)
            row_bytes = self.widths[group] * stored.itemsize
            self._read_into(target, offset + (low - self._starts[chunk]) * row_bytes)
            if target is not rows:
                rows[...] = target
        return out

    def _read_into(self, array: np.ndarray, offset: int) -> None:
        with self._lock:
            self._file.seek(offset)
            got = self._file.readinto(array.reshape(-1).view(np.uint8).data)
        if got != array.nbytes:
            raise OSError(f"scratch file ended early: {got} of {array.nbytes} bytes")

    def _trouble(self, error: OSError) -> ConfigError:
        folder = self._folder or tempfile.gettempdir()
        return ConfigError(
            f"cannot write the scratch file that reading a CSV file needs in {folder} "
            f"({error.strerror or error}); set TMPDIR to a writable folder with room"
        )

    def close(self) -> None:
        """Delete the scratch file; reading afterwards raises ValueError."""
        with self._lock:
            self._file.close()
