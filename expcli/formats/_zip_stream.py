"""A zip archive of stored records, written front to back in one pass over the data.

Each record's CRC-32 and the whole file's are computed on the way. The layout is miniz's
(what ``torch.save`` writes): a local header, the data starting at a multiple of 64 bytes
(padding in an ``FB`` extra field), a data descriptor after the data (so that sizes and
CRC may follow the data and the file is never sought), and zip64 fields where the values
need them. Any zip reader (``zipfile``, numpy, torch, ``unzip``) reads it, and aligned
data can be mapped in place. The whole file's CRC-32 (what a sharded folder's manifest
records) is combined from the records' CRCs (``crc32_combine``) instead of read a second
time.
"""

from __future__ import annotations

import contextlib
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from expcli.errors import InvalidValueError

__all__ = ["ALIGNMENT", "Record", "ZipStreamWriter", "crc32_combine", "local_header"]

ALIGNMENT = 64
"""Where record data starts (torch's default ``storage_alignment``)."""

_MAX32 = 0xFFFFFFFF  # miniz switches to zip64 fields at this value (not above it)
_UTF8_NAMES, _DESCRIPTOR_FOLLOWS = 0x0800, 0x0008
_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_ZIP64_END = struct.Struct("<IQHHIIQQQQ")
_ZIP64_LOCATOR = struct.Struct("<IIQI")
_END = struct.Struct("<IHHHHIIH")
_POLY = 0xEDB88320  # CRC-32, bits reflected
_PIECE = 1 << 20  # bytes checked then written together, within a CPU's cache


def _multmodp(a: int, b: int) -> int:
    """``a * b`` modulo the CRC-32 polynomial, bits reflected (zlib's ``multmodp``)."""
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if a & (m - 1) == 0:
                return p
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


def _powers() -> list[int]:
    table, p = [], 1 << 30  # x^1
    for _ in range(32):
        table.append(p)
        p = _multmodp(p, p)
    return table


_X2N = _powers()  # x^(2^n) modulo the polynomial


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32 of ``A + B`` from ``crc32(A)``, ``crc32(B)`` and ``len(B)``.

    zlib's ``crc32_combine``, which Python's zlib does not expose; microseconds a call.
    """
    p, n, k = 1 << 31, length2, 3  # x^(8 * length2): k starts at 3 for the bytes' 8 bits
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return _multmodp(p, crc1) ^ crc2


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
        """Append bytes (any C-contiguous buffer), computing the CRC-32 on the way.

        A piece at a time, so that the bytes the CRC just read are still in the CPU's
        cache when they are written: a large buffer is then read from memory once, not
        twice.
        """
        view = memoryview(data).cast("B")
        for start in range(0, len(view), _PIECE):
            piece = view[start : start + _PIECE]
            self.crc = zlib.crc32(piece, self.crc)
            self._file.write(piece)
        self.written += len(view)


class ZipStreamWriter:
    """Writes a zip archive of stored records to a binary stream opened at its start.

    ``record`` each record, then ``close``; ``size`` and ``crc`` are then the whole
    file's byte count and CRC-32.
    """

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self.size = 0
        self.crc = 0
        self._entries: list[_Entry] = []

    @property
    def entries(self) -> list[tuple[bytes, int]]:
        """``(name, crc)`` of each record written, in order."""
        return [(e.name, e.crc) for e in self._entries]

    def small(self, name: bytes, data: bytes) -> None:
        """A record whose bytes are all at hand."""
        with self.record(name, len(data)) as record:
            record.write(data)

    @contextlib.contextmanager
    def record(self, name: bytes, size: int) -> Iterator[Record]:
        """Stream the ``size`` bytes of record ``name``.

        Raises:
            InvalidValueError: Other than ``size`` bytes were written.
        """
        offset = self.size
        self._write(local_header(name, offset, size))
        record = Record(self._file, size)
        yield record
        if record.written != size:
            raise InvalidValueError(
                f"{name.decode(errors='replace')}: {record.written} bytes written, {size} declared"
            )
        self.crc = crc32_combine(self.crc, record.crc, size)
        self.size += size
        if size:
            wide = size >= _MAX32 or offset >= _MAX32
            sizes = struct.pack("<QQ" if wide else "<II", size, size)
            self._write(struct.pack("<II", 0x08074B50, record.crc) + sizes)
        self._entries.append(_Entry(name, offset, size, record.crc))

    def close(self) -> None:
        """The central directory and end records; the file stays open."""
        directory = bytearray()
        for entry in self._entries:
            directory += _central_header(entry)
        start, size, count = self.size, len(directory), len(self._entries)
        # zip64 end record: its size, versions (made by, needed), disks; entries, size, start
        zip64 = (0x06064B50, _ZIP64_END.size - 12, 0x031E, 0x002D, 0, 0)
        directory += _ZIP64_END.pack(*zip64, count, count, size, start)
        directory += _ZIP64_LOCATOR.pack(0x07064B50, 0, start + size, 1)
        short = min(count, 0xFFFF)
        directory += _END.pack(
            0x06054B50, 0, 0, short, short, min(size, _MAX32), min(start, _MAX32), 0
        )
        self._write(directory)

    def _write(self, data: bytes | bytearray) -> None:
        self._file.write(data)
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)


def local_header(name: bytes, offset: int, size: int) -> bytes:
    """The local header of record ``name`` of ``size`` bytes at ``offset``.

    It is padded so that the data starts at a multiple of ``ALIGNMENT``; sizes and CRC
    follow the data.
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

    The sizes if the size needs 64 bits, the offset if the offset does; nothing if
    neither does.
    """
    fields = struct.pack("<QQ", size, compressed) if size >= _MAX32 else b""
    fields += struct.pack("<Q", offset) if offset >= _MAX32 else b""
    return struct.pack("<HH", 1, len(fields)) + fields if fields else b""
