"""The manifest of a sharded dataset folder: what the folder holds, replaced atomically.

``manifest.json`` is the dataset's metadata object (``Dataset.header()``: schema
``expcli/1``, tensor specs, ``num_envs``, ``memory_size`` = rows of all shards together,
the circular state and the user metadata) plus ``shards``: one entry per shard file, in
row order, ``{"file", "rows", "bytes", "crc32"}``, plus ``"missing"``: the float tensors the
shard lacks because they were created after it was written (``collect --infos`` meets an
info key for the first time), read as NaN, as an in-memory run's rows before that step
are. A reader trusts the manifest alone:
a shard file it does not list (a writer killed between renaming a shard and replacing
the manifest) is ignored, and overwritten by the next shard of that name.
"""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from expcli.errors import FormatError
from expcli.formats._atomic import atomic_write
from expcli.formats._guards import MAX_METADATA_BYTES, brief
from expcli.formats.header import encode_header, parse_header
from expcli.spec import SCHEMA

__all__ = [
    "MANIFEST",
    "Manifest",
    "ShardEntry",
    "file_crc32",
    "is_folder_target",
    "is_sharded_folder",
    "shard_name",
]

MANIFEST = "manifest.json"
_SHARD_NAME = re.compile(r"shard-\d{6,}\.npz")


def shard_name(index: int) -> str:
    """``shard-000042.npz``: the file name of the shard numbered ``index``."""
    return f"shard-{index:06d}.npz"


def is_folder_target(path: str | os.PathLike[str]) -> bool:
    """Whether an output ``path`` names a sharded folder: no suffix, or such a folder."""
    return not Path(path).suffix or is_sharded_folder(path)


def is_sharded_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder holding a ``manifest.json`` of schema ``expcli/1``."""
    manifest = Path(path) / MANIFEST
    if not (Path(path).is_dir() and manifest.is_file()):
        return False
    try:
        with open(manifest, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return f'"schema": "{SCHEMA}"'.encode() in head


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

    def next_index(self, folder: Path) -> int:
        """A shard number above every listed one and every shard file in the folder."""
        numbers = [int(e.file[6:-4]) for e in self.shards]
        numbers += [
            int(p.name[6:-4]) for p in folder.glob("shard-*.npz") if _SHARD_NAME.fullmatch(p.name)
        ]
        return max(numbers, default=-1) + 1

    @classmethod
    def load(cls, folder: Path) -> Manifest:
        """Read ``folder/manifest.json``.

        Raises:
            FormatError: The manifest is missing, too large, not JSON, or its shard list
                is malformed (a name outside the folder, a negative count).
        """
        path = folder / MANIFEST
        try:
            with open(path, "rb") as f:
                text = f.read(MAX_METADATA_BYTES + 1)
        except FileNotFoundError:
            raise FormatError(
                f"no {MANIFEST}; expected a sharded dataset folder", path=folder
            ) from None
        if len(text) > MAX_METADATA_BYTES:
            raise FormatError(f"larger than {MAX_METADATA_BYTES:,} bytes", path=path)
        header = parse_header(text, path, MANIFEST)
        raw = header.pop("shards", None)
        if not isinstance(raw, list):
            raise FormatError("lacks a 'shards' list", path=path, key="shards")
        shards = []
        for item in raw:
            entry = _entry(item)
            if entry is None:
                raise FormatError(
                    f"malformed shard entry {brief(item)}; expected "
                    '{"file": "shard-NNNNNN.npz", "rows": n, "bytes": n, "crc32": "hex"}',
                    path=path,
                    key="shards",
                )
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
    if not (isinstance(file, str) and _SHARD_NAME.fullmatch(file)):
        return None
    if not all(type(v) is int and v >= 0 for v in (rows, size)) or not isinstance(crc, str):
        return None
    if not (isinstance(missing, list) and all(isinstance(name, str) for name in missing)):
        return None
    return ShardEntry(file, int(rows), int(size), crc, tuple(missing))  # type: ignore[arg-type]


def file_crc32(path: Path, chunk: int = 16 << 20) -> str:
    """The CRC-32 of a file's bytes, read chunk by chunk."""
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(chunk):
            crc = zlib.crc32(block, crc)
    return f"{crc:08x}"
