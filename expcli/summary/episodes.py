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
the median and the histogram. Asked to (``records=True``), the accumulator also keeps
where each complete episode lies (its env column and last stored row) and how it ended,
17 bytes more per episode: the table that a report picks episodes from, the same episodes
the statistics count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from expcli.distribution import Distribution
from expcli.formats.layout_keys import SEAMS_KEY, STARTS_CUT_KEY
from expcli.spec import CircularState, flag_rows, oldest_rows, overwritten_columns
from expcli.summary.chronology import Chunk

__all__ = [
    "Distribution",
    "EnvEpisodes",
    "EpisodeAccumulator",
    "EpisodeCutter",
    "CompleteEpisodes",
    "EpisodeStats",
    "Pieces",
    "chunk_flags",
    "episode_cutter",
]

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
class CompleteEpisodes:
    """Every complete episode, one entry each (``summarize`` gives them in the order they ended).

    An episode of ``lengths[i]`` transitions in env column ``columns[i]`` ends at stored
    row ``last_rows[i]``; its rows are the ``lengths[i]`` rows of that column up to there,
    in its chronological order (``spec.chronological_rows``), wrapping past row 0.

    Attributes:
        returns: Rewards summed in float64 (0 for a dataset without ``rewards``).
        lengths: Transitions of each episode.
        columns: The env column of each episode.
        last_rows: The stored row of each episode's last transition.
        terminated: Whether it ended with ``terminated`` (else with ``truncated`` only).
    """

    returns: np.ndarray
    lengths: np.ndarray
    columns: np.ndarray
    last_rows: np.ndarray
    terminated: np.ndarray

    def __len__(self) -> int:
        return len(self.lengths)

    def in_time_order(self, state: CircularState, memory_size: int) -> CompleteEpisodes:
        """The same episodes in the order they ended: by the step of their last row, then env.

        The accumulator meets ends chunk by chunk and, within a chunk, column by column.
        """
        oldest = oldest_rows(state, int(self.columns.max(initial=-1)) + 1)
        step = (self.last_rows - oldest[self.columns]) % max(memory_size, 1)
        order = np.lexsort((self.columns, step))
        return CompleteEpisodes(
            self.returns[order],
            self.lengths[order],
            self.columns[order],
            self.last_rows[order],
            self.terminated[order],
        )


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
        records: Each complete episode's return, length and place, when asked for
            (``EpisodeAccumulator(records=True)``); never in the JSON.
    """

    complete: int
    incomplete: int
    terminated: int
    truncated: int
    returns: Distribution
    lengths: Distribution
    histogram: tuple[tuple[float, ...], tuple[int, ...]]
    per_env: tuple[EnvEpisodes, ...]
    records: CompleteEpisodes | None = None

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


@dataclass(frozen=True, slots=True)
class Pieces:
    """The rows of one chunk cut where episodes end, env column by env column.

    A chunk's rows are taken column-major (each column's rows in order, then the next
    column's); piece ``i`` is ``starts[i]:stops[i]`` of that order and lies in one column.

    Attributes:
        starts: Where each piece begins, in the column-major order of the chunk's rows.
        stops: Where each piece ends (exclusive).
        local: Which of the chunk's columns holds each piece (0 for its first).
        column: The env column of each piece.
        first: Whether a piece is its column's first in the chunk: it continues the episode
            that the column's earlier chunks left open.
        last: Whether a piece is its column's last in the chunk.
        closed: Whether a piece's last row ends its episode (``terminated | truncated``).
        started: Whether its episode's first row is in the data (not cut by an overwrite or
            ended at a seam).
        lengths: Rows of its episode up to the piece's end, earlier chunks' included.
        last_row: The stored row of each piece's last transition.
    """

    starts: np.ndarray
    stops: np.ndarray
    local: np.ndarray
    column: np.ndarray
    first: np.ndarray
    last: np.ndarray
    closed: np.ndarray
    started: np.ndarray
    lengths: np.ndarray
    last_row: np.ndarray

    @property
    def complete(self) -> np.ndarray:
        """Whether each piece ends an episode that began inside the data."""
        return np.asarray(self.closed & self.started)


class EpisodeCutter:
    """Cuts chronologically ordered chunks into episode pieces, per env column.

    Each column carries its open episode's length and whether its start is known from one
    chunk to the next: the one place where episodes are cut, for the statistics and for
    the fingerprints alike.

    Args:
        num_envs: Env columns.
        overwritten: Per env column (or for all of them), whether its older rows were
            overwritten (``spec.overwritten_columns``): its first episode is then incomplete.
        seams: ``(row, column)`` pairs where a reader marked an artificial episode end.
        cut_starts: ``(row, column)`` pairs where an episode starts whose beginning an edit
            left out (``STARTS_CUT_KEY``).
    """

    def __init__(
        self,
        num_envs: int,
        *,
        overwritten: np.ndarray | bool,
        seams: Sequence[tuple[int, int]] = (),
        cut_starts: Sequence[tuple[int, int]] = (),
    ) -> None:
        self.num_envs = num_envs
        self.length = np.zeros(num_envs, dtype=np.int64)
        """Rows of each column's open episode so far (0: none open)."""
        # whether each column's open episode's start is known
        self._started = ~np.broadcast_to(np.asarray(overwritten, dtype=bool), (num_envs,))
        self._seams = {(int(r), int(c)) for r, c in seams}
        self._cut_starts = {(int(r), int(c)) for r, c in cut_starts}

    def cut(self, start: int, columns: np.ndarray, done: np.ndarray) -> Pieces | None:
        """Cut the rows ``start..`` of env ``columns``; ``done`` is ``(rows, len(columns))``.

        None for a chunk without rows.
        """
        rows, width = done.shape
        if rows == 0 or width == 0:
            return None
        flat_done = np.ascontiguousarray(done.T).reshape(-1)
        ends = np.flatnonzero(flat_done)
        starts = np.unique(
            np.concatenate([np.arange(width) * rows, ends[ends + 1 < rows * width] + 1])
        )
        stops = np.append(starts[1:], rows * width)
        lengths = stops - starts
        local = starts // rows  # which of ``columns`` each piece belongs to
        column = columns[local]
        first = np.ones(len(starts), dtype=bool)
        first[1:] = local[1:] != local[:-1]
        last = np.ones(len(starts), dtype=bool)
        last[:-1] = local[1:] != local[:-1]
        fresh = ~first | (self.length[column] == 0)  # pieces that begin an episode
        lengths[first] += self.length[column[first]]
        started = np.ones(len(starts), dtype=bool)
        started[first] = self._started[column[first]]
        if self._cut_starts:  # only datasets an edit made, and few
            first_row = starts - local * rows + start
            for i in np.flatnonzero(fresh):
                if (int(first_row[i]), int(column[i])) in self._cut_starts:
                    started[i] = False
        closed = flat_done[stops - 1]
        last_row = stops - 1 - local * rows + start
        if self._seams:  # only foreign layouts have any, and few
            for i in np.flatnonzero(closed):
                if (int(last_row[i]), int(column[i])) in self._seams:
                    started[i] = False
        # The last piece of each column stays open unless it closed.
        tail = column[last]
        self.length[tail] = np.where(closed[last], 0, lengths[last])
        self._started[tail] = closed[last] | started[last]
        return Pieces(starts, stops, local, column, first, last, closed, started, lengths, last_row)


