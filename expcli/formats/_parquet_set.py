"""Parquet files of a folder or a glob, shown to the foreign-table reader as one file.

``foreign_table.open_table`` reads a table through a handful of
``pyarrow.parquet.ParquetFile``'s members (``schema_arrow``, ``metadata``' row groups,
``iter_batches``, ``close``); ``ParquetSet`` has those over the files that
``parquet_sources.table_files`` finds, their row groups one sequence in the files' order,
so that the one role and placement code (``_table_order``) groups episodes spread over
many row groups and files, and reads them a row group at a time. Each file's footer is
read once when the set is opened (bounded by ``open_parquet``), its schema checked
against the first file's; a few files are kept open while read (``OPEN_FILES``), so a
folder of thousands of files holds no more descriptors than one. A hive folder's value
(``episode=3/``) is a column of the file's rows where the file does not hold it.
"""

from __future__ import annotations

import copy
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from expcli.errors import ExpcliError, FormatError
from expcli.formats._error_summary import error_summary, unreadable_group
from expcli.formats._ipc_table import RowCounts
from expcli.formats._parquet_open import open_parquet, pyarrow_parquet
from expcli.formats.column_roles import ColumnRoles
from expcli.formats.dataset import Dataset
from expcli.formats.foreign_table import open_table
from expcli.formats.parquet_sources import TableFiles
from expcli.spec import TensorSpec

_Specs = dict[str, TensorSpec]

__all__ = ["MAX_GROUPS", "OPEN_FILES", "ParquetSet", "open_files"]

OPEN_FILES = 4
"""Files kept open while read (the latest read)."""
MAX_GROUPS = 1 << 20
"""The most row groups (with rows) that the files may hold together."""


