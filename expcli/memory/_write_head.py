"""Where a Memory writes next, and what a reader needs to know has changed.

Two integers locate the next write: ``memory_index`` (row) and ``env_index`` (column within
the row); ``filled`` says whether the rows have wrapped. Only ``advance`` moves the head by
whole rows; it says when it wrapped, and the memory decides what a wrap sets off.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from expcli.spec import CircularState, chronological_rows, overwritten_columns

__all__ = ["WriteHead"]


class WriteHead:
    """The circular-write cursor of a ``(memory_size, num_envs)`` grid.

    Attributes:
        memory_size: Rows.
        num_envs: Columns.
        memory_index: Row of the next write.
        env_index: Column of the next write within that row.
        filled: The head has passed the last row at least once.
        laps: Times the head wrapped (a whole lap written in one call moves nothing else).
        rows_done: Rows the head has passed since the start; None when unknown.
        epoch: Bumped whenever the data changed in a way the head does not show.
    """

    def __init__(self, memory_size: int, num_envs: int) -> None:
        self.memory_size = memory_size
        self.num_envs = num_envs
        self.memory_index = 0
        self.env_index = 0
        self.filled = False
        self.laps = 0
        self.rows_done: int | None = 0
        self.epoch = 0

    def __len__(self) -> int:
        """Valid slots: every slot once filled, else those written so far."""
        if self.filled:
            return self.memory_size * self.num_envs
        return self.memory_index * self.num_envs + self.env_index

    @property
    def state(self) -> CircularState:
        """The circular state (``memory_index``, ``env_index``, ``filled``, ``written``)."""
        rows = self.rows_done
        written = None if rows is None else rows * self.num_envs + self.env_index
        return CircularState(self.memory_index, self.env_index, self.filled, written)

    @property
    def revision(self) -> tuple[int, int, int, int, bool]:
        """``(epoch, laps, memory_index, env_index, filled)``."""
        return (self.epoch, self.laps, self.memory_index, self.env_index, self.filled)

    def reset(self) -> None:
        """Back to the first slot, nothing written; a new epoch."""
        self.filled = False
        self.env_index = 0
        self.memory_index = 0
        self.rows_done = 0
        self.epoch += 1

    def advance(self, rows: int) -> bool:
        """Move ``rows`` rows on (never past the last row); True when the head wrapped."""
        index = self.memory_index + rows
        if self.rows_done is not None:
            self.rows_done += rows
        if index < self.memory_size:
            self.memory_index = index
            return False
        self.memory_index = 0
        self.filled = True
        self.laps += 1
        return True

    def grow(self, memory_size: int) -> int:
        """Take ``memory_size`` rows; the row that becomes row 0 is returned.

        A wrapped grid is put in chronological order first (its oldest row, the head,
        becomes row 0) and is then no longer filled: the head stands at its old size.
        """
        old, head = self.memory_size, self.memory_index if self.filled else 0
        self.memory_size = memory_size
        if self.filled:
            self.filled, self.memory_index = False, old
        self.epoch += 1
        return head

    def adopt(
        self, state: CircularState, memory_size: int, num_envs: int, metadata: dict[str, Any]
    ) -> None:
        """Take the sizes and state of loaded data; a new epoch."""
        self.memory_size, self.num_envs = memory_size, num_envs
        self.memory_index, self.env_index, self.filled = (
            state.memory_index,
            state.env_index,
            state.filled,
        )
        self.rows_done = _rows_done(state, memory_size, num_envs, metadata)
        self.epoch += 1

    def chronological_index(self) -> np.ndarray:
        """Flat indexes env by env, each env's valid rows oldest first."""
        rows = chronological_rows(self.state, self.memory_size, self.num_envs)
        envs = np.arange(self.num_envs, dtype=np.int64)[:, None]
        return np.asarray((rows * self.num_envs + envs).reshape(-1))


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
