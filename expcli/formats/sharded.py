"""Sharded dataset folders: ``manifest.json`` plus shards of contiguous rows, any size.

Each shard (``shard-000000.npz``...) is an uncompressed expcli ``.npz`` file holding rows
``(T_k, N, ...)`` of every tensor: a valid dataset of its own, whose members a reader maps
instead of reading (why npz: appending a shard is one sequential write, and a stored
member lies whole in the file, ready for ``mmap``). Shards are written to a temporary
name, fsynced and renamed; then the manifest (``_manifest``) is replaced the same way. A
reader trusts the manifest alone, so a writer killed at any moment leaves a folder that
opens and holds every shard completed before the kill.

A shard (npz or Parquet) stores its next observations once (``formats.frames``,
``FramesForm.ONCE``, the default) over its own rows: row ``t``'s successor is the shard's
row ``t + 1``, and its last row's cells are all kept (their successor is the next shard's
first row, which may not be written yet: a shard never depends on another). The
manifest's schema is then ``FRAMES_SCHEMA``, so that a reader of ``expcli/1`` alone refuses
the folder; a folder may hold shards of either form (a ``--resume`` with another
``--frames``).

Shards may instead be Parquet files (``shard-000000.parquet``, the manifest's
``shard_format``), each a complete expcli Parquet file whose bookkeeping columns
(``index``, ``row``, ``episode_index``, ``frame_index``) count across the folder, so that
pyarrow, polars, duckdb, Ray Data and HF ``datasets`` read the shard glob as one table. Such
a folder also holds a dataset card, ``README.md`` (``dataset_card``): its YAML ``configs``
give ``datasets.load_dataset(FOLDER)`` the shard glob, and its statistics (the episodes and
their returns, counted as shards land) are written again, atomically, after each manifest.
``datasets`` keys its cache by the config's patterns, not the files, so the config's
description carries a fingerprint of the listed shards (their names and CRC-32s): a folder
loaded before a ``--resume`` is read again after it (measured with datasets 5.2). A writer
going on with such a folder (``--resume``) first removes the shard files the manifest does
not list, which those readers would otherwise count.
"""

from __future__ import annotations

import contextlib
import dataclasses
import mmap
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.errors import FormatError, OutputError, OutputExistsError, SchemaError
from expcli.files.atomic import (
    commit_check_deferred,
    create_temp,
    fsync_dir,
    output_errors,
)
from expcli.formats._guards import brief, open_inside, regular_size
from expcli.formats._manifest import (
    DEFAULT_SHARD_FORMAT,
    FORMAT_KEY,
    MANIFEST,
    Manifest,
    ShardEntry,
    file_crc32,
    find_shard_format,
    is_folder_target,
    is_sharded_folder,
    shard_name,
)
from expcli.formats.concat_rows import ConcatRows
from expcli.formats.dataset import Dataset, read_whole
from expcli.formats.dataset_card import CARD, EpisodeTally, folder_card, tally_rows, write_card
from expcli.formats.frames import ByCells, DerivedRows, StoredOnce, combined
from expcli.formats.header import header_specs
from expcli.formats.lazy import LazyRows
from expcli.formats.rows import Format, WritePlan
from expcli.formats.table import compressing_shard_formats
from expcli.spec import FRAMES_SCHEMA, CircularState, FramesForm, ImagesForm

if TYPE_CHECKING:
    from expcli.formats.block_cache import BlockCache

__all__ = [
    "CARD",
    "COMPRESSION_KEY",
    "DEFAULT_SHARD_BYTES",
    "MANIFEST",
    "Manifest",
    "ShardWriter",
    "check_shard",
    "check_shards",
    "find_shard_format",
    "is_folder_target",
    "is_sharded_folder",
    "new_manifest",
    "open_lazy",
    "read",
    "shard_rows",
    "write",
]

