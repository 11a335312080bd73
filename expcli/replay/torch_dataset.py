"""A dataset file or folder as a ``torch.utils.data`` dataset: of transitions, or of whole batches.

``ReplayDataset`` is a map-style dataset of its transitions, as PyTorch users write it::

    data = ReplayDataset("runs/cartpole.h5")
    loader = DataLoader(data, batch_size=32, shuffle=True, num_workers=2)

``len(data)`` is the transitions held; ``data[i]`` is one transition, a dict of tensors,
which the default collate stacks into a batch equal to ``ReplayBuffer.batch`` of the same
indexes. ``__getitems__``, which torch's fetcher calls with a batch's indexes when a dataset
has it, gathers them as one batch and hands its rows to the collate.

The fast path gathers whole batches and leaves the collate out: ``data[indexes]`` is a batch
(``ReplayBuffer.batch``: the same names, frame stacks and transform as ``sample``) and its
``sampler``, a ``ReplayBatchSampler``, hands out those indexes, a batch at a time::

    data = ReplayDataset("runs/pong/", batch_size=256, stack_num=4, seed=0)
    loader = DataLoader(data, sampler=data.sampler, batch_size=None, num_workers=2,
                        pin_memory=True)

A sampler and a map-style dataset rather than an ``IterableDataset``, as torch pairs
``DistributedSampler`` with a dataset: the sampler runs in the main process, so
``set_epoch`` reaches it even with ``persistent_workers`` (a worker's copy of an iterable
dataset keeps the epoch it was made with); the ``DataLoader`` hands batches back in the
sampler's order, so the batches and their order are the same whatever ``num_workers``; and
an epoch's permutation exists once, not once per worker. Only the path, the options and the
sampler's few numbers go to a worker; each worker opens the file itself, once, on its first
batch, so mapped files are shared through the page cache and nothing is read twice.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from expcli.errors import (
    ConfigError,
    IndexOutOfRangeError,
    InvalidTypeError,
    InvalidValueError,
    SchemaError,
)
from expcli.formats.column_roles import ColumnRoles, DoneMeans, column_roles
from expcli.replay.buffer import ReplayBuffer, Transform
from expcli.replay.storages import DatasetStorage

__all__ = ["ReplayBatchSampler", "ReplayDataset"]


class ReplayBatchSampler(Sampler[np.ndarray]):
    """The flat indexes of each batch of an epoch: ``(batch_size,)`` int64 arrays.

    Without replacement, every index of ``0 .. count - 1`` once per epoch: a permutation
    seeded by ``(seed, epoch)``, cut into batches. With replacement, ``num_batches``
    batches drawn uniformly from a generator seeded the same way.

    Args:
        count: Transitions to draw from.
        batch_size: Indexes per batch.
        replacement: Draw with replacement (True) or each index once an epoch (False).
        num_batches: Batches an epoch, with replacement only; default
            ``count // batch_size`` (at least 1).
        drop_last: Without replacement, leave out an epoch's last batch when it is short.
        seed: Seed of every epoch's generator; None draws one, once, here.

    Raises:
        ConfigError: A size below 1, ``num_batches`` without replacement or ``drop_last``
            with it, a negative seed, or ``drop_last`` with fewer transitions than a batch.
        SchemaError: ``count`` is 0.
    """

    def __init__(
        self,
        count: int,
        batch_size: int,
        *,
        replacement: bool = False,
        num_batches: int | None = None,
        drop_last: bool = False,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        for label, value in (("batch_size", batch_size), ("num_batches", num_batches)):
            if value is not None and value < 1:
                raise ConfigError(f"{label} must be at least 1, got {value}")
        if replacement and drop_last:
            raise ConfigError(
                "drop_last is for epochs without replacement; batches drawn with it are full"
            )
        if num_batches is not None and not replacement:
            raise ConfigError(
                "num_batches is for draws with replacement; an epoch without it holds every "
                "transition once"
            )
        if count < 1:
            raise SchemaError("the dataset holds no transitions to sample")
        if drop_last and count < batch_size:
            raise ConfigError(
                f"batch size {batch_size} exceeds the {count} transitions held, and "
                "drop_last drops every batch"
            )
        if seed is not None and seed < 0:
            raise ConfigError(f"seed must be non-negative, got {seed}")
        self.count, self.batch_size = count, batch_size
        self.replacement, self.drop_last = replacement, drop_last
        self.num_batches = num_batches if num_batches is not None else max(1, count // batch_size)
        self.seed = int(np.random.default_rng().integers(2**63)) if seed is None else seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Draw epoch ``epoch``'s batches next (call it before each epoch, as torch's samplers).

        Raises:
            InvalidValueError: ``epoch`` is negative.
        """
        if epoch < 0:
            raise InvalidValueError(f"epoch must be non-negative, got {epoch}")
        self.epoch = epoch

    def __len__(self) -> int:
        if self.replacement:
            return self.num_batches
        whole, rest = divmod(self.count, self.batch_size)
        return whole + (1 if rest and not self.drop_last else 0)

    def __iter__(self) -> Iterator[np.ndarray]:
        rng = np.random.default_rng([self.seed, self.epoch])
        if self.replacement:
            for _ in range(self.num_batches):
                yield rng.integers(0, self.count, self.batch_size, dtype=np.int64)
            return
        order = rng.permutation(self.count)
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            yield order[start : start + self.batch_size]


