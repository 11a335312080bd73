"""Memory: skrl's circular buffer of torch tensors, written through numpy views.

Each tensor is shaped ``(memory_size, num_envs, *feature)``. Two integers locate the next
write: ``memory_index`` (row) and ``env_index`` (column within the row); ``filled`` says
whether the rows have wrapped. On the CPU every tensor is paired with a zero-copy numpy
view, so ``add_samples`` and sampling cost a numpy assignment or gather instead of torch's
per-call dispatch. Writing and growth live in ``writes.py``, files in ``files.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from expcli.errors import InvalidTypeError, InvalidValueError, SchemaError
from expcli.memory._shapes import NUMPY_DTYPES, feature_shape, torch_dtype
from expcli.memory.episode_report import RunningEpisodes
from expcli.memory.episodes import EpisodeBookkeeping
from expcli.memory.files import EXPORT_FORMATS, MemoryFiles
from expcli.memory.writes import MemoryWrites
from expcli.spec import CircularState, chronological_rows, overwritten_columns

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = ["Memory"]

Batch = list[list[torch.Tensor | None]]


class Memory(MemoryWrites, MemoryFiles, EpisodeBookkeeping):
    """Circular memory with skrl's API; subclasses implement ``sample``.

    It also offers tianshou's episode bookkeeping (``prev``, ``next``,
    ``unfinished_index``, ``get_buffer_indices``, ``episodes``, frame-stacking ``get``)
    and ``episodes_batch``, all derived from the ``terminated``/``truncated`` tensors.

    Args:
        memory_size: Rows of every tensor (first dimension).
        num_envs: Columns of every tensor (second dimension): parallel environments.
        device: Where tensors live; None means ``cuda:0`` when available, else the CPU.
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
        if export_format not in EXPORT_FORMATS:
            raise InvalidValueError(
                f"Unsupported export format: {export_format!r}; expected one of {EXPORT_FORMATS}"
            )
        self.memory_size = int(memory_size)
        self.num_envs = int(num_envs)
        self.device = _parse_device(device)
        self.filled = False
        self.env_index = 0
        self.memory_index = 0
        self.tensors: dict[str, torch.Tensor] = {}
        self.tensors_view: dict[str, torch.Tensor] = {}
        self.sampling_indexes: torch.Tensor | np.ndarray | Sequence[int] | None = None
        self.export = export
        self.export_format = export_format
        self.export_directory = export_directory
        self.metadata: dict[str, Any] = {}
        # Called when the write head wraps, before any row is overwritten (a streaming
        # collect flushes the memory, its staging area, to a shard there).
        self.on_wrap: Callable[[], None] | None = None
        # numpy views of the CPU tensors: (T, N, *f) and flattened (T * N, *f)
        self._arrays: dict[str, np.ndarray] = {}
        self._flat: dict[str, np.ndarray] = {}
        self._features: dict[str, tuple[int, ...]] = {}
        self._row_shapes: dict[str, tuple[int, ...]] = {}
        self._fast: dict[str, tuple[tuple[int, ...], np.ndarray]] = {}
        # what changed since a reader last looked: see ``revision``
        self._epoch = 0
        self._laps = 0
        self._rows_done: int | None = 0  # rows the write head has passed; None: unknown
        self._tracker: RunningEpisodes | None = None

    # ------------------------------------------------------------------ state

    def __len__(self) -> int:
        """Number of valid transitions: every slot once filled, else those written so far."""
        if self.filled:
            return self.memory_size * self.num_envs
        return self.memory_index * self.num_envs + self.env_index

    @property
    def state(self) -> CircularState:
        """The circular state (``memory_index``, ``env_index``, ``filled``, ``written``)."""
        rows = self._rows_done
        written = None if rows is None else rows * self.num_envs + self.env_index
        return CircularState(self.memory_index, self.env_index, self.filled, written)

    @property
    def revision(self) -> tuple[int, int, int, int, bool]:
        """Changes whenever what the memory holds changes, for readers that cache.

        ``(epoch, laps, memory_index, env_index, filled)``: ``add_samples`` moves the write
        head (or, for a whole lap, ``laps``); ``reset``, ``load``, ``share_memory`` and
        ``set_tensor_by_name`` bump ``epoch``. Writes straight into ``tensors`` are not seen.
        """
        return (self._epoch, self._laps, self.memory_index, self.env_index, self.filled)

    def reset(self) -> None:
        """Forget what was written: indexes to 0, ``filled`` False; the data stays in place."""
        self.filled = False
        self.env_index = 0
        self.memory_index = 0
        self._rows_done = 0
        self._epoch += 1
        if self._tracker is not None:
            self._tracker.reset()

    def report_episodes(self, enabled: bool = True) -> None:
        """Make ``add_samples`` return an ``EpisodeReport`` (tianshou's ``add`` values).

        While enabled, each call reports, per sample written, the episode's return and
        length when that sample ends it (``terminated | truncated``), else 0, and the flat
        index where the episode began. It costs a little on every call, so it is off by
        default.
        """
        self._tracker = RunningEpisodes(self.num_envs) if enabled else None

    def _episode_source(self) -> tuple[Mapping[str, Any], Any, int, int]:
        arrays: dict[str, Any] = dict(self._arrays)
        for name, tensor in self.tensors.items():
            if name not in arrays:  # on another device, or a dtype numpy lacks
                cpu = tensor.detach().cpu()
                arrays[name] = (cpu.float() if cpu.dtype == torch.bfloat16 else cpu).numpy()
        return arrays, self.state, self.memory_size, self.num_envs

    def _episode_metadata(self) -> Mapping[str, Any]:
        return self.metadata

    def share_memory(self) -> None:
        """Move the CPU tensors to shared memory so that other processes see the writes."""
        for name, tensor in self.tensors.items():
            if tensor.device.type == "cpu":
                tensor.share_memory_()  # type: ignore[no-untyped-call]
                self._bind(name, tensor)
        self._epoch += 1  # the data moved: readers holding views must take new ones

    def swap_tensors(self, spares: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Put ``spares`` in place of the tensors of those names; return the ones taken out.

        Double buffering without a copy: a writer flushes the rows just filled from the
        returned tensors while the memory goes on writing into the spares. The write head
        and ``filled`` stay; the spares' rows hold whatever they held.

        Raises:
            InvalidValueError: A name the memory lacks, or a spare whose shape, dtype or
                device differs from its tensor's.
        """
        for name, spare in spares.items():
            old = self.tensors.get(name)
            if old is None:
                raise InvalidValueError(
                    f"no tensor named {name!r} to swap; tensors: {sorted(self.tensors)}"
                )
            if (spare.shape, spare.dtype, spare.device) != (old.shape, old.dtype, old.device):
                raise InvalidValueError(
                    f"spare for {name!r} is {tuple(spare.shape)} {spare.dtype} on "
                    f"{spare.device}; expected {tuple(old.shape)} {old.dtype} on {old.device}"
                )
        taken = {name: self.tensors[name] for name in spares}
        for name, spare in spares.items():
            self._install(name, spare)
        self._epoch += 1
        return taken

    # ---------------------------------------------------------------- tensors

    def create_tensor(
        self,
        name: str,
        size: Any,
        dtype: Any = None,
        keep_dimensions: bool = False,
    ) -> bool:
        """Allocate a tensor shaped ``(memory_size, num_envs, *feature)``.

        Float tensors start filled with NaN, so that reading unwritten rows shows at once.

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
        if not isinstance(name, str) or not name or name.startswith("__"):
            raise InvalidValueError(
                f"tensor name must be a non-empty string not starting with '__', got {name!r}"
            )
        shape = feature_shape(size, keep_dimensions)
        if name in self.tensors:
            existing = self.tensors[name]
            if tuple(existing.shape[2:]) != shape:
                raise InvalidValueError(
                    f"Tensor size ({shape}) doesn't match the existing one "
                    f"({tuple(existing.shape[2:])}): {name!r}"
                )
            if dtype is not None and existing.dtype != torch_dtype(dtype):
                raise InvalidValueError(
                    f"Tensor dtype ({torch_dtype(dtype)}) doesn't match the existing one "
                    f"({existing.dtype}): {name!r}"
                )
            return False
        tensor = torch.zeros(
            (self.memory_size, self.num_envs, *shape), device=self.device, dtype=torch_dtype(dtype)
        )
        if tensor.is_floating_point():
            tensor.fill_(float("nan"))
        self._install(name, tensor)
        return True

    def get_tensor_names(self) -> list[str]:
        """Names of the tensors, in alphabetical order (a new list, as skrl's)."""
        return sorted(self.tensors)

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
        target = self.tensors[name]
        with torch.no_grad():
            target.copy_(torch.as_tensor(tensor))
        self._epoch += 1

    def _install(self, name: str, tensor: torch.Tensor) -> None:
        setattr(self, f"_tensor_{name}", tensor)
        self.tensors[name] = tensor
        shape = tuple(tensor.shape[2:])
        self._features[name] = shape
        self._row_shapes[name] = (self.num_envs, *shape)
        self._bind(name, tensor)

    def _bind(self, name: str, tensor: torch.Tensor) -> None:
        self.tensors_view[name] = tensor.view(-1, *tensor.shape[2:])
        if tensor.device.type == "cpu" and tensor.dtype in NUMPY_DTYPES:
            array = tensor.numpy()
            self._arrays[name] = array
            self._flat[name] = array.reshape(-1, *array.shape[2:])
            self._fast[name] = (self._row_shapes[name], array)
        else:
            self._arrays.pop(name, None)
            self._flat.pop(name, None)
            self._fast.pop(name, None)

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
        if mini_batches > 1:
            return [self._gather(names, part) for part in np.array_split(index, mini_batches)]
        return [self._gather(names, index)]

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
            order = self._chronological_index()
            if mini_batches > 1:
                return [self._gather(names, part) for part in np.array_split(order, mini_batches)]
            return [self._gather(names, order)]
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

    def _chronological_index(self) -> np.ndarray:
        rows = chronological_rows(self.state, self.memory_size, self.num_envs)
        envs = np.arange(self.num_envs, dtype=np.int64)[:, None]
        return np.asarray((rows * self.num_envs + envs).reshape(-1))

    def _gather(self, names: Sequence[str], index: np.ndarray) -> list[torch.Tensor | None]:
        flat = self._flat
        out: list[torch.Tensor | None] = []
        for name in names:
            array = flat.get(name)
            if array is not None:
                out.append(torch.from_numpy(array.take(index, axis=0)))
            elif name in self.tensors_view:
                view = self.tensors_view[name]
                out.append(view[torch.from_numpy(index).to(view.device)])
            else:
                out.append(None)
        return out

    def to_dataset(self) -> Dataset:
        """The memory as a ``formats.Dataset``: zero-copy numpy views on the CPU.

        Raises:
            SchemaError: A tensor's dtype has no numpy equivalent that expcli stores.
        """
        from expcli.formats.dataset import Dataset

        tensors: dict[str, np.ndarray] = {}
        for name in self.get_tensor_names():
            array = self._arrays.get(name)
            if array is None:
                tensor = self.tensors[name]
                if tensor.dtype not in NUMPY_DTYPES:
                    raise SchemaError(
                        f"dtype {tensor.dtype} cannot be saved; expected one of "
                        f"{', '.join(str(d) for d in NUMPY_DTYPES)}",
                        key=name,
                    )
                array = tensor.detach().cpu().numpy()
            tensors[name] = array
        return Dataset(tensors, self.state, dict(self.metadata))

    def _adopt(self, dataset: Dataset) -> None:
        """Adopt a ``formats.Dataset``'s tensors (copied to ``device``), sizes and state."""
        if dataset.tensors:
            self.memory_size, self.num_envs = dataset.memory_size, dataset.num_envs
        for name in list(self.tensors):
            delattr(self, f"_tensor_{name}")
        self.tensors, self.tensors_view = {}, {}
        self._arrays, self._flat, self._features, self._row_shapes, self._fast = {}, {}, {}, {}, {}
        for name, array in dataset.tensors.items():
            tensor = torch.from_numpy(np.array(array, copy=True, order="C")).to(self.device)
            self._install(name, tensor)
        state = dataset.state
        self.memory_index, self.env_index, self.filled = (
            state.memory_index,
            state.env_index,
            state.filled,
        )
        self.metadata = dict(dataset.metadata)
        self._rows_done = _rows_done(state, self.memory_size, self.num_envs, self.metadata)
        self._epoch += 1
        if self._tracker is not None:
            self._tracker = RunningEpisodes(self.num_envs)


def _rows_done(
    state: CircularState, memory_size: int, num_envs: int, metadata: dict[str, Any]
) -> int | None:
    """Rows the write head of a memory in ``state`` has passed, as far as the data tells.

    The recorded ``written`` says; without it, the valid rows when nothing was overwritten
    (``overwritten_columns``), else unknown (None).
    """
    if state.written is not None:
        return (state.written - state.env_index) // num_envs
    if overwritten_columns(state, memory_size, num_envs, metadata).any():
        return None
    return state.valid_length(memory_size, num_envs) // num_envs


def _parse_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _as_index_array(indexes: Sequence[int] | np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(indexes, torch.Tensor):
        indexes = indexes.detach().cpu().numpy()
    index = np.asarray(indexes)
    if index.dtype.kind not in "iu":
        if index.size == 0:
            return index.astype(np.int64)
        raise InvalidTypeError(f"indexes must be integers, got dtype {index.dtype}")
    return index
