"""The manifest of a sharded dataset folder: what the folder holds, replaced atomically.

``manifest.json`` is the dataset's metadata object (``Dataset.header()``: schema
``expcli/1``, or ``expcli/2`` once a shard stores next observations once; tensor specs,
``num_envs``, ``memory_size`` = rows of all shards together,
the circular state and the user metadata) plus ``shards``: one entry per shard file, in
row order, ``{"file", "rows", "bytes", "crc32"}``, plus ``"missing"``: the float tensors the
shard lacks because they were created after it was written (``collect --infos`` meets an
info key for the first time), read as NaN, as an in-memory run's rows before that step
are. A reader trusts the manifest alone:
a shard file it does not list (a writer killed between renaming a shard and replacing
the manifest) is ignored, and overwritten by the next shard of that name.

A folder may come from anyone, so the manifest is read as hostile: it is opened only as a
regular file of the folder (not a link, a pipe or a device), parsed as JSON (never matched
as bytes: a compact or reordered manifest is the same manifest), and each shard entry must
name a ``shard-NNNNNN.npz`` of the folder once, with a row count of at least one; the
reader (``sharded``) then checks every number against the shard files themselves.

``shard_format`` says what the shards are: ``npz`` (the default, and what a manifest
without the key means) or another format of the table that can be a shard (``parquet``:
``shard-NNNNNN.parquet``, each a complete expcli Parquet file). A folder's shards are all
of its one format: a manifest listing another is refused.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from expcli.errors import ConfigError, FormatError
from expcli.files.atomic import atomic_write
from expcli.formats._guards import MAX_METADATA_BYTES, brief, open_inside
from expcli.formats.header import encode_header, parse_header
from expcli.formats.lazy import SLICE_BYTES
from expcli.formats.rows import Format
from expcli.formats.table import format_named, formats_in_order, shard_formats
from expcli.spec import FRAMES_SCHEMA, SCHEMA

__all__ = [
    "DEFAULT_SHARD_FORMAT",
    "FORMAT_KEY",
    "MANIFEST",
    "Manifest",
    "ShardEntry",
    "file_crc32",
    "find_shard_format",
    "has_manifest",
    "is_folder_target",
    "is_sharded_folder",
    "shard_name",
    "stray_shards",
]

MANIFEST = "manifest.json"
_CRC = re.compile(r"[0-9a-f]{8}")
FORMAT_KEY = "shard_format"
"""The manifest's key naming its shards' format (absent: ``npz``)."""
DEFAULT_SHARD_FORMAT = "npz"
_SCHEMAS = (SCHEMA, FRAMES_SCHEMA)  # the second: some shard stores next observations once


def find_shard_format(name: str | None) -> Format:
    """The format called ``name`` (None: ``DEFAULT_SHARD_FORMAT``) if it can be a shard.

    Raises:
        ConfigError: No format of the table that can be a shard is called ``name``.
    """
    found = format_named(name or DEFAULT_SHARD_FORMAT)
    if found is None or not found.shards:
        raise ConfigError(f"--shard-format takes {', '.join(shard_formats())}; got {name!r}")
    return found


def shard_name(index: int, shard: Format) -> str:
    """``shard-000042.npz``: the file name of the shard numbered ``index``."""
    return f"shard-{index:06d}{shard.suffixes[0]}"


def _shard_name() -> re.Pattern[str]:
    """A shard's file name in any shard format (a billion shards; no name too long to open)."""
    shards = [f for f in formats_in_order() if f.shards]
    suffixes = "|".join(re.escape(suffix) for f in shards for suffix in f.suffixes)
    return re.compile(rf"shard-(\d{{6,9}})({suffixes})")


def is_folder_target(path: str | os.PathLike[str]) -> bool:
    """Whether an output ``path`` names a sharded folder: no suffix, or such a folder."""
    return not Path(path).suffix or is_sharded_folder(path)


