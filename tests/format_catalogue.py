"""The formats and layouts the tests run over, derived from the format table.

As Gymnasium's ``TESTING_SPACES``: the one place that lists the cases tests parametrize
over. Nothing here lists formats by name (``SKRL_EVERY_ROW`` excludes one, saying why).
Every list is computed from ``expcli.formats.table``'s objects: by what they say
(``suffixes``, ``compressions``, ``shards``, ``streams``, ``stream_note``, ``space``, a
layout's ``formats`` and ``storages``) or, where no attribute says it, by what they do with
a small dataset written and read back (``frames_once``). Adding a format to the table adds
it to every test that takes these lists. A test that cannot take some format says why
beside an exclusion; it never lists the others.

Each constant is its function's value at import. The functions read the table again when
called, so a format registered at run time is in them
(``tests/formats/test_format_catalogue.py``). String cases need no ids (pytest shows them,
joined by ``-`` for pairs: ``test_x[hdf5-gzip]``).
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import numpy as np

from expcli.formats import table
from expcli.formats.rows import Format, Layout, SpaceEstimate

__all__ = [
    "BINARY_FORMATS",
    "COMPRESSIONS",
    "FILE_FORMATS",
    "READ_FORMATS",
    "LAYOUT_DEFAULT_FILES",
    "LAYOUT_FILES",
    "LAYOUT_FOLDERS",
    "NAMED_FILES",
    "OTHER_COMPRESSIONS",
    "SHARD_FORMATS",
    "SKRL_EVERY_ROW",
    "SKRL_FORMATS",
    "STREAM_FORMATS",
    "SUFFIXES",
    "WHOLE_STREAMS",
    "binary_formats",
    "companion_names",
    "compressions",
    "file_formats",
    "read_formats",
    "frames_once",
    "layout_files",
    "layout_folders",
    "layout_formats",
    "named_files",
    "once_forms",
    "other_compressions",
    "shard_formats",
    "stream_formats",
    "suffix_of",
    "suffixes",
    "whole_streams",
]


def _files() -> tuple[Format, ...]:
    """The formats of files that expcli writes.

    One it only reads (Arrow IPC) is tested on its own (``tests/formats/test_foreign_tables.py``).
    """
    return tuple(f for f in table.formats_in_order() if not f.folder and f.writes)


def read_formats() -> tuple[str, ...]:
    """Every format of files that expcli reads, those it only reads (Arrow IPC) too."""
    return tuple(f.name for f in table.formats_in_order() if not f.folder)


def file_formats() -> tuple[str, ...]:
    """Every format of files (named by a suffix), in the table's order."""
    return tuple(f.name for f in _files())


def suffix_of(name: str) -> str:
    """The usual suffix of the file format ``name``, with its dot (``hdf5``: ``.h5``)."""
    fmt = table.format_named(name)
    assert fmt is not None and not fmt.folder, name
    return fmt.suffixes[0]


def suffixes() -> tuple[str, ...]:
    """The usual suffix of every file format, in ``file_formats``' order."""
    return tuple(f.suffixes[0] for f in _files())


def named_files() -> tuple[tuple[str, str], ...]:
    """``(suffix, format)``: every suffix of every file format (``(".hdf5", "hdf5")`` too)."""
    return tuple((suffix, f.name) for f in _files() for suffix in f.suffixes)


def companion_names() -> tuple[str, ...]:
    """The names of the files a write of ``a<usual suffix>`` also makes (a CSV's sidecar)."""
    return tuple(c.name for f in _files() for c in f.companions(Path(f"a{f.suffixes[0]}")))


def binary_formats() -> tuple[str, ...]:
    """The file formats whose cells are not text (their ``space`` is not ``TEXT``)."""
    return tuple(f.name for f in _files() if f.space is not SpaceEstimate.TEXT)


def compressions() -> tuple[tuple[str, str], ...]:
    """``(format, compression)``: every compression each file format's writer takes."""
    return tuple((f.name, c) for f in _files() for c in f.compressions)


def other_compressions() -> tuple[tuple[str, str], ...]:
    """``(format, compression)``: each compression other than the format's default (its first)."""
    return tuple((f.name, c) for f in _files() for c in f.compressions[1:])


def shard_formats() -> tuple[str, ...]:
    """The formats a sharded folder's shards may be in, the default first."""
    return table.shard_formats()


def stream_formats() -> tuple[str, ...]:
    """The formats written front to back to a stream (``convert -o -``)."""
    return table.stream_formats()


def whole_streams() -> tuple[str, ...]:
    """The stream formats whose stream leaves nothing out (no ``stream_note``): binary."""
    return tuple(name for name in table.stream_formats() if not _named(name).stream_note)


