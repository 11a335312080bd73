"""Episode bookkeeping over numpy arrays: tianshou's prev/next, episode tables, frame stacks.

Episodes are derived, never stored: per env column, an episode ends at a row where
``terminated | truncated``. An index is a flat position ``t * num_envs + env`` in the
``(memory_size, num_envs)`` grid, the order ``Memory.sample_by_index`` uses. A column's
chronological order starts at its oldest row (the write head once the memory has wrapped),
so an episode may run over the end of the tensors back to row 0, but never across the
write head: the newest step of a column always ends its last (perhaps unfinished) episode.

Everything here reads numpy arrays shaped ``(T, N, *feature)`` and a ``CircularState``,
so a ``Memory`` (through its numpy views) and a loaded ``Dataset`` share the same code.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, overload

import numpy as np

from expcli.errors import InvalidTypeError, InvalidValueError
from expcli.formats.row_gather import gather_flat
from expcli.spec import (
    CircularState,
    chronological_rows,
    done_flags,
    flag_rows,
    overwritten_columns,
)

if TYPE_CHECKING:
    from expcli.memory.batches import TemporalBatch

__all__ = [
    "Episode",
    "EpisodeBookkeeping",
    "EpisodeIndex",
    "EpisodeTable",
    "TensorSource",
    "done_flags",
    "resident",
]

DONE_NAMES = ("terminated", "truncated")


class TensorSource(Protocol):
    """Data that episode questions can read: a ``Dataset``, a lazily opened one, a memory's."""

    @property
    def tensors(self) -> Mapping[str, Any]:
        """Name to a ``(T, N, *feature)`` array (or a tensor left on disk)."""
        ...

    @property
    def state(self) -> CircularState:
        """Which slots hold data, and their chronological order."""
        ...


@dataclass(frozen=True, slots=True)
class Episode:
    """One episode: a row of ``EpisodeTable`` (whose attributes say what each field means)."""

    env: int
    start: int
    last: int
    stop: int
    length: int
    returns: float
    terminated: bool
    truncated: bool
    complete: bool


