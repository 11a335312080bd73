"""Opening a Parquet file that may be hostile: bounded before pyarrow parses or decodes it.

A Parquet file says how big its footer is and how many rows each row group holds before any
of it is parsed or decoded, and a file can lie in neither without being refused by pyarrow.
So a footer is parsed only below ``max_footer_bytes`` (a 60 MB metadata string cost over
1 GB as pyarrow parsed and copied it, once per open handle), with Thrift's own limits on
strings and lists, and a row group is decoded only below ``max_group_bytes`` (310,000 zero
frames in one zstd group: 0.9 MB on disk, 2.1 GB decoded). Both bounds can be raised by
environment variable for a file known to be honest.
"""

from __future__ import annotations

import base64
import io
import os
import sys
from pathlib import Path
from typing import IO, Any

from expcli.errors import FormatError, MissingDependencyError
from expcli.formats._arrow_schema import READ_EXTENSIONS, extensions

__all__ = [
    "FOOTER_VARIABLE",
    "GROUP_VARIABLE",
    "HIDDEN_SCHEMA_KEY",
    "SecondHandle",
    "check_groups",
    "file_identity",
    "max_footer_bytes",
    "max_group_bytes",
    "open_parquet",
    "pyarrow_parquet",
    "read_columns",
    "refuse_extension_types",
]

FOOTER_VARIABLE = "EXPCLI_MAX_PARQUET_FOOTER_BYTES"
GROUP_VARIABLE = "EXPCLI_MAX_ROW_GROUP_BYTES"
_FOOTER_BYTES = 16 << 20  # a 100 GB file of expcli's 8 MB groups has a footer of ~1.5 MB
_GROUP_BYTES = 256 << 20  # expcli writes ~8 MB groups (one step of every env, if larger)
_THRIFT_LIST_ITEMS = 100_000  # columns, row groups, metadata keys
_MIN_PYARROW = (14, 0, 1)
_MAGIC = b"PAR1"
_EXTENSION_KEY = b"ARROW:extension:name"
_SCHEMA_KEY = b"ARROW:schema"
HIDDEN_SCHEMA_KEY = b"expcli:arrow"
"""The key a stored Arrow schema that declares extension types is read under (hidden from
pyarrow, which would build them): as long as ``ARROW:schema``, so that the file's bytes
keep their places."""


def _bound(variable: str, default: int) -> int:
    text = os.environ.get(variable, "")
    return int(text) if text.isdigit() and int(text) > 0 else default


def max_footer_bytes() -> int:
    """The largest footer parsed: 16 MiB, or ``EXPCLI_MAX_PARQUET_FOOTER_BYTES``."""
    return _bound(FOOTER_VARIABLE, _FOOTER_BYTES)


def max_group_bytes() -> int:
    """The most bytes one row group may decode to: 256 MiB, or ``EXPCLI_MAX_ROW_GROUP_BYTES``."""
    return _bound(GROUP_VARIABLE, _GROUP_BYTES)


def pyarrow_parquet() -> Any:
    """``pyarrow.parquet``, once pyarrow is known to be installed and recent enough.

    Raises:
        MissingDependencyError: pyarrow is missing, or older than 14.0.1.
    """
    first = "pyarrow" not in sys.modules
    try:
        import pyarrow
        import pyarrow.parquet as pq
    except ImportError as e:
        raise MissingDependencyError("pyarrow", "parquet", "Parquet files") from e
    if first and "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:  # a user's own setting wins
        _choose_pool(pyarrow)
    version = tuple(int(p) for p in pyarrow.__version__.split(".")[:3] if p.isdigit())
    if version < _MIN_PYARROW:
        raise MissingDependencyError(
            "pyarrow>=14.0.1",
            "parquet",
            f"Parquet files (pyarrow {pyarrow.__version__} "
            "can run code from a file: CVE-2023-47248)",
        )
    return pq


def _choose_pool(pyarrow: Any) -> None:
    """Make jemalloc Arrow's pool (the system allocator where pyarrow lacks it).

    pyarrow's default, mimalloc, keeps the pages of buffers freed on another thread: a
    1.2 GB LeRobot folder read a slice at a time peaked at 276 MiB with it and 134 MiB with
    the system allocator. But glibc's heaps grow with the shards read: a folder of
    episode-ordered Parquet shards read back peaked 156, 270 and 346 MiB for 96, 480 and
    960 MiB of rows; with jemalloc 177, 166 and 171, as low as the system's on LeRobot
    frames (2026-11-30). Only when expcli imports pyarrow first: a program's pool is its own.
    """
    try:
        pool = pyarrow.jemalloc_memory_pool()
    except NotImplementedError:  # a wheel built without it (Windows)
        pool = pyarrow.system_memory_pool()
    pyarrow.set_memory_pool(pool)


