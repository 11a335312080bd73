"""EpisodeRecords: one entry per episode of a dataset, found in one pass over its small tensors.

The pass reads only the done flags, the rewards and the ``infos/*`` tensors an expression
asks for, a few megabytes at a time in chronological order (``summary.chronology``), so it
holds one chunk and the table whatever the size of the file. Episodes are cut as ``inspect``
cuts them: per env column, an episode ends at a row where ``terminated | truncated``; the
first episode of an overwritten column began in a row that is gone (its start is unknown);
the last open one of every column has no end; a seam (``SEAMS_KEY``, rows a reader marked
``truncated`` between glued episodes) is an end that the env never gave, and a row listed
under ``STARTS_CUT_KEY`` starts an episode whose beginning was left out by an earlier edit.

Episodes are numbered in the order their last transition comes in the chronological order of
transitions (row by row, in a row env column by env column); the open ones of the columns
come after all closed ones, in column order. ``index`` in expressions is this number.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from expcli.formats.dataset import Dataset
from expcli.formats.layout_keys import SEAMS_KEY, STARTS_CUT_KEY
from expcli.spec import overwritten_columns
from expcli.summary.chronology import Segment, chunks, segments
from expcli.summary.episodes import chunk_flags

__all__ = ["EpisodeRecords", "column_runs", "scan_episodes"]


@dataclass(frozen=True, slots=True)
class EpisodeRecords:
    """The episodes of one dataset, as arrays of one entry per episode (in index order).

    Attributes:
        column: Env column (int32, as ``position`` and ``length`` unless a column may
            hold 2**31 rows: int64).
        position: Where the episode's first transition lies in its column's chronological
            sequence of valid transitions (``column_runs`` maps it to stored rows).
        length: Transitions.
        start_known: Whether the episode's first transition is its real start.
        end_known: Whether a done flag the env gave closes it (not a seam, not open).
        terminated: The ``terminated`` flag of its last transition (False when open).
        truncated: The ``truncated`` flag of its last transition (False when open).
        returns: Sum of its rewards, in float64 (NaN without a ``rewards`` tensor).
        infos: ``infos/<name>`` to the mean of the tensor over the episode (every element).
    """

    column: np.ndarray
    position: np.ndarray
    length: np.ndarray
    start_known: np.ndarray
    end_known: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    returns: np.ndarray
    infos: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.column)

    @property
    def complete(self) -> np.ndarray:
        """Whether each episode is whole: its start and its end are known."""
        whole: np.ndarray = self.start_known & self.end_known
        return whole

    def fields(self) -> dict[str, np.ndarray]:
        """The per-episode fields that selections read, by the names users type."""
        return {
            "return": self.returns,
            "length": self.length,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "env": self.column,
            "index": np.arange(len(self), dtype=np.int64),
            "complete": self.complete,
            **self.infos,
        }


def info_fields(dataset: Dataset) -> list[str]:
    """The ``infos/*`` tensors of ``dataset`` that expressions can read (numeric ones)."""
    return sorted(
        name
        for name, array in dataset.tensors.items()
        if name.startswith("infos/") and np.dtype(array.dtype).kind in "biuf"
    )


def column_runs(dataset: Dataset) -> list[list[tuple[int, int]]]:
    """Per env column, its valid stored rows in chronological order, as ``(start, stop)`` runs."""
    runs: list[list[tuple[int, int]]] = [[] for _ in range(dataset.num_envs)]
    for part in _segments(dataset):
        for column in range(part.first, part.last):
            mine = runs[column]
            if mine and mine[-1][1] == part.start:
                mine[-1] = (mine[-1][0], part.stop)
            else:
                mine.append((part.start, part.stop))
    return runs


def scan_episodes(dataset: Dataset, infos: Collection[str] = ()) -> EpisodeRecords:
    """Find the episodes of ``dataset`` in one chronological pass over its small tensors.

    ``infos``: the ``infos/*`` tensors whose per-episode means to compute.
    """
    envs = dataset.num_envs
    tensors = dataset.tensors
    flags = [name for name in ("terminated", "truncated") if name in tensors]
    names = [*flags, *(["rewards"] if "rewards" in tensors else []), *infos]
    overwritten = overwritten_columns(dataset.state, dataset.memory_size, envs, dataset.metadata)
    cuts = _rows_listed(dataset.metadata, SEAMS_KEY, envs)
    cut_starts = _rows_listed(dataset.metadata, STARTS_CUT_KEY, envs)
    scan = _Scan(envs, overwritten, list(infos), dataset.memory_size)
    for chunk in chunks(tensors, names, _segments(dataset)) if names else ():
        rows, width = chunk.stop - chunk.start, chunk.last - chunk.first
        term, trunc = chunk_flags(chunk)
        values = np.empty((1 + len(infos), rows, width), dtype=np.float64)
        rewards = chunk.arrays.get("rewards")
        if rewards is None:
            values[0] = np.nan
        else:
            values[0] = rewards.reshape(rows, width, -1).sum(axis=2, dtype=np.float64)
        for i, name in enumerate(infos, start=1):
            values[i] = chunk.arrays[name].reshape(rows, width, -1).mean(axis=2, dtype=np.float64)
        scan.update(chunk.start, chunk.first, term | trunc, term, trunc, values, cuts, cut_starts)
    if not names:  # no flags, no rewards: every column one open episode
        for column, runs in enumerate(column_runs(dataset)):
            scan.count[column] = sum(stop - start for start, stop in runs)
    return scan.result()


# ----------------------------------------------------------------------- internals


def _segments(dataset: Dataset) -> list[Segment]:
    return segments(dataset.state, dataset.memory_size, dataset.num_envs)


def _rows_listed(metadata: Mapping[str, Any], key: str, envs: int) -> set[int]:
    listed = metadata.get(key) if envs == 1 else None
    if not isinstance(listed, list):
        return set()
    return {int(row) for row in listed if type(row) is int}


class _Scan:
    """The open episode of every column, and the closed ones found so far."""

    def __init__(self, envs: int, overwritten: np.ndarray, infos: list[str], rows: int = 0) -> None:
        # the table's integers: 4 bytes an entry unless a column may hold 2**31 rows
        self.integers = np.dtype(np.int32 if rows < 2**31 else np.int64)
        self.count = np.zeros(envs, dtype=np.int64)  # transitions seen per column
        self.open_at = np.zeros(envs, dtype=np.int64)  # where each open episode began
        self.open_known = ~np.asarray(overwritten, dtype=bool)
        self.open_sums = np.zeros((1 + len(infos), envs), dtype=np.float64)
        self.infos = infos
        self.closed: list[dict[str, np.ndarray]] = []

    def update(
        self,
        start: int,
        first: int,
        done: np.ndarray,
        term: np.ndarray,
        trunc: np.ndarray,
        values: np.ndarray,
        cuts: set[int],
        cut_starts: set[int],
    ) -> None:
        """Rows ``start..`` of columns ``first..``; ``values``: rewards, then infos means."""
        rows, width = done.shape
        found: list[dict[str, np.ndarray]] = []
        for j in range(width):
            column = first + j
            base = self.count[column]
            if base == 0 and start in cut_starts:
                self.open_known[column] = False
            ends = np.flatnonzero(done[:, j])
            if len(ends):
                bounds = np.concatenate([[0], ends[:-1] + 1])
                sums = np.add.reduceat(values[:, : ends[-1] + 1, j], bounds, axis=1)
                sums[:, 0] += self.open_sums[:, column]
                begins = base + bounds
                begins[0] = self.open_at[column]
                known = np.isin(start + bounds, list(cut_starts), invert=True)
                known[0] = self.open_known[column]
                length = base + ends + 1 - begins
                entry = {
                    "row": start + ends,
                    "column": np.full(len(ends), column, dtype=np.int64),
                    "column_of": np.full(len(ends), column, dtype=np.int64),
                    "position": begins,
                    "length": length,
                    "start_known": known,
                    "end_known": np.isin(start + ends, list(cuts), invert=True),
                    "terminated": term[ends, j],
                    "truncated": trunc[ends, j],
                    "sums": sums,
                }
                found.append(entry)
                tail_from = int(ends[-1]) + 1
                self.open_at[column] = base + tail_from
                self.open_known[column] = start + tail_from not in cut_starts
                self.open_sums[:, column] = 0.0
            else:
                tail_from = 0
            self.open_sums[:, column] += values[:, tail_from:, j].sum(axis=1)
            self.count[column] = base + rows
        if found:
            merged = {key: np.concatenate([f[key] for f in found], axis=-1) for key in found[0]}
            order = np.lexsort((merged.pop("column"), merged.pop("row")))  # by row, then column
            kept = {key: value[..., order] for key, value in merged.items()}
            for key in ("position", "length", "column_of"):
                kept[key] = kept[key].astype(self.integers)
            self.closed.append(kept)

    def result(self) -> EpisodeRecords:
        length = self.count - self.open_at
        tail = np.flatnonzero(length > 0)
        none = np.zeros(len(tail), dtype=bool)
        opened = {
            "column_of": tail.astype(self.integers),
            "position": self.open_at[tail].astype(self.integers),
            "length": length[tail].astype(self.integers),
            "start_known": self.open_known[tail],
            "end_known": none,
            "terminated": none,
            "truncated": none,
            "sums": self.open_sums[:, tail],
        }
        parts, self.closed = [*self.closed, opened], []
        table = {}
        for key in list(opened):  # a field at a time: the parts go as their field is joined
            table[key] = np.concatenate([p.pop(key) for p in parts], axis=-1)
        sums, count = table["sums"], np.maximum(table["length"], 1)
        return EpisodeRecords(
            column=table["column_of"],
            position=table["position"],
            length=table["length"],
            start_known=table["start_known"].astype(bool, copy=False),
            end_known=table["end_known"].astype(bool, copy=False),
            terminated=table["terminated"].astype(bool, copy=False),
            truncated=table["truncated"].astype(bool, copy=False),
            returns=sums[0],
            infos={name: sums[1 + i] / count for i, name in enumerate(self.infos)},
        )