DEFAULT_SHARD_BYTES = 128 << 20
_MAPPED_SHARDS = 256  # shard files kept mapped at once (each mapping holds a descriptor)
# Bytes of shard files kept mapped at once (at least one shard): the pages of a mapping
# that were read count in the process's RSS until it is unmapped, so a bound in bytes
# keeps a pass over a big folder (convert, a spooled collect's merge) flat in memory.
_MAPPED_BYTES = 32 << 20
_MMAP = "\0mmap"  # a shard's members: its mapping, beside its tensors (never a tensor name)
COMPRESSION_KEY = "shard_compression"
"""The manifest's key naming its shards' compression (absent: the format's own)."""


def shard_rows(tensors: Mapping[str, Any], shard_bytes: int) -> int:
    """Rows per shard so that a shard takes about ``shard_bytes`` (at least one row)."""
    row = sum(int(np.prod(a.shape[1:])) * np.dtype(a.dtype).itemsize for a in tensors.values())
    return max(1, int(shard_bytes) // max(1, int(row)))


class ShardWriter:
    """Appends shards to a folder and keeps its manifest up to date after each one.

    Args:
        folder: The dataset folder (created if missing).
        manifest: Its manifest: a new one (``Manifest(dataset.header())``, no shards) or
            one read back to go on.
        state: The circular state to record; None for a run's rows in order (full once
            there is a row).
        frames: How shards store next observations (``formats.frames``).
        license: The dataset card's license (``dataset_card``; None: the one a collect
            run recorded, else ``other``), where the shard format gives the folder a card.
        tally: The episodes of all the rows to be written (a circular dataset's, counted
            oldest first); None: counted as shards land (rows in order).
        images: How Parquet shards store image-like frames (PNG cells or raw bytes).
    """

    def __init__(
        self,
        folder: Path,
        manifest: Manifest,
        state: CircularState | None = None,
        frames: FramesForm = FramesForm.ONCE,
        *,
        license: str | None = None,
        tally: EpisodeTally | None = None,
        images: ImagesForm = ImagesForm.PNG,
    ) -> None:
        self.folder = folder
        self.manifest = manifest
        self.state = state
        self.shard = manifest.shard
        compression = manifest.header.get(COMPRESSION_KEY)
        self.plan = WritePlan(
            folder,
            self.shard.name,
            compression=compression and str(compression),
            frames=frames,
            images=images,
        )
        with output_errors(folder, every=True):
            folder.mkdir(parents=True, exist_ok=True)
        self._carries: dict[int, object | None] = {}  # after the shard of that position
        self.license = license
        self._counted = tally is None  # episodes counted here, shard by shard
        self._tally = tally
        if self.shard.shard_card is not None:
            with output_errors(folder, every=True):
                for stray in manifest.strays(folder):  # the glob's readers would count them
                    stray.unlink()
            if self._tally is None:
                self._tally = self._count_listed()
            self._write_card()
        self._next = manifest.next_index(folder)
        self._lock = threading.Lock()

    def append(self, tensors: Mapping[str, Any], metadata: Mapping[str, Any]) -> ShardEntry | None:
        """Write ``tensors`` (each ``(k, N, ...)``, ``k`` the same) as the next shard.

        The manifest follows, with ``metadata`` as its user metadata. Nothing is written for
        0 rows.

        Raises:
            OutputError: The folder cannot be written (full, read-only).
        """
        rows = len(next(iter(tensors.values()))) if tensors else 0
        with self._lock:
            if rows == 0:
                self.replace_metadata(metadata)
                return None
            entry = self._write(tensors, metadata)
            self.manifest.shards.append(entry)
            if self._counted and self._tally is not None:
                self._tally.add_tensors(tensors, rows)
            self._save(metadata)
            return entry

    def _write(self, tensors: Mapping[str, Any], metadata: Mapping[str, Any]) -> ShardEntry:
        """Write ``tensors`` as a new shard after the listed ones; its entry, not yet listed.

        Of ``metadata``, the shard's own header keeps the env's ``render_fps`` (a Parquet
        shard's ``timestamp`` counts in it).
        """
        name = shard_name(self._next, self.shard)
        self._next += 1
        first = self.manifest.rows
        own: dict[str, Any] = {"shard": {"first_row": first}}
        if "render_fps" in metadata:
            own["render_fps"] = metadata["render_fps"]
        shard = Dataset(dict(tensors), CircularState(0, 0, True), own)
        missing = self._schema(shard)
        path = self.folder / name
        position = len(self.manifest.shards)
        written = self.shard.write_shard(shard, path, self.plan, self._carry(position - 1))
        if written.once:
            self.manifest.header["schema"] = FRAMES_SCHEMA
        self._carries[position] = written.carry
        return ShardEntry(name, shard.memory_size, written.bytes, written.crc32, missing)

    def _carry(self, position: int) -> object | None:
        """What the listed shard at ``position`` hands the next (None: before the first)."""
        if position < 0:
            return None
        if position not in self._carries:
            path = self.folder / self.manifest.shards[position].file
            self._carries[position] = self.shard.shard_carry(path)
        return self._carries[position]

    def _schema(self, shard: Dataset) -> tuple[str, ...]:
        """Add the shard's new tensors to the manifest; return the folder's it lacks.

        Earlier shards lack the new ones: they are listed as missing there, read as NaN.

        Raises:
            SchemaError: A tensor the folder lacks is not a float tensor (only those can be
                read as NaN where missing).
        """
        known: dict[str, Any] = self.manifest.header.setdefault("tensors", {})
        new = {}
        for spec in shard.specs():
            if spec.name not in known:
                if np.dtype(spec.dtype).kind != "f":
                    raise SchemaError(
                        f"is new to the folder and {spec.dtype}; only float tensors can be "
                        "added after the first shard",
                        path=self.folder,
                        key=spec.name,
                    )
                new[spec.name] = spec.to_json()
        if new and self.manifest.shards:
            self.manifest.shards = [
                dataclasses.replace(e, missing=tuple(sorted({*e.missing, *new})))
                for e in self.manifest.shards
            ]
        if new:
            self.manifest.header["tensors"] = dict(sorted({**known, **new}.items()))
        return tuple(sorted(set(known) - set(shard.tensors)))

    def replace_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Write the manifest again with ``metadata`` as its user metadata."""
        self._save(metadata)

    def replace_last(self, tensors: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        """Put ``tensors`` in place of the last shard (same rows).

        Written under a new name, listed by the manifest instead of the old one, which is then
        deleted.
        """
        with self._lock:
            self._carry(len(self.manifest.shards) - 2)  # read before the shard goes
            old = self.manifest.shards.pop()
            self.manifest.shards.append(self._write(tensors, metadata))
            if self._counted and self._tally is not None:
                self._tally = self._count_listed()
            self._save(metadata)
            with contextlib.suppress(OSError):
                (self.folder / old.file).unlink()

    def _save(self, metadata: Mapping[str, Any]) -> None:
        header, rows = self.manifest.header, self.manifest.rows
        state = self.state
        if state is None:  # the shards in order, every row ever written kept
            state = CircularState(0, 0, rows > 0, rows * int(header.get("num_envs") or 0))
        own = {k: header[k] for k in _KEPT if k in header}
        self.manifest.header = {**own, "memory_size": rows, **state.to_json(), **metadata}
        self.manifest.save(self.folder)
        self._write_card()

    def _count_listed(self) -> EpisodeTally:
        """The episodes of the listed shards, read from their files (a folder gone on with)."""
        tally = EpisodeTally(int(self.manifest.header.get("num_envs") or 0))
        for entry in self.manifest.shards:
            shard, close = self.shard.open_shard(self.folder / entry.file, cache=None)
            try:
                tally.add_tensors(shard.tensors, shard.memory_size)
            finally:
                close()
        return tally

    def _write_card(self) -> None:
        """Write the folder's dataset card again (where its shard format gives it one)."""
        files = self.shard.shard_card
        if files is None or self._tally is None:
            return
        shards = [(entry.file, entry.crc32) for entry in self.manifest.shards]
        glob = f"shard-*{self.shard.suffixes[0]}"
        kind = f"{self.shard.title or self.shard.name} shards"
        text = folder_card(
            self.manifest.header,
            shards,
            self._tally,
            files=files,
            glob=glob,
            kind=kind,
            license=self.license,
        )
        with output_errors(self.folder, every=True):
            write_card(self.folder, text)


_KEPT = (
    "schema",
    "expcli_version",
    "created",
    "num_envs",
    "tensors",
    FORMAT_KEY,
    COMPRESSION_KEY,
)
_HEADER_KEYS = frozenset(
    {"schema", "expcli_version", "num_envs", "memory_size", "memory_index", "env_index"}
    | {"filled", "written", "tensors", FORMAT_KEY, COMPRESSION_KEY}
)


def new_manifest(
    header: Mapping[str, object], shard: Format | None = None, compression: str | None = None
) -> Manifest:
    """The manifest of a new folder of ``header``'s dataset, its shards ``shard`` files.

    ``shard``: a format that can be a shard (None: npz); ``compression``: one that format
    takes (None: its default); npz shards are never compressed.

    Raises:
        ConfigError: A format that cannot be a shard, or a compression it does not take.
    """
    kind = shard or find_shard_format(None)
    if not kind.shards:
        find_shard_format(kind.name)  # says which can
    extra: dict[str, Any] = {}
    if kind.name != DEFAULT_SHARD_FORMAT:
        extra[FORMAT_KEY] = kind.name
    checked = kind.checked_compression(compression, what="shards", others=compressing_shard_formats)
    if checked is not None:
        extra[COMPRESSION_KEY] = checked
    return Manifest({**header, **extra})


def user_metadata(header: Mapping[str, Any]) -> dict[str, Any]:
    """A metadata object without the keys the manifest owns (``created`` stays)."""
    return {k: v for k, v in header.items() if k not in _HEADER_KEYS}


def write(
    dataset: Dataset,
    path: Path,
    *,
    overwrite: bool,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    shard_format: str | None = None,
    compression: str | None = None,
    frames: FramesForm = FramesForm.ONCE,
    license: str | None = None,
    images: ImagesForm = ImagesForm.PNG,
) -> None:
    """Write ``dataset`` as a sharded folder, reading it a shard of rows at a time.

    The folder is built beside the target under a temporary name and renamed into place
    when complete (an existing folder is replaced only with ``overwrite``). Its shards are
    ``shard_format`` files (npz by default; Parquet ones ``compression``-ed, zstd by default);
    ``frames``: how they store next observations; ``images``: how Parquet shards store
    image-like frames (``_parquet_columns``). A folder of Parquet shards gets a dataset
    card (``dataset_card``) under ``license``, its episodes counted first (a pass over the
    rewards and done flags, oldest first).

    Raises:
        OutputExistsError: ``path`` exists and ``overwrite`` is false.
        OutputError: The folder cannot be written.
        ConfigError: A format that cannot be a shard, or a compression it does not take.
    """
    shard = find_shard_format(shard_format)
    manifest = new_manifest(dataset.header(), shard, compression)
    if os.path.lexists(path) and not overwrite:
        raise OutputExistsError(path)
    if os.path.lexists(path) and not is_sharded_folder(path):
        raise OutputError(
            "exists and is not a sharded dataset folder; refusing to replace it", path=path
        )
    made: list[Path] = []
    try:
        tmp = create_temp(path, folder=True, made=made)
        with commit_check_deferred() as check:  # ``convert --verify``: the whole folder
            tally = None
            if shard.shard_card is not None:
                tally = tally_rows(
                    dataset.tensors,
                    dataset.state,
                    dataset.metadata,
                    dataset.memory_size,
                    dataset.num_envs,
                )
            writer = ShardWriter(
                tmp, manifest, dataset.state, frames, license=license, tally=tally, images=images
            )
            metadata = user_metadata(manifest.header)
            step = shard_rows(dataset.tensors, shard_bytes)
            for start in range(0, dataset.memory_size, step):
                rows = {name: _part(a, start, start + step) for name, a in dataset.tensors.items()}
                writer.append(rows, metadata)
            if not writer.manifest.shards:
                writer.replace_metadata(metadata)
        if check is not None:
            check(tmp)
        _replace_folder(tmp, path)
    except BaseException:
        for tmp in made:
            shutil.rmtree(tmp, ignore_errors=True)
        raise


def _part(array: Any, start: int, stop: int) -> Any:
    """Rows ``start..stop`` of a tensor, still lazy where it is: read as its shard is written."""
    return array.window(start, stop) if isinstance(array, LazyRows) else array[start:stop]


def _replace_folder(tmp: Path, target: Path) -> None:
    """Rename the complete folder ``tmp`` to ``target``, replacing what is there."""
    old = None
    with output_errors(target, every=True):
        if os.path.lexists(target):
            old = create_temp(target, folder=True)
            os.rmdir(old)
            os.replace(target, old)
        os.replace(tmp, target)
        fsync_dir(target.parent)
    if old is not None:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)


