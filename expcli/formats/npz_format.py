"""NumPy ``.npz`` archives: one ``.npy`` member per tensor plus the metadata as a 0-d string.

Written as ``np.savez`` would (uncompressed), but member by member and slice by slice.
Read with ``allow_pickle=False``: object arrays, which would need unpickling, are refused.
Each member's header is checked against the bytes the archive holds before anything is
allocated; stored members are read in place and deflated ones (``np.savez_compressed``)
inflated slice by slice, so that neither a hostile header nor a deflate bomb makes a
reader allocate more than a slice, and members in another byte order come back native.
"""

from __future__ import annotations

import io
import math
import os
import struct
import threading
import zipfile
import zlib
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from expcli.errors import ExpcliError, FormatError
from expcli.files.atomic import atomic_write
from expcli.formats._error_summary import error_summary
from expcli.formats._guards import (
    MAX_METADATA_BYTES,
    check_inflation,
    check_memory,
    check_read_whole,
    check_source,
)
from expcli.formats._zip_stream import ZipStreamWriter
from expcli.formats.dataset import Dataset
from expcli.formats.frames import DerivedRows, derive, encode
from expcli.formats.header import dataset_from_header, encode_header, foreign_dataset, parse_header
from expcli.formats.lazy import SLICE_BYTES, LazyRows, row_chunks
from expcli.formats.rows import WritePlan, WrittenShard
from expcli.spec import FRAMES_SCHEMA, METADATA_KEY, FramesForm

if TYPE_CHECKING:
    from expcli.formats.block_cache import BlockCache

__all__ = ["open_lazy", "read", "write", "write_members", "write_shard", "write_to"]


_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_MAX_RATIO = 1100  # deflate expands at most ~1032:1; a larger claim is not real data
_SLACK = 1 << 16  # bytes any member may claim beyond the ratio (headers, tiny members)


def write(dataset: Dataset, plan: WritePlan) -> None:
    """Write every tensor as a ``.npy`` member, plus the metadata member ``__expcli__``.

    Members are stored uncompressed and written slice of rows by slice of rows, so a
    dataset read lazily from another file is never held in memory whole. ``frames``:
    ``FramesForm.ONCE`` stores next observations once (``formats.frames``).
    """
    path = plan.target
    members, header = encode(dataset.tensors, dataset.header(), plan.frames, path)
    text = encode_header(header, path)
    with atomic_write(path, overwrite=plan.overwrite) as f:
        write_members(members, f, text)


def write_shard(shard: Dataset, path: Path, frames: FramesForm) -> WrittenShard:
    """Write a sharded folder's shard whole (its rows alone: no wrap), then rename it into place.

    Its size and CRC-32 come from the bytes written, not read back.
    """
    members, header = encode(shard.tensors, shard.header(), frames, path, wrap=False)
    text = encode_header(header, path)
    with atomic_write(path) as f:
        size, crc = write_members(members, f, text)
    return WrittenShard(size, f"{crc:08x}", header["schema"] == FRAMES_SCHEMA)


def write_stream(dataset: Dataset, out: IO[bytes], source: str | os.PathLike[str]) -> None:
    """Write ``dataset`` front to back to the binary stream ``out`` (``source``: messages)."""
    write_to(dataset, out, encode_header(dataset.header(), source))


def write_to(dataset: Dataset, file: IO[bytes], header: str | None) -> tuple[int, int]:
    """Write the archive to an open ``file``, with ``header`` as metadata.

    A stream will do: the file is never sought. ``header`` is ``encode_header``'s; None
    writes the tensors alone (as ``np.savez`` in skrl's ``Memory.save``).

    Returns:
        The archive's size in bytes and its CRC-32, computed on the way.
    """
    return write_members(dataset.tensors, file, header)


def write_members(
    members: Mapping[str, Any], file: IO[bytes], header: str | None
) -> tuple[int, int]:
    """``write_to`` of arrays of any shape: the tensors, or the members ``frames.encode`` made."""
    archive = ZipStreamWriter(file)
    for name in sorted(members):
        _write_member(archive, name, members[name])
    if header is not None:
        _write_member(archive, METADATA_KEY, np.array(header))
    archive.close()
    return archive.size, archive.crc