def is_sharded_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder holding a ``manifest.json`` of schema ``expcli/1`` or ``/2``.

    The manifest is parsed (a regular file of the folder, within the metadata limit); any
    layout of the JSON text counts.
    """
    if not Path(path).is_dir():
        return False
    try:
        text = _read_manifest(Path(path) / MANIFEST)
        header = parse_header(text, Path(path) / MANIFEST, MANIFEST)
    except (OSError, FormatError):
        return False
    return header.get("schema") in _SCHEMAS


def has_manifest(path: str | os.PathLike[str]) -> bool:
    """Whether the folder ``path`` holds an entry named ``manifest.json``, whatever it is.

    Such a folder claims to be a sharded dataset: reading it says what is wrong with the
    manifest, rather than that it is not some other kind of folder.
    """
    return os.path.lexists(Path(path) / MANIFEST)


def _read_manifest(path: Path) -> bytes:
    """The manifest's text, read from a regular file within the metadata limit.

    Raises:
        FileNotFoundError: There is none.
        FormatError: It is not a regular file, or too large.
    """
    with open_inside(path) as f:
        text = f.read(MAX_METADATA_BYTES + 1)
    if len(text) > MAX_METADATA_BYTES:
        raise FormatError(f"larger than {MAX_METADATA_BYTES:,} bytes", path=path)
    return text


@dataclass(frozen=True, slots=True)
class ShardEntry:
    """One shard file: its name, rows, size in bytes, CRC-32 and missing tensors.

    ``missing`` names the float tensors of the folder that the shard lacks (read as NaN).
    """

    file: str
    rows: int
    bytes: int
    crc32: str
    missing: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "file": self.file,
            "rows": self.rows,
            "bytes": self.bytes,
            "crc32": self.crc32,
        }
        if self.missing:
            entry["missing"] = list(self.missing)
        return entry


@dataclass
class Manifest:
    """A folder's header (the dataset metadata object) and its shards, in row order."""

    header: dict[str, Any]
    shards: list[ShardEntry] = field(default_factory=list)

    @property
    def rows(self) -> int:
        """Rows of every shard together."""
        return sum(entry.rows for entry in self.shards)

    @property
    def shard_format(self) -> str:
        """The format of the folder's shards (``npz`` unless the manifest names another)."""
        return str(self.header.get(FORMAT_KEY, DEFAULT_SHARD_FORMAT))

    @property
    def shard(self) -> Format:
        """The format object of the folder's shards (``load`` checked that it is one)."""
        return find_shard_format(self.shard_format)

    def next_index(self, folder: Path) -> int:
        """A shard number above every listed one and every shard file in the folder."""
        numbers = [_number(e.file) for e in self.shards]
        numbers += [_number(p.name) for p in stray_shards(folder, ())]
        return max(numbers, default=-1) + 1

    def strays(self, folder: Path) -> list[Path]:
        """Shard files of ``folder`` the manifest does not list (a writer killed in between)."""
        return stray_shards(folder, {e.file for e in self.shards})

    @classmethod
    def load(cls, folder: Path) -> Manifest:
        """Read ``folder/manifest.json``.

        Raises:
            FormatError: The manifest is missing, too large, not JSON, or its shard list
                is malformed (a name outside the folder, a negative count).
        """
        path = folder / MANIFEST
        try:
            text = _read_manifest(path)
        except FileNotFoundError:
            raise FormatError(
                f"no {MANIFEST}; expected a sharded dataset folder", path=folder
            ) from None
        header = parse_header(text, path, MANIFEST)
        if header.get("schema") not in _SCHEMAS:
            raise FormatError(
                f"schema is {brief(header.get('schema'))}; expected {SCHEMA!r} or "
                f"{FRAMES_SCHEMA!r}",
                path=path,
                key="schema",
            )
        kind = header.get(FORMAT_KEY, DEFAULT_SHARD_FORMAT)
        if kind not in shard_formats():
            raise FormatError(
                f"names shard format {brief(kind)}; expected one of {', '.join(shard_formats())}",
                path=path,
                key=FORMAT_KEY,
            )
        raw = header.pop("shards", None)
        if not isinstance(raw, list):
            raise FormatError("lacks a 'shards' list", path=path, key="shards")
        shards = []
        names: set[str] = set()
        for item in raw:
            entry = _entry(item)
            if entry is None:
                raise FormatError(
                    f"malformed shard entry {brief(item)}; expected "
                    '{"file": "shard-NNNNNN.npz|parquet", "rows": n >= 1, "bytes": n, '
                    '"crc32": "8 hex digits"}',
                    path=path,
                    key="shards",
                )
            if not entry.file.endswith("." + kind):
                raise FormatError(
                    f"lists {entry.file} in a folder of {kind} shards; a folder never mixes "
                    "shard formats",
                    path=path,
                    key="shards",
                )
            if entry.file in names:
                raise FormatError(
                    f"lists {entry.file} twice; expected each shard once", path=path, key="shards"
                )
            names.add(entry.file)
            shards.append(entry)
        return cls(header, shards)

    def save(self, folder: Path) -> None:
        """Replace ``folder/manifest.json`` atomically.

        Temporary file, fsync, rename, fsync of the folder.
        """
        text = encode_header(
            {**self.header, "shards": [e.to_json() for e in self.shards]}, folder, indent=1
        )
        with atomic_write(folder / MANIFEST, "w") as f:
            f.write(text)


def _entry(item: Any) -> ShardEntry | None:
    if not isinstance(item, dict):
        return None
    file, rows, size, crc = (item.get(k) for k in ("file", "rows", "bytes", "crc32"))
    missing = item.get("missing", [])
    if not (isinstance(file, str) and _shard_name().fullmatch(file)):
        return None
    if not (type(rows) is int and rows >= 1 and type(size) is int and size >= 0):
        return None  # a writer never lists a shard of no rows
    if not (isinstance(crc, str) and _CRC.fullmatch(crc)):
        return None
    if not (isinstance(missing, list) and all(isinstance(name, str) for name in missing)):
        return None
    return ShardEntry(file, int(rows), int(size), crc, tuple(missing))


def _number(name: str) -> int:
    match = _shard_name().fullmatch(name)
    return int(match.group(1)) if match else -1


def stray_shards(folder: Path, listed: Collection[str]) -> list[Path]:
    """The shard files of ``folder`` (any shard format) whose names are not in ``listed``."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    pattern = _shard_name()
    return [folder / n for n in names if pattern.fullmatch(n) and n not in listed]


def file_crc32(path: Path, chunk: int = SLICE_BYTES) -> str:
    """The CRC-32 of a file's bytes, read chunk by chunk."""
    crc = 0
    with open_inside(path) as f:
        while block := f.read(chunk):
            crc = zlib.crc32(block, crc)
    return f"{crc:08x}"
