"""Where each row of a foreign table goes in the ``(T, N)`` tensors: runs of rows, per env.

An episode column groups rows, a step column orders them within an episode, an env column
says which column of the tensors they go in. Read a row group at a time, the table is cut
into runs: rows one after another in the file, of one episode and one env, their steps
increasing. A table whose episodes are contiguous is placed from its runs alone, in memory
that grows with its episodes, never with its rows. One whose episodes are spread (an
episode in two places, or its steps out of order) must be sorted: its episode, step and env
columns are read whole (32 bytes a row) and sorted, up to ``MAX_SORTED_ROWS`` rows; a larger
one is refused (sort it first, e.g. duckdb's ``ORDER BY episode_index, frame_index``).

Each env column holds the runs of its env in order; when the envs hold different numbers
of rows, no ``(T, N)`` grid holds them, and the runs go one env after another in one column
(as they do past ``MAX_ENV_COLUMNS`` envs). Rows that go through envs ``0..N-1`` in turn,
as expcli writes them (time after time), are runs of stride N: a copy of expcli's own table
makes runs as many as its episodes too. Rows that interleave envs in no such order (a copy
of it filtered to some episodes) make a run of each row: placed right, in memory of about
48 bytes a row, up to ``MAX_SORTED_ROWS`` runs (a larger one is refused: sort it first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from expcli.errors import FormatError

__all__ = ["MAX_ENV_COLUMNS", "MAX_SORTED_ROWS", "Keys", "Placement", "place"]

MAX_SORTED_ROWS = 1 << 22
"""The most rows of a table whose episodes are spread that are sorted (128 MiB of keys)."""

MAX_ENV_COLUMNS = 4096
"""The most env columns a table's ``env`` column makes; beyond, one column, env after env."""

Keys = dict[str, np.ndarray]
"""A row group's (or a table's) ``episode``, ``step`` and ``env`` columns, those it has."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Runs of file rows in each env column of the tensors, and where episodes end.

    Attributes:
        starts: Per env column, the file row of each of its runs, in order.
        ends: Per env column, the position in the column just after each run.
        episodes: Per env column, the episode of each run (None: no episode column).
        sorted: The rows were sorted by episode and step (the table was not in that order).
        envs_glued: The envs held different numbers of rows (or were more than
            ``MAX_ENV_COLUMNS``): one column, env after env.
        stride: File rows from one row of a run to the next: 1, or N where the rows go
            through envs ``0..N-1`` over and over (as expcli writes them, time after time).
        offsets: Per env column, the file row of its first row, where each of its rows
            is that plus ``t * stride`` (None where a column's runs are not so): a table
            read in file order, whose cells are found without a search.
    """

    starts: list[np.ndarray]
    ends: list[np.ndarray]
    episodes: list[np.ndarray] | None
    sorted: bool
    envs_glued: bool
    stride: int = 1
    offsets: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        """``(T, N)``."""
        return (int(self.ends[0][-1]) if len(self.ends[0]) else 0), len(self.ends)

    def contiguous(self, first: int, stop: int) -> int | None:
        """Where the cells of tensor rows ``first..stop`` are one run of file rows: its first.

        In C order (cell ``(first, 0)`` first); None where they are not one run.
        """
        offsets = self.offsets
        if offsets is None or stop <= first:
            return None
        if not (np.diff(offsets) == 1).all() or (stop - first > 1 and self.stride != len(offsets)):
            return None
        return int(offsets[0]) + first * self.stride

    def cells(self, first: int, stop: int) -> np.ndarray:
        """The file row of each cell of tensor rows ``first..stop``, ``(stop - first, N)``."""
        at = np.arange(first, stop, dtype=np.int64) * self.stride
        if self.offsets is not None:
            return np.asarray(at[:, None] + self.offsets[None, :])
        out = np.empty((stop - first, len(self.ends)), np.int64)
        if stop <= first:
            return out
        for column, (starts, ends) in enumerate(zip(self.starts, self.ends, strict=True)):
            # the runs the rows lie in, each as many times as it has rows among them
            low, high = np.searchsorted(ends, [first, stop - 1], side="right")
            runs = np.arange(low, high + 1)
            begins = np.where(runs > 0, ends[np.maximum(runs - 1, 0)], 0)
            counts = np.minimum(ends[runs], stop) - np.maximum(begins, first)
            out[:, column] = np.repeat(starts[runs] - begins * self.stride, counts) + at
        return out

    def episode_ends(self) -> np.ndarray:
        """``(T, N)`` bools: the last row of each episode the episode column closes."""
        rows, envs = self.shape
        out = np.zeros((rows, envs), bool)
        if self.episodes is None:
            return out
        for column, (ends, episodes) in enumerate(zip(self.ends, self.episodes, strict=True)):
            last = np.append(episodes[1:] != episodes[:-1], False)  # the last: open
            out[ends[last] - 1, column] = True
        return out


class _NotCycled(Exception):
    """The env column stopped going through its envs in turn: place the rows one by one."""


