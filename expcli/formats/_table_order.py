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
(as they do past ``MAX_ENV_COLUMNS`` envs).
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
    """

    starts: list[np.ndarray]
    ends: list[np.ndarray]
    episodes: list[np.ndarray] | None
    sorted: bool
    envs_glued: bool

    @property
    def shape(self) -> tuple[int, int]:
        """``(T, N)``."""
        return (int(self.ends[0][-1]) if len(self.ends[0]) else 0), len(self.ends)

    def cells(self, first: int, stop: int) -> np.ndarray:
        """The file row of each cell of tensor rows ``first..stop``, ``(stop - first, N)``."""
        at = np.arange(first, stop, dtype=np.int64)
        out = np.empty((stop - first, len(self.ends)), np.int64)
        for column, (starts, ends) in enumerate(zip(self.starts, self.ends, strict=True)):
            run = np.searchsorted(ends, at, side="right")
            begins = np.where(run > 0, ends[np.maximum(run - 1, 0)], 0)
            out[:, column] = starts[run] + at - begins
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


def place(
    groups: Iterator[tuple[int, Keys]], count: int, read_whole: Callable[[], Keys], path: Path
) -> Placement:
    """The placement of a table of ``count`` rows, from its keys a row group at a time.

    ``groups``: each group's first file row and keys; ``read_whole``: the keys of every row,
    asked only when the rows must be sorted.

    Raises:
        FormatError: The rows must be sorted and are more than ``MAX_SORTED_ROWS``.
    """
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("start", "episode", "env", "lo", "hi")}
    ordered, last, names = True, dict[str, np.ndarray](), set[str]()
    latest: np.ndarray | None = None
    for first, keys in groups:
        rows = len(next(iter(keys.values()))) if keys else 0
        if not rows:
            continue
        names = set(keys)
        new = np.zeros(rows, bool)
        new[0] = first == 0
        for name in ("episode", "env"):
            if name in keys:
                values = keys[name]
                new |= np.concatenate([last.get(name, values[:1]), values[:-1]]) != values
        at = np.flatnonzero(new)
        zeros = np.zeros(rows, np.int64)
        step = keys.get("step", zeros)
        if "step" in keys:  # increasing within each run
            before = np.concatenate([last.get("step", step[:1] - 1), step[:-1]])
            ordered &= bool((before < step)[~new].all())
        carried = int(at[0]) if len(at) else rows  # rows going on with the last group's run
        if carried and latest is not None:
            latest[-1] = step[carried - 1]
        for name, values in (
            ("start", first + at),
            ("episode", keys.get("episode", zeros)[at]),
            ("env", keys.get("env", zeros)[at]),
            ("lo", step[at]),
            ("hi", step[np.append(at[1:], rows) - 1] if len(at) else at),
        ):
            parts[name].append(values)
        latest = parts["hi"][-1] if len(at) else latest  # the last run's steps end there
        last = {name: values[-1:] for name, values in keys.items()}
    runs = _cat(parts, count)
    if not parts["start"] or "episode" not in names:
        return _columns(runs, False, False)
    lo, hi = np.concatenate(parts["lo"]), np.concatenate(parts["hi"])
    if ordered and _contiguous(runs, lo, hi, "step" in names):
        return _columns(runs, True, False)
    if count > MAX_SORTED_ROWS:
        raise FormatError(
            f"its episodes are not contiguous in their env (or their steps out of order) and it "
            f"holds {count:,} rows, more than the {MAX_SORTED_ROWS:,} sorted in memory; sort it "
            "by episode and step first (duckdb: ORDER BY episode_index, frame_index)",
            path=path,
        )
    return _columns(_sorted_runs(read_whole(), count), True, True)


_Runs = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Runs in file order: their first file rows, lengths, episodes and envs."""


def _cat(parts: dict[str, list[np.ndarray]], count: int) -> _Runs:
    """The runs found a group at a time, as one (no key columns: one run of every row)."""
    if not parts["start"]:
        one = np.zeros(1, np.int64)
        return one, np.array([count], np.int64), one, one
    starts = np.concatenate(parts["start"])
    lengths = np.diff(np.append(starts, count))
    return starts, lengths, np.concatenate(parts["episode"]), np.concatenate(parts["env"])


def _contiguous(runs: _Runs, lo: np.ndarray, hi: np.ndarray, steps: bool) -> bool:
    """Whether, within each env, each episode's runs follow one another, steps increasing."""
    _, _, episodes, envs = runs
    order = np.argsort(envs, kind="stable")
    env, episode = envs[order], episodes[order]
    goes_on = (env[1:] == env[:-1]) & (episode[1:] == episode[:-1])
    if steps and not (hi[order][:-1][goes_on] < lo[order][1:][goes_on]).all():
        return False
    begins = np.concatenate([[True], ~goes_on])
    pairs = np.stack([env[begins], episode[begins]], axis=1)
    return len(np.unique(pairs, axis=0)) == len(pairs)


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


def _columns(runs: _Runs, has_episodes: bool, was_sorted: bool) -> Placement:
    """The runs dealt to env columns.

    Glued into one, env after env, when the envs' row counts differ (no ``(T, N)`` grid
    holds them) or when they are more than ``MAX_ENV_COLUMNS``.
    """
    starts, lengths, episodes, envs = runs
    _, pair = np.unique(np.stack([envs, episodes], axis=1), axis=0, return_inverse=True)
    pair = pair.reshape(-1)  # one number per (env, episode): where an episode ends
    order = np.argsort(envs, kind="stable")
    names, env = np.unique(envs, return_inverse=True)
    totals = np.bincount(env.reshape(-1), weights=lengths)
    glued = len(names) > MAX_ENV_COLUMNS or bool((totals != totals[0]).any())
    groups = [order] if glued else np.split(order, np.flatnonzero(np.diff(envs[order])) + 1)
    columns = [_merged(starts[g], lengths[g], pair[g]) for g in groups]
    return Placement(
        [c[0] for c in columns],
        [np.cumsum(c[1]) for c in columns],
        [c[2] for c in columns] if has_episodes else None,
        was_sorted,
        glued,
    )


def _merged(
    starts: np.ndarray, lengths: np.ndarray, episodes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A column's runs, those that go on in the file in the same episode made one."""
    goes_on = (starts[1:] == starts[:-1] + lengths[:-1]) & (episodes[1:] == episodes[:-1])
    keep = np.concatenate([[True], ~goes_on])
    total = np.cumsum(lengths)[np.append(np.flatnonzero(keep)[1:] - 1, len(lengths) - 1)]
    return starts[keep], np.diff(np.concatenate([[0], total])), episodes[keep]
