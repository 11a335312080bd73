"""Where a replay buffer's data lives: a ``Memory`` (writable) or a loaded dataset (read-only).

Both are seen through the same small interface: tensors shaped ``(T, N, *feature)`` (numpy
arrays, or for a dataset left on disk anything that reads rows with ``take``),
the circular state, a ``revision`` that changes whenever the data changes, and ``gather``,
which reads flat indexes (``t * num_envs + env``) of any shape into torch tensors.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from expcli.errors import ConfigError, InvalidTypeError, SchemaError
from expcli.formats.dataset import Dataset
from expcli.formats.row_gather import gather_flat, take_flat
from expcli.formats.table import format_row
from expcli.memory import Memory
from expcli.memory.episodes import TensorSource, resident
from expcli.spec import CircularState

__all__ = ["DatasetStorage", "MemoryStorage", "Storage", "StorageSource", "as_storage"]


class Storage:
    """Flat-indexed read access over ``(T, N, *feature)`` numpy arrays; subclasses fill it."""

    _flat_cache: tuple[Hashable, tuple[str, ...], dict[str, Any]] | None = None

    @property
    def memory_size(self) -> int:
        """Rows of every tensor, ``T``."""
        raise NotImplementedError

    @property
    def num_envs(self) -> int:
        """Columns of every tensor, ``N``."""
        raise NotImplementedError

    @property
    def capacity(self) -> int:
        """Number of slots, ``memory_size * num_envs``."""
        return self.memory_size * self.num_envs

    def __len__(self) -> int:
        return self.state.valid_length(self.memory_size, self.num_envs)

    @property
    def state(self) -> CircularState:
        """Circular state: which slots hold data, and their chronological order."""
        raise NotImplementedError

    def revision(self) -> Hashable:
        """A value that changes whenever the data changes."""
        raise NotImplementedError

    def written_since(self, revision: Hashable) -> np.ndarray | None:
        """Flat indexes written since ``revision``, or None when anything may have changed."""
        return None

    def arrays(self) -> Mapping[str, Any]:
        """The tensors shaped ``(T, N, *feature)``.

        Numpy arrays, or tensors left on disk that read rows with ``take`` (``LazyRows``).
        """
        raise NotImplementedError

    def names(self) -> tuple[str, ...]:
        """Tensor names, sorted."""
        return self._views()[0]

    def gather(self, names: Sequence[str], index: np.ndarray) -> dict[str, torch.Tensor]:
        """The named tensors at flat ``index`` (any shape), as ``(*index.shape, *feature)``.

        Numpy arrays (memory maps too) are indexed in place; tensors left on disk
        (``LazyRows``, anything with ``take``) give only the rows the index touches.

        Raises:
            SchemaError: A name is not a tensor of the storage.
        """
        flat = self._views()[1]
        try:
            arrays = [flat[name] for name in names]
        except KeyError as e:
            raise SchemaError(
                f"no such tensor; tensors: {', '.join(sorted(flat))}", key=e.args[0]
            ) from None
        return {
            name: torch.from_numpy(
                take_flat(array, index)
                if isinstance(array, np.ndarray)
                else gather_flat(array, index, self.num_envs)
            )
            for name, array in zip(names, arrays, strict=True)
        }

    def _view_key(self) -> Hashable:
        """Changes when the arrays themselves (not their contents) change."""
        return 0

    def _views(self) -> tuple[tuple[str, ...], dict[str, Any]]:
        """Sorted names and ``(T * N, *feature)`` views of the numpy arrays.

        Lazy tensors as they are; cached until ``_view_key`` changes.
        """
        key = self._view_key()
        if self._flat_cache is None or self._flat_cache[0] != key:
            arrays = self.arrays()
            flat = {
                name: array.reshape(self.capacity, *array.shape[2:])
                if isinstance(array, np.ndarray)
                else array
                for name, array in arrays.items()
            }
            self._flat_cache = (key, tuple(sorted(flat)), flat)
        return self._flat_cache[1], self._flat_cache[2]


class MemoryStorage(Storage):
    """A ``Memory``, read through its numpy views and written with ``add_samples``.

    A replay buffer sees every write to the memory, its own or another's (a collector's),
    because the memory's ``revision`` moves with each one.
    """

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self._key: tuple[int, int, bool] | None = None

    @property
    def memory_size(self) -> int:
        """See ``Storage.memory_size``."""
        return self.memory.memory_size

    @property
    def num_envs(self) -> int:
        """See ``Storage.num_envs``."""
        return self.memory.num_envs

    @property
    def state(self) -> CircularState:
        """See ``Storage.state``."""
        return self.memory.state

    @property
    def metadata(self) -> dict[str, Any]:
        """The memory's metadata."""
        return self.memory.metadata

    def __len__(self) -> int:
        return len(self.memory)

    def revision(self) -> Hashable:
        """See ``Storage.revision``."""
        return self.memory.revision

    def written_since(self, revision: Hashable) -> np.ndarray | None:
        """See ``Storage.written_since``."""
        old, new = revision, self.memory.revision
        if not isinstance(old, tuple):
            raise InvalidTypeError(f"not a revision of a memory: {revision!r}")
        if old[0] != new[0]:
            return None
        capacity = self.capacity
        before = old[2] * self.num_envs + old[3]
        after = new[2] * self.num_envs + new[3]
        laps = new[1] - old[1]
        if laps == 0 and after >= before:
            return np.arange(before, after, dtype=np.int64)
        if laps == 1 and after < before:
            return np.concatenate(
                [np.arange(before, capacity, dtype=np.int64), np.arange(after, dtype=np.int64)]
            )
        return None

    def arrays(self) -> Mapping[str, np.ndarray]:
        """See ``Storage.arrays``."""
        return self.memory.to_dataset().tensors

    def names(self) -> tuple[str, ...]:
        """See ``Storage.names``."""
        return tuple(self.memory.get_tensor_names())

    def gather(self, names: Sequence[str], index: np.ndarray) -> dict[str, torch.Tensor]:
        """See ``Storage.gather``."""
        if self._view_key()[2]:
            return super().gather(names, index)
        missing = [name for name in names if name not in self.memory.tensors]
        if missing:
            raise SchemaError("no such tensor in the memory", key=missing[0])
        [values] = self.memory.sample_by_index(names, index.reshape(-1))
        return {
            name: value.reshape(*index.shape, *value.shape[1:])
            for name, value in zip(names, values, strict=True)
            if value is not None
        }

    def _view_key(self) -> tuple[int, int, bool]:
        """Epoch, tensor count, and whether every tensor is a CPU tensor numpy can view."""
        memory = self.memory
        key = self._key
        if key is None or key[:2] != (memory.revision[0], len(memory.tensors)):
            on_cpu = all(t.device.type == "cpu" for t in memory.tensors.values())
            key = self._key = (memory.revision[0], len(memory.tensors), on_cpu)
        return key