def place(
    groups: Callable[[], Iterator[tuple[int, Keys]]],
    count: int,
    read_whole: Callable[[], Keys],
    path: Path,
) -> Placement:
    """The placement of a table of ``count`` rows, from its keys a row group at a time.

    ``groups``: each group's first file row and keys (asked again where the first pass
    found that the env column does not cycle); ``read_whole``: the keys of every row, asked
    only when the rows must be sorted.

    Raises:
        FormatError: The rows must be sorted and are more than ``MAX_SORTED_ROWS``.
    """
    try:
        return _place(groups(), count, read_whole, path, cycled=True)
    except _NotCycled:
        return _place(groups(), count, read_whole, path, cycled=False)


def _place(
    groups: Iterator[tuple[int, Keys]],
    count: int,
    read_whole: Callable[[], Keys],
    path: Path,
    cycled: bool,
) -> Placement:
    """``place``; ``cycled``: try rows that go through envs ``0..N-1`` in turn as N runs.

    Rows cycling through N envs (file row ``r`` of env ``r % N``) are placed as runs of
    stride N (the ``t``-th row of env ``e`` is file row ``t * N + e``), so that expcli's own
    table, copied without its footer, makes runs as many as its episodes, not its rows.
    """
    parts: dict[str, list[np.ndarray]] = {
        k: [] for k in ("start", "length", "episode", "env", "lo", "hi")
    }
    ordered, names, cycle, made = True, set[str](), 0, 0
    for first, keys in groups:
        rows = len(next(iter(keys.values()))) if keys else 0
        if not rows:
            continue
        names = set(keys)
        if cycled and not cycle:
            cycle = _cycle(keys.get("env"), first)
        t = np.arange(first, first + rows, dtype=np.int64)
        if cycle > 1:
            if not np.array_equal(keys["env"], t % cycle):
                raise _NotCycled
            if first % cycle == 0 and rows % cycle == 0:  # whole times: a transpose
                keys = {n: v.reshape(-1, cycle).T.reshape(-1) for n, v in keys.items()}
                t = t.reshape(-1, cycle).T.reshape(-1) // cycle
            else:
                order = _by_env(first, rows, cycle)
                keys = {name: values[order] for name, values in keys.items()}
                t = t[order] // cycle
        new = np.zeros(rows, bool)
        new[0] = True  # a group's runs start anew: those that go on are merged later
        for name in ("episode", "env"):
            if name in keys:
                values = keys[name]
                new[1:] |= values[1:] != values[:-1]
        at = np.flatnonzero(new)
        step = keys.get("step", np.zeros(rows, np.int64))
        if "step" in keys:  # increasing within each run
            ordered &= bool((step[:-1] < step[1:])[~new[1:]].all())
        last = np.append(at[1:], rows) - 1
        made += len(at)
        if made > MAX_SORTED_ROWS:
            raise FormatError(
                f"its episodes are not contiguous in their env, or its envs interleave in no "
                f"fixed order: past {MAX_SORTED_ROWS:,} runs of rows by row {first + rows:,}, "
                "more than are placed in memory; sort it by env, episode and step first "
                "(duckdb: ORDER BY env, episode_index, frame_index)",
                path=path,
            )
        zeros = np.zeros(rows, np.int64)
        for name, values in (
            ("start", t[at]),
            ("length", last - at + 1),
            ("episode", keys.get("episode", zeros)[at]),
            ("env", keys.get("env", zeros)[at]),
            ("lo", step[at]),
            ("hi", step[last]),
        ):
            parts[name].append(values)
    stride = max(cycle, 1)
    runs = _cat(parts, count, stride)
    if not parts["start"] or "episode" not in names:
        return _columns(runs, False, False, stride)
    lo, hi = np.concatenate(parts["lo"]), np.concatenate(parts["hi"])
    if ordered and _contiguous(runs, lo, hi, "step" in names):
        return _columns(runs, True, False, stride)
    if count > MAX_SORTED_ROWS:
        raise FormatError(
            f"its episodes are not contiguous in their env (or their steps out of order) and it "
            f"holds {count:,} rows, more than the {MAX_SORTED_ROWS:,} sorted in memory; sort it "
            "by episode and step first (duckdb: ORDER BY episode_index, frame_index)",
            path=path,
        )
    return _columns(_sorted_runs(read_whole(), count), True, True, 1)


