"""The tensors of a Parquet file written episode by episode, read through its ``row``/``env``.

The file's ``row`` and ``env`` columns are read first, a span of row groups at a time (by
the foreign table reader's ``RowGroups``, which decodes the next span meanwhile), and kept
as runs (``_parquet_episodes.EpisodeCells``: about one an episode); each tensor is then
``LazyRows`` whose cells are gathered from the row groups they lie in, each decoded whole
by the file's own reader (``parquet_format._Groups``: ``read_row_group``, frames left on
Arrow's buffer, the last group of each column kept and the next decoded ahead of reads in
order). Through ``RowGroups`` a draw at random decoded 3-4x slower (spans in batches of 1
MB, copied; measured by ``benchmarks/parquet_order.py --sampling``). Drawn at random
through a ``BlockCache``, a block is a range of whole rows: every env's episodes of a
stretch of time lie in the same row groups, decoded once for the block.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from expcli.formats._parquet_columns import PNG, VALID, Column
from expcli.formats._parquet_episodes import EpisodeCells
from expcli.formats._png_gather import PngCells
from expcli.formats._table_columns import ColumnKind
from expcli.formats._table_groups import RowGroups
from expcli.formats.block_cache import BlockCache, CachedBlocks
from expcli.formats.lazy import LazyRows
from expcli.formats.row_gather import by_block

__all__ = ["Decoder", "EpisodeFile", "stored_rows"]

GROUPS_INDEX_CELLS = 1 << 20
"""Cells of a read whose file rows are found at once (8 MiB of index)."""

INDEX_CELLS = 1 << 20
"""Cells of a read whose file rows are found at once (8 MiB of index)."""

GROUPS_KEPT_BYTES = 32 << 20
"""Decoded row groups kept, all columns and all open files together (the latest used, one
at least): the runs of N env columns lie in N places of a file, each read a slice at a
time; a folder's shards are open together, and their groups share the one budget."""


class _KeptGroups:
    """Decoded row groups of every open episode file, the least recently used dropped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[int, str, int], np.ndarray] = OrderedDict()
        self._bytes = 0

    def get(self, key: tuple[int, str, int]) -> np.ndarray | None:
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
            return found

    def put(self, key: tuple[int, str, int], decoded: np.ndarray) -> None:
        with self._lock:
            old = self._kept.pop(key, None)
            self._bytes += decoded.nbytes - (0 if old is None else old.nbytes)
            self._kept[key] = decoded
            while self._bytes > GROUPS_KEPT_BYTES and len(self._kept) > 1:
                self._bytes -= self._kept.popitem(last=False)[1].nbytes

    def drop(self, owner: int) -> None:
        with self._lock:
            for key in [k for k in self._kept if k[0] == owner]:
                self._bytes -= self._kept.pop(key).nbytes


_KEPT = _KeptGroups()
_OWNERS = itertools.count()  # never reused, unlike id(): a file dropped unclosed misleads none


class Decoder(Protocol):
    """A file's row groups decoded whole, one column at a time (``parquet_format._Groups``)."""

    ends: np.ndarray

    def group(self, column: Column, group: int, count: int) -> np.ndarray:
        """Group ``group`` (of ``count`` rows) of ``column``, decoded."""

    def png_rows(self, column: Column, rows: np.ndarray) -> np.ndarray:
        """The PNG cells of ``column`` at file rows ``rows`` (-1: zeros), each decoded alone."""

    def close(self) -> None:
        """Close the file."""