class EpisodeAccumulator:
    """Episode statistics of the pieces that an ``EpisodeCutter`` cuts, chunk by chunk.

    Args:
        cutter: The cutter whose pieces ``update`` gets (which it may share with others).
        records: Keep each complete episode's place and ending too (``CompleteEpisodes``).
    """

    def __init__(self, cutter: EpisodeCutter, *, records: bool = False) -> None:
        num_envs = self.num_envs = cutter.num_envs
        self._cutter = cutter
        self._return = np.zeros(num_envs, dtype=np.float64)
        self._returns: list[np.ndarray] = []
        self._lengths: list[np.ndarray] = []
        self._complete = np.zeros(num_envs, dtype=np.int64)
        self._incomplete = np.zeros(num_envs, dtype=np.int64)
        self._terminated = np.zeros(num_envs, dtype=np.int64)
        self._return_sum = np.zeros(num_envs, dtype=np.float64)
        self._length_sum = np.zeros(num_envs, dtype=np.int64)
        self._places: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = (
            [] if records else None
        )

    def update(self, pieces: Pieces, rewards: np.ndarray, terminated: np.ndarray) -> None:
        """Add the pieces of one chunk, whose rewards and flags are ``(rows, columns)``."""
        column, first, last = pieces.column, pieces.first, pieces.last
        # Column-major: each column's rows in order, then the next column's.
        sums = np.add.reduceat(np.ascontiguousarray(rewards.T).reshape(-1), pieces.starts)
        # The first piece of a column continues that column's open episode.
        sums[first] += self._return[column[first]]
        lengths, closed, started = pieces.lengths, pieces.closed, pieces.started
        complete = pieces.complete
        term = np.ascontiguousarray(terminated.T).reshape(-1)[pieces.stops - 1]
        self._returns.append(sums[complete])
        self._lengths.append(lengths[complete])
        if self._places is not None:
            self._places.append(
                (
                    column[complete].astype(np.int32),
                    pieces.last_row[complete].astype(np.int64),
                    term[complete],
                )
            )
        n = self.num_envs
        self._complete += np.bincount(column[complete], minlength=n)
        self._terminated += np.bincount(column[complete & term], minlength=n)
        self._incomplete += np.bincount(column[closed & ~started], minlength=n)
        self._return_sum += np.bincount(column[complete], weights=sums[complete], minlength=n)
        self._length_sum += np.bincount(
            column[complete], weights=lengths[complete], minlength=n
        ).astype(np.int64)
        self._return[column[last]] = np.where(closed[last], 0.0, sums[last])

    def result(self) -> EpisodeStats:
        """The statistics; each column's open episode counts as incomplete."""
        open_ = self._cutter.length > 0
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
            records=self._records(returns, lengths),
        )

    def _records(self, returns: np.ndarray, lengths: np.ndarray) -> CompleteEpisodes | None:
        if self._places is None:
            return None
        if not self._places:
            nothing = (np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.bool_))
            return CompleteEpisodes(returns, lengths, *nothing)
        parts = zip(*self._places, strict=True)
        columns, last_rows, ended = (np.concatenate(part) for part in parts)
        return CompleteEpisodes(returns, lengths, columns, last_rows, ended)