class ParquetSet:
    """The row groups of many Parquet files as those of one ``ParquetFile``.

    Attributes:
        schema_arrow: The first file's schema (which every file's agrees with), and a
            column of int64 for each hive key the files do not hold.
        metadata: ``num_row_groups``, ``num_rows``, ``row_group(g).num_rows`` (groups
            without rows left out) and the first file's key-value ``metadata``.
        path: The folder or glob (messages about one file name that file).
    """

    def __init__(self, files: TableFiles) -> None:
        pyarrow_parquet()
        import pyarrow as pa

        self.path, self._files = files.source, files
        # each group's file and group in it, 8 bytes each (a million groups: 16 MB)
        self._files_of, self._locals = array("q"), array("q")
        self._open: OrderedDict[int, Any] = OrderedDict()
        self._lock = threading.Lock()
        rows: list[int] = []
        first: Any = None
        kv: dict[bytes, bytes] | None = None
        for index, path in enumerate(files.paths):
            parquet = open_parquet(path)
            try:
                if first is None:
                    first, kv = parquet.schema_arrow, parquet.metadata.metadata
                else:
                    self._agree(first, parquet.schema_arrow, path)
                meta = parquet.metadata
                for group in range(meta.num_row_groups):
                    count = meta.row_group(group).num_rows
                    if count:
                        self._files_of.append(index)
                        self._locals.append(group)
                        rows.append(count)
            finally:
                parquet.close()
            if len(self._locals) > MAX_GROUPS:
                raise FormatError(
                    f"its files hold more than {MAX_GROUPS:,} row groups, the most read as "
                    "one table",
                    path=self.path,
                )
        self._stored = first
        self._hive = [k for k in files.partitions[0] if k not in first.names]
        self.schema_arrow = pa.schema(
            [*first, *(pa.field(k, pa.int64()) for k in self._hive)], metadata=first.metadata
        )
        self.metadata = RowCounts(rows, kv)

    def _agree(self, first: Any, schema: Any, path: Path) -> None:
        """Refuse a file whose columns are not the first file's (names and types).

        Raises:
            FormatError: Naming the file and the first column that differs.
        """
        named = self._files.paths[0].relative_to(self._files.root)
        for field in first:
            index = schema.get_field_index(field.name)
            if index < 0:
                what = f"is missing, where {named} holds it"
            elif schema.field(index).type != field.type:
                what = f"is {schema.field(index).type}, where {named} holds {field.type}"
            else:
                continue
            raise FormatError(
                f"{what}; the files of one table must hold the same columns",
                path=path,
                key=field.name,
            )
        extra = next((f.name for f in schema if first.get_field_index(f.name) < 0), None)
        if extra is None:
            return
        raise FormatError(
            f"is a column that {named} does not hold; the files of one table must hold the "
            "same columns",
            path=path,
            key=extra,
        )

    def _file(self, index: int) -> Any:
        """File ``index``, opened (and checked again) unless kept open."""
        with self._lock:
            found = self._open.get(index)
            if found is not None:
                self._open.move_to_end(index)
                return found
            path = self._files.paths[index]
            parquet = open_parquet(path)
            try:
                if not parquet.schema_arrow.equals(self._stored, check_metadata=False):
                    self._agree(self._stored, parquet.schema_arrow, path)
            except BaseException:
                parquet.close()
                raise
            self._open[index] = parquet
            while len(self._open) > OPEN_FILES:
                self._open.popitem(last=False)[1].close()
            return parquet

    def iter_batches(
        self,
        batch_size: int,
        row_groups: list[int],
        columns: list[str],
        use_threads: bool = False,
    ) -> Iterator[Any]:
        """The rows of ``columns`` of ``row_groups``, ``batch_size`` at a time.

        Neighbouring groups of one file are read by one call to pyarrow (HF ``datasets``
        writes groups of 1,000 rows).

        Raises:
            FormatError: A file's row group cannot be read (naming the file).
        """
        import pyarrow as pa

        stored = [c for c in columns if c not in self._hive]
        for index, locals_ in _runs(self._files_of, self._locals, row_groups):
            values = self._files.partitions[index]

            def constant(name: str, rows: int, values: dict[str, int] = values) -> Any:
                return pa.array([values[name]] * rows, pa.int64())

            if not stored:  # only hive columns: as many rows as the groups hold
                meta = self._file(index).metadata
                count = sum(meta.row_group(g).num_rows for g in locals_)
                for at in range(0, count, max(1, batch_size)):
                    rows = min(batch_size, count - at)
                    yield pa.record_batch([constant(c, rows) for c in columns], columns)
                continue
            try:
                for batch in self._file(index).iter_batches(
                    batch_size=batch_size,
                    row_groups=locals_,
                    columns=stored,
                    use_threads=use_threads,
                ):
                    arrays = [
                        batch.column(stored.index(c))
                        if c in stored
                        else constant(c, batch.num_rows)
                        for c in columns
                    ]
                    yield pa.record_batch(arrays, columns)
            except Exception as e:
                if isinstance(e, ExpcliError):
                    raise
                raise unreadable_group(e, self._files.paths[index], stored[0], locals_[0]) from e

    def reopen(self) -> ParquetSet:
        """The same files, with handles of their own: a second thread's view of the set."""
        other = copy.copy(self)
        other._open, other._lock = OrderedDict(), threading.Lock()
        return other

    def close(self) -> None:
        """Close the files kept open."""
        with self._lock:
            while self._open:
                self._open.popitem()[1].close()


def _runs(
    files_of: array[int], locals_: array[int], groups: list[int]
) -> Iterator[tuple[int, list[int]]]:
    """``groups`` as runs of one file each: the file and its groups, in order."""
    run: list[int] = []
    index = -1
    for group in groups:
        if files_of[group] != index and run:
            yield index, run
            run = []
        index = files_of[group]
        run.append(locals_[group])
    if run:
        yield index, run


def open_files(
    files: TableFiles,
    specs_of: Callable[[dict[bytes, bytes] | None, Path], _Specs | None],
    mapping: ColumnRoles | None = None,
) -> tuple[Dataset, Callable[[], None]]:
    """Open the Parquet files of a folder or a glob as one table, read from its columns.

    ``specs_of``: the tensors that the first file's key-value metadata names (expcli's
    footer, where the files are expcli's own shards: a column of frames is read as its
    tensor), or None. ``mapping``: as ``foreign_table.open_table``'s (``--columns``,
    ``--done-means``).

    Raises:
        FormatError: A file is not Parquet, damaged or holds other columns than the first,
            or as ``foreign_table.open_table``.
        MissingDependencyError: pyarrow is not installed.
    """
    table = ParquetSet(files)
    try:
        specs = specs_of(table.metadata.metadata, files.paths[0])
        return open_table(table, files.source, files.described, specs, mapping, table.reopen)
    except BaseException as e:
        table.close()
        if isinstance(e, ExpcliError | MemoryError) or not isinstance(e, Exception):
            raise
        raise FormatError(f"cannot be read: {error_summary(e)}", path=files.source) from e