def open_lazy(
    path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
) -> tuple[Dataset, Callable[[], None]]:
    """The folder's dataset, each tensor a ``ConcatRows`` over its shards' mapped members.

    ``cache``: where Parquet shards keep the row groups they decode, one for the folder.

    Nothing the manifest says is trusted before it is checked against the shards: each must
    be a regular file of the folder of the size listed, whose members (their headers read,
    not their data) are the manifest's tensors, shaped by its row count and ``num_envs``.
    Those headers also say where a shard stores next observations once: each tensor's
    ``once`` (``frames.stored_once``) adds up its shards' figures, a shard stored whole
    keeping all its cells.

    Raises:
        FormatError: The manifest or a shard is missing, damaged, not a regular file, or not
            the size the manifest says.
        SchemaError: A shard's tensors disagree with the manifest.
    """
    del num_envs
    manifest = Manifest.load(path)
    header = manifest.header
    specs = header_specs(header, path / "manifest.json")
    num = header.get("num_envs")
    if type(num) is not int or num < 0:
        raise SchemaError(
            f"num_envs is {brief(num)}; expected a count",
            path=path / "manifest.json",
            key="num_envs",
        )
    by_name = {s.name: s for s in specs}
    maps = _ShardMaps(path, manifest.shards, by_name, num, manifest.shard, cache)
    pieces: dict[str, list[tuple[StoredOnce | None, int]]] = {name: [] for name in by_name}
    for index, entry in enumerate(manifest.shards):
        found = maps.check(index)
        for name, piece in pieces.items():
            array = found.get(name)
            once = array.stored_once() if isinstance(array, ByCells) else None
            piece.append((once, entry.rows * num))
    rows = manifest.rows
    if header.get("memory_size") != rows:
        raise SchemaError(
            f"manifest says memory_size {brief(header.get('memory_size'))}; its shards hold {rows}",
            path=path / "manifest.json",
            key="memory_size",
        )
    state, metadata = Dataset.split_header(header, path)
    for key in (FORMAT_KEY, COMPRESSION_KEY):  # how the folder stores the data, not the data's
        metadata.pop(key, None)
    lengths = [entry.rows for entry in manifest.shards]
    tensors: dict[str, Any] = {}
    for spec in specs:
        tensors[spec.name] = ConcatRows(
            _fetcher(maps, spec.name),
            lengths,
            (num, *spec.shape),
            np.dtype(spec.dtype),
            maps.release if maps.mapped else None,
        )
        tensors[spec.name].once = combined(pieces[spec.name])
    return Dataset(tensors, state, metadata), maps.close


