"""Attributes and scalar metadata of an HDF5 file, checked before HDF5 reads them.

HDF5 trusts what a file declares. A damaged attribute may declare a dataspace of billions
of values, and variable-length strings (expcli's metadata attribute, D4RL's metadata
strings, tianshou's type tags) live in global heap collections whose reader loops forever
on an object of size zero, or allocates whatever size a collection claims. So before such
a value is read: its declared size is checked, and for variable-length values the heap IDs
are found in the file's own bytes (in the object header of the attribute's owner, or in the
dataset's storage) and every collection they point to is walked here, each size checked
against the file. What this module cannot locate (attributes in dense storage, filtered
chunks) is left to HDF5.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import h5py

from expcli.errors import FormatError
from expcli.formats._error_summary import error_summary
from expcli.formats._guards import MAX_METADATA_BYTES

__all__ = ["read_attribute", "read_scalar"]

_MAX_HEAP_IDS = 4096  # variable-length values one attribute or scalar may hold
_ATTRIBUTE, _CONTINUATION, _LAYOUT = 0x000C, 0x0010, 0x0008
_SHARED = 0x02  # message flag: the message lives elsewhere
_HeapId = tuple[int, int, int]  # value length, collection address, object index


class _Unknown(Exception):
    """Where the heap IDs lie could not be told; HDF5 reads the value unchecked."""


class _Corrupt(Exception):
    """The object header or the storage holding the heap IDs is damaged."""


def read_attribute(obj: Any, name: str, path: Path, key: str) -> Any:
    """``obj.attrs[name]`` after checking what it declares, or None without such attribute.

    Raises:
        FormatError: The attribute declares more than metadata can be, or refers to a
            damaged global heap, or cannot be read.
    """
    try:
        if name not in obj.attrs:
            return None
        attr = h5py.h5a.open(obj.id, name.encode())
        count = _points(attr.get_space())
        kind = attr.get_type()
    except Exception as e:
        raise _unreadable(path, key, e) from e
    _check_size(count, kind, path, key)
    if _variable(kind):
        ids = _located(lambda: _attribute_ids(obj, name, count), path, key)
        _check_heaps(obj.file, ids, path, key)
    try:
        return obj.attrs[name]
    except MemoryError:
        raise
    except Exception as e:
        raise _unreadable(path, key, e) from e


def read_scalar(dataset: Any, path: Path, key: str) -> Any:
    """``dataset[()]`` of a small dataset (scalar metadata) after the same checks.

    Raises:
        FormatError: As ``read_attribute``.
    """
    try:
        count = _points(dataset.id.get_space())
        kind = dataset.id.get_type()
    except Exception as e:
        raise _unreadable(path, key, e) from e
    _check_size(count, kind, path, key)
    if _variable(kind):
        ids = _located(lambda: _dataset_ids(dataset, count), path, key)
        _check_heaps(dataset.file, ids, path, key)
    try:
        return dataset[()]
    except MemoryError:
        raise
    except Exception as e:
        raise _unreadable(path, key, e) from e


def _located(find: Callable[[], list[_HeapId]], path: Path, key: str) -> list[_HeapId]:
    """The heap IDs ``find`` locates; none where it cannot tell where they lie.

    Raises:
        FormatError: The structures holding them are damaged.
    """
    try:
        return find()
    except _Unknown:
        return []
    except _Corrupt as e:
        raise FormatError(
            f"cannot be located in the file ({e}); the file is corrupt", path=path, key=key
        ) from e


def _unreadable(path: Path, key: str, error: Exception) -> FormatError:
    return FormatError(
        f"cannot be read ({error_summary(error)}); the file is corrupt", path=path, key=key
    )


def _points(space: Any) -> int:
    kind = space.get_simple_extent_type()
    return 0 if kind == h5py.h5s.NULL else int(space.get_simple_extent_npoints())


def _variable(kind: Any) -> bool:
    """Whether values of this HDF5 type live in the global heap."""
    if kind.get_class() == h5py.h5t.VLEN:
        return True
    return bool(kind.get_class() == h5py.h5t.STRING and kind.is_variable_str())


def _check_size(count: int, kind: Any, path: Path, key: str) -> None:
    declared = count * int(kind.get_size())
    if declared > MAX_METADATA_BYTES or (_variable(kind) and count > _MAX_HEAP_IDS):
        raise FormatError(
            f"declares {count:,} values of {int(kind.get_size())} bytes; expected metadata "
            f"of at most {MAX_METADATA_BYTES:,} bytes",
            path=path,
            key=key,
        )


class _File:
    """The file's bytes, read by offset from the start of the HDF5 data (after a user block)."""

    def __init__(self, h5: Any) -> None:
        self.path = h5.filename
        self.base = int(h5.userblock_size)
        self.addr, self.length = h5.id.get_create_plist().get_sizes()
        self.size = int(h5.id.get_filesize())
        self._file = open(self.path, "rb")

    def close(self) -> None:
        self._file.close()

    def read(self, offset: int, count: int) -> bytes:
        if offset < 0 or count < 0 or offset + count > self.size:
            raise FormatError("points outside the file", path=self.path)
        self._file.seek(self.base + offset)
        data = self._file.read(count)
        if len(data) != count:
            raise FormatError("points past the end of the file", path=self.path)
        return data

    def number(self, data: bytes, at: int, size: int) -> int:
        return int.from_bytes(data[at : at + size], "little")


