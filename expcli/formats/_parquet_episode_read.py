"""The tensors of a Parquet file written episode by episode, read through its ``row``/``env``.

The file's ``row`` and ``env`` columns are read first, a span of row groups at a time, and
kept as runs (``_parquet_episodes.EpisodeCells``: about one an episode); each tensor is
then ``LazyRows`` whose cells are gathered from the row groups they lie in by the foreign
table reader's ``RowGroups`` (given the footer's specs, it decodes expcli's own encodings),
a few decoded spans kept. Drawn at random through a ``BlockCache``, a block is a range of
rows of one env column: one run of file rows, decoded without the other envs' rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from expcli.formats._parquet_columns import BINARY, LIST, VALID, Column
from expcli.formats._parquet_episodes import EpisodeCells
from expcli.formats._table_columns import ColumnKind
from expcli.formats._table_groups import RowGroups
from expcli.formats.block_cache import BlockCache, CachedBlocks
from expcli.formats.lazy import LazyRows

__all__ = ["EpisodeFile", "stored_rows"]


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
        parquet: Any,
        path: Path,
        reopen: Callable[[], Any] | None,
        shape: tuple[int, int, int],
        first_row: int,
    ) -> None:
        """Place the rows of ``parquet`` (owned from now on).

        ``shape``: T, N and the rows stored; ``first_row``: the ``row`` of tensor row 0 (a
        folder's shard: the rows of the shards before it).

        Raises:
            FormatError: The ``row`` and ``env`` columns do not place every stored cell once.
        """
        self.groups = RowGroups(parquet, path, reopen)
        self.path = path
        size, envs, stored = shape
        self.size, self.envs = size, envs
        self.groups.columns["row"] = (ColumnKind("int64", ()), (), False)
        self.groups.columns["env"] = (ColumnKind("int32", ()), (), False)

        def keys() -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
            for first, found, _ in self.groups.keys({"row": "row", "env": "env"}):
                yield first, found["row"] - first_row, found["env"]

        expected = stored_rows(envs, stored, size * envs, size)
        self.placement = EpisodeCells.from_columns(keys(), (size, envs), expected, path)

    def tensor(
        self, column: Column, cache: BlockCache | None, key: Any, block_rows: int
    ) -> LazyRows:
        """Column ``column`` as ``(T, N, *feature)`` rows (through ``cache`` where given).

        ``block_rows``: rows of one env column a cached block holds.
        """
        spec = column.spec
        if column.encoding != VALID:  # a bitmap is read with its column's values
            levels = tuple(spec.shape) if column.encoding in (LIST, BINARY) else ()
            kind = ColumnKind(spec.dtype, levels, binary=column.encoding == BINARY)
            self.groups.columns[spec.name] = (kind, levels, column.nullable)
        reader = _Cells(self, column)
        shape = (self.size, self.envs, *spec.shape)
        dtype = np.dtype(spec.dtype)
        if cache is None:
            return LazyRows(shape, dtype, reader.read)
        bounds = np.unique(np.append(np.arange(0, self.size, max(1, block_rows)), self.size))
        blocks = CachedBlocks(reader.read, bounds, cache, key, shape, dtype, reader.env_rows)
        return LazyRows(shape, dtype, blocks.read, blocks=blocks)

    def close(self) -> None:
        """Close the file and drop the decoded groups."""
        self.groups.close()


class _Cells:
    """One column's (or its null bitmap's) cells, gathered from the file rows that hold them."""

    def __init__(self, file: EpisodeFile, column: Column) -> None:
        self.file, self.column = file, column
        self.valid = column.encoding == VALID
        self.feature = () if self.valid else tuple(column.spec.shape)

    def _gather(self, rows: np.ndarray) -> np.ndarray:
        """The values (or validity) at file rows ``rows`` (-1: not stored), ``(n, *feature)``."""
        spec = self.column.spec
        have = rows >= 0
        fill = np.ones if self.valid else np.zeros  # unstored: zeros, stored as they are
        out = fill((len(rows), *self.feature), np.dtype(spec.dtype))
        if have.any():
            values, valid = self.file.groups.take(spec.name, rows[have])
            if self.valid:
                out[have] = True if valid is None else valid
            else:
                out[have] = values.reshape(-1, *self.feature)
        return out

    def read(self, first: int, stop: int) -> np.ndarray:
        """Tensor rows ``first..stop``."""
        rows = self.file.placement.cells(first, stop).reshape(-1)
        return self._gather(rows).reshape(stop - first, self.file.envs, *self.feature)

    def env_rows(self, first: int, stop: int, env: int) -> np.ndarray:
        """Rows ``first..stop`` of env column ``env``: about one run of file rows."""
        return self._gather(self.file.placement.cells(first, stop, env).reshape(-1))
