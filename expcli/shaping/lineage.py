"""Lineage: where a dataset made by merge, split or filter came from, kept in its metadata.

Each output records, under the metadata key ``lineage``, one entry per edit: the verb and
its arguments, the counts kept and dropped, and every source (path, format, size in bytes,
a SHA-256 content checksum, and the source's own lineage, so that a chain of edits reads
back to the collected data). A path is relative to the output's folder (``../runs/a.h5``), so
that a dataset shared does not show the directories of whoever made it; absolute only when
asked (``LineagePaths.ABSOLUTE``, ``--lineage-paths absolute``). Files written before
recorded absolute paths; they are read as they are.

Where the source already holds checksums of its content, the checksum is of those, which
costs a read of a few bytes: a zip archive's (``.npz``, ``.pt``) of its members' names,
sizes and CRC-32s, a sharded folder's of its manifest (each shard's size and CRC-32).
Any other file's is of its bytes, computed on a thread while the episodes are found (both
only read), and waited for before the output is written: a bounded read, 8 MiB at a time,
but a second read of such a source (HDF5, CSV, Parquet), since its rows are read in the
order the episodes need, not front to back.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import threading
import zipfile
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from expcli._version import __version__
from expcli.errors import ConfigError, FormatError
from expcli.formats.parquet_sources import is_pattern, table_files
from expcli.thread_pools import shared_pool

__all__ = [
    "LINEAGE_KEY",
    "LineagePaths",
    "Source",
    "checksum_later",
    "describe_edit",
    "edits",
    "lineage_entry",
    "shown_path",
]

LINEAGE_KEY = "lineage"
"""The metadata key holding the list of edits."""


class LineagePaths(StrEnum):
    """How lineage records paths: relative to the output's folder, or absolute."""

    RELATIVE = "relative"
    ABSOLUTE = "absolute"

    @classmethod
    def parse(cls, value: str | LineagePaths) -> LineagePaths:
        """The member spelled ``value``.

        Raises:
            ConfigError: None is.
        """
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(m.value for m in cls)
            raise ConfigError(f"--lineage-paths {value!r}: expected one of {names}") from None


def shown_path(path: str | os.PathLike[str], output: Path, paths: LineagePaths) -> str:
    """``path`` as the lineage of ``output`` records it: relative to its folder, or absolute."""
    where = Path(path).resolve()
    if paths is LineagePaths.ABSOLUTE:
        return str(where)
    return Path(os.path.relpath(where, output.resolve().parent)).as_posix()


_MANIFEST = "manifest.json"
_MAX_DEPTH = 8  # sources' lineages read back at most this deep (a file could nest them forever)
_ZIPPED = ("npz", "pt")
_CHUNK = 8 << 20


@dataclass
class Source:
    """A source of an edit, its checksum on the way (``result`` waits for it)."""

    path: Path
    format: str
    size: int
    pending: Future[str]
    of: str
    stop: threading.Event

    def result(self, output: Path, paths: LineagePaths = LineagePaths.RELATIVE) -> dict[str, Any]:
        """The source as the lineage of ``output`` records it (its path as ``paths`` says)."""
        return {
            "path": shown_path(self.path, output, paths),
            "path_is": "absolute" if paths is LineagePaths.ABSOLUTE else "relative to the output",
            "format": self.format,
            "bytes": self.size,
            "sha256": self.pending.result(),
            "checksum_of": self.of,
        }

    def cancel(self) -> None:
        """Stop the checksum, started or not (the edit failed, was interrupted, or is done)."""
        self.stop.set()
        self.pending.cancel()


def checksum_later(path: Path, fmt: str) -> Source:
    """Start the SHA-256 of ``path`` (a folder: of its manifest) on a background thread."""
    pool = shared_pool("expcli-checksum", 2)
    stop = threading.Event()
    if fmt in _ZIPPED and path.is_file():
        pending = pool.submit(_zip_digest, path)
        return Source(path, fmt, path.stat().st_size, pending, "zip directory", stop)
    if is_pattern(path):  # a glob: the files it reads
        found = table_files(path)
        size = sum(p.stat().st_size for p in found.paths)
        pending = pool.submit(_digest_all, found.paths, found.root, stop)
        return Source(path, fmt, size, pending, "files", stop)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        size = sum(p.stat().st_size for p in files)
        if (path / _MANIFEST).is_file():
            pending = pool.submit(_digest, path / _MANIFEST, stop)
            return Source(path, fmt, size, pending, "manifest", stop)
        # a foreign folder layout (Minari): every file in it
        return Source(path, fmt, size, pool.submit(_digest_all, files, path, stop), "files", stop)
    pending = pool.submit(_digest, path, stop)
    return Source(path, fmt, path.stat().st_size, pending, "file", stop)