def _write_member(archive: ZipStreamWriter, name: str, array: Any) -> None:
    header = io.BytesIO()
    np.lib.format.write_array_header_2_0(
        header,
        {
            "descr": np.lib.format.dtype_to_descr(np.dtype(array.dtype)),
            "fortran_order": False,
            "shape": tuple(array.shape),
        },
    )
    head = header.getvalue()
    size = len(head) + math.prod(array.shape) * np.dtype(array.dtype).itemsize
    with archive.record(f"{name}.npy".encode(), size) as member:
        member.write(head)
        if array.ndim == 0 or array.size == 0:
            member.write(np.ascontiguousarray(array).tobytes())
            return
        chunks = row_chunks(array)
        for start in chunks:
            rows = np.ascontiguousarray(array[start : start + chunks.step])
            member.write(rows.reshape(-1).view(np.uint8).data)


def open_lazy(
    path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
) -> tuple[Dataset, Callable[[], None]]:
    """Like ``read``, but members stay on disk as ``LazyRows``.

    Stored ones read in place, deflated ones inflated as their rows are asked for. Call the closer
    when done.

    Every member's header is checked against what the archive holds before any data is
    read: a shape that is negative or larger than the member's bytes, or a deflated member
    claiming more than deflate can expand to, is refused.

    Raises:
        FormatError, SchemaError: As ``read``.
    """
    del num_envs, cache  # the file records its shape; nothing decoded is kept
    check_source(path)  # a named pipe or a device would block or never end
    with open(path, "rb") as file:
        head = file.read(6)
    if not head.startswith(_ZIP_MAGICS):
        raise FormatError(
            f"not an .npz archive ({_what(head)}); expected a zip archive of .npy members",
            path=path,
        )
    arrays: dict[str, Any] = {}
    closers: list[Callable[[], None]] = []

    def close() -> None:
        for closer in closers:
            closer()

    try:
        with zipfile.ZipFile(path) as archive:
            deflated = [i for i in archive.infolist() if i.compress_type != zipfile.ZIP_STORED]
            inflated = sum(i.file_size for i in deflated)
            check_inflation(inflated, sum(i.compress_size for i in deflated), path, None)
            for info in archive.infolist():
                if not info.filename.endswith(".npy"):
                    raise FormatError(
                        "is not a .npy member; expected only .npy members",
                        path=path,
                        key=info.filename,
                    )
                arrays[info.filename[:-4]] = _member(path, archive, info, closers)
        meta = arrays.pop(METADATA_KEY, None)
        if meta is None:
            return foreign_dataset(arrays, path), close
        if not isinstance(meta, np.ndarray) or meta.ndim != 0 or meta.dtype.kind != "U":
            raise FormatError("expected a 0-d unicode string", path=path, key=METADATA_KEY)
        header = parse_header(str(meta[()]), path, METADATA_KEY)
        tensors = derive(arrays, header, path, partial(_mapped_source, path))
        return dataset_from_header(tensors, header, path), close
    except BaseException as e:
        close()
        if isinstance(e, ExpcliError | MemoryError) or not isinstance(e, Exception):
            raise
        raise _damaged(path, e) from e


def _damaged(path: Path, error: Exception) -> FormatError:
    """A library's error while reading an archive, as a FormatError."""
    if isinstance(error, ValueError):
        return FormatError(
            f"cannot be read ({error_summary(error)}); expected an .npz archive of numeric "
            "arrays (object arrays are never unpickled)",
            path=path,
        )
    return FormatError(f"corrupt or truncated .npz archive ({error_summary(error)})", path=path)


_NUMPY_HEADERS = threading.Lock()
"""Held while numpy parses a member's header: it does so with ``ast.literal_eval``, which
Python 3.11 cannot run on two threads at once (CPython gh-106905: "AST constructor
recursion depth mismatch", seen when a read-ahead thread opened shards beside a reader)."""


