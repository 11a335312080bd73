"""HDF5 datasets left in the file as ``LazyRows``, read by slices of rows or scattered rows.

A chunked dataset (compressed or not) is read a slice at a time through HDF5, its chunk
size given to ``take`` so that a draw of scattered rows decompresses each chunk it touches
once; with a ``BlockCache``, each chunk's rows are kept there for the draws after. A
contiguous, unfiltered dataset in native byte order also gets its file offset, so that a
reader may map it in place as it maps ``.npz`` members.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError
from expcli.formats._error_summary import error_summary
from expcli.formats._hdf5_checks import native_dtype
from expcli.formats.block_cache import BlockCache, CachedBlocks
from expcli.formats.lazy import LazyRows

__all__ = ["contiguous_offset", "lazy_dataset", "read_dataset_rows"]


def read_dataset_rows(dataset: Any, path: Path, key: str, start: int, stop: int) -> np.ndarray:
    """Rows ``start`` to ``stop`` of an ``h5py.Dataset`` in native byte order.

    Raises:
        FormatError: The data cannot be read (corrupt file, unavailable filter).
    """
    out = np.empty((stop - start, *dataset.shape[1:]), dtype=native_dtype(dataset))
    _read_into(dataset, path, key, out, np.s_[start:stop], f"rows {start}..{stop}")
    return out


def read_dataset_column(
    dataset: Any, path: Path, key: str, start: int, stop: int, env: int
) -> np.ndarray:
    """Rows ``start`` to ``stop`` of env column ``env``, shaped ``(stop - start, *feature)``.

    Raises:
        FormatError: The data cannot be read (corrupt file, unavailable filter).
    """
    # The selection keeps its column axis: h5py copies element by element when the shapes
    # of the selection and of the output differ.
    out = np.empty((stop - start, 1, *dataset.shape[2:]), dtype=native_dtype(dataset))
    where = f"rows {start}..{stop} of column {env}"
    _read_into(dataset, path, key, out, np.s_[start:stop, env : env + 1], where)
    return out.reshape(stop - start, *dataset.shape[2:])


def _read_into(
    dataset: Any, path: Path, key: str, out: np.ndarray, selection: Any, where: str
) -> None:
    """Fill ``out`` from ``selection`` of ``dataset``; a damaged file is a ``FormatError``."""
    if not out.size:
        return
    try:
        dataset.read_direct(out, source_sel=selection)
    except MemoryError:
        raise
    except Exception as e:  # h5py raises OSError, ValueError, ... for damaged data
        raise FormatError(
            f"cannot read {where} ({error_summary(e)}); the file is corrupt or truncated",
            path=path,
            key=key,
        ) from e


def lazy_dataset(
    dataset: Any,
    path: Path,
    key: str,
    read: Callable[[int, int], np.ndarray] | None = None,
    cache: BlockCache | None = None,
) -> LazyRows:
    """An ``h5py.Dataset`` of at least one dimension as ``LazyRows``.

    The file must stay open while they are read; ``read`` replaces the plain row reader when
    given. With ``cache``, a chunked dataset's rows are read a chunk's rows at a time through it
    (one env column at a time when its chunks hold one column).
    """
    reader = read if read is not None else partial(read_dataset_rows, dataset, path, key)
    shape, dtype, chunks = tuple(dataset.shape), native_dtype(dataset), dataset.chunks
    blocks = None
    if cache is not None and chunks and shape[0]:
        bounds = [*range(0, shape[0], int(chunks[0])), shape[0]]
        stat = os.stat(path)
        identity = (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        by_column = len(shape) > 2 and shape[1] > 1 and chunks[1] == 1
        column = partial(read_dataset_column, dataset, path, key) if by_column else None
        blocks = CachedBlocks(reader, bounds, cache, (identity, key), shape, dtype, column)
        reader = blocks.read
    return LazyRows(
        shape,
        dtype,
        reader,
        file_offset=contiguous_offset(dataset),
        block_rows=int(chunks[0]) if chunks else None,
        blocks=blocks,
    )


def contiguous_offset(dataset: Any) -> int | None:
    """Where a dataset's bytes lie whole in its file, as ``dtype`` says.

    None when they do not (chunked, filtered, another byte order, a user block, not yet allocated).
    """
    import h5py

    if dataset.chunks is not None or dataset.dtype.byteorder not in "|=":
        return None
    try:
        plist = dataset.id.get_create_plist()
        if plist.get_layout() != h5py.h5d.CONTIGUOUS or plist.get_external_count() > 0:
            return None
        if dataset.file.userblock_size:
            return None
        offset = dataset.id.get_offset()
    except Exception:  # anything odd: read it through HDF5 instead
        return None
    if offset is None:
        return None
    nbytes = math.prod(dataset.shape) * dataset.dtype.itemsize
    size = os.stat(dataset.file.filename).st_size
    return int(offset) if int(offset) + nbytes <= size else None