def layout_files(*, default_only: bool = False) -> tuple[tuple[str, str], ...]:
    """``(layout, format)``: each file format a foreign layout's own writer writes.

    ``default_only``: the layout's default format alone, one pair per layout.
    """
    return tuple(
        (layout.name.value, fmt)
        for layout in table.layouts_in_order()
        if layout.writes and not layout.reads_folders
        for fmt in layout.formats[: 1 if default_only else None]
    )


def layout_folders() -> tuple[tuple[str, str], ...]:
    """``(layout, storage)``: each storage a folder layout's writer keeps its data in."""
    return tuple(
        (layout.name.value, storage)
        for layout in table.layouts_in_order()
        if layout.writes and layout.reads_folders
        for storage in layout.storages
    )


def layout_formats(layout: Layout) -> tuple[str, ...]:
    """The file formats ``layout`` is written in, its default first."""
    return table.layout_named(layout).formats


def once_forms() -> dict[str, str]:
    """File format -> how it stores next observations once (``"sparse"``, ``"nulls"``).

    Found by writing a small dataset whose next observations are the next rows' (64-byte
    cells) with ``frames="once"`` and opening it: a format whose file then reports none
    stored once (CSV: text, every cell written) is not in it.
    """
    return dict(_once_forms(file_formats()))


def frames_once() -> tuple[str, ...]:
    """The file formats that store next observations once, in the table's order."""
    return tuple(once_forms())


@functools.cache
def _once_forms(names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``once_forms`` for the formats ``names`` (cached: the table's formats are the key)."""
    from expcli.formats import open_lazy, write_dataset
    from expcli.formats.dataset import Dataset
    from expcli.formats.frames import stored_once

    observations = np.arange(3 * 64, dtype=np.uint8).reshape(3, 1, 64)
    dataset = Dataset(
        {"observations": observations, "next_observations": np.roll(observations, -1, 0)}
    )
    found = []
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            path = write_dataset(dataset, Path(folder) / f"probe{suffix_of(name)}", frames="once")
            lazy, close = open_lazy(path)
            try:
                forms = {once.form for once in stored_once(lazy.tensors).values()}
            finally:
                close()
            if forms:
                found.append((name, forms.pop()))
    return tuple(found)


def _named(name: str) -> Format:
    fmt = table.format_named(name)
    assert fmt is not None, name
    return fmt


FILE_FORMATS = file_formats()
"""Every file format's name: ``pt``, ``npz``, ``csv``, ``hdf5``, ``parquet``, ..."""

READ_FORMATS = read_formats()
"""Every file format read, those only read too: ``FILE_FORMATS`` and ``ipc``."""

SUFFIXES = suffixes()
"""Every file format's usual suffix: ``.pt``, ``.npz``, ``.csv``, ``.h5``, ``.parquet``, ..."""

NAMED_FILES = named_files()
"""``(suffix, format)`` for every suffix: ``(".pt", "pt")``, ``(".pth", "pt")``, ..."""

BINARY_FORMATS = binary_formats()
"""The file formats that do not store text: ``pt``, ``npz``, ``hdf5``, ``parquet``, ..."""

COMPRESSIONS = compressions()
"""``(format, compression)`` pairs: ``("hdf5", "gzip")``, ``("parquet", "zstd")``, ..."""

OTHER_COMPRESSIONS = other_compressions()
"""``(format, compression)`` but the defaults: ``("hdf5", "gzip")``, ``("parquet", "snappy")``..."""

SHARD_FORMATS = shard_formats()
"""The shard formats of a sharded folder: ``npz``, ``parquet``, ..."""

STREAM_FORMATS = stream_formats()
"""The formats written to a stream: ``npz``, ``pt``, ``csv``, ..."""

WHOLE_STREAMS = whole_streams()
"""The stream formats whose stream keeps everything: ``npz``, ``pt``, ..."""

LAYOUT_FILES = layout_files()
"""``(layout, format)``: ``("skrl", "pt")``, ``("tianshou", "hdf5")``, ..."""

LAYOUT_DEFAULT_FILES = layout_files(default_only=True)
"""``(layout, its default format)``: ``("skrl", "pt")``, ``("tianshou", "hdf5")``, ..."""

LAYOUT_FOLDERS = layout_folders()
"""``(layout, storage)``: ``("minari", "hdf5")``, ``("lerobot", "video")``, ..."""

SKRL_FORMATS = layout_formats(Layout.SKRL)
"""What skrl's ``Memory.save`` writes (the skrl layout's formats): ``pt``, ``npz``, ``csv``."""

SKRL_EVERY_ROW = tuple(fmt for fmt in SKRL_FORMATS if fmt != "csv")
"""The skrl formats whose exports hold every row, unwritten ones too (skrl's CSV export holds
only the written transitions, one line each: the one exclusion by name here, skrl's doing)."""