def _member(
    path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, closers: list[Callable[[], None]]
) -> Any:
    """A member as LazyRows (0-d and Fortran-order ones are read now, within memory)."""
    key = info.filename
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        with _NUMPY_HEADERS:
            shape, fortran, dtype = read_header(member)
        header_bytes = member.tell()
    if dtype.hasobject:
        raise FormatError(
            "holds Python objects; object arrays are never unpickled", path=path, key=key
        )
    if any(d < 0 for d in shape):
        raise FormatError(
            f"declares the shape {shape}; expected sizes of 0 or more", path=path, key=key
        )
    nbytes = math.prod(shape) * dtype.itemsize
    held = info.file_size - header_bytes
    if nbytes != held:
        raise FormatError(
            f"declares {dtype.str} data shaped {shape} ({nbytes:,} bytes) but holds {held:,} "
            "bytes; it is truncated or damaged",
            path=path,
            key=key,
        )
    deflated = info.compress_type != zipfile.ZIP_STORED
    if deflated and info.file_size > info.compress_size * _MAX_RATIO + _SLACK:
        raise FormatError(
            f"claims to inflate {info.compress_size:,} bytes into {info.file_size:,}, more "
            "than deflate can; it is damaged",
            path=path,
            key=key,
        )
    native = dtype.newbyteorder("=")
    if len(shape) < 1 and nbytes > 4 * MAX_METADATA_BYTES:  # 4 bytes per character
        raise FormatError(
            f"is a single value of {nbytes:,} bytes; expected a number or the metadata",
            path=path,
            key=key,
        )
    if fortran or len(shape) < 1:
        check_memory(nbytes, path, key)
        with archive.open(info) as member:
            with _NUMPY_HEADERS:
                return np.lib.format.read_array(member, allow_pickle=False).astype(native)
    row_bytes = math.prod(shape[1:]) * dtype.itemsize
    if deflated:
        inflating = _Inflating(path, info.filename, header_bytes, row_bytes, shape, dtype)
        closers.append(inflating.close)
        return LazyRows(shape, native, inflating.read)
    with open(path, "rb") as file:
        file.seek(info.header_offset + 26)
        name_length, extra_length = struct.unpack("<HH", file.read(4))
    start = info.header_offset + 30 + name_length + extra_length + header_bytes
    if start + shape[0] * row_bytes > path.stat().st_size:
        raise FormatError(
            "truncated: the member is shorter than its header says", path=path, key=key
        )

    def read(first: int, stop: int) -> np.ndarray:
        rows = np.empty((stop - first, *shape[1:]), dtype)
        into = rows.reshape(-1).view(np.uint8).data  # the file's bytes land here once
        with open(path, "rb", buffering=0) as file:
            file.seek(start + first * row_bytes)
            got = 0
            while got < len(into):
                count = file.readinto(into[got:])
                if not count:
                    raise FormatError("truncated member", path=path, key=key)
                got += count
        return rows if dtype == native else rows.astype(native)

    return LazyRows(shape, native, read, file_offset=start if native == dtype else None)


