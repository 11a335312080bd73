"""The returns of a dataset's complete episodes, counted for its card (``dataset_card``).

An episode is complete when it ends with a done flag and began in the data: per env column,
rows oldest first, the first episode of a column whose oldest rows were overwritten does not
count. Only ``rewards``, ``terminated`` and ``truncated`` are read, in chunks of rows
(``_CHUNK_CELLS``), so memory stays flat whatever the dataset's size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from expcli.spec import CircularState, overwritten_columns

__all__ = ["EpisodeTally", "tally_rows"]

_CHUNK_CELLS = 1 << 18  # (row, env) cells read at once: a few MB


@dataclass
class EpisodeTally:
    """The returns of the complete episodes, fed each env column's rows oldest first.

    An episode is complete when it ends with a done flag and began in the data: the first
    episode of a column whose oldest rows were overwritten (``cut``) does not count.

    Attributes:
        count: Complete episodes.
        total: The sum of their returns.
        low: The smallest return (inf before any).
        high: The largest return (-inf before any).
        returns: Whether the data has one reward a step (else only episodes are counted).
    """

    num_envs: int
    cut: np.ndarray | None = None
    count: int = 0
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf
    returns: bool = True
    _running: np.ndarray = field(init=False, repr=False)
    _counting: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._running = np.zeros(self.num_envs, dtype=np.float64)
        cut = np.zeros(self.num_envs, bool) if self.cut is None else np.asarray(self.cut, bool)
        self._counting = ~cut

    def add(
        self, rewards: np.ndarray | None, done: np.ndarray, valid: np.ndarray | None = None
    ) -> None:
        """Feed the next ``k`` rows: ``rewards`` and ``done`` shaped ``(k, N)``.

        ``rewards`` None: the data has none (episodes counted, no returns); ``valid``: the
        cells written (others are skipped).
        """
        if rewards is None:
            self.returns = False
            rewards = np.zeros(done.shape, np.float64)
        ends = np.asarray(done, bool)
        values = np.asarray(rewards, np.float64)
        if valid is not None:
            ends = ends & valid
            values = np.where(valid, values, 0.0)
        with np.errstate(invalid="ignore", over="ignore"):  # NaN or inf rewards: such returns
            for j in range(self.num_envs):
                self._add_column(j, values[:, j], np.flatnonzero(ends[:, j]))

    def _add_column(self, j: int, values: np.ndarray, stops: np.ndarray) -> None:
        if not len(stops):
            self._running[j] += values.sum()
            return
        sums = np.add.reduceat(values[: stops[-1] + 1], np.concatenate(([0], stops[:-1] + 1)))
        sums[0] += self._running[j]
        if not self._counting[j]:
            sums = sums[1:]
        self._record(sums)
        self._counting[j] = True
        self._running[j] = values[stops[-1] + 1 :].sum()

    def add_tensors(self, tensors: Mapping[str, Any], rows: int) -> None:
        """Feed the first ``rows`` rows of ``tensors`` (a shard's, oldest first), in chunks."""
        step = max(1, _CHUNK_CELLS // max(1, self.num_envs))
        for at in range(0, rows, step):
            stop = min(rows, at + step)
            done = np.zeros((stop - at, self.num_envs), bool)
            for flag in ("terminated", "truncated"):
                found = tensors.get(flag)
                got = None if found is None else _scalar_rows(found, at, stop, self.num_envs)
                if got is not None:
                    done |= got != 0
            found = tensors.get("rewards")
            rewards = None if found is None else _scalar_rows(found, at, stop, self.num_envs)
            self.add(rewards, done)

    def _record(self, returns: np.ndarray) -> None:
        if not len(returns):
            return
        self.count += len(returns)
        self.total += float(returns.sum())
        self.low = min(self.low, float(returns.min()))
        self.high = max(self.high, float(returns.max()))

    def summary(self) -> str:
        """One line: the count, and the returns' mean, min and max where there are some."""
        if not self.count:
            return "no complete episode"
        said = f"{self.count:,} complete episode{'s' if self.count != 1 else ''}"
        if not self.returns:
            return f"{said} (no rewards recorded)"
        mean = self.total / self.count
        return f"{said}; return mean {mean:.6g}, min {self.low:.6g}, max {self.high:.6g}"


def _scalar_rows(array: Any, start: int, stop: int, num_envs: int) -> np.ndarray | None:
    """Rows ``start..stop`` of a per-step tensor as ``(k, N)``; None when a step holds more."""
    rows = np.asarray(array[start:stop])
    if rows.size != (stop - start) * num_envs:
        return None
    return rows.reshape(stop - start, num_envs)


def _circular_rows(array: Any, start: int, count: int, size: int, num_envs: int) -> Any:
    """``count`` rows from ``start`` on, going round after row ``size - 1``, as ``(k, N)``."""
    first = min(count, size - start)
    head = _scalar_rows(array, start, start + first, num_envs)
    if first == count or head is None:
        return head
    tail = _scalar_rows(array, 0, count - first, num_envs)
    return None if tail is None else np.concatenate([head, tail])


def tally_rows(
    tensors: Mapping[str, Any],
    state: CircularState,
    metadata: Mapping[str, Any],
    memory_size: int,
    num_envs: int,
) -> EpisodeTally:
    """The episodes of a dataset's tensors, read in chunks of rows, oldest first.

    A wrapped column is read from its oldest row round to its newest; only ``rewards``,
    ``terminated`` and ``truncated`` are read.
    """
    cut = overwritten_columns(state, memory_size, num_envs, metadata)
    tally = EpisodeTally(num_envs, cut)
    if memory_size == 0 or num_envs == 0:
        return tally
    oldest, valid = state.columns(memory_size, num_envs)
    base = int(oldest[-1])  # the last column is never ahead of the write head
    shift = (oldest - base) % memory_size  # 1 for the columns ahead in the newest row
    step = max(1, _CHUNK_CELLS // num_envs)
    for at in range(0, memory_size, step):
        k = min(step, memory_size - at)
        picked = shift[None, :] + np.arange(k)[:, None]  # (k, N): rows of the chunk read
        chunk = _Chunk((base + at) % memory_size, k + int(shift.max()), picked, memory_size)
        done = np.zeros((k, num_envs), bool)
        for flag in ("terminated", "truncated"):
            got = chunk.rows(tensors.get(flag))
            if got is not None:
                done |= got != 0
        rewards = chunk.rows(tensors.get("rewards"))
        tally.add(rewards, done, (at + np.arange(k))[:, None] < valid[None, :])
    return tally


@dataclass(frozen=True)
class _Chunk:
    """``count`` rows read from ``start`` on (round after the last), then ``picked`` per column."""

    start: int
    count: int
    picked: np.ndarray
    size: int

    def rows(self, array: Any) -> np.ndarray | None:
        """The chunk's ``(k, N)`` cells of a per-step tensor; None: absent, or not per step."""
        if array is None:
            return None
        num_envs = self.picked.shape[1]
        found = _circular_rows(array, self.start, self.count, self.size, num_envs)
        return None if found is None else found[self.picked, np.arange(num_envs)[None, :]]
