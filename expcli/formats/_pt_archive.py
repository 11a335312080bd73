"""The zip archive of a ``.pt`` file, written record by record as ``torch.save`` lays it out.

PyTorch writes its archives with miniz, and this module reproduces miniz's layout byte for
byte: records stored uncompressed under ``archive/``, the data of each starting at a
multiple of 64 bytes (padding in an ``FB`` extra field), a data descriptor after the data
(so that sizes and CRC-32 may follow the data, which is what lets a record be streamed),
and zip64 fields exactly where miniz puts them. Matching it keeps every torch reader
working, including ``torch.load``'s option to compute storage offsets without reading
the headers (``calculate_storage_offsets``).
"""

from __future__ import annotations

import contextlib
import hashlib
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from expcli.errors import InvalidValueError

__all__ = ["ALIGNMENT", "PtArchiveWriter", "Record", "local_header"]

ALIGNMENT = 64
"""Where record data starts: torch's default ``storage_alignment``, recorded in the file."""

_PREFIX = "archive/"  # what torch.save names the archive when given a file object
_MAX32 = 0xFFFFFFFF  # miniz switches to zip64 fields at this value (not above it)
_UTF8_NAMES, _DESCRIPTOR_FOLLOWS = 0x0800, 0x0008
_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_ZIP64_END = struct.Struct("<IQHHIIQQQQ")
_ZIP64_LOCATOR = struct.Struct("<IIQI")
_END = struct.Struct("<IHHHHIIH")
_FORMAT_VERSION = b"1"  # storages are numbered in the order the pickle meets them
_FILE_FORMAT_VERSION = b"3\n"  # the ``version`` record torch.save writes


@dataclass(frozen=True)
class _Entry:
    name: bytes
    offset: int
    size: int
    crc: int


class Record:
    """The data of one record being written: ``write`` bytes until the declared size."""

    def __init__(self, file: IO[bytes], size: int) -> None:
        self.size = size
        self.written = 0
        self.crc = 0
        self._file = file

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes (any C-contiguous buffer), computing the CRC-32 on the way."""
        view = memoryview(data).cast("B")
        self.crc = zlib.crc32(view, self.crc)
        self._file.write(view)
        self.written += len(view)


class PtArchiveWriter:
    """Writes a ``.pt`` archive to a binary file opened at its start.

    Call ``write_pickle`` once, then ``storage`` for each storage the pickle refers to, in
    the order the pickle refers to them, then ``close``.
    """

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self._offset = 0
        self._entries: list[_Entry] = []

    def write_pickle(self, data: bytes) -> None:
        """``data.pkl`` and the records torch.save writes right after it."""
        self._small("data.pkl", data)
        self._small(".format_version", _FORMAT_VERSION)
        self._small(".storage_alignment", str(ALIGNMENT).encode())
        self._small("byteorder", b"little")

    @contextlib.contextmanager
    def storage(self, key: str, size: int) -> Iterator[Record]:
        """Stream the ``size`` bytes (little-endian) of storage ``data/<key>``.

        Raises:
            ValueError: Other than ``size`` bytes were written.
        """
        with self._record(f"data/{key}", size) as record:
            yield record

    def close(self, serialization_id: str | None = None) -> None:
        """The closing records and the central directory; the file stays open.

        Args:
            serialization_id: The 40 digits of ``.data/serialization_id``; by default a
                hash of the record names and CRCs (torch's own is similar, and only logged).
        """
        self._small("version", _FILE_FORMAT_VERSION)
        self._small(".data/serialization_id", (serialization_id or self._id()).encode())
        directory = bytearray()
        for entry in self._entries:
            directory += _central_header(entry)
        start, size, count = self._offset, len(directory), len(self._entries)
        # zip64 end record: its size, versions (made by, needed), disks; entries, size, start
        zip64 = (0x06064B50, _ZIP64_END.size - 12, 0x031E, 0x002D, 0, 0)
        directory += _ZIP64_END.pack(*zip64, count, count, size, start)
        directory += _ZIP64_LOCATOR.pack(0x07064B50, 0, start + size, 1)
        short = min(count, 0xFFFF)
        directory += _END.pack(
            0x06054B50, 0, 0, short, short, min(size, _MAX32), min(start, _MAX32), 0
        )
        self._write(directory)

    def _small(self, name: str, data: bytes) -> None:
        with self._record(name, len(data)) as record:
            record.write(data)

    @contextlib.contextmanager
    def _record(self, name: str, size: int) -> Iterator[Record]:
        full = (_PREFIX + name).encode()
        offset = self._offset
        self._write(local_header(full, offset, size))
        record = Record(self._file, size)
        yield record
        if record.written != size:
            raise InvalidValueError(f"{name}: {record.written} bytes written, {size} declared")
        self._offset += size
        if size:
            wide = size >= _MAX32 or offset >= _MAX32
            sizes = struct.pack("<QQ" if wide else "<II", size, size)
            self._write(struct.pack("<II", 0x08074B50, record.crc) + sizes)
        self._entries.append(_Entry(full, offset, size, record.crc))

    def _write(self, data: bytes | bytearray) -> None:
        self._file.write(data)
        self._offset += len(data)

    def _id(self) -> str:
        digest = hashlib.blake2b(digest_size=16)
        for entry in self._entries:
            digest.update(entry.name + struct.pack("<I", entry.crc))
        value = digest.digest()
        halves = int.from_bytes(value[:8], "little"), int.from_bytes(value[8:], "little")
        return "".join(f"{half:020d}" for half in halves)


def local_header(name: bytes, offset: int, size: int) -> bytes:
    """The local zip header of record ``name`` of ``size`` bytes at ``offset``.

    Padded so that its data starts at a multiple of ``ALIGNMENT``; sizes and CRC follow the data.
    """
    zip64 = _zip64(size, 0, offset)  # miniz writes a zero compressed size here
    padding = -(offset + _LOCAL.size + len(name) + len(zip64) + 4) % ALIGNMENT
    extra = zip64 + b"FB" + struct.pack("<H", padding) + b"Z" * padding
    flags = _UTF8_NAMES | (_DESCRIPTOR_FOLLOWS if size else 0)
    fields = (0x04034B50, 0, flags, 0, 0, 0, 0, 0, 0, len(name), len(extra))
    return _LOCAL.pack(*fields) + name + extra


def _central_header(entry: _Entry) -> bytes:
    """The central directory entry of a record."""
    extra = _zip64(entry.size, entry.size, entry.offset)
    flags = _UTF8_NAMES | (_DESCRIPTOR_FOLLOWS if entry.size else 0)
    size = min(entry.size, _MAX32)
    # versions, flags, method, time, date; crc, sizes; lengths; disk, attributes, offset
    head = (0x02014B50, 0, 0, flags, 0, 0, 0, entry.crc, size, size)
    tail = (len(entry.name), len(extra), 0, 0, 0, 0, min(entry.offset, _MAX32))
    return _CENTRAL.pack(*head, *tail) + entry.name + extra


def _zip64(size: int, compressed: int, offset: int) -> bytes:
    """The zip64 extra field as miniz writes it.

    The sizes if the size needs 64 bits, the offset if the offset does; nothing if neither does.
    """
    fields = struct.pack("<QQ", size, compressed) if size >= _MAX32 else b""
    fields += struct.pack("<Q", offset) if offset >= _MAX32 else b""
    return struct.pack("<HH", 1, len(fields)) + fields if fields else b""
