"""What an Arrow IPC record batch declares, read from its metadata before pyarrow decodes it.

pyarrow inflates a compressed record batch whole when it is asked for, to whatever size the
first eight bytes of each of its buffers declare: a few kilobytes of a hostile file can ask
for terabytes. So each batch's message (a flatbuffer: its rows, its buffers, whether they are
compressed) is read here first, the sizes its compressed buffers declare are summed, and a
batch that would inflate like a bomb is refused by ``_guards.check_inflation``. The rows are
counted from the same metadata, so that opening an IPC file decodes no batch.

The flatbuffer tables read (``Message``, ``RecordBatch``, ``DictionaryBatch``, ``Footer``)
and their field numbers are those of Arrow's ``Message.fbs`` and ``File.fbs``; every offset is
checked against the bytes it points into.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from expcli.errors import FormatError
from expcli.formats._flatbuffer import Damaged, Flatbuffer
from expcli.formats._guards import MAX_METADATA_BYTES, check_inflation

__all__ = ["Batch", "declared", "file_batches"]

_RECORD_BATCH, _DICTIONARY_BATCH = 3, 2  # MessageHeader union's types
_CONTINUATION = 0xFFFFFFFF
_MAGIC = b"ARROW1"


@dataclass(frozen=True, slots=True)
class Batch:
    """One record (or dictionary) batch as its message declares it.

    Attributes:
        rows: Its rows.
        dictionary: Whether it is a dictionary batch (rows of a dictionary, not of the table).
    """

    rows: int
    dictionary: bool


def declared(
    metadata: bytes, body_length: int, read: Callable[[int], bytes], path: Path, where: str
) -> Batch | None:
    """What a message declares: its rows, its kind (None for a schema or another message).

    ``read(offset)``: the eight bytes at ``offset`` of the message's body. A compressed batch
    whose buffers declare a bomb is refused.

    Raises:
        FormatError: The metadata points outside itself or the body, or the batch is a bomb.
    """
    try:
        return _declared(Flatbuffer(metadata), body_length, read, path, where)
    except Damaged:
        raise _damaged(path, len(metadata)) from None


def _declared(
    flat: Flatbuffer, body_length: int, read: Callable[[int], bytes], path: Path, where: str
) -> Batch | None:
    message = flat.root()
    kind = flat.scalar(message, 1, "<B")
    header = flat.child(message, 2)
    if header is None or kind not in (_RECORD_BATCH, _DICTIONARY_BATCH):
        return None
    batch = header if kind == _RECORD_BATCH else flat.child(header, 1)
    if batch is None:
        return None
    rows = flat.scalar(batch, 0, "<q")
    inflated = body_length
    if flat.child(batch, 3) is not None:  # BodyCompression: each buffer opens with its size
        inflated = 0
        for at in flat.structs(batch, 2, 16):
            offset, length = flat.unpack("<q", at), flat.unpack("<q", at + 8)
            if length == 0:
                continue
            if not (0 <= offset and 8 <= length and offset + length <= body_length):
                raise FormatError(f"has a compressed buffer outside the body of {where}", path=path)
            size = struct.unpack("<q", read(offset))[0]
            inflated += length - 8 if size == -1 else max(size, 0)
        check_inflation(inflated, body_length, path, where)
    if not 0 <= rows <= 8 * inflated + 8:  # a column of rows takes a bit of each at least
        raise FormatError(
            f"declares {rows:,} rows in {inflated:,} bytes of {where}; the file is damaged",
            path=path,
        )
    return Batch(rows, kind == _DICTIONARY_BATCH)


def file_batches(path: Path) -> list[Batch] | None:
    """The record batches of an IPC file, by its footer, then the dictionaries it holds.

    None where the file does not end as an IPC file does (an IPC stream has no footer).

    Raises:
        FormatError: A damaged footer or block, or a batch that is a bomb.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        return _file_batches(fd, os.fstat(fd).st_size, path)
    finally:
        os.close(fd)


def _damaged(path: Path, size: int) -> FormatError:
    return FormatError(
        f"has Arrow IPC metadata that points outside its {size:,} bytes; the file is damaged",
        path=path,
    )


def _at(read: Callable[[int, int], bytes], start: int, offset: int) -> bytes:
    return read(start + offset, 8)


def _file_batches(fd: int, size: int, path: Path) -> list[Batch] | None:
    def read(offset: int, length: int) -> bytes:
        data = os.pread(fd, length, offset) if 0 <= offset else b""
        if len(data) != length:
            raise FormatError("has an Arrow IPC block past its end; it is truncated", path=path)
        return data

    if size < 18 or read(size - 6, 6) != _MAGIC:
        return None
    length = struct.unpack("<i", read(size - 10, 4))[0]
    if not 0 < length <= min(size - 18, MAX_METADATA_BYTES):
        raise FormatError(f"has an Arrow IPC footer of {length:,} bytes; damaged", path=path)
    try:
        return _blocks(Flatbuffer(read(size - 10 - length, length)), read, size, path)
    except Damaged:
        raise _damaged(path, length) from None


def _blocks(
    footer: Flatbuffer, read: Callable[[int, int], bytes], size: int, path: Path
) -> list[Batch]:
    root = footer.root()
    batches: list[Batch] = []
    blocks = [(3, at) for at in footer.structs(root, 3, 24)]
    blocks += [(2, at) for at in footer.structs(root, 2, 24)]
    for number, (field, at) in enumerate(blocks):
        offset, meta, body = (
            footer.unpack("<q", at),
            footer.unpack("<i", at + 8),
            footer.unpack("<q", at + 16),
        )
        where = f"record batch {number}" if field == 3 else "a dictionary batch"
        if not (0 <= offset and 8 <= meta <= MAX_METADATA_BYTES and 0 <= body <= size):
            raise FormatError(f"has a damaged block for {where} in its footer", path=path)
        head = read(offset, 8)
        skip = 8 if struct.unpack_from("<I", head)[0] == _CONTINUATION else 4
        flat = read(offset + skip, meta - skip)
        found = declared(flat, body, partial(_at, read, offset + meta), path, where)
        if found is None or found.dictionary != (field == 2):
            raise FormatError(f"has a footer block for {where} that is not one", path=path)
        batches.append(found)
    return batches