class ReplayDataset(Dataset[Any]):
    """A dataset file or sharded folder as a map-style dataset of transitions and of batches.

    ``len(data)`` is the transitions held; ``data[i]``, for an integer ``i`` in
    ``0 .. len(data) - 1``, is one transition: ``{name: tensor}`` without a batch dimension,
    row ``0`` of ``ReplayBuffer.batch([i])``. So ``DataLoader(data, batch_size=32,
    shuffle=True, num_workers=2)`` works with the default collate, which stacks them into a
    batch equal to ``ReplayBuffer.batch`` of the same indexes.

    The fast path: ``data[indexes]``, for an array of them, is ``(batch, info)`` as
    ``ReplayBuffer.sample(return_info=True)`` gives it, ``info["index"]`` the flat indexes
    as an int64 tensor. Pass ``sampler=data.sampler`` and ``batch_size=None`` to
    ``DataLoader``; call ``data.set_epoch(epoch)`` before each epoch. With ``num_workers``
    above 0 a ``transform`` runs in the workers; under the ``spawn`` start method it must
    pickle (a function of a module, not a lambda). A transition is a row of a batch made
    with the ``transform``: its result must then be tensors (in mappings, tuples or lists)
    whose first dimension is the batch's.

    Args:
        path: A dataset file of any format expcli reads, or a sharded folder.
        batch_size: Transitions per batch of ``sampler``; None (the default) for a dataset
            of transitions only, without ``sampler``.
        stack_num: Frames stacked in ``observations`` and ``next_observations``, as
            ``ReplayBuffer``'s.
        names: Tensors to put in batches; default all.
        transform: Called on every batch, as ``ReplayBuffer``'s.
        replacement: The sampler's (``ReplayBatchSampler``).
        num_batches: The sampler's.
        drop_last: The sampler's.
        seed: The sampler's.
        columns: For a table, the column of each role, as ``expcli.load`` takes it.
        done_means: What a table's lone ``done`` stands for, as ``expcli.load`` takes it.

    Raises:
        ConfigError: As ``ReplayBuffer`` and ``ReplayBatchSampler``; a sampler's option
            without ``batch_size``.
        FormatError, SchemaError: ``path`` cannot be read as a dataset, or holds none.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        batch_size: int | None = None,
        *,
        stack_num: int = 1,
        names: Sequence[str] | None = None,
        transform: Transform | None = None,
        replacement: bool = False,
        num_batches: int | None = None,
        drop_last: bool = False,
        seed: int | None = None,
        columns: ColumnRoles | Mapping[str, str] | str | None = None,
        done_means: DoneMeans | str | None = None,
    ) -> None:
        if batch_size is None:
            given = [
                label
                for label, value in (
                    ("replacement", replacement),
                    ("num_batches", num_batches is not None),
                    ("drop_last", drop_last),
                    ("seed", seed is not None),
                )
                if value
            ]
            if given:
                raise ConfigError(
                    f"{', '.join(given)} set the batch sampler's draws; give batch_size too "
                    "(a DataLoader's own sampler, as shuffle=True makes, takes none of them)"
                )
        self.path = Path(path)
        self.mapping = column_roles(columns, done_means)
        self.stack_num = stack_num
        self.names = tuple(names) if names is not None else None
        self.transform = transform
        self._opened: tuple[int, ReplayBuffer] | None = None
        self._inherited: list[ReplayBuffer] = []
        # counted on a handle closed at once: no file is open here when workers fork
        buffer = self._open()
        try:
            self.count = len(buffer)
        finally:
            _close(buffer)
        self._sampler: ReplayBatchSampler | None = None
        if batch_size is not None:
            self._sampler = ReplayBatchSampler(
                self.count,
                batch_size,
                replacement=replacement,
                num_batches=num_batches,
                drop_last=drop_last,
                seed=seed,
            )

    @property
    def sampler(self) -> ReplayBatchSampler:
        """The batches' indexes, for ``DataLoader(data, sampler=data.sampler, batch_size=None)``.

        Raises:
            ConfigError: The dataset was made without ``batch_size``.
        """
        if self._sampler is None:
            raise ConfigError(
                "this ReplayDataset was made without batch_size, so it has no batch sampler; "
                "give ReplayDataset a batch_size, or DataLoader one (batch_size=32, shuffle=True)",
                path=self.path,
            )
        return self._sampler

    def __len__(self) -> int:
        """The transitions held (``0 .. len - 1`` are the indexes): what a ``DataLoader`` draws."""
        return self.count

    def __getitem__(self, index: Any) -> Any:
        """The transition at integer ``index``, or the batch at an array of them and its info.

        Raises:
            IndexOutOfRangeError: An index outside ``0 .. len(data) - 1`` (an ``IndexError``).
            InvalidTypeError: ``index`` does not hold integers.
        """
        flat = np.asarray(index)
        if flat.ndim == 0:
            return self.__getitems__(flat.reshape(1))[0]
        batch = self.buffer.batch(self._checked(flat))
        return batch, {"index": torch.from_numpy(flat.astype(np.int64))}

    def __getitems__(self, indexes: Sequence[int] | np.ndarray) -> list[Any]:
        """The transitions at ``indexes``, gathered as one batch and cut into its rows.

        What torch's fetcher calls with each batch of a ``DataLoader``'s own sampler
        (``batch_size=32, shuffle=True``) before its collate stacks the rows again.

        Raises:
            IndexOutOfRangeError: An index outside ``0 .. len(data) - 1`` (an ``IndexError``).
            InvalidTypeError: ``indexes`` do not hold integers.
            InvalidValueError: A result of ``transform`` that cannot be cut into rows.
        """
        flat = self._checked(np.asarray(indexes).reshape(-1))
        return _rows(self.buffer.batch(flat), len(flat))

    @property
    def buffer(self) -> ReplayBuffer:
        """This process's buffer over ``path``, opened on first use in each process."""
        opened, pid = self._opened, os.getpid()
        if opened is None or opened[0] != pid:
            if opened is not None:
                # a fork's copy of the parent's buffer: its files (buffered, with offsets
                # shared with the parent) are left alone, and kept so that no finalizer runs
                self._inherited.append(opened[1])
            self._opened = opened = pid, self._open()
        return opened[1]

    def set_epoch(self, epoch: int) -> None:
        """See ``ReplayBatchSampler.set_epoch``."""
        self.sampler.set_epoch(epoch)

    def close(self) -> None:
        """Close this process's handle on the file (the next batch opens it again)."""
        opened, self._opened = self._opened, None
        if opened is not None and opened[0] == os.getpid():
            _close(opened[1])
        elif opened is not None:
            self._inherited.append(opened[1])  # the parent's, as in ``buffer``

    def __enter__(self) -> ReplayDataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        """The path and options: a worker opens the file itself."""
        return {**self.__dict__, "_opened": None, "_inherited": []}

    def __repr__(self) -> str:
        sampler = self._sampler
        if sampler is None:
            return f"ReplayDataset({str(self.path)!r}, {self.count} transitions)"
        mode = "with replacement" if sampler.replacement else "each once an epoch"
        return (
            f"ReplayDataset({str(self.path)!r}, {self.count} transitions, "
            f"batch_size={sampler.batch_size}, {mode})"
        )

    def _checked(self, index: np.ndarray) -> np.ndarray:
        """``index`` as int64, every one of them in ``0 .. len - 1``."""
        if index.size and index.dtype.kind not in "iu":
            raise InvalidTypeError(
                f"transitions are indexed by integers, got {index.dtype}", path=self.path
            )
        index = index.astype(np.int64, copy=False)
        outside = (index < 0) | (index >= self.count)
        if outside.any():
            bad = int(index[outside][0])
            raise IndexOutOfRangeError(
                f"index {bad} is out of range: the dataset holds transitions 0..{self.count - 1}",
                path=self.path,
                index=bad,
            )
        return index

    def _open(self) -> ReplayBuffer:
        storage = DatasetStorage.open(self.path, columns=self.mapping)
        try:
            return ReplayBuffer(
                storage, transform=self.transform, names=self.names, stack_num=self.stack_num
            )
        except BaseException:
            storage.close()
            raise