def _attribute_ids(obj: Any, name: str, count: int) -> list[_HeapId]:
    """The heap IDs of a compact attribute, from its owner's object header."""
    with _reading(obj.file) as file:
        address = int(h5py.h5o.get_info(obj.id).addr)
        for data in _messages(file, address):
            if data is not None and data[0] == _ATTRIBUTE:
                found = _attribute_data(data[1], name)
                if found is not None:
                    return _ids(file, found, count)
    raise _Unknown  # in dense storage, or shared


def _dataset_ids(dataset: Any, count: int) -> list[_HeapId]:
    """The heap IDs of a dataset's values, from its contiguous or compact storage."""
    with _reading(dataset.file) as file:
        offset = dataset.id.get_offset()
        if offset is not None:
            return _ids(file, file.read(int(offset), count * (8 + file.addr)), count)
        address = int(h5py.h5o.get_info(dataset.id).addr)
        for data in _messages(file, address):
            body = data[1] if data is not None and data[0] == _LAYOUT else b""
            if len(body) >= 4 and body[0] == 3 and body[1] == 0:  # version 3, compact
                size = struct.unpack_from("<H", body, 2)[0]
                return _ids(file, body[4 : 4 + size], count)
    raise _Unknown  # chunked


@contextlib.contextmanager
def _reading(h5: Any) -> Iterator[_File]:
    """The file's bytes while heap IDs are located; what fails there marks it corrupt."""
    file = _File(h5)
    try:
        yield file
    except _Unknown:
        raise
    except Exception as e:
        raise _Corrupt(error_summary(e)) from e
    finally:
        file.close()


def _ids(file: _File, raw: bytes, count: int) -> list[_HeapId]:
    """``(length, collection address, object index)`` of each of ``count`` heap IDs."""
    width = 8 + file.addr
    if len(raw) < count * width:
        raise _Corrupt(f"{len(raw)} bytes for {count} heap IDs")
    return [
        (
            file.number(raw, i * width, 4),
            file.number(raw, i * width + 4, file.addr),
            file.number(raw, i * width + 4 + file.addr, 4),
        )
        for i in range(count)
    ]