def _by_env(first: int, rows: int, cycle: int) -> np.ndarray:
    """The local rows of a group cycling through ``cycle`` envs, env after env, in time.

    Local row ``i`` is of env ``(first + i) % cycle``: rows ``-o + e + k * cycle`` (``o`` the
    group's offset in the cycle) are env ``e``'s, those inside the group kept.
    """
    offset = first % cycle
    steps = -(-(rows + offset) // cycle)
    grid = np.arange(-offset, steps * cycle - offset, dtype=np.int64).reshape(steps, cycle)
    order = grid.T.reshape(-1)
    return order[(order >= 0) & (order < rows)]


def _cycle(env: np.ndarray | None, first: int) -> int:
    """N where the first group's env column goes ``0..N-1`` over and over, else 1."""
    if env is None or first != 0 or len(env) < 2 or env[0] != 0:
        return 1
    again = np.flatnonzero(env[1:] == 0)
    cycle = int(again[0]) + 1 if len(again) else int(env.max()) + 1
    if cycle < 2 or not np.array_equal(env[:cycle], np.arange(cycle)):
        return 1
    return cycle


_Runs = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Runs: their first file rows, lengths, episodes and envs."""


def _cat(parts: dict[str, list[np.ndarray]], count: int, stride: int) -> _Runs:
    """The runs found a group at a time, as one (no key columns: one run of every row).

    Found with a stride, a run's start is its first row's time ``t`` in its env; it is made
    the file row ``t * N + env`` here.
    """
    if not parts["start"]:
        one = np.zeros(1, np.int64)
        return one, np.array([count], np.int64), one, one
    starts = np.concatenate(parts["start"])
    envs = np.concatenate(parts["env"])
    if stride > 1:
        starts = starts * stride + envs
    return starts, np.concatenate(parts["length"]), np.concatenate(parts["episode"]), envs


def _contiguous(runs: _Runs, lo: np.ndarray, hi: np.ndarray, steps: bool) -> bool:
    """Whether, within each env, each episode's runs follow one another, steps increasing."""
    _, _, episodes, envs = runs
    order = np.argsort(envs, kind="stable")
    env, episode = envs[order], episodes[order]
    goes_on = (env[1:] == env[:-1]) & (episode[1:] == episode[:-1])
    if steps and not (hi[order][:-1][goes_on] < lo[order][1:][goes_on]).all():
        return False
    begins = np.concatenate([[True], ~goes_on])
    return not _pairs(env[begins], episode[begins])[1]


def _sorted_runs(keys: Keys, count: int) -> _Runs:
    """Runs of the rows sorted by env, episode and step (ties in file order)."""
    zeros = np.zeros(count, np.int64)
    episode, env = keys.get("episode", zeros), keys.get("env", zeros)
    order = np.lexsort((keys.get("step", zeros), episode, env))
    episode, env = episode[order], env[order]
    new = np.ones(count, bool)
    new[1:] = (np.diff(order) != 1) | (episode[1:] != episode[:-1]) | (env[1:] != env[:-1])
    at = np.flatnonzero(new)
    return order[at], np.diff(np.append(at, count)), episode[at], env[at]


def _columns(runs: _Runs, has_episodes: bool, was_sorted: bool, stride: int) -> Placement:
    """The runs dealt to env columns.

    Glued into one, env after env, when the envs' row counts differ (no ``(T, N)`` grid
    holds them) or when they are more than ``MAX_ENV_COLUMNS``.
    """
    starts, lengths, episodes, envs = runs
    pair, _ = _pairs(envs, episodes)  # one number per (env, episode): where an episode ends
    order = np.argsort(envs, kind="stable")
    cut = np.flatnonzero(np.diff(envs[order])) + 1
    totals = np.add.reduceat(lengths[order], np.concatenate([[0], cut])) if len(order) else lengths
    glued = len(cut) + 1 > MAX_ENV_COLUMNS or bool((totals != totals[0]).any())
    groups = [order] if glued else np.split(order, cut)
    columns = [_merged(starts[g], lengths[g], pair[g], stride) for g in groups]
    ends = [np.cumsum(c[1]) for c in columns]
    return Placement(
        [c[0] for c in columns],
        ends,
        [c[2] for c in columns] if has_episodes else None,
        was_sorted,
        glued,
        stride,
        _offsets([c[0] for c in columns], ends, stride),
    )


def _pairs(envs: np.ndarray, episodes: np.ndarray) -> tuple[np.ndarray, bool]:
    """A number for each ``(env, episode)`` pair (equal pairs, equal numbers); any twice."""
    if not len(envs):
        return np.zeros(0, np.int64), False
    order = np.lexsort((episodes, envs))
    env, episode = envs[order], episodes[order]
    new = np.concatenate([[True], (env[1:] != env[:-1]) | (episode[1:] != episode[:-1])])
    out = np.empty(len(envs), np.int64)
    out[order] = np.cumsum(new) - 1
    return out, not bool(new.all())


def _offsets(starts: list[np.ndarray], ends: list[np.ndarray], stride: int) -> np.ndarray | None:
    """Each column's first file row where its rows are that plus ``t * stride``, else None."""
    offsets = np.zeros(len(starts), np.int64)
    for column, (first, end) in enumerate(zip(starts, ends, strict=True)):
        begins = np.concatenate([[0], end[:-1]])
        moved = first - begins * stride
        if not len(moved) or (moved != moved[0]).any():
            return None
        offsets[column] = moved[0]
    return offsets


def _merged(
    starts: np.ndarray, lengths: np.ndarray, episodes: np.ndarray, stride: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A column's runs, those that go on in the file in the same episode made one."""
    goes_on = (starts[1:] == starts[:-1] + stride * lengths[:-1]) & (episodes[1:] == episodes[:-1])
    keep = np.concatenate([[True], ~goes_on])
    total = np.cumsum(lengths)[np.append(np.flatnonzero(keep)[1:] - 1, len(lengths) - 1)]
    return starts[keep], np.diff(np.concatenate([[0], total])), episodes[keep]
