"""An Arrow IPC (Feather v2) file or stream, shown to the foreign-table reader as Parquet is.

``foreign_table.open_table`` reads a table a row group at a time through a handful of
``pyarrow.parquet.ParquetFile``'s members (``schema_arrow``, ``metadata``' row groups,
``iter_batches``, ``close``); ``IpcTable`` has those over the record batches of an IPC
file, each batch a row group, so that the columns, roles and placement are read by the one
code that reads Parquet. An IPC file (``ARROW1``, what pyarrow's ``ipc.new_file`` and
``feather.write_feather`` and polars' ``write_ipc`` write) is read a batch at a time by its
footer; an IPC stream (HF ``datasets``' cache files) has none, so it is memory-mapped and its
messages found by one pass and kept as views of the mapping, each decoded when asked for.
Either way the rows are counted, and a compressed batch that would inflate like a bomb
refused, from the batches' metadata alone (``_ipc_messages``), before any is decoded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from expcli.errors import FormatError
from expcli.formats._error_summary import error_summary
from expcli.formats._ipc_messages import declared as declared_batch
from expcli.formats._ipc_messages import file_batches
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
        self._messages: list[Any] = []
        try:
            self._open(pa, path)
        except BaseException:
            self._source.close()
            raise

    def _open(self, pa: Any, path: Path) -> None:
        """Read the footer (an IPC file) or find the batches (an IPC stream).

        Each batch's metadata is read first (``_ipc_messages``): its rows are counted from it
        and a compressed batch that would inflate like a bomb is refused before pyarrow
        inflates it.
        """
        declared = file_batches(path)
        if declared is not None:
            rows = [b.rows for b in declared if not b.dictionary]
            if len(rows) > MAX_BATCHES:
                raise FormatError(
                    f"holds {len(rows):,} record batches, more than {MAX_BATCHES:,}", path=path
                )
            self._reader: Any = pa.ipc.open_file(self._source)
            self.stream = False
            self.schema_arrow = self._reader.schema
            if self._reader.num_record_batches != len(rows):
                raise FormatError("has a footer that pyarrow reads otherwise; damaged", path=path)
        else:  # no footer: an IPC stream, its messages views of a mapping
            self._source.close()
            self._source = pa.memory_map(str(path), "r")
            self.stream = True
            rows = self._stream_messages(pa, path)
        self.metadata = RowCounts(rows, self.schema_arrow.metadata)

    def _stream_messages(self, pa: Any, path: Path) -> list[int]:
        """Find a stream's record batches, each checked; keep them to decode when asked."""
        messages = pa.ipc.MessageReader.open_stream(self._source)
        schema, dictionaries = None, False
        kept: list[tuple[Any, int]] = []
        for message in messages:  # pyarrow reads a message as the type asked, unchecked
            if schema is None and message.type == "schema":
                schema = pa.ipc.read_schema(message)
                continue
            if schema is None or message.type not in ("record batch", "dictionary"):
                raise FormatError(
                    f"holds an Arrow IPC message of type {message.type!r} where a "
                    f"{'schema' if schema is None else 'record batch'} was expected",
                    path=path,
                )
            body = message.body
            size = 0 if body is None else body.size
            where = f"record batch {len(kept)}"
            batch = declared_batch(
                message.metadata.to_pybytes(),
                size,
                partial(_eight, body),
                path,
                where,
            )
            if batch is None or batch.dictionary != (message.type == "dictionary"):
                raise FormatError(f"has a damaged message for {where}", path=path)
            dictionaries |= batch.dictionary
            if not batch.dictionary:
                if len(kept) >= MAX_BATCHES:
                    raise FormatError(f"holds more than {MAX_BATCHES:,} record batches", path=path)
                kept.append((message, batch.rows))
        if schema is None:
            raise FormatError("is an Arrow IPC stream without a schema", path=path)
        self.schema_arrow = schema
        if dictionaries:  # dictionaries are resolved by pyarrow's own stream reader only
            self._batches = list(pa.ipc.open_stream(self._source))
        else:
            self._messages = [message for message, _ in kept]
        return [rows for _, rows in kept]

    def _batch(self, group: int) -> Any:
        """Batch ``group``, checked whole: pyarrow trusts a batch's offsets when it reads it."""
        pa = _pyarrow()
        try:
            if self._batches is not None:
                batch = self._batches[group]
            elif self.stream:
                batch = pa.ipc.read_record_batch(self._messages[group], self.schema_arrow)
            else:
                batch = self._reader.get_batch(group)
            batch.validate(full=True)
        except (OSError, ValueError, pa.ArrowException) as e:
            raise FormatError(
                f"has a damaged record batch {group}: {error_summary(e)}", path=self.path
            ) from e
        if batch.num_rows != self.metadata.row_group(group).num_rows:
            raise FormatError(
                f"has a record batch {group} of {batch.num_rows:,} rows where its metadata "
                f"declares {self.metadata.row_group(group).num_rows:,}",
                path=self.path,
            )
        return batch

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
        self._batches, self._messages = None, []
        self._source.close()


def open_ipc(path: Path) -> IpcTable:
    """Open an Arrow IPC file or stream at ``path``.

    Raises:
        FormatError: Neither, truncated or damaged.
        MissingDependencyError: pyarrow is not installed.
    """
    pa = _pyarrow()
    try:
        return IpcTable(path)
    except FormatError:
        raise
    except (OSError, ValueError, pa.ArrowException) as e:
        raise FormatError(
            f"is not a readable Arrow IPC file or stream: {error_summary(e)}", path=path
        ) from e


def _eight(body: Any, offset: int) -> bytes:
    """The eight bytes at ``offset`` of a message's body (a pyarrow ``Buffer``)."""
    eight: bytes = body[offset : offset + 8].to_pybytes()
    return eight


def _pyarrow() -> Any:
    """pyarrow, once ``pyarrow_parquet`` found it recent enough (CVE-2023-47248)."""
    pyarrow_parquet()
    import pyarrow as pa

    return pa
