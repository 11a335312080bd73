"""The row groups of a foreign Parquet table, decoded when asked for, a few of them kept.

``RowGroups.take`` gives the values of any file rows of a column, decoding each row group
they lie in once (``_table_columns.decode``) and keeping the latest decoded ones, about
``KEPT_BYTES`` in all, so that reading a table in order decodes each group once.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import ExpcliError, FormatError
from expcli.formats._error_summary import unreadable_group
from expcli.formats._table_columns import ColumnKind, decode
from expcli.formats._table_order import Keys
from expcli.formats.row_gather import by_block

__all__ = ["KEPT_BYTES", "RowGroups"]

KEPT_BYTES = 24 << 20
"""Decoded row groups kept, all columns together (one at least)."""
BATCH_BYTES = 1 << 20
"""Decoded bytes of a column that pyarrow decodes at once (its levels besides)."""


class RowGroups:
    """A table's row groups, a few decoded ones kept (about ``KEPT_BYTES``).

    Attributes:
        columns: Each column read: its kind, feature shape (``()`` a scalar) and whether
            it may hold nulls.
        count: The table's rows.
    """

    def __init__(self, parquet: Any, path: Path) -> None:
        self.parquet, self.path = parquet, path
        meta = parquet.metadata
        counts = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        self.starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
        self.count = int(self.starts[-1])
        self.columns: dict[str, tuple[ColumnKind, tuple[int, ...], bool]] = {}
        self._kept: OrderedDict[tuple[str, int], tuple[np.ndarray, np.ndarray | None]] = (
            OrderedDict()
        )
        self._bytes = 0
        self._lock = threading.Lock()  # readers ahead share the file and the kept groups

    def batches(self, name: str, group: int, rows: int) -> Iterator[Any]:
        """Group ``group`` of column ``name``, ``rows`` at a time, as Arrow arrays.

        Decoding lists, pyarrow holds levels of 4 bytes a value besides the values (a row
        group of 8 MB of ``list<uint8>`` took 80 MB to decode whole): in batches, a few MB.
        """
        try:
            for batch in self.parquet.iter_batches(
                batch_size=max(1, min(rows, 1 << 30)),
                row_groups=[group],
                columns=[name],
                use_threads=False,
            ):
                yield batch.column(0)
        except Exception as e:
            if isinstance(e, ExpcliError):
                raise
            raise unreadable_group(e, self.path, name, group) from e

    def decoded(self, name: str, group: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Group ``group`` of column ``name`` decoded (and its valid rows, where nullable).

        The latest decoded groups are kept, about ``KEPT_BYTES`` of them.
        """
        found = self._kept.get((name, group))
        if found is not None:
            self._kept.move_to_end((name, group))
            return found
        values = self._decode(name, group)
        self._kept[name, group] = values
        self._bytes += values[0].nbytes
        while self._bytes > KEPT_BYTES and len(self._kept) > 1:
            dropped, _ = self._kept.popitem(last=False)[1]
            self._bytes -= dropped.nbytes
        return values

    def _decode(self, name: str, group: int) -> tuple[np.ndarray, np.ndarray | None]:
        """``decoded``, a batch of about ``BATCH_BYTES`` at a time, kept nowhere."""
        kind, shape, nullable = self.columns[name]
        first, count = int(self.starts[group]), int(self.starts[group + 1] - self.starts[group])
        out = np.empty((count, *shape), kind.dtype)
        valid = np.ones(count, bool) if nullable else None
        step = max(1, BATCH_BYTES // max(1, math.prod(shape) * out.itemsize))
        at = 0
        for array in self.batches(name, group, step):
            where = (self.path, name, first + at)
            part, mask = decode(array, kind, shape, where, nullable)
            if at + len(part) > count:
                break
            out[at : at + len(part)] = part
            if valid is not None and mask is not None:
                valid[at : at + len(part)] = mask
            at += len(part)
        if at != count:
            raise FormatError(
                f"row group {group} holds other than the {count:,} rows its footer says",
                path=self.path,
                key=name,
            )
        return out, None if valid is None or valid.all() else valid

    def take(self, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Values of file rows ``rows`` of a column, and where nullable, whether each is valid."""
        kind, shape, nullable = self.columns[name]
        out = np.empty((len(rows), *shape), kind.dtype)
        valid = np.ones(len(rows), bool) if nullable else None
        with self._lock:
            for group, at in by_block(self.starts, rows):
                values, mask = self.decoded(name, group)
                local = rows[at] - self.starts[group]
                out[at] = values[local]
                if valid is not None and mask is not None:
                    valid[at] = mask[local]
        return out, valid

    def keys(self, names: dict[str, str]) -> Iterator[tuple[int, Keys]]:
        """Each row group's first row and its ``names`` (role -> column) as int64 arrays."""
        for group in range(len(self.starts) - 1):
            yield int(self.starts[group]), self._keys(names, group)

    def whole_keys(self, names: dict[str, str]) -> Keys:
        """The ``names`` columns of every row, as int64 arrays."""
        parts = [self._keys(names, g) for g in range(len(self.starts) - 1)]
        return {role: np.concatenate([p[role] for p in parts]) for role in names}

    def _keys(self, names: dict[str, str], group: int) -> Keys:
        return {role: self._decode(name, group)[0].astype(np.int64) for role, name in names.items()}

    def close(self) -> None:
        """Drop the decoded groups and close the file."""
        with self._lock:
            self._kept.clear()
            self._bytes = 0
            self.parquet.close()