@dataclass(frozen=True)
class EpisodeTable:
    """One row per episode, complete or not, ordered by env then time.

    Columns are numpy arrays (``table.length``, ``table.to_dict()``); iterating, or
    ``table[i]``, gives the rows as ``Episode`` values: ``for ep in memory.episodes()``.

    Attributes:
        env: Env column of the episode.
        start: Flat index of its first step.
        last: Flat index of its last step (``start`` of the next episode's predecessor).
        stop: ``start + length * num_envs``: the exclusive end ``get_buffer_indices`` takes
            (past the tensors' end for an episode that runs over the wrap point).
        length: Number of steps.
        returns: Sum of ``rewards`` over the steps (NaN without a ``rewards`` tensor).
        terminated: The last step is flagged ``terminated``.
        truncated: The last step is flagged ``truncated``.
        complete: The episode ended (done flag) and began inside the data: after a done
            flag, or at the column's first write. The first episode of a column whose
            older rows were overwritten (``spec.overwritten_columns``) may have begun in
            them, so it never counts.
    """

    env: np.ndarray
    start: np.ndarray
    last: np.ndarray
    stop: np.ndarray
    length: np.ndarray
    returns: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    complete: np.ndarray

    def __len__(self) -> int:
        return len(self.env)

    def __iter__(self) -> Iterator[Episode]:
        columns = [getattr(self, name).tolist() for name in _EPISODE_FIELDS]
        return (Episode(*row) for row in zip(*columns, strict=True))

    def __getitem__(self, i: int) -> Episode:
        """The ``i``-th episode (negative counts from the end).

        Raises:
            IndexError: ``i`` is out of range.
        """
        return Episode(*(getattr(self, name)[i].item() for name in _EPISODE_FIELDS))

    def to_dict(self) -> dict[str, np.ndarray]:
        """The columns by name, for ``pandas.DataFrame`` or printing."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


_EPISODE_FIELDS = tuple(Episode.__dataclass_fields__)


class EpisodeBookkeeping:
    """tianshou's episode methods for any class that can hand over its arrays and state.

    Subclasses implement ``_episode_source``; ``Memory``, ``EpisodeIndex`` and
    ``ReplayBuffer`` do. Nothing is cached: ``prev``, ``next`` and ``get`` read only the
    done flags of the indexes asked about, so they stay right while data is written.
    """

    def _episode_source(self) -> tuple[Mapping[str, Any], CircularState, int, int]:
        """Arrays shaped ``(T, N, *feature)``, circular state, ``T`` and ``N``."""
        raise NotImplementedError

    def _episode_metadata(self) -> Mapping[str, Any]:
        """The data's metadata, for ``overwritten_columns`` (files that lack ``written``)."""
        return {}

    # -------------------------------------------------------------- geometry

    def _columns(self) -> tuple[np.ndarray, np.ndarray, int, int]:
        """Per env column: oldest row and number of valid rows; then ``T`` and ``N``."""
        _, state, memory_size, num_envs = self._episode_source()
        return (*state.columns(memory_size, num_envs), memory_size, num_envs)

    def _check_index(self, index: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The index as int64, its row and its env; IndexError for slots without data."""
        oldest, count, memory_size, num_envs = self._columns()
        idx = np.asarray(index)
        if idx.dtype.kind not in "iu":
            raise InvalidTypeError(f"indexes must be integers, got dtype {idx.dtype}")
        idx = idx.astype(np.int64, copy=False)
        capacity = memory_size * num_envs
        if idx.size and (idx.min() < 0 or idx.max() >= capacity):
            raise IndexError(f"index out of range 0..{capacity - 1}: {idx.min()}..{idx.max()}")
        row, env = np.divmod(idx, num_envs)
        position = (row - oldest[env]) % memory_size
        if idx.size and not (position < count[env]).all():
            bad = idx[position >= count[env]].reshape(-1)[0]
            raise IndexError(f"index {bad} holds no data yet (len {self._valid_length()})")
        return idx, row, env

    def _valid_length(self) -> int:
        _, state, memory_size, num_envs = self._episode_source()
        return state.valid_length(memory_size, num_envs)

    def _done_at(self, flat: np.ndarray) -> np.ndarray:
        arrays, _, memory_size, num_envs = self._episode_source()
        done = np.zeros(flat.shape, dtype=bool)
        for name in DONE_NAMES:
            array = arrays.get(name)
            if array is not None:
                values = np.asarray(array).reshape(memory_size * num_envs, -1)[flat]
                done |= values.reshape(*flat.shape, -1).any(axis=-1)
        return done

    # ---------------------------------------------------------------- tianshou

    @overload
    def prev(self, index: int) -> int: ...
    @overload
    def prev(self, index: np.ndarray | list[int]) -> np.ndarray: ...

    def prev(self, index: Any) -> Any:
        """The index of the previous step of the same env; unchanged at an episode's start.

        An episode starts after a done flag, and at a column's oldest step.

        Raises:
            IndexError: An index is out of range or holds no data yet.
        """
        idx, row, env = self._check_index(index)
        oldest, _, memory_size, num_envs = self._columns()
        before = ((row - 1) % memory_size) * num_envs + env
        stay = (row == oldest[env]) | self._done_at(before)
        return _like(index, np.where(stay, idx, before))

    @overload
    def next(self, index: int) -> int: ...
    @overload
    def next(self, index: np.ndarray | list[int]) -> np.ndarray: ...

    def next(self, index: Any) -> Any:
        """The index of the next step of the same env; unchanged at an episode's end.

        An episode ends at a done flag, and at a column's newest step (the write head).

        Raises:
            IndexError: An index is out of range or holds no data yet.
        """
        idx, row, env = self._check_index(index)
        oldest, count, memory_size, num_envs = self._columns()
        newest = (oldest[env] + count[env] - 1) % memory_size
        after = ((row + 1) % memory_size) * num_envs + env
        stay = (row == newest) | self._done_at(idx)
        return _like(index, np.where(stay, idx, after))

    def unfinished_index(self) -> np.ndarray:
        """Flat indexes of the newest step of every env whose last episode has not ended."""
        oldest, count, memory_size, num_envs = self._columns()
        envs = np.flatnonzero(count > 0)
        newest = ((oldest[envs] + count[envs] - 1) % memory_size) * num_envs + envs
        return np.asarray(newest[~self._done_at(newest)], dtype=np.int64)

    def get_buffer_indices(self, start: int, stop: int) -> np.ndarray:
        """Flat indexes from ``start`` up to ``stop`` (exclusive) within one env column.

        ``stop`` is a flat index of the same column, ``num_envs`` past the last step wanted.
        It may lie before ``start``: the indexes then run over the column's last row back
        to row 0, as tianshou's do over a sub-buffer edge. It may also lie past the end of
        the tensors (up to ``start + memory_size * num_envs``), which is how
        ``EpisodeTable.stop`` names the end of an episode that runs over the wrap point.

        Raises:
            ValueError: ``start`` and ``stop`` lie in different env columns, or out of range.
        """
        _, _, memory_size, num_envs = self._episode_source()
        start, stop = int(start), int(stop)
        capacity = memory_size * num_envs
        env = start % num_envs
        if not 0 <= start < capacity:
            raise InvalidValueError(f"start {start} is outside 0..{capacity - 1}")
        if stop % num_envs != env or not 0 <= stop <= start + capacity:
            raise InvalidValueError(
                f"Start and stop indices must be within the same env column: start {start} "
                f"is in column {env}, stop {stop} in column {stop % num_envs} "
                f"(num_envs={num_envs}, memory_size={memory_size}, stop at most "
                f"{start + capacity})"
            )
        first, end = start // num_envs, stop // num_envs
        if end < first:
            end += memory_size
        rows = np.arange(first, end, dtype=np.int64) % memory_size
        return np.asarray(rows * num_envs + env)

    def episodes(self) -> EpisodeTable:
        """Every episode in the data, complete or not (see ``EpisodeTable``)."""
        arrays, state, memory_size, num_envs = self._episode_source()
        oldest, count, _, _ = self._columns()
        term = flag_rows(arrays, "terminated", memory_size, num_envs)
        trunc = flag_rows(arrays, "truncated", memory_size, num_envs)
        done = term | trunc
        rewards = arrays.get("rewards")
        reward = (
            np.asarray(rewards).reshape(memory_size, num_envs, -1).sum(axis=-1, dtype=np.float64)
            if rewards is not None
            else None
        )
        order = chronological_rows(state, memory_size, num_envs)
        cut = overwritten_columns(state, memory_size, num_envs, self._episode_metadata())
        parts: dict[str, list[np.ndarray]] = {k: [] for k in EpisodeTable.__dataclass_fields__}
        for env in range(num_envs):
            rows = order[env, : count[env]]
            if not len(rows):
                continue
            ends = np.flatnonzero(done[rows, env])
            if not len(ends) or ends[-1] != len(rows) - 1:
                ends = np.append(ends, len(rows) - 1)
            starts = np.concatenate([[0], ends[:-1] + 1])
            n = len(starts)
            last = rows[ends] * num_envs + env
            parts["env"].append(np.full(n, env, dtype=np.int64))
            parts["start"].append(rows[starts] * num_envs + env)
            parts["last"].append(last)
            parts["stop"].append(rows[starts] * num_envs + env + (ends - starts + 1) * num_envs)
            parts["length"].append(ends - starts + 1)
            if reward is None:
                parts["returns"].append(np.full(n, np.nan))
            else:
                parts["returns"].append(np.add.reduceat(reward[rows, env], starts))
            parts["terminated"].append(term[rows[ends], env])
            parts["truncated"].append(trunc[rows[ends], env])
            complete = done[rows[ends], env].copy()
            if cut[env]:
                complete[0] = False  # may have begun in rows since overwritten
            parts["complete"].append(complete)
        dtypes = {"returns": np.float64, "terminated": bool, "truncated": bool, "complete": bool}
        return EpisodeTable(
            **{
                name: np.concatenate(values).astype(dtypes.get(name, np.int64))
                if values
                else np.zeros(0, dtype=dtypes.get(name, np.int64))
                for name, values in parts.items()
            }
        )

    def get(self, index: Any, key: str, stack_num: int = 1) -> np.ndarray:
        """``key`` at ``index``, stacked over the last ``stack_num`` steps of its episode.

        Returns ``[x[t - stack_num + 1], ..., x[t]]`` along a new axis after the index's
        axes, so an index shaped ``(B,)`` gives ``(B, stack_num, *feature)``; at an
        episode's start the first frame is repeated (tianshou's frame stacking, and
        EnvPool's). A ``next_<name>`` tensor beside ``<name>`` (``next_observations``)
        stacks as the step after ``t`` sees it: ``<name>``'s stack at ``t`` shifted by
        one, then ``next_<name>[t]``, so its first step's stack starts with the episode's
        first observation. With ``stack_num == 1`` the values come without the stacking
        axis.

        Raises:
            KeyError: No tensor is called ``key``.
            IndexError: An index is out of range or holds no data yet.
            ValueError: ``stack_num`` is less than 1.
        """
        if stack_num < 1:
            raise InvalidValueError(f"stack_num must be at least 1, got {stack_num}")
        arrays, _, memory_size, num_envs = self._episode_source()
        if key not in arrays:
            raise KeyError(f"no tensor named {key!r}; tensors: {sorted(arrays)}")
        array = arrays[key]
        idx, _, _ = self._check_index(index)
        if stack_num == 1:
            return gather_flat(array, idx, num_envs)
        # A next_<name> stack is what the following step sees: its last frame from
        # next_<name>, the frames before it from <name> (this row's and earlier ones).
        before = key.removeprefix("next_")
        shifted = before != key and before in arrays
        stacked = np.empty((stack_num, *idx.shape), dtype=np.int64)
        stacked[-1] = idx
        first = stack_num - 2
        if shifted:
            stacked[-2] = idx
            first -= 1
        current = idx
        for k in range(first, -1, -1):
            current = np.asarray(self.prev(current))
            stacked[k] = current
        if shifted:
            frames = np.concatenate(
                [
                    gather_flat(arrays[before], stacked[:-1], num_envs),
                    gather_flat(array, stacked[-1:], num_envs),
                ]
            )
        else:
            frames = gather_flat(array, stacked, num_envs)  # one read of every frame's rows
        return np.ascontiguousarray(np.moveaxis(frames, 0, idx.ndim))

    def episodes_batch(
        self, names: Sequence[str] | None = None, max_len: int | None = None
    ) -> TemporalBatch:
        """Every episode as one padded ``TemporalBatch`` (``B`` episodes x ``T`` steps).

        Episodes come in ``episodes()`` order, unfinished ones included; padding steps are
        zeros and ``mask()`` tells them apart. Episodes longer than ``max_len`` keep their
        first ``max_len`` steps.

        Args:
            names: Tensors to include; default all of them.
            max_len: Cap on ``T``; default the longest episode's length.

        Raises:
            KeyError: A name is not a tensor.
            ValueError: ``max_len`` is less than 1.
        """
        import torch

        from expcli.memory.batches import TemporalBatch

        if max_len is not None and max_len < 1:
            raise InvalidValueError(f"max_len must be at least 1, got {max_len}")
        arrays, _, memory_size, num_envs = self._episode_source()
        names = list(arrays) if names is None else list(names)
        missing = [name for name in names if name not in arrays]
        if missing:
            raise KeyError(f"no tensors named {missing}; tensors: {sorted(arrays)}")
        table = self.episodes()
        lengths = table.length if max_len is None else np.minimum(table.length, max_len)
        steps = int(lengths.max()) if len(lengths) else 0
        offsets = np.arange(steps, dtype=np.int64)
        rows = (table.start[:, None] // num_envs + offsets) % memory_size
        index = rows * num_envs + table.env[:, None]
        valid = offsets < lengths[:, None]
        index = np.where(valid, index, table.start[:, None])
        tensors = {}
        for name in names:
            values = gather_flat(arrays[name], index, num_envs)
            values[~valid] = 0
            tensors[name] = torch.from_numpy(values)
        return TemporalBatch(tensors, torch.from_numpy(lengths.astype(np.int64)))


class EpisodeIndex(EpisodeBookkeeping):
    """Episode bookkeeping over a loaded ``Dataset`` (or any arrays and circular state).

    Args:
        source: Anything with ``tensors`` (name to ``(T, N, *feature)`` array) and
            ``state`` (a ``CircularState``), such as ``expcli.load(path)``; or a mapping
            of arrays, with ``state`` given separately.
        state: The circular state when ``source`` is a mapping (default: not wrapped,
            every row written).

    Lazily read tensors (``formats.open_lazy``) stay on disk, read a batch of rows at a time
    by ``get`` and ``episodes_batch``; only ``terminated`` and ``truncated`` are read whole.
    """

    def __init__(
        self, source: TensorSource | Mapping[str, Any], state: CircularState | None = None
    ) -> None:
        if isinstance(source, Mapping):
            arrays = dict(source)
        else:
            arrays = dict(source.tensors)
            state = state or source.state
        arrays = {name: resident(name, array) for name, array in arrays.items()}
        first = next(iter(arrays.values()), None)
        if first is None or first.ndim < 2:
            raise InvalidValueError("expected tensors shaped (memory_size, num_envs, ...)")
        self._arrays = arrays
        self._size = int(first.shape[0]), int(first.shape[1])
        self._state = state if state is not None else CircularState(0, 0, True)
        metadata = getattr(source, "metadata", None)
        self._metadata: Mapping[str, Any] = metadata if isinstance(metadata, Mapping) else {}

    def _episode_source(self) -> tuple[Mapping[str, Any], CircularState, int, int]:
        return self._arrays, self._state, self._size[0], self._size[1]

    def _episode_metadata(self) -> Mapping[str, Any]:
        return self._metadata


def resident(name: str, array: Any) -> Any:
    """What bookkeeping keeps of a tensor.

    A numpy array as it is; a tensor left on disk that reads rows with ``take`` left there, except
    the episode flags, which every episode question reads whole; anything else read whole.
    """
    if isinstance(array, np.ndarray):
        return array
    if callable(getattr(array, "take", None)) and name not in DONE_NAMES:
        return array
    return np.asarray(array)


def _like(index: Any, result: np.ndarray) -> Any:
    """An int for an int index, an array otherwise."""
    return int(result) if np.ndim(index) == 0 else result