def chunk_flags(chunk: Chunk) -> tuple[np.ndarray, np.ndarray]:
    """``terminated`` and ``truncated`` of a chunk, ``(rows, columns)`` bool each.

    All False for a flag the dataset lacks.
    """
    rows, columns = chunk.stop - chunk.start, chunk.last - chunk.first
    terminated = flag_rows(chunk.arrays, "terminated", rows, columns)
    return terminated, flag_rows(chunk.arrays, "truncated", rows, columns)


def episode_cutter(
    metadata: Mapping[str, Any], state: CircularState, memory_size: int, num_envs: int
) -> EpisodeCutter:
    """The cutter of a dataset's episodes.

    It knows the columns whose older rows were overwritten, the seams that a foreign
    layout's reader marked (``SEAMS_KEY``) and the starts an edit cut (``STARTS_CUT_KEY``),
    the last two for one env column only.
    """
    overwritten = overwritten_columns(state, memory_size, num_envs, metadata)
    return EpisodeCutter(
        num_envs,
        overwritten=overwritten,
        seams=_listed_rows(metadata, SEAMS_KEY, num_envs),
        cut_starts=_listed_rows(metadata, STARTS_CUT_KEY, num_envs),
    )


def _listed_rows(metadata: Mapping[str, Any], key: str, num_envs: int) -> list[tuple[int, int]]:
    """The rows a one-column dataset's metadata lists under ``key``, as ``(row, 0)`` pairs."""
    listed = metadata.get(key) if num_envs == 1 else None
    return [(r, 0) for r in listed if type(r) is int] if isinstance(listed, list) else []


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