def _rows(batch: Any, count: int) -> list[Any]:
    """The ``count`` rows of ``batch`` (tensors in mappings, tuples, lists), as views."""
    if isinstance(batch, torch.Tensor | np.ndarray):
        if batch.ndim == 0 or batch.shape[0] != count:
            raise InvalidValueError(
                f"a transform's result for a batch of {count} has shape "
                f"{tuple(batch.shape)}; items of one transition are rows of a batch, so the "
                f"first dimension must be {count}"
            )
        return list(batch.unbind(0) if isinstance(batch, torch.Tensor) else batch)
    if isinstance(batch, Mapping):
        keys, columns = list(batch), [_rows(value, count) for value in batch.values()]
        if not keys:
            return [{} for _ in range(count)]
        return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]
    if isinstance(batch, tuple | list):
        parts = [_rows(value, count) for value in batch]
        rows = zip(*parts, strict=True) if parts else [()] * count
        return [list(row) for row in rows] if isinstance(batch, list) else list(rows)
    raise InvalidTypeError(
        f"a transform's result cannot be cut into transitions: {type(batch).__name__}; "
        "return tensors (in a mapping, tuple or list) whose first dimension is the batch's"
    )


def _close(buffer: ReplayBuffer) -> None:
    buffer.close()
    if isinstance(buffer.storage, DatasetStorage):
        buffer.storage.close()
