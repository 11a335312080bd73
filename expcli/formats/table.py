"""The table of formats and layouts: one object each, imported when first asked for.

As Minari keeps its storages: a name stands for ``"module:attr"``, the object (a
``rows.Format`` or a ``rows.FileLayout``) that the module holds, imported on first use.
The registry's reads and writes, sniffing, the free-space estimate, the layouts' writes,
``conversion``'s stream formats, ``summary.latest`` and the command line's help texts all
ask this table; no other module lists format names or suffixes. A format defined outside
expcli comes from an installed package that names it in the entry-point group
``expcli.formats`` (``ENTRY_POINT_GROUP``), read once, when a name or a suffix is not
found among those known, or every format is listed::

    [project.entry-points."expcli.formats"]
    json = "my_package.json_file:JSON_FILE"  # a ``rows.Format`` object named "json"

or is added at run time with ``register_format``::

    from expcli.formats.table import register_format

    unregister = register_format(JsonFile())  # a ``rows.Format``

Formats are looked up by name or suffix, in the table's order; later ones never shadow
earlier ones.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from expcli.errors import ConfigError
from expcli.formats.rows import FileLayout, Format, Layout

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = [
    "ENTRY_POINT_GROUP",
    "MINARI_FOLDER",
    "OWN_FILE_FORMATS",
    "SHARDED_FOLDER",
    "compressing_formats",
    "compressing_shard_formats",
    "file_formats",
    "foreign_hdf5_titles",
    "format_from_suffix",
    "format_named",
    "formats_in_order",
    "layout_named",
    "layouts_in_order",
    "listed",
    "read_foreign_hdf5",
    "register_format",
    "shard_formats",
    "sniff_format",
    "source_help",
    "stream_formats",
    "suffix_help",
]

SHARDED_FOLDER = "folder"
"""The format of a sharded dataset folder (shards and a ``manifest.json``)."""

MINARI_FOLDER = Layout.MINARI.value
"""What ``source_format`` calls another folder: a Minari dataset, the layout kept in folders."""

_BUILTIN = "expcli.formats.builtin"
_FORMATS: dict[str, str | Format] = {
    "pt": f"{_BUILTIN}.pt_file:PT_FILE",
    "npz": f"{_BUILTIN}.npz_file:NPZ_FILE",
    "csv": f"{_BUILTIN}.csv_file:CSV_FILE",
    "hdf5": f"{_BUILTIN}.hdf5_file:HDF5_FILE",
    "parquet": f"{_BUILTIN}.parquet_file:PARQUET_FILE",
    "ipc": f"{_BUILTIN}.ipc_file:IPC_FILE",
    SHARDED_FOLDER: f"{_BUILTIN}.sharded_folder:FOLDER_FORMAT",
}
"""Each format by name, in the order messages list them (and sniffing tries them)."""

OWN_FILE_FORMATS: tuple[str, ...] = tuple(name for name in _FORMATS if name != SHARDED_FOLDER)
"""expcli's own file formats, named without importing them (``file_formats()`` adds others)."""

ENTRY_POINT_GROUP = "expcli.formats"
"""Where installed packages name their formats: ``NAME = "module:attr"``, a ``rows.Format``."""

_plugins_read = False

_LAYOUTS: dict[Layout, str | FileLayout] = {
    Layout.EXPCLI: "expcli.formats.rows:EXPCLI_LAYOUT",
    Layout.SKRL: f"{_BUILTIN}.skrl_export:SKRL_EXPORT",
    Layout.TIANSHOU: f"{_BUILTIN}.tianshou_buffer:TIANSHOU_BUFFER",
    Layout.MINARI: f"{_BUILTIN}.minari_dataset:MINARI_DATASET",
    Layout.D4RL: f"{_BUILTIN}.d4rl_file:D4RL_FILE",
    Layout.LEROBOT: f"{_BUILTIN}.lerobot_dataset:LEROBOT_DATASET",
}
"""Each layout, in ``Layout``'s order; HDF5 files are offered to them in this order."""