def lineage_entry(
    verb: str,
    arguments: Mapping[str, Any],
    sources: Sequence[dict[str, Any]],
    source_metadata: Sequence[Mapping[str, Any]],
    *,
    kept: Mapping[str, int],
    dropped: Mapping[str, int],
) -> dict[str, Any]:
    """One edit as the output's metadata records it."""
    described = []
    for source, metadata in zip(sources, source_metadata, strict=True):
        earlier = metadata.get(LINEAGE_KEY)
        described.append(
            {**source, **({LINEAGE_KEY: earlier} if isinstance(earlier, list) else {})}
        )
    return {
        "verb": verb,
        "arguments": dict(arguments),
        "sources": described,
        "kept": dict(kept),
        "dropped": dict(dropped),
        "expcli_version": __version__,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def edits(lineage: object, depth: int = 0) -> list[dict[str, object]]:
    """The edits of a recorded lineage and of its sources' lineages, oldest first.

    Whatever the metadata holds: entries that are not objects are left out.
    """
    out: list[dict[str, object]] = []
    for entry in _listed(lineage) if depth < _MAX_DEPTH else ():
        if isinstance(entry, dict):
            for source in _listed(entry.get("sources")):
                out += edits(_mapping(source).get(LINEAGE_KEY), depth + 1)
            out.append(entry)
    return out


def describe_edit(entry: Mapping[str, object]) -> str:
    """One edit in a line: verb, sources (with the start of their checksums), arguments, counts.

    ``filter of runs/a.h5 (sha256 0123456789ab…) [top=10%]: kept 9 episodes, dropped 81``.
    """
    named = []
    for source in _listed(entry.get("sources")):
        if isinstance(source, dict):
            digest = str(source.get("sha256", ""))[:12]
            path = str(source.get("path"))
            named.append(f"{path} (sha256 {digest}…)" if digest else path)
    given = ", ".join(f"{k}={_argument(v)}" for k, v in _mapping(entry.get("arguments")).items())
    kept, dropped = _mapping(entry.get("kept")), _mapping(entry.get("dropped"))
    counts = f"kept {kept.get('episodes', '?')} episodes, dropped {dropped.get('episodes', '?')}"
    if dropped.get("incomplete"):
        counts += f" ({dropped['incomplete']} incomplete)"
    shown = f"{entry.get('verb', '?')} of {' + '.join(named) or '?'}"
    return shown + (f" [{given}]" if given else "") + f": {counts}"


def _listed(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _mapping(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _argument(value: object) -> str:
    """An edit's argument as typed: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _digest(path: Path, stop: threading.Event) -> str:
    """The SHA-256 of a file's bytes, read a chunk at a time; "" once told to stop."""
    total = hashlib.sha256()
    chunk = bytearray(_CHUNK)
    view = memoryview(chunk)
    try:
        with open(path, "rb", buffering=0) as f:
            while not stop.is_set():
                count = f.readinto(chunk)
                if not count:
                    return total.hexdigest()
                total.update(view[:count])
    except OSError as e:
        raise FormatError(
            f"cannot be read for its checksum ({e.strerror or e})", path=path
        ) from None
    return ""


def _zip_digest(path: Path) -> str:
    """Of a zip archive's directory: each member's name, sizes and CRC-32, in order."""
    total = hashlib.sha256()
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                total.update(os.fsencode(info.filename) + b"\0")
                total.update(f"{info.file_size}:{info.compress_size}:{info.CRC}\n".encode())
    except (OSError, zipfile.BadZipFile) as e:
        raise FormatError(f"cannot be read for its checksum ({e})", path=path) from None
    return total.hexdigest()


def _digest_all(files: Sequence[Path], root: Path, stop: threading.Event) -> str:
    total = hashlib.sha256()
    for file in files:
        total.update(os.fsencode(file.relative_to(root).as_posix()) + b"\0")
        total.update(_digest(file, stop).encode())
    return total.hexdigest()
