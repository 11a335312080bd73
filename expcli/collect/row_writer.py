"""Writes each step's transitions into a Memory's preallocated rows, keeping columns aligned.

A Memory row holds one transition of every env. Usually every env yields one per step and
the row is written in place at once. But an env can skip a step: a Gymnasium vector env
that autoresets on the next step spends that step on the reset (its result is not a
transition), and an ``"idle"`` env waits for the others. Each env column then keeps its
own time: its transitions are staged until every column has one for the same row, and
only complete rows are committed. Staging works in blocks of steps, so the per-step cost
stays a handful of row copies.

The memory owns its write head: rows go in through ``Memory.write_row`` and
``Memory.write_rows``, which wrap, count laps and export as ``add_samples`` does, and a
growing run asks ``Memory.grow`` for room. The writer counts only what it committed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from expcli.errors import InvalidValueError

if TYPE_CHECKING:
    from expcli.memory import Memory

__all__ = ["RowWriter"]

OnCommit = Callable[[Mapping[str, np.ndarray]], None]


class RowWriter:
    """Commits rows of transitions into ``memory`` (a ``Memory``), which wraps or grows.

    Args:
        memory: The memory; its tensors must exist already (names of ``write``'s values).
        on_commit: Called with rows committed from staging (each value ``(k, N, ...)``).
        grow: Double the memory instead of wrapping when it is full.
        limit_rows: Commit no more than this many rows in all (None: no limit).
        block: Steps buffered before staged transitions are aligned.
    """

    def __init__(
        self,
        memory: Memory,
        on_commit: OnCommit,
        *,
        grow: bool = False,
        limit_rows: int | None = None,
        block: int = 64,
    ) -> None:
        self.memory = memory
        self.on_commit = on_commit
        self.grow = grow
        self.limit_rows = limit_rows
        self.committed_rows = 0
        self.num_envs = int(memory.num_envs)
        self._block_size = block
        if memory.env_index != 0:
            raise InvalidValueError("the memory has a partly written row; collect into full rows")
        # Staging, used only while the columns are out of step.
        self._lagging = False
        self._block: dict[str, np.ndarray] = {}
        self._block_valid = np.zeros((block, self.num_envs), dtype=bool)
        self._block_count = np.zeros(self.num_envs, dtype=np.int64)  # valid per column
        self._filled = 0
        self._stage: dict[str, np.ndarray] = {}
        self._written = np.zeros(self.num_envs, dtype=np.int64)  # per column, absolute
        self._committed_abs = 0

    def add_tensor(self, name: str, row: np.ndarray) -> None:
        """Start writing a tensor the memory just gained (``row``: one step's values).

        Transitions already staged get NaN (or 0) for it, as the memory's older rows do.
        """
        fill = np.nan if np.issubdtype(row.dtype, np.floating) else 0
        if self._block:
            self._block[name] = np.full((self._block_size, *row.shape), fill, row.dtype)
        if self._stage:
            capacity = next(iter(self._stage.values())).shape[0]
            self._stage[name] = np.full((capacity, *row.shape), fill, row.dtype)

    @property
    def full(self) -> bool:
        """Whether ``limit_rows`` rows are committed, or reached by every column.

        Staged rows count once every column has its transition for them (``flush``
        commits them): a run that goes on stepping past that only gathers transitions
        beyond the limit, which are never stored.
        """
        if self.limit_rows is None:
            return False
        reached = self.committed_rows
        if self._lagging:
            ahead = self._written + self._block_count
            reached += int(ahead.min()) - self._committed_abs
        return reached >= self.limit_rows

    @property
    def staged(self) -> int:
        """Transitions waiting for the other columns (dropped if the run ends now)."""
        if not self._lagging:
            return 0
        valid = int(self._block_valid[: self._filled].sum())
        return valid + int((self._written - self._committed_abs).sum())

    def write(self, values: Mapping[str, np.ndarray], valid: np.ndarray | None = None) -> bool:
        """Store one step: ``values[name]`` shaped ``(N, ...)``; ``valid`` marks real transitions.

        Returns:
            True if the step was written as a row at once (``on_commit`` is not called for
            it: the caller has the values already), False if it was staged (or dropped at
            the limit); staged rows reach ``on_commit`` when they are committed.
        """
        if not self._lagging and valid is None:
            if self.full:
                return False
            self._reserve(1)
            self.memory.write_row(values)
            self.committed_rows += 1
            return True
        if not self._lagging:
            self._start_lagging(values)
        b = self._filled
        for name, value in values.items():
            self._block[name][b] = value
        self._block_valid[b] = True if valid is None else valid
        self._block_count += self._block_valid[b]
        self._filled = b + 1
        if self._filled == self._block_size:
            self.flush()
        return False

    def write_block(self, rows: Mapping[str, np.ndarray]) -> int:
        """Store complete rows: ``rows[name]`` shaped ``(k, N, ...)``, every env's transition.

        Rows past ``limit_rows`` are left out; ``on_commit`` is called with those written.

        Returns:
            The rows written.
        """
        if self._lagging:
            raise InvalidValueError("write_block needs the columns in step (no staged rows)")
        k = len(next(iter(rows.values())))
        if self.limit_rows is not None:
            k = min(k, self.limit_rows - self.committed_rows)
        if k <= 0:
            return 0
        if k < len(next(iter(rows.values()))):
            rows = {name: value[:k] for name, value in rows.items()}
        self._write_rows(rows, k)
        return k

    def flush(self) -> None:
        """Align the buffered steps and commit every row that all columns have reached."""
        if not self._lagging or self._filled == 0:
            return
        filled, n = self._filled, self.num_envs
        mask = self._block_valid[:filled]
        positions = (self._written[None, :] + np.cumsum(mask, axis=0) - 1)[mask]
        columns = np.nonzero(mask)[1]
        written = self._written + mask.sum(axis=0)
        capacity = self._fit_stage(int(written.max()) - self._committed_abs)
        # Flat (row * n + column) indexes, once for every tensor: 1-D take and put are
        # several times faster than a boolean mask and a 2-D scatter per tensor.
        source = np.flatnonzero(mask)
        target = (positions % capacity) * n + columns
        for name, stage in self._stage.items():
            block = self._block[name]
            flat_block = block[:filled].reshape(filled * n, *block.shape[2:])
            stage.reshape(capacity * n, *stage.shape[2:])[target] = flat_block.take(source, 0)
        self._written = written
        self._filled = 0
        self._block_count[:] = 0
        self._commit_aligned()

    def _commit_aligned(self) -> None:
        start = self._committed_abs
        ready = int(self._written.min()) - start
        if self.limit_rows is not None:
            ready = min(ready, self.limit_rows - self.committed_rows)
        if ready > 0:
            capacity = next(iter(self._stage.values())).shape[0]
            first = start % capacity
            if first + ready <= capacity:  # one run of the ring: views, no copy
                rows = {name: stage[first : first + ready] for name, stage in self._stage.items()}
            else:
                take = (start + np.arange(ready)) % capacity
                rows = {name: stage[take] for name, stage in self._stage.items()}
            self._write_rows(rows, ready)
            self._committed_abs = start + ready
        if (self._written == self._committed_abs).all() and self._filled == 0:
            self._lagging = False

    def _start_lagging(self, values: Mapping[str, np.ndarray]) -> None:
        self._lagging = True
        self._filled = 0
        self._block_count[:] = 0
        if not self._block:
            self._block = {
                name: np.empty((self._block_size, *value.shape), value.dtype)
                for name, value in values.items()
            }
        self._committed_abs = 0
        self._written = np.zeros(self.num_envs, dtype=np.int64)

    def _fit_stage(self, needed: int) -> int:
        """Make the staging ring hold ``needed`` rows past the committed ones; its capacity."""
        current = next(iter(self._stage.values())).shape[0] if self._stage else 0
        if needed <= current:
            return current
        capacity = max(needed, 2 * current, 2 * self._block_size)
        # A staged row lives at (absolute row) % capacity; move the live ones accordingly.
        live = self._committed_abs + np.arange(int(self._written.max()) - self._committed_abs)
        for name, block in self._block.items():
            grown = np.zeros((capacity, *block.shape[1:]), block.dtype)
            if current:
                grown[live % capacity] = self._stage[name][live % current]
            self._stage[name] = grown
        return capacity

    def _write_rows(self, rows: Mapping[str, np.ndarray], n: int) -> None:
        """Hand ``n`` complete rows to the memory, then to ``on_commit``."""
        self._reserve(n)
        self.memory.write_rows(rows)
        self.committed_rows += n
        self.on_commit(rows)

    def _reserve(self, n: int) -> None:
        """Grow the memory first when allowed and ``n`` more rows would fill it.

        A growing memory never becomes full (so never wraps over its oldest rows) until it
        reaches ``limit_rows``, the size that fits the run exactly.
        """
        memory = self.memory
        size, limit = memory.memory_size, self.limit_rows
        if (
            self.grow
            and not memory.filled
            and memory.memory_index + n >= size
            and (limit is None or size < limit)
        ):
            rows = max(2 * size, memory.memory_index + n + 1)
            memory.grow(rows if limit is None else min(rows, limit))
