"""Random cells of a Parquet column of PNG frames, decoding only the cells asked for.

A row group of PNG cells costs far more to decode than to read: a random batch that
decoded each group it touched (as the block cache does for raw frames) decoded about 80
frames for each one it used. Gathers (``take``, ``take_cells``) here read the groups'
PNG bytes (kept, a few KB a frame, by the caller's ``encoded``) and inflate only the
cells drawn; slices still go through the rows' reader and its block cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from expcli.formats._parquet_columns import Column, flat_array, from_arrow
from expcli.formats.block_cache import CachedBlocks
from expcli.formats.lazy import LazyRows
from expcli.formats.row_gather import flat_rows

__all__ = ["PngCells", "png_rows"]


class PngCells(LazyRows):
    """A ``(T, N, *frame)`` tensor of PNG cells whose gathers decode the cells asked for.

    ``read`` and ``blocks`` read slices, as ``LazyRows``'; ``gather``: the cells at flat
    ``t * N + n`` indexes (1-D int64) as ``(n, *frame)``.
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
        read: Callable[[int, int], np.ndarray],
        blocks: CachedBlocks | None,
        gather: Callable[[np.ndarray], np.ndarray],
    ) -> None:
        super().__init__(shape, dtype, read, blocks=blocks)
        self._gather = gather

    def take(self, index: Any) -> np.ndarray:
        """Rows ``index`` (any shape): the cells of those rows, decoded alone."""
        wanted, rows = flat_rows(index, self.shape[0])
        envs = self.shape[1]
        cells = rows[:, None] * envs + np.arange(envs, dtype=np.int64)
        return self.take_cells(cells).reshape(*wanted.shape, *self.shape[1:])

    def take_cells(self, index: Any) -> np.ndarray:
        """The cells at flat ``index`` (any shape), each PNG decoded alone."""
        wanted, flat = flat_rows(index, self.shape[0] * self.shape[1])
        return self._gather(flat).reshape(*wanted.shape, *self.shape[2:])


def png_rows(
    column: Column, ends: np.ndarray, encoded: Callable[[int], Any], rows: np.ndarray
) -> np.ndarray:
    """The PNG cells at file rows ``rows`` (-1: not stored, zeros), ``(n, *frame)`` uint8.

    ``ends``: each row group's end row; ``encoded(group)``: that group's column as Arrow
    (PNG bytes).

    Raises:
        InvalidValueError: A cell's PNG is refused (``_parquet_columns.from_arrow``).
    """
    out = np.zeros((len(rows), *column.spec.shape), np.uint8)
    have = np.flatnonzero(rows >= 0)
    groups = np.searchsorted(ends, rows[have], side="right")
    for group in np.unique(groups):
        mine = have[groups == group]
        begin = int(ends[group - 1]) if group else 0
        taken = encoded(int(group)).take(flat_array(rows[mine] - begin))
        out[mine] = from_arrow(column, taken)
    return out
