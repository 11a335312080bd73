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
import os
import sys
from pathlib import Path
from typing import IO, Any

from expcli.errors import FormatError, MissingDependencyError

__all__ = [
    "FOOTER_VARIABLE",
    "GROUP_VARIABLE",
    "check_groups",
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
    if "pyarrow" not in sys.modules:
        # pyarrow's default, mimalloc, keeps the pages of freed buffers in each thread's
        # heap, and expcli frees each decoded row group once its rows are copied out, on a
        # reader thread: reading a 1.2 GB LeRobot folder a slice at a time peaked at 276 MiB
        # with mimalloc and 134 MiB with the system allocator, at the same speed. pyarrow
        # reads the variable once, when imported; a user's own setting wins.
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    try:
        import pyarrow
        import pyarrow.parquet as pq
    except ImportError as e:
        raise MissingDependencyError("pyarrow", "parquet", "Parquet files") from e
    version = tuple(int(p) for p in pyarrow.__version__.split(".")[:3] if p.isdigit())
    if version < _MIN_PYARROW:
        raise MissingDependencyError(
            "pyarrow>=14.0.1",
            "parquet",
            f"Parquet files (pyarrow {pyarrow.__version__} "
            "can run code from a file: CVE-2023-47248)",
        )
    return pq


def open_parquet(path: Path, file: IO[bytes] | None = None, **options: Any) -> Any:
    """``pyarrow.parquet.ParquetFile`` of ``path`` (or of ``file``, opened on it), bounded.

    Its ends and footer length are checked first, an Arrow schema naming an extension type
    is refused unparsed (``refuse_extension_types``), pyarrow parses the footer with limits
    on its strings and lists, and row groups that decode to too much are refused
    (``check_groups``). Pages are verified by their checksums.

    Raises:
        FormatError: Not a Parquet file, truncated, a footer too large, or one pyarrow
            cannot parse.
    """
    pq = pyarrow_parquet()
    footer = _footer_length(path)
    refuse_extension_types(path, footer)
    limit = max_footer_bytes()
    options = {"page_checksum_verification": True, **options}
    try:
        parquet = pq.ParquetFile(
            str(path) if file is None else file,
            thrift_string_size_limit=limit,
            thrift_container_size_limit=_THRIFT_LIST_ITEMS,
            **options,
        )
    except Exception as e:
        detail = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        if "size limit" in detail:
            detail = f"its footer holds a list of over {_THRIFT_LIST_ITEMS:,} items"
        raise FormatError(f"cannot read its footer ({detail}); it is damaged", path=path) from e
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
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + _EXTENSION_KEY)
        inner = encoded[4 if shift else 0 : -4]
        if inner in data or _EXTENSION_KEY in data:
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