class DatasetStorage(Storage):
    """A dataset, read-only.

    Tensors left on disk stay there: a dataset opened lazily (``open_lazy``,
    ``DatasetStorage.open``) is read a batch of rows at a time, so memory holds the batches drawn,
    whatever the file's size. Only the episode flags (``terminated``, ``truncated``: a byte or so
    per transition) are read whole, once.
    """

    def __init__(self, dataset: TensorSource, close: Callable[[], None] | None = None) -> None:
        """Sample ``dataset`` (anything with ``tensors`` and ``state``).

        ``close`` is called when the storage is garbage-collected or closed (the file that lazy
        tensors read).
        """
        tensors = {name: resident(name, array) for name, array in dataset.tensors.items()}
        if not tensors:
            if close is not None:
                close()
            raise SchemaError("the dataset holds no tensors to sample")
        first = next(iter(tensors.values()))
        self._size = int(first.shape[0]), int(first.shape[1])
        self._tensors = tensors
        self._state = dataset.state
        self.metadata = getattr(dataset, "metadata", {})
        self._closer = weakref.finalize(self, close) if close is not None else None
        self._maps = [a._mmap for a in tensors.values() if getattr(a, "_mmap", None) is not None]

    def gather(self, names: Sequence[str], index: np.ndarray) -> dict[str, torch.Tensor]:
        """See ``Storage.gather``; mapped files are let go of as the batch is gathered.

        Where tensors are mapped files, the batch is gathered ``_MAPPED_STEP``
        transitions at a time, letting go of the pages each piece touched
        (``MADV_DONTNEED``: they stay in the page cache, not in this process). The kernel
        maps whole page-cache folios (up to megabytes) per row touched, so without this a
        sampler's RSS would grow towards the file's size.
        """
        flat = np.asarray(index)
        if not self._maps or flat.size <= _MAPPED_STEP:
            batch = super().gather(names, flat)
            self._release()
            return batch
        pieces = []
        for part in np.array_split(flat.reshape(-1), -(-flat.size // _MAPPED_STEP)):
            pieces.append(super().gather(names, part))
            self._release()
        return {
            name: torch.cat([p[name] for p in pieces]).reshape(
                *flat.shape, *pieces[0][name].shape[1:]
            )
            for name in pieces[0]
        }

    def _release(self) -> None:
        for mapped in self._maps:
            with contextlib.suppress(OSError, ValueError):  # closed, or no madvise here
                mapped.madvise(mmap.MADV_DONTNEED)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, num_envs: int | None = None) -> DatasetStorage:
        """A storage reading a dataset file lazily.

        Uncompressed tensors are mapped (``.pt``, stored ``.npz`` members, contiguous HDF5
        datasets), others (chunked or compressed HDF5, deflated ``.npz`` members, CSV) read a batch
        of rows at a time.

        Raises:
            FormatError, SchemaError: The path cannot be read as a dataset.
        """
        from expcli.formats import open_lazy, read_dataset, source_format

        source = Path(path)
        fmt = source_format(source)
        row = format_row(fmt)
        if row is not None and row.open_lazy is None:  # a .pt: mapped by its reader
            return cls(read_dataset(source, fmt, num_envs=num_envs))
        dataset, close = open_lazy(source, fmt, num_envs=num_envs)
        try:
            tensors = {name: _mapped(source, a) for name, a in dataset.tensors.items()}
            return cls(Dataset(tensors, dataset.state, dataset.metadata), close)
        except BaseException:
            close()
            raise

    def close(self) -> None:
        """Close the file that lazy tensors read (sampling them afterwards fails)."""
        if self._closer is not None:
            self._closer()

    @property
    def memory_size(self) -> int:
        """See ``Storage.memory_size``."""
        return self._size[0]

    @property
    def num_envs(self) -> int:
        """See ``Storage.num_envs``."""
        return self._size[1]

    @property
    def state(self) -> CircularState:
        """See ``Storage.state``."""
        return self._state

    def revision(self) -> Hashable:
        """See ``Storage.revision``."""
        return 0

    def arrays(self) -> Mapping[str, Any]:
        """See ``Storage.arrays``."""
        return self._tensors


_MAPPED_STEP = 32  # transitions gathered from mapped files between two releases


def _mapped(path: Path, array: Any) -> Any:
    """A lazy tensor whose bytes lie whole in the file, mapped read-only; others as they are."""
    offset = getattr(array, "file_offset", None)
    if offset is None or not array.size:
        return array
    return np.memmap(path, array.dtype, "r", offset, array.shape)


def as_storage(source: StorageSource) -> Storage:
    """A storage for a ``Storage``, a ``Memory``, a loaded ``Dataset`` or a dataset path.

    Raises:
        ConfigError: ``source`` is none of those.
        FormatError, SchemaError: The path cannot be read as a dataset.
    """
    if isinstance(source, Storage):
        return source
    if isinstance(source, Memory):
        return MemoryStorage(source)
    if isinstance(source, str | os.PathLike):
        return DatasetStorage.open(source)
    if hasattr(source, "tensors") and hasattr(source, "state"):
        return DatasetStorage(source)
    raise ConfigError(
        f"cannot use a {type(source).__name__} as storage; expected a Memory, a Dataset "
        "(expcli.load) or the path of a dataset file"
    )


# What a replay buffer samples from: ``as_storage`` takes each of these.
StorageSource = Storage | Memory | TensorSource | str | os.PathLike[str]
