"""Writing a Memory: ``add_samples`` (skrl's), whole rows for collectors.

``MemoryWriter`` is the only code that moves the write head: every write ends in ``advance``,
and when the head wraps at the last row the writer calls the ``wrapped`` callback it was
given (the memory's: ``on_wrap``, then the export) before the next row overwrites the
oldest. After ``report_episodes()`` it also keeps the running episodes (``tracker``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from expcli.errors import InvalidValueError
from expcli.memory._storage import TensorStorage
from expcli.memory._write_head import WriteHead
from expcli.memory.episode_report import EpisodeReport, RunningEpisodes

__all__ = ["MemoryWriter"]

_ndarray = np.ndarray


class MemoryWriter:
    """Writes samples and rows into a storage at a write head.

    Args:
        storage: The tensors written to.
        head: The write head moved.
        wrapped: Called each time the head wraps, before any row is overwritten.

    Attributes:
        tracker: The running episodes, kept while ``Memory.report_episodes`` is on.
    """

    def __init__(
        self, storage: TensorStorage, head: WriteHead, wrapped: Callable[[], None]
    ) -> None:
        self.storage = storage
        self.head = head
        self.wrapped = wrapped
        self.tracker: RunningEpisodes | None = None

    def add(self, tensors: dict[str, Any]) -> EpisodeReport | None:
        """``Memory.add_samples``: see there."""
        if self.tracker is not None:
            return self._add_and_report(tensors, self.tracker)
        head = self.head
        if head.env_index == 0:
            # Fast path: a full row of every named tensor, as arrays of the exact row shape.
            fast = self.storage.fast
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
                    memory_index = head.memory_index
                    for dst, value in pending:
                        dst[memory_index] = value
                    if head.advance(1):
                        self.wrapped()
                    return None
        self._add_samples(tensors)
        return None

    def _add_and_report(self, tensors: dict[str, Any], tracker: RunningEpisodes) -> EpisodeReport:
        """add_samples, then the episode report of what was written."""
        n, _ = self._count_samples(tensors)
        head = self.head
        num_envs, memory_index, env_index = head.num_envs, head.memory_index, head.env_index
        self._add_samples(tensors)
        if num_envs == 1:
            env = np.zeros(n, dtype=np.int64)
            index = (memory_index + np.arange(n, dtype=np.int64)) % head.memory_size
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
        head, storage = self.head, self.storage
        num_envs, memory_index, env_index = head.num_envs, head.memory_index, head.env_index
        full_row = n == num_envs and env_index == 0 and not single
        if not full_row and n > num_envs - env_index and num_envs > 1:
            raise InvalidValueError(
                f"Got {n} samples but row {memory_index} has only {num_envs - env_index} free "
                f"env slots (env_index={env_index}, num_envs={num_envs})"
            )
        shapes = storage.row_shapes if full_row else None
        todo: list[tuple[str, np.ndarray]] = []
        for name, value in tensors.items():
            if value is None or name not in storage.features:
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
                storage.write(name, where, value)
            if env_index + n < num_envs:
                head.env_index = env_index + n
            else:
                head.env_index = 0
                self._advance(1)

    def write_row(self, row: Mapping[str, np.ndarray]) -> None:
        """``Memory.write_row``: see there."""
        head = self.head
        if head.env_index == 0 and self.tracker is None:
            fast = self.storage.fast
            try:
                for name, value in row.items():
                    if value.shape != fast[name][0]:
                        raise LookupError
            except (LookupError, AttributeError):
                pass
            else:
                index = head.memory_index
                for name, value in row.items():
                    fast[name][1][index] = value
                if head.advance(1):
                    self.wrapped()
                return
        self.write_rows(
            {
                name: value[None] if hasattr(value, "shape") else np.asarray(value)[None]
                for name, value in row.items()
            }
        )

    def write_rows(self, rows: Mapping[str, Any]) -> None:
        """``Memory.write_rows``: see there."""
        head, storage = self.head, self.storage
        if head.env_index != 0:
            raise InvalidValueError(
                f"row {head.memory_index} is partly written (env_index={head.env_index}); "
                "write_rows writes complete rows only"
            )
        todo: list[tuple[str, np.ndarray]] = []
        count: int | None = None
        for name, value in rows.items():
            if name not in storage.features:
                raise InvalidValueError(
                    f"no tensor named {name!r}; tensors: {sorted(storage.features)}"
                )
            array = value if type(value) is np.ndarray else _as_numpy(value, name)
            row_shape = storage.row_shapes[name]
            if array.shape[1:] != row_shape or (count is not None and len(array) != count):
                expected = ", ".join(map(str, ("k" if count is None else count, *row_shape)))
                raise InvalidValueError(
                    f"Tensor {name!r} has shape {tuple(array.shape)}; expected ({expected})"
                )
            count = len(array)
            todo.append((name, array))
        if count:
            if self.tracker is not None:
                self._track_rows(todo, count, self.tracker)
            self._put_rows(todo, count)

    def _put_rows(self, todo: list[tuple[str, np.ndarray]], count: int) -> None:
        """Copy ``count`` checked rows in, lap by lap, advancing (and exporting) as they go."""
        head, storage = self.head, self.storage
        done = 0
        while done < count:
            index = head.memory_index
            take = min(count - done, head.memory_size - index)
            for name, array in todo:
                storage.write(name, (slice(index, index + take),), array[done : done + take])
            done += take
            self._advance(take)

    def _track_rows(
        self, todo: list[tuple[str, np.ndarray]], count: int, tracker: RunningEpisodes
    ) -> None:
        values = dict(todo)
        head = self.head
        env = np.arange(head.num_envs, dtype=np.int64)
        for k in range(count):
            row: dict[str, Any] = {
                name: values[name][k]
                for name in ("rewards", "terminated", "truncated")
                if name in values
            }
            reward, done = _reward_and_done(row, head.num_envs)
            index = ((head.memory_index + k) % head.memory_size) * head.num_envs + env
            tracker.update(env, index, reward, done)

    def _advance(self, rows: int) -> None:
        """Move the head ``rows`` rows on; at a wrap, call ``wrapped`` before going on."""
        if self.head.advance(rows):
            self.wrapped()

    # ----------------------------------------------------------------- helpers

    def _count_samples(self, tensors: dict[str, Any]) -> tuple[int, bool]:
        """How many env samples a call carries, and whether it is a single unbatched sample."""
        name = "observations" if tensors.get("observations") is not None else None
        if name is None:
            name = next(
                (k for k, v in tensors.items() if v is not None and k in self.storage.features),
                None,
            )
        if name is None:
            name = next((k for k, v in tensors.items() if v is not None), None)
        if name is None:
            raise InvalidValueError("There are no samples: every value is None")
        value = tensors[name]
        shape = tuple(value.shape) if hasattr(value, "shape") else np.shape(value)
        feature = self.storage.features.get(name)
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
            f"n <= {self.head.num_envs}, or one sample shaped {feature}; got {shape}"
        )

    def _conform(self, name: str, value: np.ndarray, n: int, single: bool) -> np.ndarray:
        feature = self.storage.features[name]
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
    torch = sys.modules.get("torch")  # a torch tensor means torch is loaded
    if torch is not None and isinstance(value, torch.Tensor):
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