def _fetcher(maps: _ShardMaps, name: str) -> Callable[[int], Any]:
    return lambda shard: maps.member(shard, name)


def read(path: Path, *, num_envs: int | None = None) -> Dataset:
    """The whole folder in memory (for data that fits; ``open_lazy`` streams).

    Raises:
        FormatError, SchemaError: As ``open_lazy``.
        ConfigError: The memory available cannot hold the data (said before reading any).
    """
    return read_whole(open_lazy(path, num_envs=num_envs), path)


def check_shards(path: Path, progress: Callable[[float], None] | None = None) -> list[str]:
    """Problems of a folder's shards.

    A size or CRC-32 that is not the manifest's (each shard is read once, chunk by chunk). Empty
    when every shard is intact. ``progress`` is called with the fraction of the manifest's bytes
    checked, before each shard and at the end.
    """
    problems = []
    shards = Manifest.load(path).shards
    total, done = sum(entry.bytes for entry in shards), 0
    for entry in shards:
        if progress is not None:
            progress(done / total if total else 1.0)
        done += entry.bytes
        problem = check_shard(path, entry)
        if problem is not None:
            problems.append(problem)
    if progress is not None:
        progress(1.0)
    return problems


def check_shard(path: Path, entry: ShardEntry) -> str | None:
    """The problem of one shard of folder ``path`` (its size or CRC-32), or None if intact."""
    try:
        _check_size(path, entry)
        crc = file_crc32(path / entry.file)
    except FileNotFoundError:
        return str(FormatError("listed in the manifest but missing", path=path / entry.file))
    except (FormatError, OSError) as e:
        return str(e)
    if crc != entry.crc32:
        return f"{entry.file}: CRC-32 {crc}; the manifest says {entry.crc32}"
    return None


