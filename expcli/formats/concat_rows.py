"""ConcatRows: one ``(T, N, *feature)`` tensor made of the tensors of consecutive shards.

Each shard's piece is fetched on demand (a memory-mapped member, or ``LazyRows``), so a
slice or a gather touches only the shards holding its rows, and memory holds what was
asked for. It is a ``LazyRows`` (``shape``, ``dtype``, ``len``, ``[start:stop]`` across shard
boundaries, read ahead, ``__array__``) that also gathers rows: ``take``.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.formats.lazy import LazyRows
from expcli.formats.row_gather import copy_cells, flat_rows

if TYPE_CHECKING:
    from expcli.formats.frames import StoredOnce

__all__ = ["ConcatRows"]


class ConcatRows(LazyRows):
    """Rows of ``pieces`` (shard ``k`` holds ``lengths[k]`` rows) one after the other.

    Args:
        fetch: ``fetch(k)`` gives shard ``k``'s piece: an array-like shaped
            ``(lengths[k], *tail)`` that takes ``[start:stop]`` and an index array.
        lengths: Rows of each shard.
        tail: The shape after the first dimension: ``(N, *feature)``.
        dtype: The dtype of every piece.
        release: Lets go of the pages that reading mapped pieces brought into this
            process, if the pieces are mapped (kept as ``release``; the tensors of one
            folder share it).

    Attributes:
        once: Where the tensor's shards store it once, their figures together
            (``frames.combined``); None where every shard stores it whole.
    """

    def __init__(
        self,
        fetch: Callable[[int], Any],
        lengths: Sequence[int],
        tail: tuple[int, ...],
        dtype: np.dtype[Any],
        release: Callable[[], None] | None = None,
    ) -> None:
        self._fetch = fetch
        self.release = release
        self.once: StoredOnce | None = None
        self._starts = [0]
        for rows in lengths:
            self._starts.append(self._starts[-1] + int(rows))
        super().__init__((self._starts[-1], *tail), dtype, self._rows)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, slice) and key.step in (None, 1):
            start, stop, _ = key.indices(len(self))
            return self._slice(start, max(start, stop))
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            index = int(key) + (len(self) if key < 0 else 0)
            if not 0 <= index < len(self):
                raise IndexError(f"row {key} is out of range for {len(self)} rows")
            return np.asarray(self._rows(index, index + 1)[0])
        if isinstance(key, np.ndarray | list) and np.asarray(key).dtype.kind in "iu":
            return self.take(np.asarray(key))
        return np.asarray(np.asarray(self)[key])

    def _rows(self, start: int, stop: int) -> np.ndarray:
        out = np.empty((stop - start, *self.shape[1:]), self.dtype)
        shard = max(0, bisect.bisect_right(self._starts, start) - 1)
        at = start
        while at < stop:
            first, end = self._starts[shard], self._starts[shard + 1]
            high = min(stop, end)
            if high > at:
                out[at - start : high - start] = self._fetch(shard)[at - first : high - first]
                at = high
            shard += 1
        return out

    def take(self, index: np.ndarray) -> np.ndarray:
        """Rows ``index`` (any shape, along axis 0, negatives from the end), as numpy's.

        Raises:
            IndexError: An index is out of range.
        """
        wanted = np.asarray(index, dtype=np.int64)
        index = wanted.reshape(-1)
        rows = len(self)
        index = np.where(index < 0, index + rows, index)
        if index.size and (index.min() < 0 or index.max() >= rows):
            raise IndexError(f"index out of range for {rows} rows")
        out = np.empty((index.size, *self.shape[1:]), self.dtype)
        for shard, group in self._by_shard(index):
            out[group] = _gather(self._fetch(shard), index[group] - self._starts[shard])
        return out.reshape(*wanted.shape, *self.shape[1:])

    def _by_shard(self, rows: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """Each shard holding some of ``rows``, and the positions in ``rows`` it holds."""
        shard_of = np.searchsorted(self._starts, rows, side="right") - 1
        order = np.argsort(shard_of, kind="stable")
        bounds = np.flatnonzero(np.diff(shard_of[order])) + 1
        for group in np.split(order, bounds):
            if group.size:
                yield int(shard_of[group[0]]), group

    def take_cells(self, index: np.ndarray) -> np.ndarray:
        """The transitions at flat ``index`` (any shape), as ``take_flat`` gathers them.

        Raises:
            IndexError: An index is not an integer or lies outside ``T * N``.
        """
        envs = self.shape[1]
        wanted, cells = flat_rows(index, len(self) * envs)
        return self.take_flat(cells, envs).reshape(*wanted.shape, *self.shape[2:])

    def take_flat(
        self, index: np.ndarray, num_envs: int, out: np.ndarray | None = None
    ) -> np.ndarray:
        """Transitions at flat ``index`` (``row * num_envs + env``, 1-d, in range).

        Each shard gives only the transitions asked of it: a mapped piece by flat
        indexing, a piece read by slices of rows (a Parquet shard) through its ``take``.
        Into ``out`` (``(len(index), *feature)``, each row C-contiguous) when given: big
        rows (frames) are copied there one by one, straight from the mapping.
        """
        if out is None:
            out = np.empty((index.size, *self.shape[2:]), self.dtype)
        for shard, group in self._by_shard(index // num_envs):
            piece = self._fetch(shard)
            local = index[group] - self._starts[shard] * num_envs
            into = getattr(piece, "cells_into", None)
            if into is not None:  # a derived piece copies from its own sources
                into(local, out, group)
            else:
                copy_cells(piece, local, num_envs, out, group)
        return out


def _gather(piece: Any, local: np.ndarray) -> np.ndarray:
    """Rows ``local`` of one shard's piece: a mapped array, or anything sliced by rows."""
    if isinstance(piece, np.ndarray):
        return piece.take(local, 0)
    take = getattr(piece, "take", None)
    if take is not None:
        return np.asarray(take(local))
    low, high = int(local.min()), int(local.max()) + 1
    return np.asarray(np.asarray(piece[low:high])[local - low])