def stored_rows(envs: int, stored: int, cells: int, size: int) -> np.ndarray:
    """Per env column, the rows a file of ``stored`` of the ``cells`` transitions holds of it.

    All of them, or (the rows never written left out) the first ``stored`` cells, row-major.
    """
    if stored == cells:
        return np.full(envs, size, np.int64)
    return np.maximum(0, -(-(stored - np.arange(envs, dtype=np.int64)) // max(envs, 1)))


class EpisodeFile:
    """The row groups and placement of one open episode-ordered file."""

    def __init__(
        self,
        decoder: Decoder,
        opened: tuple[Any, Path, Callable[[], Any] | None],
        shape: tuple[int, int, int],
        first_row: int,
    ) -> None:
        """Place the rows of the file that ``decoder`` decodes (owned from now on).

        ``opened``: its ``ParquetFile``, its path and how to open another handle on it.
        ``shape``: T, N and the rows stored; ``first_row``: the ``row`` of tensor row 0 (a
        folder's shard: the rows of the shards before it).

        Raises:
            FormatError: The ``row`` and ``env`` columns do not place every stored cell once.
        """
        parquet, path, reopen = opened
        self.decoder, self.path = decoder, path
        self._lock = threading.Lock()
        self._owner = next(_OWNERS)
        self.starts = np.concatenate([[0], decoder.ends]).astype(np.int64)
        size, envs, stored = shape
        self.size, self.envs = size, envs
        keys_of = RowGroups(parquet, path, reopen)
        keys_of.columns["row"] = (ColumnKind("int64", ()), (), False)
        keys_of.columns["env"] = (ColumnKind("int32", ()), (), False)

        def keys() -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
            for first, found, _ in keys_of.keys({"row": "row", "env": "env"}):
                yield first, found["row"] - first_row, found["env"]

        expected = stored_rows(envs, stored, size * envs, size)
        try:
            self.placement = EpisodeCells.from_columns(keys(), (size, envs), expected, path)
        finally:  # its decoding thread and second handle; the file stays the decoder's
            keys_of.parquet = _Kept()
            keys_of.close()

    def tensor(
        self, column: Column, cache: BlockCache | None, key: Any, block_rows: int
    ) -> LazyRows:
        """Column ``column`` as ``(T, N, *feature)`` rows (through ``cache`` where given).

        ``block_rows``: rows of one env column a cached block holds (whole rows: N in all).
        """
        spec = column.spec
        reader = _Cells(self, column)
        shape = (self.size, self.envs, *spec.shape)
        dtype = np.dtype(spec.dtype)
        blocks = None
        if cache is not None:
            # Whole rows a block: every env's episodes of a stretch of time lie in the same
            # row groups, so a block of one env column decoded them again for each env (a
            # batch from 240 MiB of 4 KiB rows, 4 envs: 249 groups decoded, 34 s; 12 s so).
            rows = max(1, block_rows // max(1, self.envs))
            bounds = np.unique(np.append(np.arange(0, self.size, rows), self.size))
            blocks = CachedBlocks(reader.read, bounds, cache, key, shape, dtype)
        read = reader.read if blocks is None else blocks.read
        if column.encoding == PNG:  # gathers decode the cells drawn, not their groups

            def gather(flat: np.ndarray) -> np.ndarray:
                return self.decoder.png_rows(column, self.placement.rows_of(flat))

            return PngCells(shape, dtype, read, blocks, gather)
        return LazyRows(shape, dtype, read, blocks=blocks)

    def group(self, column: Column, group: int) -> np.ndarray:
        """Row group ``group`` of ``column`` decoded; kept within ``GROUPS_KEPT_BYTES``."""
        key = (self._owner, column.key, group)
        found = _KEPT.get(key)
        if found is not None:
            return found
        with self._lock:  # one decode at a time on this file's handle
            found = _KEPT.get(key)
            if found is None:
                count = int(self.starts[group + 1] - self.starts[group])
                found = self.decoder.group(column, group, count)
                _KEPT.put(key, found)
            return found

    def close(self) -> None:
        """Close the file and drop its decoded groups."""
        _KEPT.drop(self._owner)
        with self._lock:
            self.decoder.close()


class _Kept:
    """Stands for a file another object closes."""

    def close(self) -> None:
        """Nothing: the file is not this holder's to close."""


class _Cells:
    """One column's (or its null bitmap's) cells, gathered from the file rows that hold them."""

    def __init__(self, file: EpisodeFile, column: Column) -> None:
        self.file, self.column = file, column
        self.feature = tuple(column.spec.shape)

    def _gather(self, rows: np.ndarray) -> np.ndarray:
        """The values (or validity) at file rows ``rows`` (-1: not stored), ``(n, *feature)``."""
        spec = self.column.spec
        valid = self.column.encoding == VALID
        fill = np.ones if valid else np.zeros  # unstored: zeros, stored as they are
        out = fill((len(rows), *self.feature), np.dtype(spec.dtype))
        have = np.flatnonzero(rows >= 0)
        starts = self.file.starts
        for group, at in by_block(starts, rows[have]):
            decoded = self.file.group(self.column, group)
            local = rows[have[at]] - starts[group]
            if (
                len(local) > 1
                and local[-1] - local[0] == len(local) - 1
                and (np.diff(local) == 1).all()
            ):
                out[have[at]] = decoded[int(local[0]) : int(local[-1]) + 1]  # a run: a slice
            else:
                out[have[at]] = decoded[local]
        return out

    def read(self, first: int, stop: int) -> np.ndarray:
        """Tensor rows ``first..stop``, ``INDEX_CELLS`` cells at a time.

        The file row of each cell is 8 bytes (and its sort as much again): for a flag,
        sixteen times the cell's own; a slice's index is bounded, not the slice's cells.
        """
        envs = self.file.envs
        out = np.empty((stop - first, envs, *self.feature), np.dtype(self.column.spec.dtype))
        step = max(1, INDEX_CELLS // max(1, envs))
        for low in range(first, stop, step):
            high = min(stop, low + step)
            rows = self.file.placement.cells(low, high).reshape(-1)
            out[low - first : high - first] = self._gather(rows).reshape(
                high - low, envs, *self.feature
            )
        return out
