"""HDF5 ``.h5``/``.hdf5`` files: one chunked dataset per tensor, the metadata as a root attribute.

Layout written: each tensor is a dataset named as the tensor, shaped ``(T, N, *feature)``,
with the array's dtype (bool is HDF5's FALSE/TRUE enum, which h5py reads back as bool) in
native byte order. A ``/`` in a name makes groups, as in D4RL's ``infos/qpos``; a nested
dataset reads back under its full path (``infos/qpos``). Chunks hold about 1 MiB of whole
rows (a slice of the env columns when one row is larger); gzip (level 4) or lzf
compression is optional. Empty tensors are stored contiguous: HDF5 has no empty chunks.
The root attribute ``expcli`` holds the metadata JSON as a variable-length UTF-8 string.

Reading checks every dataset against the metadata, and its declared size against what the
file stores, before reading any data; data kept in other files (external or virtual
datasets) is refused. A file without the ``expcli`` attribute goes to the foreign layouts
that the caller passes (``foreign``: the format table passes ``table.read_foreign_hdf5``).
``Hdf5Reader`` and ``Hdf5Writer`` move rows slice by slice, so a conversion holds a few
chunks in memory; ``read`` and ``write`` handle whole datasets on top of them.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, cast

import numpy as np

from expcli.errors import FormatError, InvalidValueError, SchemaError
from expcli.files.atomic import atomic_path
from expcli.formats._guarded_file import Hdf5Output
from expcli.formats._guards import check_read_whole
from expcli.formats._hdf5_checks import (
    ATTRIBUTE,
    as_format_errors,
    check_all_stored,
    check_datasets,
    check_names,
    check_size,
    check_written,
    header_text,
    open_file,
)
from expcli.formats._hdf5_lazy import lazy_dataset, read_dataset_rows
from expcli.formats.block_cache import BlockCache
from expcli.formats.dataset import Dataset
from expcli.formats.frames import PREFIX, derive, encode, sparse_members
from expcli.formats.header import dataset_from_header, encode_header, header_specs, parse_header
from expcli.formats.lazy import SLICE_BYTES
from expcli.formats.rows import WritePlan
from expcli.spec import COMPRESSIONS, TensorSpec

__all__ = [
    "ATTRIBUTE",
    "CHUNK_BYTES",
    "COLUMN_CELL_BYTES",
    "COLUMN_CHUNK_BYTES",
    "COMPRESSIONS",
    "Hdf5Reader",
    "Hdf5Writer",
    "ForeignLayouts",
    "chunk_shape",
    "read",
    "write",
]

CHUNK_BYTES = 1 << 20
"""Target size of one HDF5 chunk as stored in the file (what a read moves: ``SLICE_BYTES``)."""

COLUMN_CELL_BYTES = 1 << 10
"""Cells this large (frames) are chunked one env column at a time (``chunk_shape``)."""

COLUMN_CHUNK_BYTES = 128 << 10
"""Target size of a chunk of one env column: 18 steps of 84x84 frames, about a sampled slice."""

_CACHE_BYTES = 4 << 20  # chunk cache per dataset: a few chunks, for unaligned row slices
_GZIP_LEVEL = 4


class ForeignLayouts(NamedTuple):
    """The foreign layouts a file without expcli's metadata goes to: a reader and their names.

    ``read(h5, path, num_envs, lazy=...)`` reads an open file of one of them, or returns
    None; ``names`` lists them for the error when none matches ("tianshou, Minari, D4RL").
    """

    read: Callable[..., Dataset | None]
    names: str


def chunk_shape(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...] | None:
    """The chunks of a ``(T, N, *feature)`` tensor's dataset.

    A tensor of cells of ``COLUMN_CELL_BYTES`` or more (frames) is chunked by env column,
    about ``COLUMN_CHUNK_BYTES`` a chunk: a sampled slice of one env's steps then decodes
    that column's few chunks, not whole rows of ``N`` envs (lzf, 84x84 frames of 8 envs,
    32 slices of 16 steps: 18 ms instead of 111 ms). Other tensors get chunks of about
    ``CHUNK_BYTES``: whole rows if a row fits, else fewer columns, and so on. Returns None
    for an empty shape (HDF5 chunks cannot be empty: store it contiguous).
    """
    if 0 in shape:
        return None
    cell = math.prod(shape[2:]) * itemsize
    if len(shape) > 2 and cell >= COLUMN_CELL_BYTES:
        rows = max(1, min(shape[0], COLUMN_CHUNK_BYTES // cell))
        return (rows, 1, *_fitted(shape[2:], itemsize))
    return _fitted(shape, itemsize)


def _fitted(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Chunks of about ``CHUNK_BYTES`` of ``shape``, cut along its first axes first."""
    chunk = list(shape)
    for axis in range(len(shape)):
        inner = math.prod(shape[axis + 1 :]) * itemsize
        if inner < CHUNK_BYTES:
            chunk[axis] = max(1, min(shape[axis], CHUNK_BYTES // inner))
            break
        chunk[axis] = 1
    return tuple(chunk)


class Hdf5Writer:
    """Writes an expcli HDF5 file atomically, slice of rows by slice of rows.

    Example::

        with Hdf5Writer(path, overwrite=True, compression="lzf") as writer:
            writer.create(dataset.header())
            writer.write_rows("observations", 0, first_rows)

    The file appears under ``path`` only when the ``with`` block ends without an exception
    and every chunk of every tensor was written (else the block raises SchemaError).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, overwrite: bool, compression: str | None = None
    ) -> None:
        """Check the options; the file is created on ``__enter__``.

        Raises:
            ConfigError: ``compression`` is not one HDF5 takes (or None).
        """
        self.path = Path(path)
        self.compression = _compression(compression)
        self._overwrite = overwrite
        self._stack = contextlib.ExitStack()
        self._file: Any = None
        self._output: Hdf5Output | None = None
        self._datasets: dict[str, Any] = {}
        self._specs: dict[str, TensorSpec] = {}

    def __enter__(self) -> Hdf5Writer:
        with contextlib.ExitStack() as stack:
            tmp = stack.enter_context(atomic_path(self.path, overwrite=self._overwrite))
            self._output = Hdf5Output(tmp, rdcc_nbytes=_CACHE_BYTES)
            self._file = stack.enter_context(self._output)
            self._stack = stack.pop_all()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, contextlib.ExitStack()
        if error is not None:  # close the file and delete it; the error propagates
            stack.__exit__(kind, error, tb)
            return
        with stack:  # close the file, then rename it into place (or delete it on failure)
            for name, dataset in self._datasets.items():
                check_written(dataset, self.path, name)

    def create(self, header: Mapping[str, Any]) -> None:
        """Create one dataset per tensor listed in ``header`` and store ``header`` as metadata.

        Args:
            header: A metadata object such as ``Dataset.header()``: its ``tensors``,
                ``memory_size`` and ``num_envs`` give the datasets' dtypes and shapes;
                its ``frames`` the tensors stored once (``frames.encode``), whose two
                members are created instead.

        Raises:
            SchemaError: The header is not JSON-serialisable or malformed, or a tensor name
                cannot be an HDF5 path.
        """
        text = encode_header(header, self.path)
        specs = header_specs(header, self.path)
        size = (header.get("memory_size"), header.get("num_envs"))
        for key, value in zip(("memory_size", "num_envs"), size, strict=True):
            if type(value) is not int or value < 0:
                raise SchemaError(f"is {value!r}; expected a count", path=self.path, key=key)
        sparse = sparse_members(header, self.path)
        whole = [spec for spec in specs if spec.name not in header.get("frames", {})]
        check_names([spec.name for spec in whole] + list(sparse), self.path)
        for spec in whole:
            shape = (*cast(tuple[int, int], size), *spec.shape)
            itemsize = np.dtype(spec.dtype).itemsize
            self._create(spec.name, np.dtype(spec.dtype), shape, chunk_shape(shape, itemsize))
        for name, (dtype, shape) in sparse.items():
            self._create(name, dtype, shape, _fitted(shape, dtype.itemsize) if all(shape) else None)
        self._file.attrs[ATTRIBUTE] = text

    def _create(self, name: str, dtype: np.dtype[Any], shape: tuple[int, ...], chunks: Any) -> None:
        options: dict[str, Any] = {}
        if chunks is not None and self.compression == "gzip":
            options = {"compression": "gzip", "compression_opts": _GZIP_LEVEL}
        elif chunks is not None and self.compression == "lzf":
            options = {"compression": "lzf"}
        self._datasets[name] = self._file.create_dataset(
            name, shape=shape, dtype=dtype, chunks=chunks, track_times=False, **options
        )
        self._specs[name] = TensorSpec(name, dtype.name, shape[1:])

    def write_rows(self, name: str, start: int, rows: np.ndarray) -> None:
        """Write ``rows`` (shaped ``(k, N, *feature)``) at rows ``start`` to ``start + k``.

        Raises:
            SchemaError: No such tensor was created, or ``rows`` has another dtype or shape.
            ValueError: The rows fall outside the dataset.
        """
        dataset = self._datasets.get(name)
        if dataset is None:
            raise SchemaError("was not created; create it first", path=self.path, key=name)
        spec = self._specs[name]
        if rows.dtype.name != spec.dtype or tuple(rows.shape[1:]) != dataset.shape[1:]:
            raise SchemaError(
                f"rows of {rows.dtype.name} shaped {tuple(rows.shape)}; expected {spec.dtype} "
                f"shaped (rows, {', '.join(map(str, dataset.shape[1:]))})",
                path=self.path,
                key=name,
            )
        stop = start + len(rows)
        if not 0 <= start <= stop <= dataset.shape[0]:
            raise InvalidValueError(
                f"rows {start}..{stop} outside 0..{dataset.shape[0]} of {name!r}"
            )
        if rows.size:
            native = np.ascontiguousarray(rows, dtype=rows.dtype.newbyteorder("="))
            dataset.write_direct(native, dest_sel=np.s_[start:stop])
            assert self._output is not None
            self._output.check()  # a full disk ends the write now, not after the last row

    def slab_rows(self, name: str) -> int:
        """Rows to pass per ``write_rows`` call: whole chunks, about 16 MiB."""
        return _slab_rows(self._datasets[name])


class Hdf5Reader:
    """Reads an expcli HDF5 file slice of rows by slice of rows, after checking it whole.

    Attributes:
        path: The file.
        header: Its metadata object.
        specs: Its tensors, in name order.
        members: Its datasets, in name order: the tensors, but for those stored once
            (``frames``), whose two members are there instead.
        state: The circular state of the memory that wrote it.
        memory_size: Rows (``T``) of every tensor.
        num_envs: Columns (``N``) of every tensor.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Open the file and check its datasets against the metadata; no data is read.

        Raises:
            FormatError: Not an HDF5 file, corrupt or truncated, without expcli's metadata
                (foreign layouts are read by ``read``), declaring more data than it stores,
                or keeping data in other files.
            SchemaError: The datasets disagree with each other or with the metadata.
        """
        self.path = Path(path)
        self._file = open_file(self.path, _CACHE_BYTES)
        try:
            text = header_text(self._file, self.path)
            if text is None:
                raise FormatError(
                    f"has no root attribute {ATTRIBUTE!r}; expected expcli's metadata",
                    path=self.path,
                )
            self.header = parse_header(text, self.path, ATTRIBUTE)
            self.state, _ = Dataset.split_header(self.header, self.path)
            self.specs = header_specs(self.header, self.path)
            sparse = sparse_members(self.header, self.path)
            whole = [s for s in self.specs if s.name not in self.header.get("frames", {})]
            self._datasets = check_datasets(self._file, self.path, whole, sparse)
            self.members = sorted(self._datasets)
            self.memory_size, self.num_envs = check_size(
                {s.name: self._datasets[s.name] for s in whole}, self.header, self.state, self.path
            )
        except BaseException:
            self._file.close()
            raise

    def __enter__(self) -> Hdf5Reader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file."""
        self._file.close()

    def read_rows(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows ``start`` to ``stop`` of a tensor, in native byte order.

        Raises:
            SchemaError: No such tensor.
            ValueError: The rows fall outside the tensor.
            FormatError: The data cannot be read (corrupt file, unavailable filter).
        """
        dataset = self._datasets.get(name)
        if dataset is None:
            raise SchemaError("no such tensor in the file", path=self.path, key=name)
        if not 0 <= start <= stop <= dataset.shape[0]:
            raise InvalidValueError(
                f"rows {start}..{stop} outside 0..{dataset.shape[0]} of {name!r}"
            )
        return read_dataset_rows(dataset, self.path, name, start, stop)

    def dataset(self, name: str) -> Any:
        """The ``h5py.Dataset`` of a tensor, checked (for its chunks and storage).

        Raises:
            SchemaError: No such tensor.
        """
        dataset = self._datasets.get(name)
        if dataset is None:
            raise SchemaError("no such tensor in the file", path=self.path, key=name)
        return dataset

    def slab_rows(self, name: str) -> int:
        """Rows to ask per ``read_rows`` call: whole chunks, about 16 MiB."""
        return _slab_rows(self._datasets[name])


def write(dataset: Dataset, plan: WritePlan) -> None:
    """Write every tensor as a chunked dataset, and the metadata as the root attribute.

    ``plan.frames``: ``FramesForm.ONCE`` stores next observations once (``formats.frames``).

    Raises:
        ConfigError: ``plan.compression`` is not one HDF5 takes.
        SchemaError: The metadata is not JSON-serialisable, or a tensor name cannot be an
            HDF5 path (empty parts, ``.`` parts, or a tensor named as another's group).
    """
    path = plan.target
    members, header = encode(dataset.tensors, dataset.header(), plan.frames, path)
    with Hdf5Writer(path, overwrite=plan.overwrite, compression=plan.compression) as writer:
        writer.create(header)
        for name in sorted(members):
            array = members[name]
            step = writer.slab_rows(name)
            for start in range(0, len(array), step):
                writer.write_rows(name, start, array[start : start + step])


def read(
    path: Path, *, num_envs: int | None = None, foreign: ForeignLayouts | None = None
) -> Dataset:
    """Load an HDF5 file; one without expcli's metadata is read by ``foreign``.

    Args:
        path: File to read.
        num_envs: Passed on to the foreign layouts; expcli files record it.
        foreign: The foreign layouts and their reader (none: no layout is known).

    Raises:
        FormatError: Not an HDF5 file, corrupt or truncated, declaring more data than it
            stores, or without metadata and of no known layout.
        SchemaError: The datasets disagree with each other or with the metadata.
        ConfigError: The memory available cannot hold the data (said before reading any).
    """
    with open_file(path, _CACHE_BYTES) as file:
        if header_text(file, path) is None:
            return _read_foreign(file, path, num_envs, foreign)
    with Hdf5Reader(path) as reader:
        cells = reader.memory_size * reader.num_envs
        whole = sum(cells * math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in reader.specs)
        sparse = sum(reader.dataset(n).nbytes for n in reader.members if n.startswith(PREFIX))
        check_read_whole(whole + sparse, path)
        arrays = {
            name: reader.read_rows(name, 0, reader.dataset(name).shape[0])
            for name in reader.members
        }
        header = reader.header
    tensors = {name: np.asarray(array) for name, array in derive(arrays, header, path).items()}
    return dataset_from_header(tensors, header, path)


def open_lazy(
    path: Path,
    *,
    num_envs: int | None = None,
    foreign: ForeignLayouts | None = None,
    cache: BlockCache | None = None,
) -> tuple[Dataset, Callable[[], None]]:
    """Like ``read``, but tensors stay in the file as ``LazyRows``; call the closer after.

    ``cache``: where an expcli file's chunked tensors keep the chunks they decode.

    Raises:
        FormatError, SchemaError: As ``read``.
    """
    file = open_file(path, _CACHE_BYTES)
    try:
        if header_text(file, path) is None:  # a foreign layout, read from the open file
            return _read_foreign(file, path, num_envs, foreign, lazy=True), file.close
    except BaseException:
        file.close()
        raise
    file.close()
    reader = Hdf5Reader(path)
    try:
        arrays: dict[str, Any] = {
            name: lazy_dataset(
                reader.dataset(name), path, name, partial(reader.read_rows, name), cache
            )
            for name in reader.members
        }
        tensors = derive(arrays, reader.header, path)
        return dataset_from_header(tensors, reader.header, path), reader.close
    except BaseException:
        reader.close()
        raise


def _compression(compression: str | None) -> str | None:
    """``compression`` as h5py takes it: None for none."""
    from expcli.formats.builtin.hdf5_file import HDF5_FILE

    checked = HDF5_FILE.checked_compression(compression)
    return None if checked == "none" else checked


def _slab_rows(dataset: Any) -> int:
    """Whole chunks of rows, about ``SLICE_BYTES`` (at least one chunk)."""
    shape: tuple[int, ...] = dataset.shape
    chunks: tuple[int, ...] | None = dataset.chunks
    row_bytes = max(1, math.prod(shape[1:]) * int(dataset.dtype.itemsize))
    step = chunks[0] if chunks else 1
    return max(step, SLICE_BYTES // row_bytes // step * step)


def _read_foreign(
    file: Any, path: Path, num_envs: int | None, foreign: ForeignLayouts | None, lazy: bool = False
) -> Dataset:
    """Hand a file without expcli's metadata to the foreign layouts.

    ``lazy``: those that can leave rows in the file, which must then stay open. Else the
    layout reads its rows whole: the file's datasets are first counted against the memory
    available (about what a layout reads; one that skips a dataset reads less).
    """
    found = check_all_stored(file, path)  # so that the layouts read only what it holds
    if not lazy:
        check_read_whole(sum(file[name].nbytes for name in found), path)
    with as_format_errors(path, "its layout"):
        lazily = {"lazy": True} if lazy else {}  # a reader that cannot leave rows reads whole
        dataset = foreign.read(file, path, num_envs, **lazily) if foreign is not None else None
    if dataset is None:
        names = ", ".join(list(found)[:8]) or "none"
        known = f" ({foreign.names})" if foreign is not None and foreign.names else ""
        raise FormatError(
            f"no expcli metadata (root attribute {ATTRIBUTE!r}) and no known layout"
            f"{known}; its datasets: {names}",
            path=path,
        )
    return dataset