class _Inflating:
    """The rows of a deflated member, inflated as they are asked for.

    A read continues from where the last one stopped (reading backwards starts the member over), so
    that reading it slice by slice inflates it once and holds one slice at a time.
    """

    def __init__(
        self,
        path: Path,
        name: str,
        header_bytes: int,
        row_bytes: int,
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
    ) -> None:
        self.path, self.name, self.header_bytes = path, name, header_bytes
        self.row_bytes, self.shape, self.dtype = row_bytes, shape, dtype
        self._lock = threading.Lock()
        self._archive: zipfile.ZipFile | None = None
        self._member: IO[bytes] | None = None
        self._position = 0

    def read(self, first: int, stop: int) -> np.ndarray:
        offset, size = self.header_bytes + first * self.row_bytes, (stop - first) * self.row_bytes
        with self._lock:
            try:
                member = self._at(offset)
                data = _read_exactly(member, size)
                self._position = offset + len(data)
            except (zipfile.BadZipFile, EOFError, OSError, zlib.error, ValueError) as e:
                self._drop()
                raise FormatError(
                    f"cannot inflate rows {first}..{stop} ({error_summary(e)}); the archive is "
                    "corrupt",
                    path=self.path,
                    key=self.name,
                ) from e
        if len(data) != size:
            raise FormatError("truncated member", path=self.path, key=self.name)
        rows = np.frombuffer(data, dtype=self.dtype).reshape(stop - first, *self.shape[1:])
        return rows.astype(self.dtype.newbyteorder("="))

    def _at(self, offset: int) -> IO[bytes]:
        if self._member is None or offset < self._position:
            self._drop()
            self._archive = zipfile.ZipFile(self.path)
            self._member = self._archive.open(self.name)
            self._position = 0
        while self._position < offset:
            skipped = self._member.read(min(offset - self._position, SLICE_BYTES))
            if not skipped:
                raise EOFError("the member ended early")
            self._position += len(skipped)
        return self._member

    def _drop(self) -> None:
        for item in (self._member, self._archive):
            if item is not None:
                item.close()
        self._member = self._archive = None

    def close(self) -> None:
        """Close the archive, if a read opened it."""
        with self._lock:
            self._drop()


def _read_exactly(member: IO[bytes], size: int) -> bytes:
    parts, left = [], size
    while left > 0:
        part = member.read(min(left, SLICE_BYTES))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def read(path: Path, *, num_envs: int | None = None) -> Dataset:
    """Load an ``.npz`` archive; one without metadata is read as a full skrl memory.

    Stored members in native byte order are memory-mapped; the others (deflated, another
    byte order) are read into memory, when it has room for all of them.

    Args:
        path: File to read.
        num_envs: Unused: an ``.npz`` archive records its arrays' shapes.

    Raises:
        FormatError: Not an ``.npz`` archive, corrupt or truncated, holding object arrays,
            or with a malformed metadata member.
        SchemaError: A tensor has an unsupported dtype or disagrees with the metadata.
        ConfigError: The memory available cannot hold the members to read (said before
            reading any).
    """
    del num_envs
    lazy, close = open_lazy(path)
    try:
        members: list[Any] = list(lazy.tensors.values())  # LazyRows, or arrays already read
        unmapped = [a for a in members if isinstance(a, LazyRows) and _map_offset(a) is None]
        check_read_whole(sum(a.nbytes for a in unmapped), path)
        arrays = {name: _mapped(path, array) for name, array in lazy.tensors.items()}
    finally:
        close()
    return Dataset(arrays, lazy.state, lazy.metadata)


def _map_offset(array: LazyRows) -> int | None:
    """Where a member's bytes lie in the file as its dtype says, to be mapped; None: read it."""
    return array.file_offset if array.size > 0 else None


def _mapped(path: Path, array: Any) -> np.ndarray:
    """A stored member as a copy-on-write memory map of the file.

    Pages are read when touched, and writes stay private; anything else read whole.
    """
    offset = _map_offset(array) if isinstance(array, LazyRows) else None
    if offset is None:
        return np.asarray(array)
    return np.asarray(np.memmap(path, array.dtype, "c", offset, array.shape))


def _mapped_source(path: Path, array: Any) -> Any:
    """A stored member that ``DerivedRows`` reads from, mapped read-only where it lies whole.

    A gather then copies the cells asked for, not their whole rows.
    """
    offset = _map_offset(array) if isinstance(array, LazyRows) else None
    if offset is None or isinstance(array, DerivedRows):
        return array
    return np.memmap(path, array.dtype, "r", offset, array.shape)


def _what(head: bytes) -> str:
    """What a file that is not a zip archive holds, judging by its first bytes."""
    if not head:
        return "the file is empty"
    if head == b"\x93NUMPY":
        return "it holds a single .npy array"
    return "unrecognised content"
