"""The table of formats and layouts: one row each, read by every dispatcher.

The registry's reads and writes, sniffing, the free-space estimate, the layouts' writes,
``conversion``'s stream formats, ``summary.latest`` and the command line's help texts all
ask this table; no other module lists format names or suffixes. A format defined outside
expcli becomes a row with ``register_format``::

    from expcli.formats.rows import FormatRow
    from expcli.formats.table import register_format

    unregister = register_format(FormatRow("json", (".json",), "JSON text", read, write))

Rows are looked up by name or suffix; later rows never shadow earlier ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from expcli.errors import ConfigError
from expcli.formats._builtin_rows import (
    FORMAT_ROWS,
    LAYOUT_ROWS,
    MINARI_FOLDER,
    SHARDED_FOLDER,
    read_foreign_hdf5,
)
from expcli.formats.layouts.kinds import Layout
from expcli.formats.rows import FormatRow, LayoutRow

__all__ = [
    "MINARI_FOLDER",
    "SHARDED_FOLDER",
    "FormatRow",
    "LayoutRow",
    "compressing_formats",
    "file_formats",
    "format_from_suffix",
    "format_row",
    "format_rows",
    "layout_row",
    "layout_rows",
    "listed",
    "read_foreign_hdf5",
    "register_format",
    "sniff_format",
    "source_help",
    "stream_formats",
    "suffix_help",
]

_ROWS: dict[str, FormatRow] = {row.name: row for row in FORMAT_ROWS}
_LAYOUTS: dict[Layout, LayoutRow] = {row.name: row for row in LAYOUT_ROWS}


def register_format(row: FormatRow) -> Callable[[], None]:
    """Add a format to the table, after those there are; returns what removes it again.

    Raises:
        ConfigError: A format of that name, or one of its suffixes, is in the table already,
            or a suffix is not lower case with its dot.
    """
    if row.name in _ROWS or row.name == MINARI_FOLDER:
        raise ConfigError(f"a format named {row.name!r} is registered already")
    for suffix in row.suffixes:
        if not suffix.startswith(".") or suffix != suffix.lower():
            raise ConfigError(f"format {row.name!r}: suffix {suffix!r} must be like '.ext'")
        taken = format_from_suffix(f"x{suffix}")
        if taken is not None:
            raise ConfigError(f"format {row.name!r}: suffix {suffix!r} is {taken}'s already")
    _ROWS[row.name] = row

    def unregister() -> None:
        if _ROWS.get(row.name) is row:
            del _ROWS[row.name]

    return unregister


def format_rows() -> tuple[FormatRow, ...]:
    """Every format, files first in table order, then folders."""
    rows = tuple(_ROWS.values())
    return tuple(r for r in rows if not r.folder) + tuple(r for r in rows if r.folder)


def format_row(name: str) -> FormatRow | None:
    """The row of the format named ``name`` (case-insensitive, a leading dot allowed)."""
    return _ROWS.get(name.lower().lstrip("."))


def file_formats() -> tuple[str, ...]:
    """Names of the formats of files (named by a suffix), in table order."""
    return tuple(r.name for r in format_rows() if not r.folder)


def compressing_formats() -> tuple[str, ...]:
    """Names of the formats whose writer takes a compression."""
    return tuple(r.name for r in format_rows() if r.compresses)


def shard_formats() -> tuple[str, ...]:
    """Names of the formats a sharded folder's shards may be in, the default (npz) first."""
    return tuple(r.name for r in format_rows() if r.shard)


def stream_formats() -> tuple[str, ...]:
    """Names of the formats written front to back to a stream, in help-text order."""
    rows = [r for r in format_rows() if r.streaming is not None]
    return tuple(r.name for r in sorted(rows, key=lambda r: r.streaming.rank if r.streaming else 0))


def format_from_suffix(path: str | os.PathLike[str]) -> str | None:
    """The format that the file name's suffix stands for (case-insensitive), or None."""
    suffix = Path(path).suffix.lower()
    return next((r.name for r in _ROWS.values() if suffix and suffix in r.suffixes), None)


def sniff_format(path: Path, head: bytes) -> str | None:
    """The first format, in table order, that a file's first bytes show; or None."""
    return next((r.name for r in _ROWS.values() if r.sniff and r.sniff(path, head)), None)


def layout_rows() -> tuple[LayoutRow, ...]:
    """Every layout, in ``Layout``'s order."""
    return tuple(_LAYOUTS.values())


def layout_row(layout: Layout) -> LayoutRow:
    """The row of ``layout``."""
    return _LAYOUTS[layout]


def listed(names: tuple[str, ...] | list[str], last: str = "or") -> str:
    """``a, b, c or d``: names as help texts list them."""
    if len(names) < 2:
        return "".join(names)
    return f"{', '.join(names[:-1])} {last} {names[-1]}"


def suffix_help() -> str:
    """``.pt, .npz, .csv, .h5``: the usual suffix of every file format."""
    return ", ".join(r.suffixes[0] for r in format_rows() if not r.folder)


def source_help() -> str:
    """``.pt, .npz, .csv, .h5, or a Minari or LeRobot folder``: what a command may read."""
    titles = [r.title for r in layout_rows() if r.read_folder is not None]
    return f"{suffix_help()}, or a {' or '.join(titles)} folder" if titles else suffix_help()
