"""ReplayBuffer: torchrl's composable buffer (storage, sampler, writer, transform) over expcli data.

The storage is a ``Memory`` (so a collector's writes are sampled as they land) or a loaded
dataset (``.pt`` memory-mapped). Batches are ``DictBatch`` of ``(B, *feature)`` tensors, or
``TemporalBatch`` of ``(slices, steps, *feature)`` tensors from a ``SliceSampler``. The
buffer also offers tianshou's episode bookkeeping over its storage (``prev``, ``next``,
``episodes``, frame-stacking ``get``, ``episodes_batch``, ...).

``sample_arrays`` draws the same batch as numpy arrays, without importing torch: the rows
are gathered as numpy either way (``Storage.gather_arrays``) and become tensors at the edge.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from expcli.errors import ConfigError, IndexOutOfRangeError, InvalidTypeError
from expcli.formats.column_roles import ColumnRoles, DoneMeans, column_roles
from expcli.memory.episodes import EpisodeBookkeeping
from expcli.replay.batch_gather import cuda_available, is_observation, torch_device
from expcli.replay.prefetch import Prefetcher
from expcli.replay.samplers import (
    PrioritizedSampler,
    RandomSampler,
    Sampler,
    SamplerWithoutReplacement,
)
from expcli.replay.storages import Storage, StorageSource, as_storage
from expcli.replay.writers import RoundRobinWriter
from expcli.spec import CircularState

if TYPE_CHECKING:
    from expcli.memory.batches import TemporalBatch

__all__ = ["ReplayBuffer"]

Transform = Callable[[Any], Any]
_Draw = tuple[Any, dict[str, Any], bool]


class ReplayBuffer(EpisodeBookkeeping):
    """Sample training batches from a Memory or a dataset file.

    Args:
        storage: A ``Memory``, a loaded ``Dataset`` (``expcli.load``), the path of a
            dataset file, or a ``Storage``.
        sampler: ``RandomSampler()`` (default), ``SamplerWithoutReplacement``,
            ``PrioritizedSampler`` or ``SliceSampler``.
        writer: Where ``extend`` writes; ``RoundRobinWriter()`` (the default) is the one.
        transform: Called on every batch at sample time; its result is what ``sample``
            returns.
        batch_size: Default batch size of ``sample`` (required with ``prefetch``).
        prefetch: Number of batches drawn ahead in a background thread. The batches and
            their order are the same as without it.
        names: Tensors to put in batches; default all.
        seed: Seed of the buffer's ``numpy.random.Generator``: a seeded buffer draws the
            same batches every run.
        stack_num: Frames to stack in ``observations`` and ``next_observations`` (and
            their leaves) at sample time, as ``get(index, name, stack_num)`` does: each
            becomes ``(B, stack_num, *feature)``. For data that stores one frame per
            transition and records ``metadata["frame_stack"]`` (``--mode envpool`` on
            Atari).
        device: Where batches land (``"cuda"``, ``"cuda:1"``, ...); default where the
            storage is (the CPU for files).
        pin_memory: Gather batches into page-locked memory, so that copying them to a GPU
            is asynchronous (``non_blocking``). Default: when ``device`` is a CUDA device.
            Ignored where CUDA is not there.
        columns: For the path of a table (Parquet, Arrow IPC), the column of each role, as
            ``expcli.load`` takes it.
        done_means: What a table's ``done`` column without the split stands for, as
            ``expcli.load`` takes it.

    Raises:
        ConfigError: ``prefetch`` without ``batch_size``, a size below 1, or a storage
            that is none of the above.
    """

    def __init__(
        self,
        storage: StorageSource,
        sampler: Sampler | None = None,
        writer: RoundRobinWriter | None = None,
        transform: Transform | None = None,
        batch_size: int | None = None,
        prefetch: int | None = None,
        names: Sequence[str] | None = None,
        seed: int | None = None,
        stack_num: int = 1,
        device: str | None = None,
        pin_memory: bool | None = None,
        columns: ColumnRoles | Mapping[str, str] | str | None = None,
        done_means: DoneMeans | str | None = None,
    ) -> None:
        for label, value in (
            ("batch_size", batch_size),
            ("prefetch", prefetch),
            ("stack_num", stack_num),
        ):
            if value is not None and value < 1:
                raise ConfigError(f"{label} must be at least 1, got {value}")
        if prefetch and batch_size is None:
            raise ConfigError("prefetch needs a batch_size at construction (what to draw ahead)")
        self.storage: Storage = as_storage(storage, column_roles(columns, done_means))
        self.sampler = sampler if sampler is not None else RandomSampler()
        self.writer = writer if writer is not None else RoundRobinWriter()
        self.transform = transform
        self.batch_size = batch_size
        self.names = tuple(names) if names is not None else None
        self.stack_num = stack_num
        self.device = None if device is None else torch_device(device)
        cuda = self.device is not None and self.device.type == "cuda"
        self._pin = bool(cuda if pin_memory is None else pin_memory) and cuda_available()
        self._rng = np.random.default_rng(seed)
        self._seen: Hashable | None = None
        self._prefetcher: Prefetcher[_Draw] | None = None
        if prefetch:
            size = batch_size
            assert size is not None
            self._prefetcher = Prefetcher(
                prefetch,
                lambda: self._draw(size),
                self._snapshot,
                self._restore,
                self.storage.revision,
            )

    def __len__(self) -> int:
        return len(self.storage)

    def __repr__(self) -> str:
        return (
            f"ReplayBuffer({len(self)} transitions in a {type(self.storage).__name__}, "
            f"sampler={type(self.sampler).__name__}, batch_size={self.batch_size})"
        )

    # ---------------------------------------------------------------- sampling

    def sample(self, batch_size: int | None = None, return_info: bool = False) -> Any:
        """Draw a batch (after ``transform``); with ``return_info``, ``(batch, info)``.

        ``info["index"]`` holds the flat indexes drawn (``(B,)``, or ``(slices, steps)``
        for a ``SliceSampler``); a ``PrioritizedSampler`` adds ``info["priority_weight"]``.

        Raises:
            ConfigError: No batch size (here or at construction), or one the sampler
                cannot serve (see the sampler).
            SchemaError: The buffer holds no transitions, or ``names`` lists an unknown
                tensor.
        """
        batch, info, _ = self._next(batch_size)
        return (batch, info) if return_info else batch

    def __iter__(self) -> Iterator[Any]:
        """Batches of ``batch_size``.

        One epoch of a ``SamplerWithoutReplacement`` (each transition once), else as many batches as
        make up ``len(buffer)`` transitions.
        """
        if isinstance(self.sampler, SamplerWithoutReplacement):
            while True:
                batch, _, ran_out = self._next(None)
                yield batch
                if ran_out:
                    return
        else:
            size = self._batch_size(None)
            for _ in range(max(1, len(self) // size)):
                yield self._next(None)[0]

    def _next(self, batch_size: int | None) -> _Draw:
        size = self._batch_size(batch_size)
        if self._prefetcher is not None:
            if size == self.batch_size:
                return self._prefetcher.next()
            self._prefetcher.settle()
        return self._draw(size)

    def _batch_size(self, batch_size: int | None) -> int:
        size = batch_size if batch_size is not None else self.batch_size
        if size is None:
            raise ConfigError("no batch size: pass one to sample() or to ReplayBuffer()")
        if size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {size}")
        return size

    def _draw(self, batch_size: int) -> _Draw:
        index, info = self._draw_index(batch_size)
        batch = self._batch(index, info.get("lengths"))
        info["index"] = index
        return batch, info, self.sampler.ran_out

    def _draw_index(self, batch_size: int) -> tuple[np.ndarray, dict[str, Any]]:
        """The sampler's next indexes and info, drawn from the buffer's generator."""
        self._sync()
        return self.sampler.sample(self.storage, batch_size, self._rng)

    def sample_arrays(
        self, batch_size: int | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The batch ``sample`` would draw, as numpy arrays, and its info; torch is not imported.

        The same indexes from the same generator (a seeded buffer draws what ``sample``
        would draw in its place) and the same values: name to ``(B, *feature)`` arrays, or
        ``(slices, steps, *feature)`` from a ``SliceSampler`` with the steps past a short
        slice's ``info["lengths"]`` zeroed; frame stacks as ``stack_num`` says. What only
        tensors have is left out: no ``transform``, no ``device``, no pinned memory.

        Returns:
            The arrays and ``info`` (``info["index"]``, and ``info["priority_weight"]`` or
            ``info["lengths"]`` as for ``sample``).

        Raises:
            ConfigError, SchemaError: As ``sample``.
        """
        size = self._batch_size(batch_size)
        if self._prefetcher is not None:
            self._prefetcher.settle()
        index, info = self._draw_index(size)
        names = self.names if self.names is not None else self.storage.names()
        stack_here = self.stack_num > 1 and not self.storage.can_stack
        arrays = self.storage.gather_arrays(
            names, index, stack_num=1 if stack_here else self.stack_num
        )
        if stack_here:
            for name in arrays:
                if is_observation(name):
                    arrays[name] = self.get(index, name, self.stack_num)
        lengths = info.get("lengths")
        if lengths is not None:
            padding = np.arange(index.shape[1])[None, :] >= lengths[:, None]
            for array in arrays.values():
                array[padding] = 0
        info["index"] = index
        return arrays, info

    def batch(self, index: npt.ArrayLike, lengths: np.ndarray | None = None) -> Any:
        """The batch at flat ``index``, made as ``sample`` makes it (names, stacks, transform).

        For indexes drawn elsewhere: a ``torch.utils.data`` sampler's, or ``info["index"]``
        of an earlier batch. ``index`` is ``(B,)`` for a ``DictBatch`` or ``(slices, steps)``
        for a ``TemporalBatch``, whose ``lengths`` (a ``SliceSampler``'s ``info["lengths"]``)
        say where short slices end.

        Raises:
            InvalidTypeError: ``index`` does not hold integers.
            IndexOutOfRangeError: An index outside ``0 .. len(buffer) - 1`` (an
                ``InvalidValueError`` and an ``IndexError``).
            SchemaError: ``names`` lists an unknown tensor.
        """
        index = np.asarray(index)
        if index.size and index.dtype.kind not in "iu":
            raise InvalidTypeError(f"index must hold integers, got {index.dtype}")
        index = index.astype(np.int64, copy=False)
        if index.size and (index.min() < 0 or index.max() >= len(self)):
            raise IndexOutOfRangeError(
                f"index out of range: the buffer holds transitions 0..{len(self) - 1}"
            )
        return self._batch(index, lengths)

    def _batch(self, index: np.ndarray, lengths: np.ndarray | None) -> Any:
        names = self.names if self.names is not None else self.storage.names()
        if self.stack_num > 1 and not self.storage.can_stack:
            tensors = self.storage.gather(names, index)
            self._stack(tensors, index)
        else:
            tensors = self.storage.gather(
                names, index, stack_num=self.stack_num, pin_memory=self._pin
            )
        if self.device is not None:
            tensors = {
                name: tensor.to(self.device, non_blocking=self._pin)
                for name, tensor in tensors.items()
            }
        from expcli.memory.batches import DictBatch

        batch: Any
        if index.ndim == 1:
            batch = DictBatch.of(tensors)
        else:
            batch = _temporal(tensors, lengths)
        if self.transform is not None:
            batch = self.transform(batch)
        return batch

    def _stack(self, tensors: dict[str, Any], index: np.ndarray) -> None:
        """Replace the observations in ``tensors`` by their frame stacks at ``index``."""
        import torch

        for name, tensor in tensors.items():
            if is_observation(name):
                stacked = self.get(index, name, self.stack_num)
                tensors[name] = torch.from_numpy(stacked).to(tensor.device)

    def _sync(self) -> None:
        """Tell the sampler what the storage wrote since it last looked."""
        revision = self.storage.revision()
        if revision != self._seen:
            written = None if self._seen is None else self.storage.written_since(self._seen)
            self.sampler.update(self.storage, written)
            self._seen = revision

    def _snapshot(self) -> Any:
        return self._rng.bit_generator.state, self.sampler.snapshot(), self._seen

    def _restore(self, snapshot: Any) -> None:
        self._rng.bit_generator.state, sampler_state, self._seen = snapshot
        self.sampler.restore(sampler_state)

    def close(self) -> None:
        """Stop the prefetching thread, if any (the buffer stays usable)."""
        if self._prefetcher is not None:
            self._prefetcher.close()

    def __enter__(self) -> ReplayBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- writing

    def extend(self, data: Mapping[str, Any]) -> np.ndarray:
        """Write ``n`` samples (name to ``(n, *feature)``) through the writer.

        Returns:
            The flat indexes written.

        Raises:
            ConfigError: The storage is a read-only dataset, or the values disagree on ``n``.
            ValueError: A value does not fit its tensor.
        """
        if self._prefetcher is not None:
            self._prefetcher.settle()
        index = self.writer.extend(self.storage, data)
        self._sync()
        return index

    def add(self, data: Mapping[str, Any]) -> int:
        """Write one sample (name to a ``(*feature)`` value); return its flat index."""
        one = {k: v[None] if hasattr(v, "shape") else np.asarray(v)[None] for k, v in data.items()}
        return int(self.extend(one)[0])

    def update_priority(self, index: npt.ArrayLike, priority: npt.ArrayLike) -> None:
        """Set the priorities of the transitions at flat ``index`` (e.g. ``info["index"]``).

        Raises:
            ConfigError: The sampler is not a ``PrioritizedSampler``, or see its
                ``update_priority``.
        """
        if not isinstance(self.sampler, PrioritizedSampler):
            raise ConfigError(
                f"update_priority needs a PrioritizedSampler, not a {type(self.sampler).__name__}"
            )
        if self._prefetcher is not None:
            self._prefetcher.settle()
        self._sync()
        if hasattr(index, "detach"):
            index = index.detach().cpu().numpy()
        if hasattr(priority, "detach"):
            priority = priority.detach().cpu().numpy()
        self.sampler.update_priority(index, priority)

    # ------------------------------------------------------- episode bookkeeping

    def _episode_source(self) -> tuple[Mapping[str, Any], CircularState, int, int]:
        storage = self.storage
        return storage.arrays(), storage.state, storage.memory_size, storage.num_envs

    def _episode_metadata(self) -> Mapping[str, Any]:
        metadata = getattr(self.storage, "metadata", None)
        return metadata if isinstance(metadata, Mapping) else {}


def _temporal(tensors: dict[str, Any], lengths: np.ndarray | None) -> TemporalBatch:
    """Slices as a ``TemporalBatch``; steps past a short slice's length are zeroed."""
    import torch

    from expcli.memory.batches import TemporalBatch

    if lengths is None:
        return TemporalBatch(tensors)

    lengths_t = torch.from_numpy(lengths)
    batch = TemporalBatch(tensors, lengths_t)
    if int(lengths.min()) < batch.max_len:
        padding = ~batch.mask().to(torch.bool)
        for tensor in tensors.values():
            tensor[padding] = 0
    return batch
