"""Writing a Memory: ``add_samples`` (skrl's), whole rows for collectors, and growth.

A mixin of ``Memory``, and the only code that moves its write head: every write ends in
``_advance``, which wraps at the last row (``filled``, one more lap in ``revision``) and,
with ``export``, saves the memory before the next row overwrites its oldest (``on_wrap``,
when set, is called there first: a streaming collect flushes its staging memory).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from expcli.errors import InvalidValueError
from expcli.memory.episode_report import EpisodeReport, RunningEpisodes

__all__ = ["MemoryWrites"]

_ndarray = np.ndarray


class MemoryWrites:
    """``add_samples``, ``write_row``, ``write_rows`` and ``grow`` for ``Memory``."""

    memory_size: int
    num_envs: int
    memory_index: int
    env_index: int
    filled: bool
    export: bool
    export_format: str
    export_directory: str
    on_wrap: Callable[[], None] | None
    tensors: dict[str, torch.Tensor]
    _arrays: dict[str, np.ndarray]
    _features: dict[str, tuple[int, ...]]
    _row_shapes: dict[str, tuple[int, ...]]
    _fast: dict[str, tuple[tuple[int, ...], np.ndarray]]
    _epoch: int
    _laps: int
    _rows_done: int | None
    _tracker: RunningEpisodes | None

    if TYPE_CHECKING:

        def save(self, directory: str | os.PathLike[str] = "", format: str | None = None) -> str:
            """See ``MemoryFiles.save``."""

        def _install(self, name: str, tensor: torch.Tensor) -> None: ...

    # ------------------------------------------------------------- skrl's API

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
        if self._tracker is not None:
            return self._add_and_report(tensors, self._tracker)
        if self.env_index == 0:
            # Fast path: a full row of every named tensor, as arrays of the exact row shape.
            fast = self._fast
            pending: list[tuple[np.ndarray, np.ndarray]] = []
            try:
                for name, value in tensors.items():
                    shape, dst = fast[name]
                    if type(value) is not _ndarray:
                        value = value.numpy()  # a CPU tensor's view; grad, GPU, bfloat16 refuse
                    if value.shape != shape:
                        raise LookupError
                    pending.append((dst, value))
            except (LookupError, AttributeError, RuntimeError, TypeError):
                pass
            else:
                if pending:
                    memory_index = self.memory_index
                    for dst, value in pending:
                        dst[memory_index] = value
                    self._advance(1)
                    return None
        self._add_samples(tensors)
        return None

    def _add_and_report(self, tensors: dict[str, Any], tracker: RunningEpisodes) -> EpisodeReport:
        """add_samples, then the episode report of what was written."""
        n, _ = self._count_samples(tensors)
        num_envs, memory_index, env_index = self.num_envs, self.memory_index, self.env_index
        self._add_samples(tensors)
        if num_envs == 1:
            env = np.zeros(n, dtype=np.int64)
            index = (memory_index + np.arange(n, dtype=np.int64)) % self.memory_size
        else:
            env = np.arange(env_index, env_index + n, dtype=np.int64)
            index = memory_index * num_envs + env
        reward, done = _reward_and_done(tensors, n)
        return tracker.update(env, index, reward, done)

    def _add_samples(self, tensors: dict[str, Any]) -> None:
        """add_samples for every case: partial rows, reshaping, conversions, torch writes."""
        if not tensors:
            raise InvalidValueError(
                "There are no samples. Provide samples as key-value arguments, "
                "where keys are the tensor names"
            )
        n, single = self._count_samples(tensors)
        num_envs, memory_index, env_index = self.num_envs, self.memory_index, self.env_index
        full_row = n == num_envs and env_index == 0 and not single
        if not full_row and n > num_envs - env_index and num_envs > 1:
            raise InvalidValueError(
                f"Got {n} samples but row {memory_index} has only {num_envs - env_index} free "
                f"env slots (env_index={env_index}, num_envs={num_envs})"
            )
        shapes = self._row_shapes if full_row else None
        todo: list[tuple[str, np.ndarray]] = []
        for name, value in tensors.items():
            if value is None or name not in self.tensors:
                continue
            if type(value) is not np.ndarray:
                value = _as_numpy(value, name)
            if shapes is None or value.shape != shapes[name]:
                value = self._conform(name, value, n, single)
            todo.append((name, value))

        if full_row:
            self._put_rows([(name, value[None]) for name, value in todo], 1)
        elif num_envs == 1 and n > 1:
            self._put_rows([(name, value[:, None]) for name, value in todo], n)
        else:
            where: tuple[Any, ...] = (
                (memory_index, env_index)
                if single
                else (memory_index, slice(env_index, env_index + n))
            )
            for name, value in todo:
                dst = self._arrays.get(name)
                if dst is not None:
                    dst[where] = value
                else:
                    self._write_torch(name, where, value)
            if env_index + n < num_envs:
                self.env_index = env_index + n
            else:
                self.env_index = 0
                self._advance(1)

    # ------------------------------------------------------------ whole rows

    def write_row(self, row: Mapping[str, np.ndarray]) -> None:
        """Write one complete row at the write head, then move the head as ``add_samples`` does.

        The per-step path of a collector: ``row[name]`` is a numpy array shaped
        ``(num_envs, *feature)``; tensors not named keep what that row held. Anything
        else (torch tensors, other shapes, tensors numpy cannot view) goes through
        ``write_rows``, which converts or explains.

        Raises:
            ValueError: As ``write_rows``.
        """
        if self.env_index == 0 and self._tracker is None:
            fast = self._fast
            try:
                for name, value in row.items():
                    if value.shape != fast[name][0]:
                        raise LookupError
            except (LookupError, AttributeError):
                pass
            else:
                index = self.memory_index
                for name, value in row.items():
                    fast[name][1][index] = value
                self._advance(1)
                return
        self.write_rows(
            {
                name: value[None] if hasattr(value, "shape") else np.asarray(value)[None]
                for name, value in row.items()
            }
        )

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
        if self.env_index != 0:
            raise InvalidValueError(
                f"row {self.memory_index} is partly written (env_index={self.env_index}); "
                "write_rows writes complete rows only"
            )
        todo: list[tuple[str, np.ndarray]] = []
        count: int | None = None
        for name, value in rows.items():
            if name not in self.tensors:
                raise InvalidValueError(
                    f"no tensor named {name!r}; tensors: {sorted(self.tensors)}"
                )
            array = value if type(value) is np.ndarray else _as_numpy(value, name)
            row_shape = self._row_shapes[name]
            if array.shape[1:] != row_shape or (count is not None and len(array) != count):
                expected = ", ".join(map(str, ("k" if count is None else count, *row_shape)))
                raise InvalidValueError(
                    f"Tensor {name!r} has shape {tuple(array.shape)}; expected ({expected})"
                )
            count = len(array)
            todo.append((name, array))
        if count:
            if self._tracker is not None:
                self._track_rows(todo, count, self._tracker)
            self._put_rows(todo, count)

    def _put_rows(self, todo: list[tuple[str, np.ndarray]], count: int) -> None:
        """Copy ``count`` checked rows in, lap by lap, advancing (and exporting) as they go."""
        done = 0
        while done < count:
            index = self.memory_index
            take = min(count - done, self.memory_size - index)
            for name, array in todo:
                part = array[done : done + take]
                dst = self._arrays.get(name)
                if dst is not None:
                    dst[index : index + take] = part
                else:
                    self._write_torch(name, (slice(index, index + take),), part)
            done += take
            self._advance(take)

    def _track_rows(
        self, todo: list[tuple[str, np.ndarray]], count: int, tracker: RunningEpisodes
    ) -> None:
        values = dict(todo)
        env = np.arange(self.num_envs, dtype=np.int64)
        for k in range(count):
            row: dict[str, Any] = {
                name: values[name][k]
                for name in ("rewards", "terminated", "truncated")
                if name in values
            }
            reward, done = _reward_and_done(row, self.num_envs)
            index = ((self.memory_index + k) % self.memory_size) * self.num_envs + env
            tracker.update(env, index, reward, done)

    def _advance(self, rows: int) -> None:
        """Move the write head ``rows`` rows on, wrapping (and exporting) at the last row.

        ``rows`` never reaches past the last row: writes stop there and go on after it.
        """
        index = self.memory_index + rows
        if self._rows_done is not None:
            self._rows_done += rows
        if index < self.memory_size:
            self.memory_index = index
            return
        self.memory_index = 0
        self.filled = True
        self._laps += 1
        if self.on_wrap is not None:
            self.on_wrap()
        if self.export:
            self.save(directory=self.export_directory, format=self.export_format)

    # ------------------------------------------------------------------ growth

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
        head = self.memory_index if self.filled else 0
        for name, tensor in list(self.tensors.items()):
            grown = torch.empty(
                (int(memory_size), *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device
            )
            grown[old:] = float("nan") if tensor.is_floating_point() else 0
            grown[: old - head] = tensor[head:]
            grown[old - head : old] = tensor[:head]
            if tensor.is_shared():  # type: ignore[no-untyped-call]
                grown.share_memory_()  # type: ignore[no-untyped-call]
            self._install(name, grown)
        self.memory_size = int(memory_size)
        if self.filled:
            self.filled, self.memory_index = False, old
        self._epoch += 1

    # ----------------------------------------------------------------- helpers

    def _count_samples(self, tensors: dict[str, Any]) -> tuple[int, bool]:
        """How many env samples a call carries, and whether it is a single unbatched sample."""
        name = "observations" if tensors.get("observations") is not None else None
        if name is None:
            name = next(
                (k for k, v in tensors.items() if v is not None and k in self.tensors), None
            )
        if name is None:
            name = next((k for k, v in tensors.items() if v is not None), None)
        if name is None:
            raise InvalidValueError("There are no samples: every value is None")
        value = tensors[name]
        shape = tuple(value.shape) if hasattr(value, "shape") else np.shape(value)
        feature = self._features.get(name)
        if feature is None:  # not stored: skrl's rule on dimensions alone
            if len(shape) == 1:
                return 1, True
            if len(shape) == 2:
                return shape[0], False
        elif len(shape) == len(feature) + 1:
            return shape[0], False
        elif shape == feature:
            return 1, True
        elif feature == (1,) and len(shape) == 1:
            return shape[0], False
        elif len(shape) >= 2 and math.prod(shape[1:]) == math.prod(feature):
            return shape[0], False
        elif len(shape) >= 1 and math.prod(shape) == math.prod(feature):
            return 1, True
        raise InvalidValueError(
            f"Expected {name!r} shaped (n, {', '.join(map(str, feature or ('size',)))}) with "
            f"n <= {self.num_envs}, or one sample shaped {feature}; got {shape}"
        )

    def _conform(self, name: str, value: np.ndarray, n: int, single: bool) -> np.ndarray:
        feature = self._features[name]
        expected = feature if single else (n, *feature)
        if value.shape == expected:
            return value
        if value.size == int(np.prod(expected)) and (
            single or (value.ndim >= 1 and value.shape[0] == n)
        ):
            return value.reshape(expected)
        raise InvalidValueError(
            f"Tensor {name!r} has shape {tuple(value.shape)}; expected {expected} "
            f"({n} sample{'s' if n != 1 else ''} of feature shape {feature})"
        )

    def _write_torch(self, name: str, where: tuple[Any, ...], value: np.ndarray) -> None:
        target = self.tensors[name]
        with torch.no_grad():
            target[where] = torch.as_tensor(value).to(device=target.device, dtype=target.dtype)


def _reward_and_done(values: Mapping[str, Any], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: the reward summed over its features, and ``terminated | truncated``."""
    reward = np.zeros(n, dtype=np.float64)
    done = np.zeros(n, dtype=bool)
    for name, value in values.items():
        if value is None or name not in ("rewards", "terminated", "truncated"):
            continue
        flat = _as_numpy(value, name).reshape(n, -1)
        if name == "rewards":
            reward = flat.sum(axis=-1, dtype=np.float64)
        else:
            done |= flat.astype(bool).any(axis=-1)
    return reward, done


def _as_numpy(value: Any, name: str) -> np.ndarray:
    """A numpy view of a torch tensor (detached, on the CPU) or ``np.asarray`` of anything else."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if value.device.type != "cpu":
            value = value.cpu()
        if value.dtype == torch.bfloat16:
            value = value.float()
        return np.asarray(value.numpy())
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as e:
        raise InvalidValueError(
            f"Tensor {name!r}: cannot read {type(value).__name__} as an array"
        ) from e
