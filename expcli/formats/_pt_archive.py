"""The zip archive of a ``.pt`` file, written record by record as ``torch.save`` lays it out.

PyTorch writes its archives with miniz, and ``_zip_stream`` reproduces miniz's layout byte
for byte: records stored uncompressed under ``archive/``, the data of each starting at a
multiple of 64 bytes, a data descriptor after the data (so that a record can be streamed),
and zip64 fields exactly where miniz puts them. Matching it keeps every torch reader
working, including ``torch.load``'s option to compute storage offsets without reading
the headers (``calculate_storage_offsets``). This module adds the records torch expects.
"""

from __future__ import annotations

import contextlib
import hashlib
import struct
from collections.abc import Iterator
from typing import IO

from expcli.formats._zip_stream import ALIGNMENT, Record, ZipStreamWriter, local_header

__all__ = ["ALIGNMENT", "PtArchiveWriter", "Record", "local_header"]

_PREFIX = "archive/"  # what torch.save names the archive when given a file object
_FORMAT_VERSION = b"1"  # storages are numbered in the order the pickle meets them
_FILE_FORMAT_VERSION = b"3\n"  # the ``version`` record torch.save writes


class PtArchiveWriter:
    """Writes a ``.pt`` archive to a binary file opened at its start.

    Call ``write_pickle`` once, then ``storage`` for each storage the pickle refers to, in
    the order the pickle refers to them, then ``close``.
    """

    def __init__(self, file: IO[bytes]) -> None:
        self._zip = ZipStreamWriter(file)

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
            InvalidValueError: Other than ``size`` bytes were written.
        """
        with self._zip.record((_PREFIX + f"data/{key}").encode(), size) as record:
            yield record

    def close(self, serialization_id: str | None = None) -> None:
        """The closing records and the central directory; the file stays open.

        Args:
            serialization_id: The 40 digits of ``.data/serialization_id``; by default a
                hash of the record names and CRCs (torch's own is similar, and only logged).
        """
        self._small("version", _FILE_FORMAT_VERSION)
        self._small(".data/serialization_id", (serialization_id or self._id()).encode())
        self._zip.close()

    def _small(self, name: str, data: bytes) -> None:
        self._zip.small((_PREFIX + name).encode(), data)

    def _id(self) -> str:
        digest = hashlib.blake2b(digest_size=16)
        for name, crc in self._zip.entries:
            digest.update(name + struct.pack("<I", crc))
        value = digest.digest()
        halves = int.from_bytes(value[:8], "little"), int.from_bytes(value[8:], "little")
        return "".join(f"{half:020d}" for half in halves)