def _imported(entry: str) -> object:
    """The object ``"module:attr"`` names, its module imported."""
    module, _, attr = entry.partition(":")
    found: object = getattr(importlib.import_module(module), attr)
    return found


def _read_plugins() -> None:
    """Add, once, the formats installed packages name in ``ENTRY_POINT_GROUP``.

    After expcli's own, in the order found; a name the table has already is left out.
    """
    global _plugins_read
    if _plugins_read:
        return
    _plugins_read = True
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if point.name not in _FORMATS and point.name != MINARI_FOLDER:
            _FORMATS[point.name] = point.value


def _format(name: str) -> Format:
    """The format of the table called ``name``, imported (and kept) on first use.

    Raises:
        ConfigError: What an entry point names is not a format of that name.
    """
    entry = _FORMATS[name]
    if isinstance(entry, str):
        found = _imported(entry)
        if not isinstance(found, Format) or found.name != name:
            raise ConfigError(f"{entry} (format {name!r}) is not a Format named {name!r}")
        _FORMATS[name] = entry = found
    return entry


def _layout(name: Layout) -> FileLayout:
    """The layout of the table called ``name``, imported (and kept) on first use."""
    entry = _LAYOUTS[name]
    if isinstance(entry, str):
        found = _imported(entry)
        if not isinstance(found, FileLayout):
            raise ConfigError(f"{entry} (layout {name}) is not a FileLayout")
        _LAYOUTS[name] = entry = found
    return entry


def register_format(fmt: Format) -> Callable[[], None]:
    """Add a format to the table, after those there are; returns what removes it again.

    Raises:
        ConfigError: A format of that name, or one of its suffixes, is in the table already,
            or a suffix is not lower case with its dot.
    """
    _read_plugins()
    if fmt.name in _FORMATS or fmt.name == MINARI_FOLDER:
        raise ConfigError(f"a format named {fmt.name!r} is registered already")
    for suffix in fmt.suffixes:
        if not suffix.startswith(".") or suffix != suffix.lower():
            raise ConfigError(f"format {fmt.name!r}: suffix {suffix!r} must be like '.ext'")
        taken = format_from_suffix(f"x{suffix}")
        if taken is not None:
            raise ConfigError(f"format {fmt.name!r}: suffix {suffix!r} is {taken}'s already")
    _FORMATS[fmt.name] = fmt

    def unregister() -> None:
        if _FORMATS.get(fmt.name) is fmt:
            del _FORMATS[fmt.name]

    return unregister


def _all(installed: bool = True) -> tuple[Format, ...]:
    if installed:
        _read_plugins()
    names = list(_FORMATS) if installed else [*OWN_FILE_FORMATS, SHARDED_FOLDER]
    return tuple(_format(name) for name in names)


def formats_in_order(*, installed: bool = True) -> tuple[Format, ...]:
    """Every format, files first in table order, then folders.

    ``installed``: with the formats of installed packages and those registered (else
    expcli's own only, and no entry point is read).
    """
    every = _all(installed)
    return tuple(f for f in every if not f.folder) + tuple(f for f in every if f.folder)


def format_named(name: str) -> Format | None:
    """The format named ``name`` (case-insensitive, a leading dot allowed), or None."""
    key = name.lower().lstrip(".")
    if key not in _FORMATS:
        _read_plugins()
    return _format(key) if key in _FORMATS else None


def file_formats() -> tuple[str, ...]:
    """Names of the formats of files (named by a suffix), in table order."""
    return tuple(f.name for f in formats_in_order() if not f.folder)


def compressing_formats() -> tuple[str, ...]:
    """Names of the formats whose writer takes a compression."""
    return tuple(f.name for f in formats_in_order() if f.compresses)


def compressing_shard_formats() -> tuple[str, ...]:
    """Names of the shard formats whose writer takes a compression."""
    return tuple(f.name for f in formats_in_order() if f.shards and f.compresses)


def shard_formats() -> tuple[str, ...]:
    """Names of the formats a sharded folder's shards may be in, the default (npz) first."""
    return tuple(f.name for f in formats_in_order() if f.shards)