def file_identity(stat: os.stat_result) -> tuple[int, ...]:
    """What tells one file from another put in its place, or changed: device, inode, size, time."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


class SecondHandle:
    """Another handle on a Parquet file opened and checked before, for a thread of its own.

    A ``ParquetFile`` is not read by two threads at once: a thread that decodes ahead
    opens its own. It is opened on the same file that was checked (``file_identity``): one
    put in its place since, or changed, is refused, never parsed. It offers the
    ``ParquetFile``'s members.
    """

    def __init__(self, path: Path, identity: tuple[int, ...]) -> None:
        """Open ``path`` again, if it is still the file of ``identity``.

        Raises:
            FormatError: It was replaced or changed, or is no more a Parquet file.
        """
        file = open(path, "rb")
        try:
            if file_identity(os.fstat(file.fileno())) != identity:
                raise FormatError("was replaced or changed while it was read", path=path)
            self._parquet = open_parquet(path, file)
        except BaseException:
            file.close()
            raise
        self._file = file

    def __getattr__(self, name: str) -> Any:
        return getattr(self._parquet, name)

    def close(self) -> None:
        """Close the handle and its file."""
        self._parquet.close()
        self._file.close()


def open_parquet(path: Path, file: IO[bytes] | None = None, **options: Any) -> Any:
    """``pyarrow.parquet.ParquetFile`` of ``path`` (or of ``file``, opened on it), bounded.

    Its ends and footer length are checked first, an Arrow schema naming an extension type
    is read by expcli (``_arrow_schema``) and hidden from pyarrow, or refused unparsed
    (``refuse_extension_types``), pyarrow parses the footer with limits on its strings and
    lists, and row groups that decode to too much are refused (``check_groups``). Pages are
    verified by their checksums.

    Raises:
        FormatError: Not a Parquet file, truncated, a footer too large, or one pyarrow
            cannot parse.
    """
    pq = pyarrow_parquet()
    footer = _footer_length(path)
    hidden = _hide_extension_types(path, footer)
    source: Any = str(path) if file is None else file
    if hidden is not None:  # the same bytes, but pyarrow sees no stored Arrow schema
        source = _Renamed(open(path, "rb") if file is None else file, *hidden)
    limit = max_footer_bytes()
    # pre_buffer (pyarrow's default) reads ahead a row group's columns for each read: for
    # tables of many small row groups read a column at a time, 3x slower (HF's 1,000 rows)
    options = {"page_checksum_verification": True, "pre_buffer": False, **options}
    try:
        parquet = pq.ParquetFile(
            source,
            thrift_string_size_limit=limit,
            thrift_container_size_limit=_THRIFT_LIST_ITEMS,
            **options,
        )
    except Exception as e:
        if hidden is not None:
            source.close()
        detail = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        if "size limit" in detail:
            detail = f"its footer holds a list of over {_THRIFT_LIST_ITEMS:,} items"
        raise FormatError(f"cannot read its footer ({detail}); it is damaged", path=path) from e
    if hidden is not None:
        parquet._close_source = True  # the renamed view is expcli's: closed with the file
    try:
        check_groups(parquet, path)
    except BaseException:
        parquet.close()
        raise
    return parquet


def _footer_length(path: Path) -> int:
    """The footer's length from the file's last 8 bytes, checked against the file and bound."""
    try:
        with open(path, "rb") as file:
            head = file.read(4)
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - 8))
            tail = file.read(8)
    except OSError as e:
        raise FormatError(f"cannot be read ({e.strerror or e})", path=path) from e
    if size < 12 or head != _MAGIC or tail[4:] != _MAGIC:
        raise FormatError(
            "not a Parquet file (no PAR1 at both ends); expected a Parquet file, complete",
            path=path,
        )
    footer = int.from_bytes(tail[:4], "little")
    if footer + 12 > size:
        raise FormatError(
            f"declares a footer of {footer:,} bytes in a file of {size:,}; it is truncated "
            "or damaged",
            path=path,
        )
    limit = max_footer_bytes()
    if footer > limit:
        raise FormatError(
            f"has a footer of {footer:,} bytes, more than the {limit:,} read; set "
            f"{FOOTER_VARIABLE} to read a larger one from a file you trust",
            path=path,
        )
    return footer


def _hide_extension_types(path: Path, footer: int) -> tuple[int, bytes] | None:
    """Where a stored Arrow schema declaring extension types is, and its key renamed.

    None: the footer declares none. Each declared type must be one expcli reads
    (``READ_EXTENSIONS``) at the top level; the key is renamed ``HIDDEN_SCHEMA_KEY`` so that
    pyarrow reads the columns as their storage types and builds nothing.

    Raises:
        FormatError: Another extension type, one in a nested column, or a damaged schema.
    """
    with open(path, "rb") as file:
        start = file.seek(-8 - footer, os.SEEK_END)
        data = file.read(footer)
    if not _declares_extension(data) or data.count(_SCHEMA_KEY) != 1:
        refuse_extension_types(path, footer)
        return None
    at = data.index(_SCHEMA_KEY)
    value = _thrift_string(data, at + len(_SCHEMA_KEY))
    for column, declared in extensions(value, path).items():
        if declared.name not in READ_EXTENSIONS:
            raise FormatError(
                f"its Arrow schema declares the extension type {declared.name!r} (column "
                f"{column!r}); expcli reads {', '.join(READ_EXTENSIONS)} and never builds "
                "types named by a file",
                path=path,
            )
    return start + at, HIDDEN_SCHEMA_KEY


def _thrift_string(data: bytes, at: int) -> bytes:
    """The value after a key-value's key in Thrift's compact encoding (b"": none there)."""
    if data[at : at + 1] != b"\x18":  # field 2 (value), a binary
        return b""
    length, shift, at = 0, 0, at + 1
    while at < len(data) and shift < 35:
        byte = data[at]
        length |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return data[at : at + length]
    return b""


def _declares_extension(data: bytes) -> bool:
    """Whether footer bytes name ``ARROW:extension:name``, raw or in base64 at any alignment."""
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + _EXTENSION_KEY)
        if encoded[4 if shift else 0 : -4] in data or _EXTENSION_KEY in data:
            return True
    return False


class _Renamed(io.RawIOBase):
    """A file read with the bytes at ``at`` replaced by ``patch`` (of the same length)."""

    def __init__(self, file: IO[bytes], at: int, patch: bytes) -> None:
        super().__init__()
        self._file, self._at, self._patch = file, at, patch

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def readinto(self, buffer: Any) -> int:
        first = self._file.tell()
        data = self._file.read(len(buffer))
        count = len(data)
        view = memoryview(buffer).cast("B")
        view[:count] = data
        low, high = max(first, self._at), min(first + count, self._at + len(self._patch))
        if low < high:
            view[low - first : high - first] = self._patch[low - self._at : high - self._at]
        return count

    def close(self) -> None:
        self._file.close()
        super().close()


def refuse_extension_types(path: Path, footer: int) -> None:
    """Refuse a file whose stored Arrow schema names an extension type, before pyarrow reads it.

    pyarrow builds the stored schema's extension types as it opens a file, running the
    deserialiser of any type registered in the process (by ray or ``datasets``, say); expcli
    builds none, so a file naming one is refused unread. The schema (``ARROW:schema``) is
    base64 text in the footer (``footer`` bytes before the last 8): each alignment of the
    key's encoding is looked for.
    """
    with open(path, "rb") as file:
        file.seek(-8 - footer, os.SEEK_END)
        data = file.read(footer)
    if _declares_extension(data):
        raise FormatError(
            "its Arrow schema declares an extension type; expcli writes only plain types "
            "and never builds types named by a file",
            path=path,
        )


def read_columns(path: Path, columns: list[str], max_rows: int | None = None) -> Any:
    """The ``columns`` of a small Parquet file (metadata tables) as one table, bounded.

    Raises:
        FormatError: As ``open_parquet``, or more rows than ``max_rows``.
        KeyError: A column is missing (as ``pyarrow.parquet.read_table`` raises).
    """
    parquet = open_parquet(path)
    try:
        names = parquet.schema_arrow.names
        for column in columns:
            if column not in names:
                raise KeyError(f"no column {column!r}")
        rows = parquet.metadata.num_rows
        if max_rows is not None and rows > max_rows:
            raise FormatError(f"holds {rows:,} rows; expected at most {max_rows:,}", path=path)
        return parquet.read(columns=columns, use_threads=False)
    finally:
        parquet.close()


_WIDTHS = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12}


def check_groups(parquet: Any, path: Path) -> None:
    """Refuse a file with a column chunk that decodes to more than ``max_group_bytes``.

    A chunk's decoded size is its values times their width where the type is of fixed
    width, whatever the encoding (a dictionary or a run of repeats decodes to that much);
    for bytes of varying length, the uncompressed size its footer gives.

    Raises:
        FormatError: As above, naming the row group and column.
    """
    meta = parquet.metadata
    schema = meta.schema
    widths = []
    for c in range(meta.num_columns):
        column = schema.column(c)
        kind = column.physical_type
        widths.append(column.length if kind == "FIXED_LEN_BYTE_ARRAY" else _WIDTHS.get(kind))
    limit = max_group_bytes()
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c, width in enumerate(widths):
            chunk = group.column(c)
            decoded = max(chunk.num_values * (width or 0), chunk.total_uncompressed_size)
            if decoded > limit:
                raise FormatError(
                    f"row group {g} decodes to {decoded:,} bytes in column "
                    f"{chunk.path_in_schema!r} ({chunk.num_values:,} values), more than the "
                    f"{limit:,} decoded at once; set {GROUP_VARIABLE} to read larger groups "
                    "from a file you trust",
                    path=path,
                )
