"""An Arrow IPC (Feather v2) file or stream, shown to the foreign-table reader as Parquet is.

``foreign_table.open_table`` reads a table a row group at a time through a handful of
``pyarrow.parquet.ParquetFile``'s members (``schema_arrow``, ``metadata``' row groups,
``iter_batches``, ``close``); ``IpcTable`` has those over the record batches of an IPC
file, each batch a row group, so that the columns, roles and placement are read by the one
code that reads Parquet. An IPC file (``ARROW1``, what pyarrow's ``ipc.new_file`` and
``feather.write_feather`` and polars' ``write_ipc`` write) is read a batch at a time by its
footer (each batch read once when opened, to count its rows); an IPC stream (HF
``datasets``' cache files) has none, so it is memory-mapped and its batches found by one
pass and kept as views of the mapping (a compressed one decompressed as it is found).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from expcli.errors import FormatError
from expcli.formats._error_summary import error_summary
from expcli.formats._parquet_open import pyarrow_parquet

__all__ = ["IpcTable", "RowCounts", "open_ipc"]

MAX_BATCHES = 1 << 20
"""The most record batches an IPC file may hold (each is a row group, its rows counted)."""


@dataclass(frozen=True, slots=True)
class _Group:
    num_rows: int


class RowCounts:
    """What ``RowGroups`` and ``parquet_format`` ask of a ``FileMetaData``: rows by group."""

    def __init__(self, rows: list[int], kv: dict[bytes, bytes] | None) -> None:
        self._rows, self.metadata = rows, kv
        self.num_row_groups = len(rows)
        self.num_rows = sum(rows)

    def row_group(self, group: int) -> _Group:
        return _Group(self._rows[group])


class IpcTable:
    """The record batches of an IPC file as the row groups of a ``ParquetFile``.

    Attributes:
        schema_arrow: The table's Arrow schema.
        metadata: ``num_row_groups``, ``num_rows``, ``row_group(g).num_rows`` and the
            schema's key-value ``metadata``.
        stream: Whether it is an IPC stream (no footer), not an IPC file.
    """

    def __init__(self, path: Path) -> None:
        pa = _pyarrow()
        self.path = path
        # an IPC file's batches are read when asked for, into memory that is freed after (a
        # mapping would count every page read in the process's resident size)
        self._source: Any = pa.OSFile(str(path), "rb")
        self._batches: list[Any] | None = None
        try:
            self._open(pa, path)
        except BaseException:
            self._source.close()
            raise

    def _open(self, pa: Any, path: Path) -> None:
        """Read the footer (an IPC file) or find the batches (an IPC stream)."""
        try:
            self._reader: Any = pa.ipc.open_file(self._source)
            self.stream = False
            count = self._reader.num_record_batches
            if count > MAX_BATCHES:
                raise FormatError(
                    f"holds {count:,} record batches, more than {MAX_BATCHES:,}", path=path
                )
            rows = [self._reader.get_batch(b).num_rows for b in range(count)]
        except pa.ArrowInvalid:  # no footer: an IPC stream, its batches views of a mapping
            self._source.close()
            self._source = pa.memory_map(str(path), "r")
            self._reader = pa.ipc.open_stream(self._source)
            self.stream = True
            self._batches = []
            for batch in self._reader:
                if len(self._batches) >= MAX_BATCHES:
                    raise FormatError(
                        f"holds more than {MAX_BATCHES:,} record batches", path=path
                    ) from None
                self._batches.append(batch)
            rows = [b.num_rows for b in self._batches]
        self.schema_arrow = self._reader.schema
        self.metadata = RowCounts(rows, self.schema_arrow.metadata)

    def _batch(self, group: int) -> Any:
        if self._batches is not None:
            return self._batches[group]
        return self._reader.get_batch(group)

    def iter_batches(
        self,
        batch_size: int,
        row_groups: list[int],
        columns: list[str],
        use_threads: bool = False,
    ) -> Iterator[Any]:
        """The rows of ``columns`` of the batches ``row_groups``, ``batch_size`` at a time."""
        del use_threads
        for group in row_groups:
            batch = self._batch(group).select(columns)
            for first in range(0, batch.num_rows, max(1, batch_size)):
                yield batch.slice(first, batch_size)

    def read_row_group(self, group: int, columns: list[str], use_threads: bool = False) -> Any:
        """Batch ``group`` of ``columns`` as a table."""
        del use_threads
        return _pyarrow().Table.from_batches([self._batch(group).select(columns)])

    def close(self) -> None:
        """Drop the batches and close (or unmap) the file."""
        self._batches = None
        self._source.close()


def open_ipc(path: Path) -> IpcTable:
    """Open an Arrow IPC file or stream at ``path``.

    Raises:
        FormatError: Neither, truncated or damaged.
        MissingDependencyError: pyarrow is not installed.
    """
    _pyarrow()
    try:
        return IpcTable(path)
    except FormatError:
        raise
    except (OSError, ValueError, NotImplementedError) as e:  # pyarrow's Arrow*Error among them
        raise FormatError(
            f"is not a readable Arrow IPC file or stream: {error_summary(e)}", path=path
        ) from e


def _pyarrow() -> Any:
    """pyarrow, once ``pyarrow_parquet`` found it recent enough (CVE-2023-47248)."""
    pyarrow_parquet()
    import pyarrow as pa

    return pa
