"""NumPy ``.npz`` archives: one ``.npy`` member per tensor plus the metadata as a 0-d string.

Written as ``np.savez`` would (uncompressed), but member by member and slice by slice.
Read with ``allow_pickle=False``: object arrays, which would need unpickling, are refused.
"""

from __future__ import annotations

import math
import struct
import zipfile
from pathlib import Path
from typing import IO, Any

import numpy as np

from expcli.errors import FormatError, SchemaError
from expcli.formats._atomic import atomic_write
from expcli.formats.dataset import Dataset
from expcli.formats.lazy import LazyRows, row_chunks
from expcli.formats.registry import (
    dataset_from_header,
    encode_header,
    error_summary,
    foreign_dataset,
    parse_header,
)
from expcli.spec import METADATA_KEY

__all__ = ["open_lazy", "read", "write", "write_to"]


_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")


def write(dataset: Dataset, path: Path, *, overwrite: bool) -> None:
    """Write every tensor as a ``.npy`` member, plus the metadata member ``__expcli__``.

    Members are stored uncompressed and written slice of rows by slice of rows, so a
    dataset read lazily from another file is never held in memory whole.
    """
    text = encode_header(dataset.header(), path)
    with atomic_write(path, overwrite=overwrite) as f:
        write_to(dataset, f, text)


def write_to(dataset: Dataset, file: IO[bytes], header: str) -> None:
    """Write the archive to an open ``file`` (a stream will do: zip entries then carry
    their sizes after their data), with ``header`` (``encode_header``'s) as metadata."""
    text = np.array(header)
    with zipfile.ZipFile(file, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name in sorted(dataset.tensors):
            _write_member(archive, name, dataset.tensors[name])
        _write_member(archive, METADATA_KEY, text)


def _write_member(archive: zipfile.ZipFile, name: str, array: Any) -> None:
    header = {
        "descr": np.lib.format.dtype_to_descr(np.dtype(array.dtype)),
        "fortran_order": False,
        "shape": tuple(array.shape),
    }
    with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
        np.lib.format.write_array_header_2_0(member, header)
        if array.ndim == 0 or array.size == 0:
            member.write(np.ascontiguousarray(array).tobytes())
            return
        chunks = row_chunks(array)
        for start in chunks:
            rows = np.ascontiguousarray(array[start : start + chunks.step])
            member.write(rows.reshape(-1).view(np.uint8).data)


def open_lazy(path: Path) -> Dataset:
    """Like ``read``, but members stored uncompressed stay on disk as ``LazyRows``.

    Raises:
        FormatError, SchemaError: As ``read``.
    """
    with open(path, "rb") as file:
        head = file.read(6)
    if not head.startswith(_ZIP_MAGICS):
        raise FormatError(
            f"not an .npz archive ({_what(head)}); expected a zip archive of .npy members",
            path=path,
        )
    arrays: dict[str, Any] = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if not info.filename.endswith(".npy"):
                    raise FormatError(
                        "is not a .npy member; expected only .npy members",
                        path=path,
                        key=info.filename,
                    )
                arrays[info.filename[:-4]] = _member(path, archive, info)
    except (FormatError, SchemaError):
        raise
    except ValueError as e:
        raise FormatError(
            f"cannot be read ({error_summary(e)}); expected an .npz archive of numeric "
            "arrays (object arrays are never unpickled)",
            path=path,
        ) from e
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, RuntimeError) as e:
        raise FormatError(
            f"corrupt or truncated .npz archive ({error_summary(e)})", path=path
        ) from e
    meta = arrays.pop(METADATA_KEY, None)
    if meta is None:
        return foreign_dataset({k: np.asarray(v) for k, v in arrays.items()}, path)
    meta = np.asarray(meta)
    if meta.ndim != 0 or meta.dtype.kind != "U":
        raise FormatError("expected a 0-d unicode string", path=path, key=METADATA_KEY)
    return dataset_from_header(arrays, parse_header(str(meta[()]), path, METADATA_KEY), path)


def _member(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Any:
    """A stored C-order member as LazyRows over the file; anything else read now."""
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, fortran, dtype = read_header(member)
        if dtype.hasobject:
            raise FormatError(
                "holds Python objects; object arrays are never unpickled",
                path=path,
                key=info.filename,
            )
        if info.compress_type != zipfile.ZIP_STORED or fortran or len(shape) < 1:
            return np.lib.format.read_array(archive.open(info), allow_pickle=False)
        header_bytes = member.tell()
    with open(path, "rb") as file:
        file.seek(info.header_offset + 26)
        name_length, extra_length = struct.unpack("<HH", file.read(4))
    start = info.header_offset + 30 + name_length + extra_length + header_bytes
    row_bytes = math.prod(shape[1:]) * dtype.itemsize
    if start + shape[0] * row_bytes > path.stat().st_size:
        raise FormatError(
            "truncated: the member is shorter than its header says", path=path, key=info.filename
        )

    def read(first: int, stop: int) -> np.ndarray:
        with open(path, "rb") as file:
            file.seek(start + first * row_bytes)
            data = file.read((stop - first) * row_bytes)
        if len(data) != (stop - first) * row_bytes:
            raise FormatError("truncated member", path=path, key=info.filename)
        return np.frombuffer(data, dtype=dtype).reshape(stop - first, *shape[1:]).copy()

    return LazyRows(shape, dtype, read, file_offset=start)


def read(path: Path, *, num_envs: int | None = None) -> Dataset:
    """Load an ``.npz`` archive; one without metadata is read as a full skrl memory.

    Args:
        path: File to read.
        num_envs: Unused: an ``.npz`` archive records its arrays' shapes.

    Raises:
        FormatError: Not an ``.npz`` archive, corrupt or truncated, holding object arrays,
            or with a malformed metadata member.
        SchemaError: A tensor has an unsupported dtype or disagrees with the metadata.
    """
    del num_envs
    lazy = open_lazy(path)
    arrays = {name: _mapped(path, array) for name, array in lazy.tensors.items()}
    return Dataset(arrays, lazy.state, lazy.metadata)


def _mapped(path: Path, array: Any) -> np.ndarray:
    """A stored member as a copy-on-write memory map of the file (pages are read when
    touched, and writes stay private); anything else as it was read."""
    if not isinstance(array, LazyRows) or array.file_offset is None or array.size == 0:
        return np.asarray(array)
    return np.asarray(np.memmap(path, array.dtype, "c", array.file_offset, array.shape))


def _what(head: bytes) -> str:
    """What a file that is not a zip archive holds, judging by its first bytes."""
    if not head:
        return "the file is empty"
    if head == b"\x93NUMPY":
        return "it holds a single .npy array"
    return "unrecognised content"
