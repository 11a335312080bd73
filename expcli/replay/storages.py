"""Where a replay buffer's data lives: a ``Memory`` (writable) or a loaded dataset (read-only).

Both are seen through the same small interface: tensors shaped ``(T, N, *feature)`` (numpy
arrays, or for a dataset left on disk anything that reads rows with ``take``),
the circular state, a ``revision`` that changes whenever the data changes, and
``gather_arrays``, which reads flat indexes (``t * num_envs + env``) of any shape into numpy
arrays; ``gather`` hands those on as torch tensors (the edge where torch comes in: sampling
for ``expcli sample`` stops before it and never imports torch).
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from expcli.errors import ConfigError, InvalidTypeError, SchemaError
from expcli.formats.block_cache import DEFAULT_CACHE_BYTES, BlockCache, CacheStats
from expcli.formats.column_roles import ColumnRoles, DoneMeans, column_roles
from expcli.formats.dataset import Dataset
from expcli.host_memory import available_bytes
from expcli.memory import Memory
from expcli.memory.episodes import DONE_NAMES, TensorSource, resident
from expcli.replay.batch_gather import (
    Empty,
    cuda_available,
    frame_rows,
    gather_arrays,
    is_observation,
    pinned_empty,
)
from expcli.replay.packed_rows import PackedRows, packable
from expcli.spec import CircularState

if TYPE_CHECKING:
    import torch

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

    @property
    def can_stack(self) -> bool:
        """Whether ``gather`` stacks frames itself (``stack_num``)."""
        return True

    def gather(
        self,
        names: Sequence[str],
        index: np.ndarray,
        *,
        stack_num: int = 1,
        pin_memory: bool = False,
    ) -> dict[str, torch.Tensor]:
        """The named tensors at flat ``index`` (any shape), as ``(*index.shape, *feature)``.

        ``gather_arrays``' arrays as torch tensors, sharing their memory; with
        ``pin_memory`` (where CUDA is there to use it) gathered straight into page-locked
        tensors.

        Raises:
            SchemaError: A name is not a tensor of the storage.
        """
        import torch

        if not (pin_memory and cuda_available()):
            arrays = self.gather_arrays(names, index, stack_num=stack_num)
            return {name: torch.from_numpy(array) for name, array in arrays.items()}
        pinned: dict[int, torch.Tensor] = {}
        arrays = self.gather_arrays(names, index, stack_num=stack_num, empty=pinned_empty(pinned))
        return {
            name: pinned[id(array)] if id(array) in pinned else torch.from_numpy(array)
            for name, array in arrays.items()
        }

    def gather_arrays(
        self,
        names: Sequence[str],
        index: np.ndarray,
        *,
        stack_num: int = 1,
        empty: Empty | None = None,
    ) -> dict[str, np.ndarray]:
        """The named tensors at flat ``index`` (any shape), as ``(*index.shape, *feature)`` arrays.

        Each tensor is gathered once, straight into a new array (allocated by ``empty``
        when given: ``batch_gather.pinned_empty``). With ``stack_num`` above 1,
        observations (``observations``, ``next_observations`` and their leaves) come as
        frame stacks ``(*index.shape, stack_num, *feature)``, as ``ReplayBuffer.get``
        stacks them. Numpy arrays (memory maps too) are indexed in place; tensors left
        on disk (``LazyRows``, anything with ``take``) give only the rows the index touches.

        Raises:
            SchemaError: A name is not a tensor of the storage.
        """
        flat = self._views()[1]
        missing = [name for name in names if name not in flat]
        if missing:
            raise SchemaError(f"no such tensor; tensors: {', '.join(sorted(flat))}", key=missing[0])
        index = np.asarray(index, dtype=np.int64)
        if stack_num > 1 and index.size and (index.min() < 0 or index.max() >= self.capacity):
            raise IndexError(f"transition index out of range for {self.capacity} transitions")
        return gather_arrays(
            flat,
            names,
            index,
            self.num_envs,
            stack_num=stack_num,
            stacked=is_observation,
            frames=lambda: self._frames(flat, index, stack_num),
            empty=empty,
            releases=self._page_releases(),
        )

    def _page_releases(self) -> Mapping[str, Callable[[], None]]:
        """For tensors that are mapped files: what lets go of the pages read (none here)."""
        return {}

    def _frames(self, flat: Mapping[str, Any], index: np.ndarray, stack_num: int) -> np.ndarray:
        """Flat indexes of the frames stacked at ``index`` (``batch_gather.frame_rows``)."""
        flags = [
            np.asarray(flat[name]).reshape(self.capacity, -1) for name in DONE_NAMES if name in flat
        ]
        oldest, _ = self.state.columns(self.memory_size, self.num_envs)
        return frame_rows(index, stack_num, flags, oldest, self.memory_size, self.num_envs)

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

    @property
    def can_stack(self) -> bool:
        """See ``Storage.can_stack``: not while a tensor lives on a GPU."""
        return self._view_key()[2]

    def gather(
        self,
        names: Sequence[str],
        index: np.ndarray,
        *,
        stack_num: int = 1,
        pin_memory: bool = False,
    ) -> dict[str, torch.Tensor]:
        """See ``Storage.gather``; tensors on a GPU are gathered there, unstacked.

        The memory's small CPU tensors (``Memory.packed``) come from one gather of their
        records, as views of them (strided tensors), unless frames are stacked or pinned.
        """
        import torch

        if self._view_key()[2]:
            return super().gather(names, index, stack_num=stack_num, pin_memory=pin_memory)
        packed = self.memory.packed
        if packed is not None and stack_num == 1 and not pin_memory:
            if packed.names.issuperset(names):
                records = packed.records(index)
                return {name: torch.from_numpy(records[name]) for name in names}
        missing = [name for name in names if name not in self.memory.tensors]
        if missing:
            raise SchemaError("no such tensor in the memory", key=missing[0])
        [values] = self.memory.sample_by_index(names, index.reshape(-1))
        return {
            name: value.reshape(*index.shape, *value.shape[1:])
            for name, value in zip(names, values, strict=True)
            if value is not None
        }

    def gather_arrays(
        self,
        names: Sequence[str],
        index: np.ndarray,
        *,
        stack_num: int = 1,
        empty: Empty | None = None,
    ) -> dict[str, np.ndarray]:
        """See ``Storage.gather_arrays``; tensors on a GPU are gathered there, then copied here.

        The memory's small CPU tensors (``Memory.packed``) come from one gather of their
        records, as views of them (strided arrays), unless frames are stacked or ``empty``
        is given.
        """
        packed = self.memory.packed
        if packed is not None and stack_num == 1 and empty is None:
            if packed.names.issuperset(names):
                records = packed.records(index)
                return {name: records[name] for name in names}
        if self._view_key()[2]:
            return super().gather_arrays(names, index, stack_num=stack_num, empty=empty)
        tensors = self.gather(names, index, stack_num=stack_num)
        return {name: tensor.cpu().numpy() for name, tensor in tensors.items()}

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

    def __init__(
        self,
        dataset: TensorSource,
        close: Callable[[], None] | None = None,
        *,
        pack: bool = True,
    ) -> None:
        """Sample ``dataset`` (anything with ``tensors`` and ``state``).

        ``close`` is called when the storage is garbage-collected or closed (the file that lazy
        tensors read). ``pack``: keep the small tensors in memory as one record per
        transition (``packed_rows``), read on first use; else they stay where they are.
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
        self._let_go: dict[str, Callable[[], None]] = {}
        for name, array in tensors.items():
            mapped = getattr(array, "_mmap", None)
            release = getattr(array, "release", None)  # a folder's (formats.concat_rows)
            if mapped is not None:
                self._let_go[name] = functools.partial(_let_go, mapped)
            elif callable(release):
                self._let_go[name] = release
        self._packed: PackedRows | None = None
        self._pack = pack
        self._length: int | None = None
        self._cache: BlockCache | None = None

    def _packed_rows(self) -> PackedRows | None:
        """The small tensors packed one record per transition, read on first use."""
        if self._pack:
            self._pack = False
            names = packable(self._tensors, self.capacity)
            if names:
                self._packed = PackedRows(self._tensors, names)
                self._release(names)
        return self._packed

    def _release(self, names: Iterable[str]) -> None:
        """Let go of the mapped pages that reading ``names`` brought into this process."""
        for release in {self._let_go[n] for n in names if n in self._let_go}:
            release()  # a folder's tensors share one, which lets go of all its mappings

    def _page_releases(self) -> Mapping[str, Callable[[], None]]:
        return self._let_go

    def gather_arrays(
        self,
        names: Sequence[str],
        index: np.ndarray,
        *,
        stack_num: int = 1,
        empty: Empty | None = None,
    ) -> dict[str, np.ndarray]:
        """See ``Storage.gather_arrays``; small tensors come from records packed in memory.

        Tensors with small rows (``packed_rows``) are packed one record per transition on
        first use and gathered together, as views of the records drawn (strided arrays),
        unless ``empty`` is given.
        The pages others took from a mapping are let go of once the batch is gathered
        (``MADV_DONTNEED``: they stay in the page cache, not in this process): the kernel
        maps whole page-cache folios per row touched, so without this a sampler's RSS
        would grow towards the file's size.
        """
        packed = None if empty is not None else self._packed_rows() if self._pack else self._packed
        if packed is not None and stack_num == 1 and packed.names.issuperset(names):
            records = packed.records(index)  # the common case, straight through
            return {name: records[name] for name in names}
        if packed is None:
            rest, batch = list(names), dict[str, np.ndarray]()
        else:
            index = np.asarray(index, dtype=np.int64)
            stacked = stack_num > 1
            mine = [n for n in names if n in packed.names and not (stacked and is_observation(n))]
            rest = [n for n in names if n not in mine]
            batch = packed.gather(index, mine)
        if rest:
            try:
                batch |= super().gather_arrays(rest, index, stack_num=stack_num, empty=empty)
            finally:
                if stack_num > 1:
                    self._release(DONE_NAMES)  # frame stacks read the episode flags
        return {name: batch[name] for name in names}

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        num_envs: int | None = None,
        cache_bytes: int | None = None,
        columns: ColumnRoles | Mapping[str, str] | str | None = None,
        done_means: DoneMeans | str | None = None,
    ) -> DatasetStorage:
        """A storage reading a dataset file lazily.

        Uncompressed tensors are mapped (``.pt``, stored ``.npz`` members, contiguous HDF5
        datasets), others (chunked or compressed HDF5, deflated ``.npz`` members, CSV) read a batch
        of rows at a time. Compressed HDF5 chunks and Parquet row groups (of a file or a
        folder's shards) are decoded once while a cache of ``cache_bytes`` holds them
        (``cache_stats``); by default ``DEFAULT_CACHE_BYTES`` (512 MiB), or an eighth of the
        memory available where that is less. ``columns`` and ``done_means``: how a table
        is read, as ``expcli.load`` takes them.

        Raises:
            FormatError, SchemaError: The path cannot be read as a dataset.
            ConfigError: ``cache_bytes`` is negative, or ``columns`` as ``expcli.load``.
        """
        from expcli.formats import open_lazy, source_format

        source = Path(path)
        mapping = column_roles(columns, done_means)
        if cache_bytes is None:
            room = available_bytes()
            cache_bytes = min(DEFAULT_CACHE_BYTES, room // 8 if room is not None else 1 << 62)
        cache = BlockCache(cache_bytes)
        fmt = source_format(source)
        dataset, close_lazy = open_lazy(
            source, fmt, num_envs=num_envs, cache=cache, mapping=mapping
        )
        file = source.open("rb") if source.is_file() else None

        def close() -> None:
            try:
                close_lazy()
            finally:
                if file is not None:
                    file.close()

        try:
            tensors = dataset.tensors
            if file is not None:
                tensors = {name: _mapped(file, a) for name, a in tensors.items()}
            storage = cls(Dataset(tensors, dataset.state, dataset.metadata), close)
        except BaseException:
            close()
            raise
        storage._cache = cache
        return storage

    def cache_stats(self) -> CacheStats:
        """What the block cache of a compressed file did (``open``): hits, misses, bytes.

        All zeros for data that decodes nothing (mapped files, data in memory).
        """
        cache = self._cache
        return cache.stats() if cache is not None else CacheStats()

    def close(self) -> None:
        """Close the file that lazy tensors read (sampling them afterwards fails)."""
        if self._closer is not None:
            self._closer()
        if self._cache is not None:
            self._cache.clear()

    def __len__(self) -> int:
        if self._length is None:  # read-only: counted once
            self._length = self.state.valid_length(*self._size)
        return self._length

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


def _let_go(mapped: mmap.mmap) -> None:
    with contextlib.suppress(OSError, ValueError):  # closed, or no madvise here
        mapped.madvise(mmap.MADV_DONTNEED)


def _mapped(file: IO[bytes], array: Any) -> Any:
    """A lazy tensor whose bytes lie whole in ``file``, mapped read-only; others as they are."""
    offset = getattr(array, "file_offset", None)
    if offset is None or not array.size:
        return array
    return np.memmap(file, array.dtype, "r", offset, array.shape)


def as_storage(source: StorageSource, mapping: ColumnRoles | None = None) -> Storage:
    """A storage for a ``Storage``, a ``Memory``, a loaded ``Dataset`` or a dataset path.

    ``mapping``: how a path that is a table is read (``--columns``, ``--done-means``).

    Raises:
        ConfigError: ``source`` is none of those, or ``mapping`` is given for no path.
        FormatError, SchemaError: The path cannot be read as a dataset.
    """
    if isinstance(source, str | os.PathLike):
        return DatasetStorage.open(source, columns=mapping)
    if mapping:
        raise ConfigError(
            "columns and done_means read a table from its path; this storage is a "
            f"{type(source).__name__}"
        )
    if isinstance(source, Storage):
        return source
    if isinstance(source, Memory):
        return MemoryStorage(source)
    if hasattr(source, "tensors") and hasattr(source, "state"):
        return DatasetStorage(source)
    raise ConfigError(
        f"cannot use a {type(source).__name__} as storage; expected a Memory, a Dataset "
        "(expcli.load) or the path of a dataset file"
    )


# What a replay buffer samples from: ``as_storage`` takes each of these.
StorageSource = Storage | Memory | TensorSource | str | os.PathLike[str]
