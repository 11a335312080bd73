"""The row groups of a foreign Parquet table, decoded when asked for, a few of them kept.

``RowGroups.take`` gives the values of any file rows of a column, decoding each row group
they lie in once (``_table_columns.decode``) and keeping the latest decoded ones, about
``KEPT_BYTES`` in all, so that reading a table in order decodes each group once.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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
AHEAD_ROW_BYTES = 1 << 10
"""Columns of rows of at most this many bytes are decoded ahead on a second thread.

Their decoding is mostly pyarrow's work for each row group and value (2x faster on two
threads); wider rows (frames) are mostly copied, which a second thread barely speeds, and
its heap would keep the pages of the frames it freed (glibc's arenas are per thread: a
240 MiB table peaked 30-55 MiB higher than a 48 MiB one).
"""


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

    def __init__(self, parquet: Any, path: Path, reopen: Callable[[], Any] | None = None) -> None:
        """Read ``parquet``; ``reopen`` opens another handle on it.

        That handle is a thread's, which decodes the next span of a column read in order
        meanwhile (None: no thread does).
        """
        self.parquet, self.path, self._reopen = parquet, path, reopen
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
        self._last: dict[str, int] = {}  # each column's span decoded last
        self._ahead: dict[str, tuple[int, Future[tuple[np.ndarray, np.ndarray | None]]]] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._second: Any = None  # the decoding thread's handle
        self._pid = os.getpid()  # a forked child decodes ahead on a thread of its own

    def batches(self, name: str, groups: range, rows: int) -> Iterator[Any]:
        """Row groups ``groups`` of column ``name``, ``rows`` at a time, as Arrow arrays.

        Decoding lists, pyarrow holds levels of 4 bytes a value besides the values (a row
        group of 8 MB of ``list<uint8>`` took 80 MB to decode whole): in batches, a few MB.
        """
        for batch in self._record_batches(self.parquet, [name], groups, rows):
            yield batch.column(0)

    def _record_batches(
        self, parquet: Any, names: list[str], groups: range, rows: int
    ) -> Iterator[Any]:
        """``batches`` of several columns, in one pass over the groups (of ``parquet``)."""
        try:
            yield from parquet.iter_batches(
                batch_size=max(1, min(rows, 1 << 30)),
                row_groups=list(groups),
                columns=names,
                use_threads=False,
            )
        except Exception as e:
            if isinstance(e, ExpcliError):
                raise
            raise unreadable_group(e, self.path, names[0], groups.start) from e

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
        if self._pid != os.getpid():  # forked since: the decoding thread is not here
            self._pid, self._executor, self._second = os.getpid(), None, None
            self._ahead.clear()
        ahead = self._ahead.pop(name, None)
        if ahead is not None and ahead[0] == span:
            values = ahead[1].result()
        else:
            following = span + 1
            if (
                self._ahead_of(name)
                and self._last.get(name) == span - 1
                and following + 1 < len(groups)
            ):
                # read in order: the next span decodes on a handle of its own meanwhile (and
                # the one after here again: the two threads take turns)
                wanted = range(int(groups[following]), int(groups[following + 1]))
                future = self._decoder().submit(self._decode_one_ahead, name, wanted)
                self._ahead[name] = (following, future)
            values = self._decode(name, range(int(groups[span]), int(groups[span + 1])))
        self._kept[name, span] = values
        self._bytes += values[0].nbytes
        while self._bytes > KEPT_BYTES and len(self._kept) > 1:
            dropped, _ = self._kept.popitem(last=False)[1]
            self._bytes -= dropped.nbytes
        self._last[name] = span
        return values

    def _ahead_of(self, *names: str) -> bool:
        """Whether columns ``names`` are decoded ahead: narrow ones, with a second handle."""
        if self._reopen is None:
            return False
        row_bytes = 0
        for name in names:
            kind, shape, _ = self.columns[name]
            row_bytes += math.prod(shape) * np.dtype(kind.dtype).itemsize
        return row_bytes <= AHEAD_ROW_BYTES

    def _decoder(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="expcli-table-decode")
        return self._executor

    def _decode_one_ahead(self, name: str, groups: range) -> tuple[np.ndarray, np.ndarray | None]:
        return self._decode_ahead([name], groups)[0]

    def _decode_ahead(
        self, names: list[str], groups: range
    ) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """``_decode_many`` on the decoding thread's own handle (opened on first use)."""
        if self._second is None and self._reopen is not None:
            self._second = self._reopen()
        return self._decode_many(self._second, names, groups)

    def _decode(self, name: str, groups: range) -> tuple[np.ndarray, np.ndarray | None]:
        """Row groups ``groups`` of a column, a batch of about ``BATCH_BYTES`` at a time."""
        return self._decode_many(self.parquet, [name], groups)[0]

    def _decode_many(
        self, parquet: Any, names: list[str], groups: range
    ) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """``_decode`` of several columns in one pass over the groups (of ``parquet``)."""
        if len(names) > 1 and not getattr(parquet, "reads_columns_together", True):
            return [self._decode_many(parquet, [name], groups)[0] for name in names]
        first, count = (
            int(self.starts[groups.start]),
            int(self.starts[groups.stop] - self.starts[groups.start]),
        )
        outs, valids, row_bytes = [], [], 0
        for name in names:
            kind, shape, nullable = self.columns[name]
            outs.append(np.empty((count, *shape), kind.dtype))
            valids.append(np.ones(count, bool) if nullable else None)
            row_bytes += math.prod(shape) * outs[-1].itemsize
        at = 0
        for batch in self._record_batches(parquet, names, groups, BATCH_BYTES // max(1, row_bytes)):
            length = batch.num_rows
            if at + length > count:
                break
            for i, name in enumerate(names):
                kind, shape, nullable = self.columns[name]
                where = (self.path, name, first + at)
                part, mask = decode(batch.column(i), kind, shape, where, nullable)
                outs[i][at : at + length] = part
                valid = valids[i]
                if valid is not None and mask is not None:
                    valid[at : at + length] = mask
            at += length
        if at != count:
            which = (
                f"row group {groups.start}"
                if len(groups) == 1
                else (f"row groups {groups.start}..{groups.stop - 1}")
            )
            raise FormatError(
                f"{which} holds other than the {count:,} rows its footer says",
                path=self.path,
                key=names[0],
            )
        return [
            (out, None if valid is None or valid.all() else valid)
            for out, valid in zip(outs, valids, strict=True)
        ]

    def take(self, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Values of file rows ``rows`` of a column, and where nullable, whether each is valid."""
        if len(rows) > 1 and rows[-1] - rows[0] == len(rows) - 1 and _ascending(rows):
            return self.run(name, int(rows[0]), len(rows))  # rows in file order: copies
        kind, shape, nullable = self.columns[name]
        out = np.empty((len(rows), *shape), kind.dtype)
        valid = np.ones(len(rows), bool) if nullable else None
        _, starts = self._spans_of(name)
        with self._lock:
            for span, at in by_block(starts, rows):
                values, mask = self.decoded(name, span)
                local = rows[at] - starts[span]
                out[at] = values[local]
                if valid is not None and mask is not None:
                    valid[at] = mask[local]
        return out, valid

    def run(self, name: str, first: int, count: int) -> tuple[np.ndarray, np.ndarray | None]:
        """File rows ``first..first + count`` of a column (and where nullable, which are valid)."""
        kind, shape, nullable = self.columns[name]
        out = np.empty((count, *shape), kind.dtype)
        valid = np.ones(count, bool) if nullable else None
        with self._lock:
            self._slices(name, first, out, valid)
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

    def keys(
        self, names: dict[str, str], flags: dict[str, str] | None = None
    ) -> Iterator[tuple[int, Keys, Keys]]:
        """Each span's first row, its keys and its flags, all read in one pass.

        ``names``: the key columns (role -> column), given as int64 arrays; ``flags``: the
        flag columns, given as bools (non-zero is set).
        """
        flags = flags or {}
        first = self.spans(8 * len(names) + len(flags))
        bounds = np.append(first, len(self.starts) - 1)
        columns = [*names.values(), *flags.values()]
        spans = [range(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        if not columns:  # no key nor flag: the spans' first rows alone
            yield from ((int(self.starts[groups.start]), {}, {}) for groups in spans)
            return
        for groups, read in zip(spans, self._in_order(columns, spans), strict=True):
            keys = {role: r[0].astype(np.int64) for role, r in zip(names, read, strict=False)}
            with np.errstate(invalid="ignore"):
                set_ = {role: r[0] != 0 for role, r in zip(flags, read[len(names) :], strict=True)}
            yield int(self.starts[groups.start]), keys, set_

    def _in_order(
        self, names: list[str], spans: list[range]
    ) -> Iterator[list[tuple[np.ndarray, np.ndarray | None]]]:
        """Columns ``names`` of each of ``spans`` decoded, in order.

        With a handle of its own, the decoding thread takes every other span meanwhile.
        """
        ahead: Future[list[tuple[np.ndarray, np.ndarray | None]]] | None = None
        for at, groups in enumerate(spans):
            if ahead is not None:
                yield ahead.result()
                ahead = None
            else:
                if at + 1 < len(spans) and self._ahead_of(*names):
                    ahead = self._decoder().submit(self._decode_ahead, names, spans[at + 1])
                yield self._decode_many(self.parquet, names, groups)

    def whole_keys(self, names: dict[str, str]) -> Keys:
        """The ``names`` columns of every row, as int64 arrays."""
        parts = [keys for _, keys, _ in self.keys(names)]
        return {role: np.concatenate([p[role] for p in parts]) for role in names}

    def close(self) -> None:
        """Drop the decoded groups and close the file."""
        with self._lock:
            executor, self._executor = self._executor, None
            if executor is not None:  # after a decode under way ends
                executor.shutdown(wait=True, cancel_futures=True)
            if self._second is not None:
                self._second.close()
                self._second = None
            self._kept.clear()
            self._ahead.clear()
            self._bytes = 0
            self.parquet.close()
