"""Memory: skrl's circular buffer of torch tensors, written through numpy views.

Each tensor is shaped ``(memory_size, num_envs, *feature)``. A ``Memory`` is made of parts
that own their state and are handed what they need: the tensors and their numpy views
(``_storage.TensorStorage``), the write head (``_write_head.WriteHead``), the writer that
moves it (``writes.MemoryWriter``) and the file helpers (``files``). The episode methods come
from ``EpisodeBookkeeping``, which reads the memory through ``_episode_source``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from expcli.errors import InvalidTypeError, InvalidValueError
from expcli.host_memory import check_fits
from expcli.memory._shapes import DTypeLike, SizeLike
from expcli.memory._storage import TensorStorage
from expcli.memory._write_head import WriteHead
from expcli.memory.episode_report import EpisodeReport, RunningEpisodes
from expcli.memory.episodes import EpisodeBookkeeping
from expcli.memory.files import check_export_format, save_dataset
from expcli.memory.writes import MemoryWriter
from expcli.spec import CircularState

if TYPE_CHECKING:
    import torch

    from expcli.formats.dataset import Dataset
    from expcli.memory._packed import PackedTensors

__all__ = ["Memory"]

Batch = list[list["torch.Tensor | None"]]


class Memory(EpisodeBookkeeping):
    """Circular memory with skrl's API; subclasses implement ``sample``.

    It also offers tianshou's episode bookkeeping (``prev``, ``next``,
    ``unfinished_index``, ``get_buffer_indices``, ``episodes``, frame-stacking ``get``)
    and ``episodes_batch``, all derived from the ``terminated``/``truncated`` tensors.

    Args:
        memory_size: Rows of every tensor (first dimension).
        num_envs: Columns of every tensor (second dimension): parallel environments.
        device: Where tensors live; None means ``cuda:0`` when available, else the CPU.
            On ``"cpu"`` the memory is numpy arrays until torch is asked for (``tensors``,
            ``_tensor_<name>``, sampling, ...), then torch tensors on the same memory: a
            collector that only writes rows and saves them never imports torch.
        export: Save the memory to a file each time it fills, before it wraps.
        export_format: ``"pt"``, ``"npz"`` or ``"csv"``.
        export_directory: Folder for exports (a ``memories/`` folder is made inside it).

    Raises:
        ValueError: A size is not a positive integer or the export format is unknown.
    """

    def __init__(
        self,
        memory_size: int,
        num_envs: int = 1,
        device: str | torch.device | None = None,
        export: bool = False,
        export_format: str = "pt",
        export_directory: str = "",
    ) -> None:
        for label, value in (("memory_size", memory_size), ("num_envs", num_envs)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InvalidValueError(f"{label} must be a positive integer, got {value!r}")
        check_export_format(export_format)
        self._storage = TensorStorage(_storage_device(device))
        self._head = WriteHead(int(memory_size), int(num_envs))
        self._writer = MemoryWriter(self._storage, self._head, self._wrapped)
        self.sampling_indexes: torch.Tensor | np.ndarray | Sequence[int] | None = None
        self.export = export
        self.export_format = export_format
        self.export_directory = export_directory
        self.metadata: dict[str, Any] = {}
        # Called when the write head wraps, before any row is overwritten (a streaming
        # collect flushes the memory, its staging area, to a shard there).
        self.on_wrap: Callable[[], None] | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the ``_tensor_<name>`` attributes: the storage carries the tensors.

        (Once, packed ones as their one buffer of records; the attributes are set again.)
        """
        return {k: v for k, v in vars(self).items() if not k.startswith("_tensor_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._expose()

    def __getattr__(self, name: str) -> Any:
        """``_tensor_<name>`` of a memory still numpy alone: torch now (skrl's attributes)."""
        storage = self.__dict__.get("_storage")
        if name.startswith("_tensor_") and storage is not None:
            storage.promote()  # the attributes are set once torch holds the tensors
            self._expose()
            if name in self.__dict__:
                return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ------------------------------------------------------------------ state

    @property
    def memory_size(self) -> int:
        """Rows of every tensor."""
        return self._head.memory_size

    @property
    def num_envs(self) -> int:
        """Columns of every tensor: parallel environments."""
        return self._head.num_envs

    @property
    def device(self) -> torch.device:
        """Where the tensors live."""
        return self._storage.device

    @property
    def memory_index(self) -> int:
        """Row of the next write."""
        return self._head.memory_index

    @memory_index.setter
    def memory_index(self, value: int) -> None:
        self._head.memory_index = value

    @property
    def env_index(self) -> int:
        """Column of the next write within row ``memory_index``."""
        return self._head.env_index

    @env_index.setter
    def env_index(self, value: int) -> None:
        self._head.env_index = value

    @property
    def filled(self) -> bool:
        """Whether the rows have wrapped: every slot holds data."""
        return self._head.filled

    @filled.setter
    def filled(self, value: bool) -> None:
        self._head.filled = value

    @property
    def holds_torch(self) -> bool:
        """Whether torch tensors hold the data; False while a CPU memory is numpy arrays alone.

        Asking ``tensors`` (or anything else of torch's) makes it True, on the same memory.
        """
        return not self._storage.numpy_only

    @property
    def tensors(self) -> dict[str, torch.Tensor]:
        """Name to tensor ``(memory_size, num_envs, *feature)``."""
        return self._storage.tensors

    @property
    def tensors_view(self) -> dict[str, torch.Tensor]:
        """Name to the tensor's ``(memory_size * num_envs, *feature)`` view."""
        return self._storage.views

    @property
    def packed(self) -> PackedTensors | None:
        """The records of the small CPU tensors, or None (none of them, or on a GPU).

        On the CPU, tensors of at most ``records.ROW_BYTES`` bytes a transition live side
        by side in one record per transition: each is a strided view of one buffer (not
        contiguous once a record holds two), and ``packed.records(index)`` draws the
        transitions at flat ``index`` in one gather, a field per tensor
        (``packed.names``: the tensors held there now).
        """
        return self._storage.packed

    def __len__(self) -> int:
        """Number of valid transitions: every slot once filled, else those written so far."""
        return len(self._head)

    @property
    def state(self) -> CircularState:
        """The circular state (``memory_index``, ``env_index``, ``filled``, ``written``)."""
        return self._head.state

    @property
    def revision(self) -> tuple[int, int, int, int, bool]:
        """Changes whenever what the memory holds changes, for readers that cache.

        ``(epoch, laps, memory_index, env_index, filled)``: ``add_samples`` moves the write
        head (or, for a whole lap, ``laps``); ``reset``, ``load``, ``share_memory`` and
        ``set_tensor_by_name`` bump ``epoch``. Writes straight into ``tensors`` are not seen.
        """
        return self._head.revision

    def reset(self) -> None:
        """Forget what was written: indexes to 0, ``filled`` False; the data stays in place."""
        self._head.reset()
        if self._writer.tracker is not None:
            self._writer.tracker.reset()

    def report_episodes(self, enabled: bool = True) -> None:
        """Make ``add_samples`` return an ``EpisodeReport`` (tianshou's ``add`` values).

        While enabled, each call reports, per sample written, the episode's return and
        length when that sample ends it (``terminated | truncated``), else 0, and the flat
        index where the episode began. It costs a little on every call, so it is off by
        default.
        """
        self._writer.tracker = RunningEpisodes(self.num_envs) if enabled else None

    def _episode_source(self) -> tuple[Mapping[str, Any], CircularState, int, int]:
        return self._storage.readable(), self.state, self.memory_size, self.num_envs

    def _episode_metadata(self) -> Mapping[str, Any]:
        return self.metadata

    def share_memory(self) -> None:
        """Move the CPU tensors to shared memory so that other processes see the writes."""
        self._storage.share()
        self._head.epoch += 1  # the data moved: readers holding views must take new ones

    def swap_tensors(self, spares: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Put ``spares`` in place of the tensors of those names; return the ones taken out.

        Double buffering without a copy: a writer flushes the rows just filled from the
        returned tensors while the memory goes on writing into the spares. The write head
        and ``filled`` stay; the spares' rows hold whatever they held.

        Raises:
            InvalidValueError: A name the memory lacks, or a spare whose shape, dtype or
                device differs from its tensor's.
        """
        taken = self._storage.swap(spares)
        self._expose()
        self._head.epoch += 1
        return taken

    # ---------------------------------------------------------------- tensors

    def create_tensor(
        self,
        name: str,
        size: SizeLike,
        dtype: DTypeLike = None,
        keep_dimensions: bool = False,
    ) -> bool:
        """Allocate a tensor shaped ``(memory_size, num_envs, *feature)``.

        Float tensors start filled with NaN, so that reading unwritten rows shows at once.
        On the CPU a small tensor joins the others' records (``packed``): the tensors held
        there move to a wider buffer as the same objects (``tensors``, ``tensors_view``,
        ``_tensor_<name>``), but numpy views of them taken before (``to_dataset``) do not.
        Once ``share_memory`` has run, new tensors stay out of the shared records.

        Args:
            name: Tensor name; also reachable as the attribute ``_tensor_<name>``.
            size: An int, a sequence of ints or a gymnasium space (flattened unless
                ``keep_dimensions``). None creates nothing.
            dtype: torch (or numpy) dtype; None means torch's default dtype.
            keep_dimensions: Keep the dimensions of a sequence or Box-like space.

        Returns:
            True if the tensor was created, False if it existed already (or size is None).

        Raises:
            ValueError: A tensor of that name exists with another size or dtype.
        """
        if size is None:
            return False
        created = self._storage.create(
            name, self.memory_size, self.num_envs, size, dtype, keep_dimensions
        )
        if created:
            self._expose()
        return created

    def get_tensor_names(self) -> list[str]:
        """Names of the tensors, in alphabetical order (a new list, as skrl's)."""
        return sorted(self._storage.features)

    def get_tensor_by_name(self, name: str, keepdim: bool = True) -> torch.Tensor:
        """The tensor itself, or with ``keepdim=False`` its ``(memory_size * num_envs, *f)`` view.

        Raises:
            KeyError: No tensor has that name.
        """
        return self.tensors[name] if keepdim else self.tensors_view[name]

    def structured(self, name: str) -> Any:
        """The tensors stored under ``name``, nested as its space is (``Dataset.structured``).

        A dict (tuple) of ``(memory_size, num_envs, *leaf_shape)`` tensors for a Dict
        (Tuple) space in ``metadata``; ``Text`` leaves stay int32 code points (torch holds
        no strings; ``expcli.space_json.decode_text`` reads them).

        Raises:
            SchemaError: Nothing is stored under ``name``, or a leaf is missing.
        """
        from expcli.space_json import structured

        return structured(self.metadata, self.tensors, name, text=False)

    def set_tensor_by_name(self, name: str, tensor: torch.Tensor | np.ndarray) -> None:
        """Copy ``tensor`` into the tensor of that name (broadcasting as torch does).

        Raises:
            KeyError: No tensor has that name.
        """
        import torch

        target = self.tensors[name]
        with torch.no_grad():
            target.copy_(torch.as_tensor(tensor))
        self._head.epoch += 1

    def _expose(self) -> None:
        """Set the ``_tensor_<name>`` attributes (skrl's): one per tensor, the tensor itself."""
        if self._storage.numpy_only:
            return  # set when asked for (``__getattr__``), with torch
        tensors = self._storage.tensors
        for attribute in [a for a in vars(self) if a.startswith("_tensor_")]:
            if attribute.removeprefix("_tensor_") not in tensors:
                delattr(self, attribute)
        for name, tensor in tensors.items():
            setattr(self, f"_tensor_{name}", tensor)

    # ---------------------------------------------------------------- writing

    def add_samples(self, **tensors: Any) -> EpisodeReport | None:
        """Store one step of samples for some or all envs; numpy arrays or torch tensors.

        The number of samples ``n`` comes from ``observations`` (or the first tensor): a
        tensor with one dimension more than its feature holds ``n`` samples, one with the
        feature's dimensions holds the sample of one env. Then:

        * ``n == num_envs``: fill row ``memory_index`` and move to the next row;
        * ``n < num_envs``: fill ``n`` columns from ``env_index`` and move ``env_index``;
        * ``num_envs == 1`` and ``n > 1``: store ``n`` consecutive rows, wrapping around.

        Names without a tensor, and None values, are skipped. When the last row is written
        the memory is ``filled`` and, with ``export``, saved before it wraps.

        Returns:
            None, or after ``report_episodes()`` an ``EpisodeReport`` of the samples written.

        Raises:
            ValueError: No samples, or shapes that do not fit the tensors or the free slots.
        """
        return self._writer.add(tensors)

    def write_row(self, row: Mapping[str, np.ndarray]) -> None:
        """Write one complete row at the write head, then move the head as ``add_samples`` does.

        The per-step path of a collector: ``row[name]`` is a numpy array shaped
        ``(num_envs, *feature)``; tensors not named keep what that row held. Anything
        else (torch tensors, other shapes, tensors numpy cannot view) goes through
        ``write_rows``, which converts or explains.

        Raises:
            ValueError: As ``write_rows``.
        """
        self._writer.write_row(row)

    def write_rows(self, rows: Mapping[str, Any]) -> None:
        """Write ``k`` complete rows at the write head: ``rows[name]`` shaped ``(k, num_envs, *f)``.

        The rows go where ``k`` full-row ``add_samples`` calls would put them and the write
        head moves the same way: past the last row it wraps (``filled``; ``revision``
        counts the lap) and, with ``export``, the memory is saved before the next row
        overwrites its oldest, so a block longer than the memory exports every lap it
        completes. Tensors not named keep their values in those rows; after
        ``report_episodes()`` the running episodes are updated. Values may be numpy arrays
        or torch tensors.

        Raises:
            ValueError: A partly written row (``env_index`` is not 0), a name without a
                tensor, or values not shaped ``(k, num_envs, *feature)`` with one ``k``.
        """
        self._writer.write_rows(rows)

    def grow(self, memory_size: int) -> None:
        """Give every tensor ``memory_size`` rows, keeping the data and the write head.

        The new rows start as ``create_tensor`` makes them (NaN floats, zeros). A memory
        that has wrapped is first put in chronological order, oldest row first, and is
        then no longer ``filled``: its write head is at its old size. The tensors are new
        objects (shared again if they were shared), so ``revision`` starts a new epoch.

        Raises:
            ValueError: ``memory_size`` is smaller than now, or a wrapped memory has a
                partly written row.
        """
        old = self.memory_size
        if isinstance(memory_size, bool) or not isinstance(memory_size, (int, np.integer)):
            raise InvalidValueError(f"memory_size must be an integer, got {memory_size!r}")
        if memory_size < old:
            raise InvalidValueError(f"cannot shrink the memory from {old} to {memory_size} rows")
        if memory_size == old:
            return
        if self.filled and self.env_index:
            raise InvalidValueError(
                f"row {self.memory_index} is partly written (env_index={self.env_index}); "
                "a wrapped memory grows only between complete rows"
            )
        self._storage.grow(int(memory_size), self._head.grow(int(memory_size)))
        self._expose()

    def _wrapped(self) -> None:
        """The write head wrapped: ``on_wrap``, then with ``export`` a save, before overwriting."""
        if self.on_wrap is not None:
            self.on_wrap()
        if self.export:
            self.save(directory=self.export_directory, format=self.export_format)

    # --------------------------------------------------------------- sampling

    def sample(
        self,
        names: Sequence[str],
        batch_size: int,
        mini_batches: int = 1,
        sequence_length: int = 1,
    ) -> Batch:
        """Draw a batch; implemented by subclasses such as ``RandomMemory``.

        Raises:
            NotImplementedError: Always, on the base class.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement sample()")

    def sample_by_index(
        self,
        names: Sequence[str],
        indexes: Sequence[int] | np.ndarray | torch.Tensor,
        mini_batches: int = 1,
    ) -> Batch:
        """Gather the rows at flat ``indexes`` (``t * num_envs + env``) of each named tensor.

        Returns:
            One list per mini-batch (``np.array_split`` of the indexes), each holding a
            ``(len(batch), *feature)`` tensor per name (None for unknown names).
        """
        index = _as_index_array(indexes)
        gather = self._storage.gather
        if mini_batches > 1:
            return [gather(names, part) for part in np.array_split(index, mini_batches)]
        return [gather(names, index)]

    def sample_all(
        self, names: Sequence[str], mini_batches: int = 1, sequence_length: int = 1
    ) -> Batch:
        """Every slot of every named tensor, as ``(memory_size * num_envs, *feature)``.

        With ``sequence_length > 1`` the slots come env by env, each env's rows in
        chronological order (oldest first), so consecutive rows form sequences that never
        mix envs nor jump across the write head. Without it they come in storage order,
        split into ``mini_batches`` equal slices (the remainder dropped, as skrl does).
        """
        if sequence_length > 1:
            return self.sample_by_index(names, self._head.chronological_index(), mini_batches)
        views = [self.tensors_view.get(name) for name in names]
        if mini_batches > 1:
            size = (self.memory_size * self.num_envs) // mini_batches
            return [
                [None if v is None else v[i * size : (i + 1) * size] for v in views]
                for i in range(mini_batches)
            ]
        return [views]

    def get_sampling_indexes(self) -> torch.Tensor | np.ndarray | Sequence[int] | None:
        """The flat indexes of the last ``sample`` call."""
        return self.sampling_indexes

    # ------------------------------------------------------------------ files

    def to_dataset(self) -> Dataset:
        """The memory as a ``formats.Dataset``: zero-copy numpy views on the CPU.

        Raises:
            SchemaError: A tensor's dtype has no numpy equivalent that expcli stores.
        """
        from expcli.formats.dataset import Dataset

        tensors = self._storage.storable(self.get_tensor_names())
        return Dataset(tensors, self.state, dict(self.metadata))

    def save(self, directory: str | os.PathLike[str] = "", format: str | None = None) -> str:
        """Write the memory to a file atomically and return its path.

        As in skrl, the file goes to ``<directory>/memories/<timestamp>_memory_<id>.<format>``
        (``export_directory`` when ``directory`` is empty). A ``directory`` that ends in
        ``.pt``, ``.npz``, ``.csv`` or ``.h5`` is taken as the file path itself. The file follows
        the expcli dataset schema: tensors, circular state and metadata.

        Raises:
            ValueError: The format is not one of pt, npz, csv.
            SchemaError: A tensor's dtype cannot be stored (bfloat16, complex).
            OutputLockedError: Another process writes that file.
        """
        return save_dataset(
            self.to_dataset, directory or self.export_directory, format, hex(id(self))
        )

    def load(self, path: str | os.PathLike[str]) -> None:
        """Replace tensors, sizes, circular state and metadata with those of a saved file.

        Reads pt, npz, csv and HDF5 (skrl's own exports too) without ever unpickling.

        Raises:
            FormatError: The file is unknown, corrupt or unsafe.
            SchemaError: Its tensors disagree in shape or dtype.
        """
        from expcli.formats import read_dataset

        dataset = read_dataset(path, num_envs=self.num_envs)
        _check_copy_fits(dataset, self._storage.on_cpu, path)
        self._adopt(dataset)

    @classmethod
    def from_dataset(cls, dataset: Dataset, device: str | torch.device | None = None) -> Self:
        """A new memory holding a ``Dataset``'s tensors.

        Copied to ``device``; circular state and metadata, sized as the dataset (at least one row
        and one column).
        """
        memory = cls(max(dataset.memory_size, 1), max(dataset.num_envs, 1), device=device)
        memory._adopt(dataset)
        return memory

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], device: str | torch.device | None = None
    ) -> Self:
        """A new memory holding what ``path`` holds (sizes taken from the file)."""
        from expcli.formats import read_dataset

        dataset = read_dataset(path)
        chosen = _storage_device(device)
        _check_copy_fits(dataset, chosen == "cpu" or getattr(chosen, "type", "") == "cpu", path)
        return cls.from_dataset(dataset, device)

    def _adopt(self, dataset: Dataset) -> None:
        """Adopt a ``formats.Dataset``'s tensors (copied to ``device``), sizes and state."""
        size = (
            (dataset.memory_size, dataset.num_envs)
            if dataset.tensors
            else (self.memory_size, self.num_envs)
        )
        self._storage.replace(dataset.tensors)
        self._expose()
        self.metadata = dict(dataset.metadata)
        self._head.adopt(dataset.state, *size, self.metadata)
        if self._writer.tracker is not None:
            self._writer.tracker = RunningEpisodes(self.num_envs)


def _check_copy_fits(dataset: Dataset, on_cpu: bool, path: str | os.PathLike[str]) -> None:
    """Refuse, before copying, a file whose tensors (mapped, so far) a CPU memory cannot hold.

    Raises:
        ConfigError: One line naming the file, the sizes and the lazy alternative.
    """
    if on_cpu:
        needed = sum(int(a.nbytes) for a in dataset.tensors.values())
        check_fits(
            needed,
            "copying it into a Memory",
            "sample it where it lies with expcli.ReplayBuffer(path)",
            path=path,
        )


def _storage_device(device: str | torch.device | None) -> torch.device | str:
    """The device of a new memory's storage.

    The string ``"cpu"`` (numpy until torch is asked for) when ``device`` is the CPU spelled
    so, else a ``torch.device``.
    """
    if device == "cpu":
        return "cpu"
    import torch

    if device is None:
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _as_index_array(indexes: Sequence[int] | np.ndarray | torch.Tensor) -> np.ndarray:
    torch = sys.modules.get("torch")  # a torch tensor means torch is loaded
    if torch is not None and isinstance(indexes, torch.Tensor):
        indexes = indexes.detach().cpu().numpy()
    index = np.asarray(indexes)
    if index.dtype.kind not in "iu":
        if index.size == 0:
            return index.astype(np.int64)
        raise InvalidTypeError(f"indexes must be integers, got dtype {index.dtype}")
    return index
