"""Episode statistics kept incrementally while collecting: one update per stored row.

The tracker sees exactly the rows that reach the memory, so its counts agree with the
episodes of the saved file (``Memory.episodes()``, ``inspect``) unless the memory wrapped
and overwrote old rows (``spec.overwritten_columns``); collect's summary then says both.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from expcli.distribution import Distribution

__all__ = ["EpisodeSummary", "EpisodeTracker"]


@dataclass(frozen=True, slots=True)
class EpisodeSummary:
    """Episodes seen so far: counts and the spread of returns and lengths of complete ones."""

    complete: int
    incomplete: int
    terminated: int
    truncated: int
    returns: Distribution
    lengths: Distribution
    recent_mean_return: float


_BLOCK_ROWS = 64


class EpisodeTracker:
    """Running return and length per env column; a record of every completed episode.

    Args:
        num_envs: Env columns.
        window: How many recent episodes ``recent_mean_return`` averages (100, as usual).
    """

    def __init__(self, num_envs: int, window: int = 100) -> None:
        self.num_envs = num_envs
        self._return = np.zeros(num_envs, dtype=np.float64)
        self._length = np.zeros(num_envs, dtype=np.int64)
        self._returns: list[float] = []
        self._lengths: list[int] = []
        self._terminated = 0
        self._recent: deque[float] = deque(maxlen=window)
        # Rows given one at a time wait here and reach ``update`` in blocks.
        self._row_rewards = np.zeros((_BLOCK_ROWS, num_envs), dtype=np.float64)
        self._row_terminated = np.zeros((_BLOCK_ROWS, num_envs), dtype=bool)
        self._row_truncated = np.zeros((_BLOCK_ROWS, num_envs), dtype=bool)
        self._rows = 0
        self._row_ends = 0

    @property
    def complete(self) -> int:
        """Episodes completed so far (by rows given to ``add_row`` too)."""
        return len(self._returns) + self._row_ends

    def update(self, rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> int:
        """Account for rows of rewards and flags, each shaped ``(k, num_envs)`` or ``(N,)``.

        Vectorised over the rows: an episode's return is a difference of running sums.

        Returns:
            The number of episodes these rows completed.
        """
        self._drain()
        return self._apply(rewards, terminated, truncated)

    def add_row(self, rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> None:
        """Account for one row (``num_envs`` values each), the per-step path.

        Rows are copied into a block that ``update`` takes whole, which costs a fraction
        per row of taking each row on its own; ``complete`` counts their episodes at once.
        """
        k = self._rows
        self._row_rewards[k] = rewards.ravel()
        self._row_terminated[k] = terminated.ravel()
        self._row_truncated[k] = truncated.ravel()
        self._row_ends += int(np.count_nonzero(self._row_terminated[k] | self._row_truncated[k]))
        self._rows = k + 1
        if self._rows == _BLOCK_ROWS:
            self._drain()

    def _drain(self) -> None:
        k, self._rows, self._row_ends = self._rows, 0, 0
        if k:
            self._apply(self._row_rewards[:k], self._row_terminated[:k], self._row_truncated[:k])

    def _apply(self, rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> int:
        n = self.num_envs
        rewards = rewards.reshape(-1, n).astype(np.float64, copy=False)
        terminated = terminated.reshape(-1, n)
        done = terminated | truncated.reshape(-1, n)
        k = rewards.shape[0]
        sums = np.cumsum(rewards, axis=0)
        if not done.any():
            self._return += sums[-1]
            self._length += k
            return 0
        columns, rows = np.nonzero(done.T)  # by column, then time
        first = np.ones(len(rows), dtype=bool)
        first[1:] = columns[1:] != columns[:-1]
        at_end = sums[rows, columns]
        before = np.where(first, 0.0, np.roll(at_end, 1))
        previous_row = np.where(first, -1, np.roll(rows, 1))
        with np.errstate(invalid="ignore", over="ignore"):  # inf rewards: NaN, no warning
            returns = at_end - before + np.where(first, self._return[columns], 0.0)
        lengths = rows - previous_row + np.where(first, self._length[columns], 0)
        order = np.lexsort((columns, rows))  # chronological, as the episodes ended
        self._returns.extend(returns[order].tolist())
        self._lengths.extend(lengths[order].tolist())
        self._recent.extend(returns[order].tolist())
        self._terminated += int(terminated[rows, columns].sum())
        # Carry what follows each column's last end (or the whole block) to the next call.
        last = np.full(n, -1)
        last[columns] = rows  # the last assignment per column wins: its latest end
        with np.errstate(invalid="ignore", over="ignore"):
            self._return = np.where(
                last >= 0,
                sums[-1] - sums[np.maximum(last, 0), np.arange(n)],
                self._return + sums[-1],
            )
        self._length = np.where(last >= 0, k - 1 - last, self._length + k)
        return len(rows)

    def recent_mean_return(self) -> float:
        """Mean return of the last ``window`` completed episodes (NaN before the first)."""
        self._drain()
        return float(np.mean(self._recent)) if self._recent else math.nan

    def summary(self) -> EpisodeSummary:
        """Counts and spreads; an incomplete episode is a column with steps since its last end."""
        self._drain()
        complete = len(self._returns)
        return EpisodeSummary(
            complete=complete,
            incomplete=int((self._length > 0).sum()),
            terminated=self._terminated,
            truncated=complete - self._terminated,
            returns=Distribution.of(np.asarray(self._returns, dtype=np.float64)),
            lengths=Distribution.of(np.asarray(self._lengths, dtype=np.float64)),
            recent_mean_return=self.recent_mean_return(),
        )
