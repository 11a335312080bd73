"""Streaming episode statistics, per env column, from ``terminated``/``truncated`` and rewards.

Episodes are not stored; per env column, an episode ends at a row where ``terminated |
truncated`` (DESIGN.md, "Episodes"). Rows arrive in chronological order (see
``chronology``), a chunk at a time; each column carries its open episode's return and
length from one chunk to the next. An episode is complete when it ended (a done flag) and
began inside the data: the first episode of a column whose older rows were overwritten
(``spec.overwritten_columns``, the one definition every episode count uses) may have begun
in them, and the last episode of a column may still be running, so both count as incomplete.
So does an episode that a foreign layout cut short at a seam between two of its buffers
(the rows listed under ``seams_marked_truncated``): its end was not the env's.

Complete episodes are counted by how they ended (``terminated`` wins over ``truncated``
when a row has both), and their returns and lengths are kept, 16 bytes per episode, for
the median and the histogram.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from expcli.distribution import Distribution

__all__ = ["Distribution", "EnvEpisodes", "EpisodeAccumulator", "EpisodeStats"]

HISTOGRAM_BINS = 10


@dataclass(frozen=True, slots=True)
class EnvEpisodes:
    """Episode counts and means of one env column."""

    env: int
    complete: int
    incomplete: int
    terminated: int
    truncated: int
    return_mean: float
    length_mean: float

    def to_json(self) -> dict[str, Any]:
        """One entry of ``episodes.per_env`` (NaN as null)."""
        return {
            "env": self.env,
            "complete": self.complete,
            "incomplete": self.incomplete,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "return_mean": self.return_mean if math.isfinite(self.return_mean) else None,
            "length_mean": self.length_mean if math.isfinite(self.length_mean) else None,
        }


@dataclass(frozen=True, slots=True)
class EpisodeStats:
    """Episode statistics over every env column.

    Attributes:
        complete: Episodes whose first and last rows are in the data.
        incomplete: Episodes cut by the start or end of the data (or by a seam).
        terminated: Complete episodes that ended with ``terminated``.
        truncated: Complete episodes that ended with ``truncated`` only.
        returns: Distribution of the complete episodes' returns (rewards summed in float64;
            NaN when the dataset has no ``rewards``).
        lengths: Distribution of the complete episodes' lengths in transitions.
        histogram: ``(edges, counts)`` of the complete episodes' returns.
        per_env: One entry per env column.
    """

    complete: int
    incomplete: int
    terminated: int
    truncated: int
    returns: Distribution
    lengths: Distribution
    histogram: tuple[tuple[float, ...], tuple[int, ...]]
    per_env: tuple[EnvEpisodes, ...]

    def to_json(self, *, per_env: bool = False) -> dict[str, Any]:
        """The ``episodes`` object of ``inspect --json``."""
        edges, counts = self.histogram
        out: dict[str, Any] = {
            "complete": self.complete,
            "incomplete": self.incomplete,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "return": self.returns.to_json(),
            "length": self.lengths.to_json(),
            "histogram": {"edges": list(edges), "counts": list(counts)},
        }
        if per_env:
            out["per_env"] = [env.to_json() for env in self.per_env]
        return out


class EpisodeAccumulator:
    """Follows the episodes of every env column through chronologically ordered chunks.

    Args:
        num_envs: Env columns.
        overwritten: Per env column (or for all of them), whether its older rows were
            overwritten (``spec.overwritten_columns``): its first episode is then incomplete.
        seams: ``(row, column)`` pairs where a reader marked an artificial episode end.
    """

    def __init__(
        self,
        num_envs: int,
        *,
        overwritten: np.ndarray | bool,
        seams: Sequence[tuple[int, int]] = (),
    ) -> None:
        self.num_envs = num_envs
        self._return = np.zeros(num_envs, dtype=np.float64)
        self._length = np.zeros(num_envs, dtype=np.int64)
        # whether each column's open episode's start is known
        self._started = ~np.broadcast_to(np.asarray(overwritten, dtype=bool), (num_envs,))
        self._seams = {(int(r), int(c)) for r, c in seams}
        self._returns: list[np.ndarray] = []
        self._lengths: list[np.ndarray] = []
        self._complete = np.zeros(num_envs, dtype=np.int64)
        self._incomplete = np.zeros(num_envs, dtype=np.int64)
        self._terminated = np.zeros(num_envs, dtype=np.int64)
        self._return_sum = np.zeros(num_envs, dtype=np.float64)
        self._length_sum = np.zeros(num_envs, dtype=np.int64)

    def update(
        self,
        start: int,
        columns: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        """Add the rows ``start..`` of env ``columns``: arrays shaped ``(rows, len(columns))``."""
        rows, width = rewards.shape
        if rows == 0 or width == 0:
            return
        done = terminated | truncated
        # Column-major: each column's rows in order, then the next column's.
        flat_done = np.ascontiguousarray(done.T).reshape(-1)
        ends = np.flatnonzero(flat_done)
        starts = np.unique(
            np.concatenate([np.arange(width) * rows, ends[ends + 1 < rows * width] + 1])
        )
        sums = np.add.reduceat(np.ascontiguousarray(rewards.T).reshape(-1), starts)
        stops = np.append(starts[1:], rows * width)
        lengths = stops - starts
        local = starts // rows  # which of ``columns`` each piece belongs to
        column = columns[local]
        first = np.ones(len(starts), dtype=bool)
        first[1:] = local[1:] != local[:-1]
        # The first piece of a column continues that column's open episode.
        sums[first] += self._return[column[first]]
        lengths[first] += self._length[column[first]]
        started = np.ones(len(starts), dtype=bool)
        started[first] = self._started[column[first]]
        closed = flat_done[stops - 1]
        last_row = stops - 1 - local * rows + start
        if self._seams:  # only foreign layouts have any, and few
            for i in np.flatnonzero(closed):
                if (int(last_row[i]), int(column[i])) in self._seams:
                    started[i] = False
        complete = closed & started
        term = np.ascontiguousarray(terminated.T).reshape(-1)[stops - 1]
        self._returns.append(sums[complete])
        self._lengths.append(lengths[complete])
        n = self.num_envs
        self._complete += np.bincount(column[complete], minlength=n)
        self._terminated += np.bincount(column[complete & term], minlength=n)
        self._incomplete += np.bincount(column[closed & ~started], minlength=n)
        self._return_sum += np.bincount(column[complete], weights=sums[complete], minlength=n)
        self._length_sum += np.bincount(
            column[complete], weights=lengths[complete], minlength=n
        ).astype(np.int64)
        # The last piece of each column stays open unless it closed.
        last = np.ones(len(starts), dtype=bool)
        last[:-1] = local[1:] != local[:-1]
        tail = column[last]
        self._return[tail] = np.where(closed[last], 0.0, sums[last])
        self._length[tail] = np.where(closed[last], 0, lengths[last])
        self._started[tail] = closed[last] | started[last]

    def result(self) -> EpisodeStats:
        """The statistics; each column's open episode counts as incomplete."""
        open_ = self._length > 0
        incomplete = self._incomplete + open_
        returns = np.concatenate(self._returns) if self._returns else np.zeros(0)
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int64)
        per_env = tuple(
            EnvEpisodes(
                env=j,
                complete=int(self._complete[j]),
                incomplete=int(incomplete[j]),
                terminated=int(self._terminated[j]),
                truncated=int(self._complete[j] - self._terminated[j]),
                return_mean=_ratio(self._return_sum[j], self._complete[j]),
                length_mean=_ratio(self._length_sum[j], self._complete[j]),
            )
            for j in range(self.num_envs)
        )
        complete = int(self._complete.sum())
        terminated = int(self._terminated.sum())
        return EpisodeStats(
            complete=complete,
            incomplete=int(incomplete.sum()),
            terminated=terminated,
            truncated=complete - terminated,
            returns=Distribution.of(returns),
            lengths=Distribution.of(lengths.astype(np.float64)),
            histogram=histogram(returns),
            per_env=per_env,
        )


def histogram(
    values: np.ndarray, bins: int = HISTOGRAM_BINS
) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Edges and counts of ``values`` in at most ``bins`` equal bins (finite values only)."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return (), ()
    low, high = float(finite.min()), float(finite.max())
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            counts, edges = np.histogram(finite, bins=bins if low < high else 1)
    except ValueError:  # a range too narrow for its magnitude, or too wide for a float
        counts, edges = np.array([finite.size]), np.array([low, high])
    return tuple(float(e) for e in edges), tuple(int(c) for c in counts)


def _ratio(total: Any, count: Any) -> float:
    return float(total) / int(count) if count else math.nan