def _check_size(folder: Path, entry: ShardEntry) -> None:
    try:
        size = regular_size(folder / entry.file)
    except FileNotFoundError:
        raise FormatError("listed in the manifest but missing", path=folder / entry.file) from None
    if size != entry.bytes:
        raise FormatError(
            f"holds {size:,} bytes; the manifest says {entry.bytes:,}", path=folder / entry.file
        )


def _let_go(maps: list[mmap.mmap]) -> None:
    """Drop the pages of ``maps`` from this process (read again from the file if used)."""
    for mapped in maps:
        with contextlib.suppress(OSError, ValueError):  # closed, or no madvise here
            mapped.madvise(mmap.MADV_DONTNEED)


class _ShardMaps:
    """Shard files mapped on first use, their members read-only arrays over the mapping.

    Beyond a bound, the least recently used are unmapped.
    """

    def __init__(
        self,
        folder: Path,
        shards: list[ShardEntry],
        specs: Mapping[str, Any],
        num_envs: int,
        shard: Format,
        cache: BlockCache | None = None,
    ) -> None:
        self.folder, self.shards, self.specs, self.num_envs = folder, shards, specs, num_envs
        self.shard = shard
        self.mapped = shard.shards_mapped
        self.cache = None if self.mapped else cache
        self._open: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._mapped_bytes = 0
        self._released = False
        self._touched: set[int] = set()  # shards read since the last release
        self._lock = threading.Lock()
        self._closers: dict[int, Callable[[], None]] = {}
        # a Parquet shard keeps a decoded row group of each tensor read: its rows' bytes
        self._row_bytes = num_envs * sum(
            int(np.prod(spec.shape)) * np.dtype(spec.dtype).itemsize for spec in specs.values()
        )

    def _weight(self, shard: int) -> int:
        entry = self.shards[shard]
        if self.mapped:  # once pages are let go of after each use, a mapping weighs little
            return 0 if self._released else entry.bytes
        if self.cache is not None:  # what it decodes is kept (and bounded) in the cache
            return 0
        return max(entry.bytes, entry.rows * int(self._row_bytes))

    def release(self) -> None:
        """Let go of the pages the mappings read since the last call brought in.

        From the first call on, the caller lets go after each use (a sampler, after each
        batch), so mappings stay open (up to ``_MAPPED_SHARDS``) rather than being
        unmapped by bytes: a batch drawn across all shards maps each one once.
        """
        with self._lock:
            if not self._released:
                self._released = True
                self._mapped_bytes = 0
                self._touched.update(self._open)
            opened = [self._open.get(shard) for shard in self._touched]
            self._touched.clear()
            maps = [m for members in opened if members for m in members.get(_MMAP, ())]
        _let_go(maps)

    def member(self, shard: int, name: str) -> Any:
        dropped: list[mmap.mmap] = []
        with self._lock:
            self._touched.add(shard)
            members = self._open.get(shard)
            if members is None:
                members = self._map(shard)
                self._open[shard] = members
                self._mapped_bytes += self._weight(shard)
                while len(self._open) > 1 and (
                    len(self._open) > _MAPPED_SHARDS or self._mapped_bytes > _MAPPED_BYTES
                ):
                    # views still in use keep their mapping (a Parquet file: its reader)
                    evicted, gone = self._open.popitem(last=False)
                    self._closers.pop(evicted, None)
                    self._mapped_bytes -= self._weight(evicted)
                    dropped.extend(gone.get(_MMAP, ()))
            else:
                self._open.move_to_end(shard)
            found = members[name]
        _let_go(dropped)
        return found

    def check(self, shard: int, keep: bool = False) -> dict[str, Any]:
        """The shard's members, unread, after checking them against the manifest.

        ``keep``: a Parquet shard stays open (its members read through it) until the folder
        is closed or the shard evicted; else it is closed.

        Raises:
            FormatError: The shard is missing, not a regular file, not the size listed, or
                damaged.
            SchemaError: Its members are not the manifest's tensors in kind and shape.
        """
        entry = self.shards[shard]
        path = self.folder / entry.file
        _check_size(self.folder, entry)
        lazy, close = self._open_shard(path)
        if self.mapped or not keep:
            close()
        else:  # its rows are read through the open file; closed with the folder
            self._closers[shard] = close
        extra = sorted(set(lazy.tensors) - set(self.specs))
        if extra:
            raise SchemaError(
                f"holds a tensor the manifest does not list; expected only {sorted(self.specs)}",
                path=path,
                key=extra[0],
            )
        expected = entry.rows, self.num_envs
        for name in entry.missing:
            spec = self.specs.get(name)
            if spec is None or np.dtype(spec.dtype).kind != "f" or name in lazy.tensors:
                raise SchemaError(
                    "is listed as missing from the shard; expected a float tensor of the "
                    "manifest that the shard lacks",
                    path=path,
                    key=name,
                )
        for name, spec in self.specs.items():
            array = lazy.tensors.get(name)
            if array is None and name in entry.missing:
                continue
            if (
                array is None
                or array.shape != (*expected, *spec.shape)
                or array.dtype != spec.dtype
            ):
                got = "missing" if array is None else f"{array.dtype} {tuple(array.shape)}"
                raise SchemaError(
                    f"holds {got}; the manifest says {spec.dtype} {(*expected, *spec.shape)}",
                    path=path,
                    key=name,
                )
        return dict(lazy.tensors)

    def _open_shard(self, path: Path) -> tuple[Dataset, Callable[[], None]]:
        try:
            return self.shard.open_shard(path, cache=self.cache)
        except OSError as e:  # unreadable (permissions, I/O): the folder's fault, named
            raise FormatError(f"cannot be read ({e.strerror or e})", path=path) from None

    def _map(self, shard: int) -> dict[str, Any]:
        entry = self.shards[shard]
        path = self.folder / entry.file
        arrays = self.check(shard, keep=True)
        expected = entry.rows, self.num_envs
        members: dict[str, Any] = {}
        mapping: list[mmap.mmap] = []

        def mapped(array: Any) -> Any:
            """A stored member as an array over the shard's one mapping (else as it is)."""
            if not (isinstance(array, LazyRows) and array.file_offset is not None and array.size):
                return array
            if not mapping:
                with open_inside(path) as f:
                    mapping.append(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
            flat = np.frombuffer(mapping[0], array.dtype, array.size, array.file_offset)
            return flat.reshape(array.shape)

        for name, spec in self.specs.items():
            array = arrays.get(name)
            if array is None:  # created after this shard: NaN, as unwritten
                nan = np.array(np.nan, spec.dtype)
                members[name] = np.broadcast_to(nan, (*expected, *spec.shape))
            elif isinstance(array, DerivedRows):  # its members read over the mapping too
                source = mapped(arrays[name.removeprefix("next_")])
                members[name] = DerivedRows(source, mapped(array.kept), array.cells, array.wrap)
            else:
                members[name] = mapped(array)
        if mapping:
            members[_MMAP] = tuple(mapping)
        return members

    def close(self) -> None:
        with self._lock:
            self._open.clear()
            self._mapped_bytes = 0
            closers, self._closers = self._closers, {}
        for close in closers.values():
            close()