def stream_formats(*, installed: bool = True) -> tuple[str, ...]:
    """Names of the formats written front to back to a stream, in help-text order.

    ``installed``: as ``formats_in_order``'s.
    """
    streams = [f for f in formats_in_order(installed=installed) if f.streams]
    return tuple(f.name for f in sorted(streams, key=lambda f: f.stream_rank))


def _first(test: Callable[[Format], bool]) -> str | None:
    """The name of the first format, in table order, that passes ``test``; or None.

    The installed packages' formats are read only when none of those known passes: a
    process that names a built-in format spends no time on entry points.
    """
    found = next((name for name in list(_FORMATS) if test(_format(name))), None)
    if found is None and not _plugins_read:
        _read_plugins()
        return _first(test)
    return found


def format_from_suffix(path: str | os.PathLike[str]) -> str | None:
    """The format that the file name's suffix stands for (case-insensitive), or None."""
    suffix = Path(path).suffix.lower()
    return _first(lambda f: bool(suffix) and suffix in f.suffixes)


def sniff_format(path: Path, head: bytes) -> str | None:
    """The first format, in table order, that a file's first bytes show; or None."""
    return _first(lambda f: f.sniff(path, head))


def layouts_in_order() -> tuple[FileLayout, ...]:
    """Every layout, in ``Layout``'s order."""
    return tuple(_layout(name) for name in list(_LAYOUTS))


def layout_named(layout: Layout) -> FileLayout:
    """The object of ``layout``."""
    return _layout(layout)


def foreign_hdf5_titles() -> str:
    """``tianshou, Minari, D4RL``: the layouts an HDF5 file without expcli's metadata may be."""
    return ", ".join(
        layout.title or layout.name
        for layout in layouts_in_order()
        if type(layout).read_hdf5 is not FileLayout.read_hdf5
    )


def read_foreign_hdf5(
    h5: Any, path: Path, num_envs: int | None = None, *, lazy: bool = False
) -> Dataset | None:
    """Read an open HDF5 file of a foreign layout, or return None when none matches.

    Tried in the table's order: tianshou (a ``_meta`` group and a ``maxsize`` attribute),
    Minari (only ``episode_<id>`` groups at the root), D4RL (``observations``, ``actions``
    and ``rewards`` datasets at the root).

    Args:
        h5: An ``h5py.File`` open for reading, without expcli's root attribute.
        path: The file's path, for messages (and a Minari ``metadata.json`` beside it).
        num_envs: For D4RL files only: split the rows into this many equal env columns,
            env by env (as ``write_layout`` lays them out); default one column.
        lazy: Leave the rows of D4RL, tianshou and Minari files in the file as ``LazyRows``,
            read a slice at a time; ``h5`` must then stay open while they are read.

    Raises:
        FormatError: The file is of a recognised layout but malformed, or holds data that
            would have to be unpickled or decoded.
        SchemaError: Its arrays disagree in length or shape.
        ConfigError: ``num_envs`` does not divide a D4RL file's rows.
    """
    for layout in layouts_in_order():
        found = layout.read_hdf5(h5, path, num_envs, lazy)
        if found is not None:
            return found
    return None


def listed(names: tuple[str, ...] | list[str], last: str = "or") -> str:
    """``a, b, c or d``: names as help texts list them."""
    if len(names) < 2:
        return "".join(names)
    return f"{', '.join(names[:-1])} {last} {names[-1]}"


def suffix_help() -> str:
    """``.pt, .npz, .csv, .h5``: the usual suffix of every file format."""
    return ", ".join(f.suffixes[0] for f in formats_in_order() if not f.folder)


def source_help() -> str:
    """``.pt, .npz, .csv, .h5, or a Minari or LeRobot folder``: what a command may read."""
    titles = [layout.title for layout in layouts_in_order() if layout.reads_folders]
    return f"{suffix_help()}, or a {' or '.join(titles)} folder" if titles else suffix_help()