def _messages(file: _File, address: int) -> list[tuple[int, bytes] | None]:
    """``(type, data)`` of every message of an object header.

    Both versions; following continuation blocks; a shared message is None.
    """
    head = file.read(address, 16)
    blocks: list[tuple[int, int, bool]] = []
    if head[:4] == b"OHDR":
        flags = head[5]
        at = 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
        width = 1 << (flags & 3)
        size = file.number(file.read(address + at, width), 0, width)
        blocks.append((address + at + width, size, True))
        creation = bool(flags & 0x04)
    elif head[0] == 1:
        blocks.append((address + 16, struct.unpack_from("<I", head, 8)[0], False))
        creation = False
    else:
        raise _Corrupt(f"no object header at {address}")
    found: list[tuple[int, bytes] | None] = []
    while blocks and len(found) < 4096:
        start, size, v2 = blocks.pop(0)
        data = file.read(start, size)
        at = 0
        while at + (4 if v2 else 8) <= len(data):
            if v2:
                kind, flags = data[at], data[at + 3]
                length = struct.unpack_from("<H", data, at + 1)[0]
                at += 4 + (2 if creation else 0)
            else:
                kind, length, flags = *struct.unpack_from("<HH", data, at), data[at + 4]
                at += 8
            body = data[at : at + length]
            at += length
            if kind == _CONTINUATION:
                target = file.number(body, 0, file.addr)
                extent = file.number(body, file.addr, file.length)
                if v2:  # "OCHK", then messages, then a checksum
                    blocks.append((target + 4, extent - 8, True))
                else:
                    blocks.append((target, extent, False))
            found.append(None if flags & _SHARED else (kind, body))
    return found


def _attribute_data(body: bytes, name: str) -> bytes | None:
    """The data of an attribute message, when it is the attribute ``name``."""
    version = body[0]
    name_size, type_size, space_size = struct.unpack_from("<HHH", body, 2)
    if body[1] & 0x03:  # datatype or dataspace shared: not located here
        raise _Unknown
    if version == 1:  # each field padded to a multiple of 8 bytes
        at = 8
        found = body[at : at + name_size].rstrip(b"\0")
        at += sum((n + 7) // 8 * 8 for n in (name_size, type_size, space_size))
    elif version in (2, 3):
        at = 8 if version == 2 else 9
        found = body[at : at + name_size].rstrip(b"\0")
        at += name_size + type_size + space_size
    else:
        raise _Corrupt(f"attribute message of version {version}")
    return body[at:] if found == name.encode() else None


def _check_heaps(h5: Any, ids: list[_HeapId], path: Path, key: str) -> None:
    """Walk every global heap collection the heap IDs point to, as HDF5 would.

    What would make HDF5 loop or over-allocate is refused.
    """
    file = _File(h5)
    try:
        collections: dict[int, dict[int, int]] = {}
        for length, address, index in ids:
            if length == 0 and address == 0:
                continue  # an empty value: HDF5 reads no heap
            if address not in collections:
                collections[address] = _collection(file, address, path, key)
            size = collections[address].get(index)
            if size is None or length > size:
                raise FormatError(
                    f"refers to heap object {index} of {length} bytes, which the global heap "
                    f"at {address} does not hold; the file is corrupt",
                    path=path,
                    key=key,
                )
    finally:
        file.close()


def _collection(file: _File, address: int, path: Path, key: str) -> dict[int, int]:
    """Object index -> size of a global heap collection, checked object by object."""

    def corrupt(what: str) -> FormatError:
        return FormatError(
            f"the global heap at {address} {what}; the file is corrupt", path=path, key=key
        )

    head = file.read(address, 8 + file.length)
    if head[:4] != b"GCOL" or head[4] != 1:
        raise corrupt("has no GCOL signature")
    size = file.number(head, 8, file.length)
    if not 8 + file.length < size <= min(file.size - address, MAX_METADATA_BYTES + (1 << 20)):
        raise corrupt(f"declares {size:,} bytes")
    data = file.read(address, size)
    header = 8 + file.length  # index, references, reserved, size
    objects: dict[int, int] = {}
    at = 8 + file.length
    while at < size:
        if at + header > size:
            break  # too small for an object: free space
        index = file.number(data, at, 2)
        length = file.number(data, at + 8, file.length)
        need = length if index == 0 else header + (length + 7) // 8 * 8
        if need < header or at + need > size or index in objects:
            raise corrupt(f"holds object {index} of {length:,} bytes at {at}")
        if index:
            objects[index] = length
        at += need
    return objects
