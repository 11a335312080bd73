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
GROUP_SPAN_BYTES = 4 << 20
"""Decoded bytes of a column whose row groups are decoded together (small groups)."""


def _ascending(rows: np.ndarray) -> bool:
    """Whether ``rows`` go up one at a time (their ends already checked)."""
    return bool((rows[1:] - rows[:-1] == 1).all())


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
        self._spans: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._bytes = 0
        self._lock = threading.Lock()  # readers ahead share the file and the kept groups

    def batches(self, name: str, groups: range, rows: int) -> Iterator[Any]:
        """Row groups ``groups`` of column ``name``, ``rows`` at a time, as Arrow arrays.

        Decoding lists, pyarrow holds levels of 4 bytes a value besides the values (a row
        group of 8 MB of ``list<uint8>`` took 80 MB to decode whole): in batches, a few MB.
        """
        try:
            for batch in self.parquet.iter_batches(
                batch_size=max(1, min(rows, 1 << 30)),
                row_groups=list(groups),
                columns=[name],
                use_threads=False,
            ):
                yield batch.column(0)
        except Exception as e:
            if isinstance(e, ExpcliError):
                raise
            raise unreadable_group(e, self.path, name, groups.start) from e

    def spans(self, row_bytes: int) -> np.ndarray:
        """The first row group of each span: neighbouring groups decoded together.

        A span holds the groups whose rows start in one ``GROUP_SPAN_BYTES`` of decoded values
        (``row_bytes`` a row): tables of many small row groups (HF ``datasets`` writes 1,000
        rows a group) are decoded a few MB at a time, not a call to pyarrow a group.
        """
        block = self.starts[:-1] * max(1, row_bytes) // GROUP_SPAN_BYTES
        return np.flatnonzero(np.concatenate([[True], block[1:] != block[:-1]]))

    def _spans_of(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Column ``name``'s spans: their first groups and their first rows (and the end)."""
        found = self._spans.get(name)
        if found is None:
            kind, shape, _ = self.columns[name]
            first = self.spans(math.prod(shape) * np.dtype(kind.dtype).itemsize)
            found = self._spans[name] = (
                np.append(first, len(self.starts) - 1),
                np.append(self.starts[first], self.count),
            )
        return found

    def decoded(self, name: str, span: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Span ``span`` of column ``name`` decoded (and its valid rows, where nullable).

        The latest decoded spans are kept, about ``KEPT_BYTES`` of them.
        """
        found = self._kept.get((name, span))
        if found is not None:
            self._kept.move_to_end((name, span))
            return found
        groups = self._spans_of(name)[0]
        values = self._decode(name, range(int(groups[span]), int(groups[span + 1])))
        self._kept[name, span] = values
        self._bytes += values[0].nbytes
        while self._bytes > KEPT_BYTES and len(self._kept) > 1:
            dropped, _ = self._kept.popitem(last=False)[1]
            self._bytes -= dropped.nbytes
        return values

    def _decode(self, name: str, groups: range) -> tuple[np.ndarray, np.ndarray | None]:
        """Row groups ``groups`` of a column, a batch of about ``BATCH_BYTES`` at a time."""
        kind, shape, nullable = self.columns[name]
        first, count = (
            int(self.starts[groups.start]),
            int(self.starts[groups.stop] - self.starts[groups.start]),
        )
        out = np.empty((count, *shape), kind.dtype)
        valid = np.ones(count, bool) if nullable else None
        step = max(1, BATCH_BYTES // max(1, math.prod(shape) * out.itemsize))
        at = 0
        for array in self.batches(name, groups, step):
            where = (self.path, name, first + at)
            part, mask = decode(array, kind, shape, where, nullable)
            if at + len(part) > count:
                break
            out[at : at + len(part)] = part
            if valid is not None and mask is not None:
                valid[at : at + len(part)] = mask
            at += len(part)
        if at != count:
            which = (
                f"row group {groups.start}"
                if len(groups) == 1
                else (f"row groups {groups.start}..{groups.stop - 1}")
            )
            raise FormatError(
                f"{which} holds other than the {count:,} rows its footer says",
                path=self.path,
                key=name,
            )
        return out, None if valid is None or valid.all() else valid

    def take(self, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Values of file rows ``rows`` of a column, and where nullable, whether each is valid."""
        kind, shape, nullable = self.columns[name]
        out = np.empty((len(rows), *shape), kind.dtype)
        valid = np.ones(len(rows), bool) if nullable else None
        _, starts = self._spans_of(name)
        with self._lock:
            if len(rows) > 1 and rows[-1] - rows[0] == len(rows) - 1 and _ascending(rows):
                self._slices(name, int(rows[0]), out, valid)  # rows in file order: copies
                return out, valid
            for span, at in by_block(starts, rows):
                values, mask = self.decoded(name, span)
                local = rows[at] - starts[span]
                out[at] = values[local]
                if valid is not None and mask is not None:
                    valid[at] = mask[local]
        return out, valid

    def _slices(self, name: str, first: int, out: np.ndarray, valid: np.ndarray | None) -> None:
        """File rows ``first..first + len(out)`` of a column into ``out``, span by span."""
        _, starts = self._spans_of(name)
        span = int(np.searchsorted(starts, first, side="right")) - 1
        at = 0
        while at < len(out):
            values, mask = self.decoded(name, span)
            begin = first + at - int(starts[span])
            n = min(len(out) - at, len(values) - begin)
            out[at : at + n] = values[begin : begin + n]
            if valid is not None and mask is not None:
                valid[at : at + n] = mask[begin : begin + n]
            at, span = at + n, span + 1

    def keys(self, names: dict[str, str]) -> Iterator[tuple[int, Keys]]:
        """Each span's first row and its ``names`` columns (role -> column) as int64 arrays."""
        first = self.spans(8 * len(names))
        bounds = np.append(first, len(self.starts) - 1)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            yield int(self.starts[lo]), self._keys(names, range(int(lo), int(hi)))

    def whole_keys(self, names: dict[str, str]) -> Keys:
        """The ``names`` columns of every row, as int64 arrays."""
        parts = [keys for _, keys in self.keys(names)]
        return {role: np.concatenate([p[role] for p in parts]) for role in names}

    def _keys(self, names: dict[str, str], groups: range) -> Keys:
        return {
            role: self._decode(name, groups)[0].astype(np.int64) for role, name in names.items()
        }

    def close(self) -> None:
        """Drop the decoded groups and close the file."""
        with self._lock:
            self._kept.clear()
            self._bytes = 0
            self.parquet.close()
