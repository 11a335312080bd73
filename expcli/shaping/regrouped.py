"""Chosen episodes of one or more datasets as one new dataset, read only as it is written.

The new dataset has one env column: the chosen episodes one after the other, each whole and
in its own order, so that any writer of the format table streams it. Its tensors are
``LazyRows`` whose ``read(start, stop)`` gathers those rows from the sources: a mapped
source (a numpy array) by one ``take`` of the cells, a folder by its own gather of cells,
any other (a compressed file) through windows of whole source rows and a small cache of
blocks of them, least recently used first out. The episodes
come in the order they ended, so the rows a slice needs lie close together in time and a
block read for one column serves the episodes of the others.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from expcli.formats.dataset import Dataset
from expcli.formats.layout_keys import SEAMS_KEY, STARTS_CUT_KEY
from expcli.formats.lazy import LazyRows
from expcli.host_memory import available_bytes
from expcli.shaping.episode_table import EpisodeRecords, column_runs
from expcli.spec import CircularState

__all__ = ["CACHE_BYTES", "Pick", "regroup"]

CACHE_BYTES = 16 << 20
"""The most the cache of source row blocks holds (less where memory is short)."""

_BLOCK_BYTES = 1 << 20
"""About how many bytes of source rows one cached block holds."""

_WINDOW_BYTES = 8 << 20
"""The most source rows one gather reads together (whole rows, every env column)."""

_SUB_ROWS = 1 << 18
"""The most output rows gathered at a time (their index arrays take 8 bytes a row each)."""

_SUB_BYTES = 4 << 20
"""About how many bytes of output rows are gathered at a time."""

_SPAN_BYTES = 32 << 20
"""The pages of a mapped source are let go of once the cells read since the last time span
this many bytes of it (scattered cells map whole folios), and after every read."""


@dataclass(frozen=True, slots=True)
class Pick:
    """Episodes chosen from one source: indexes into its table, in the order they go out."""

    dataset: Dataset
    table: EpisodeRecords
    chosen: np.ndarray
    release: Callable[[], None] | None = None


@dataclass(frozen=True, slots=True)
class _Pieces:
    """Runs of source rows (one env column each) in output order: 16 bytes a run."""

    offset: np.ndarray  # where each run starts in the output; one more entry: the total
    base: np.ndarray  # output row ``o`` of run ``i`` is source cell ``base[i] + o * N``
    bounds: np.ndarray  # output rows of source ``k``: ``bounds[k]..bounds[k + 1]``


def regroup(picks: Sequence[Pick], metadata: Mapping[str, Any]) -> Dataset:
    """The chosen episodes, one after the other in one env column, as a lazily read dataset.

    An episode whose end is unknown (open, or closed by a seam) and that is not the last
    one is marked ``truncated`` at its last row and listed under ``SEAMS_KEY``; one whose
    start is unknown is listed under ``STARTS_CUT_KEY``, so that readers count both as
    incomplete. ``metadata`` is the new dataset's user metadata; those two keys are set.
    """
    pieces, seams, cut_starts, forced = _plan(picks)
    total = int(pieces.offset[-1])
    first = picks[0].dataset
    cache = _BlockCache(_cache_bytes())
    releases = [pick.release for pick in picks if pick.release is not None]
    tensors: dict[str, Any] = {}
    for name, array in first.tensors.items():
        sources = [pick.dataset.tensors[name] for pick in picks]
        marks = forced if name == "truncated" else None
        reader = _Gather(name, sources, pieces, cache, marks, releases)
        tensors[name] = LazyRows((total, 1, *array.shape[2:]), np.dtype(array.dtype), reader)
    meta = {k: v for k, v in metadata.items() if k not in (SEAMS_KEY, STARTS_CUT_KEY)}
    if seams:
        meta[SEAMS_KEY] = seams
    if cut_starts:
        meta[STARTS_CUT_KEY] = cut_starts
    state = CircularState(0, 0, total > 0, written=total)
    return Dataset(tensors, state, meta)


def _plan(picks: Sequence[Pick]) -> tuple[_Pieces, list[int], list[int], np.ndarray]:
    """The runs of source rows, the seams and cut starts, and the rows marked ``truncated``.

    Memory: 16 bytes a run kept (``_Pieces``), and about as much again per episode meanwhile.
    """
    runs = [_runs_of(pick) for pick in picks]
    total = sum(len(lengths) for _, lengths in runs)
    offsets = np.zeros(total + 1, dtype=np.int64)
    base = np.empty(total, dtype=np.int64)
    bounds, seams, cut_starts = [0], [], []
    at, done = 0, 0  # output rows so far, runs so far
    count, seen = sum(len(pick.chosen) for pick in picks), 0
    for pick, (cells, lengths) in zip(picks, runs, strict=True):
        ends = offsets[done + 1 : done + 1 + len(lengths)]
        np.cumsum(lengths, out=ends)
        ends += at
        base[done : done + len(lengths)] = cells
        starts = ends - lengths  # each run's first output row
        starts *= pick.dataset.num_envs
        base[done : done + len(lengths)] -= starts  # row o of run i is cell base[i] + o * N
        del starts, cells
        table, chosen = pick.table, pick.chosen
        last_rows = np.cumsum(table.length[chosen]) + (at - 1)  # each episode's last row
        cut = np.flatnonzero(~table.end_known[chosen])
        # an open episode (no flag at its end) may stay open when it is the last of all;
        # one a seam closed keeps its flag, and so its listing
        open_end = ~(table.terminated[chosen][cut] | table.truncated[chosen][cut])
        seams.append(last_rows[cut[~open_end | (seen + cut < count - 1)]])
        unknown = np.flatnonzero(~table.start_known[chosen])
        cut_starts.append(last_rows[unknown] - table.length[chosen][unknown] + 1)
        del last_rows
        done += len(lengths)
        at = int(offsets[done])
        bounds.append(at)
        seen += len(chosen)
    marked = np.concatenate(seams).astype(np.int64)
    pieces = _Pieces(offsets, base, np.asarray(bounds, dtype=np.int64))
    return pieces, marked.tolist(), np.concatenate(cut_starts).astype(np.int64).tolist(), marked


def _runs_of(pick: Pick) -> tuple[np.ndarray, np.ndarray]:
    """The first source cell (``row * N + column``) and rows of each run of the chosen episodes.

    A column's valid rows are one run of stored rows unless the memory wrapped; an episode of
    a wrapped column may then run over the end of the stored rows on to row 0 and give two
    runs (three at most).
    """
    table, chosen = pick.table, pick.chosen
    envs = pick.dataset.num_envs
    runs = column_runs(pick.dataset)
    column = table.column[chosen].astype(np.int64)
    if all(len(r) <= 1 for r in runs):  # nothing wrapped: a run per episode
        first_row = np.asarray([r[0][0] if r else 0 for r in runs], dtype=np.int64)
        cells = (first_row[column] + table.position[chosen]) * envs + column
        return cells, table.length[chosen].astype(np.int64)
    position, length = table.position[chosen], table.length[chosen]
    keys, cells, counts = [], [], []
    for c, mine_runs in enumerate(runs):
        mine = np.flatnonzero(column == c)
        at = 0
        for k, (start, stop) in enumerate(mine_runs):
            first = np.maximum(position[mine], at)
            last = np.minimum(position[mine] + length[mine], at + stop - start)
            hit = last > first
            keys.append(mine[hit] * 4 + k)  # output order: episode, then run
            cells.append((start + first[hit] - at) * envs + c)
            counts.append(last[hit] - first[hit])
            at += stop - start
    if not keys:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(np.concatenate(keys), kind="stable")
    return (
        np.concatenate(cells)[order].astype(np.int64),
        np.concatenate(counts)[order].astype(np.int64),
    )


class _Gather:
    """``read(start, stop)`` of one tensor of the regrouped dataset."""

    def __init__(
        self,
        name: str,
        sources: list[Any],
        pieces: _Pieces,
        cache: _BlockCache,
        forced: np.ndarray | None,
        releases: Sequence[Callable[[], None]] = (),
    ) -> None:
        self.name = name
        self.sources = sources
        self.pieces = pieces
        self.cache = cache
        self.forced = forced
        self.releases = releases  # of mapped sources: let go of pages after each read
        first = sources[0]
        self.feature = tuple(int(d) for d in first.shape[2:])
        self.dtype = np.dtype(first.dtype)

    def __call__(self, start: int, stop: int) -> np.ndarray:
        out = np.empty((stop - start, 1, *self.feature), dtype=self.dtype)
        flat = out.reshape(stop - start, *self.feature)
        bounds = self.pieces.bounds
        cell = max(1, int(np.prod(self.feature, dtype=np.int64)) * self.dtype.itemsize)
        step = max(1, min(_SUB_ROWS, _SUB_BYTES // cell))
        for number, source in enumerate(self.sources):
            lo, hi = max(start, int(bounds[number])), min(stop, int(bounds[number + 1]))
            envs = int(source.shape[1])
            span = [np.iinfo(np.int64).max, -1]
            for first in range(lo, hi, step):
                last = min(hi, first + step)
                cells = self._cells(first, last, envs)
                self._take(source, cells, flat[first - start : last - start])
                span = [min(span[0], int(cells.min())), max(span[1], int(cells.max()))]
                if (span[1] - span[0]) * cell > _SPAN_BYTES:
                    self._let_go(source)
                    span = [np.iinfo(np.int64).max, -1]
            self._let_go(source)
        if self.forced is not None and len(self.forced):
            marks = self.forced[(self.forced >= start) & (self.forced < stop)] - start
            flat[marks] = True
        return out

    def _let_go(self, source: Any) -> None:
        """Let go of the pages of mapped sources that the last gather brought in."""
        release = getattr(source, "release", None)
        if release is not None:
            release()
        for release in self.releases:
            release()

    def _cells(self, start: int, stop: int, envs: int) -> np.ndarray:
        """The flat source cells (``row * N + column``) of output rows ``start..stop``."""
        pieces = self.pieces
        lo = int(np.searchsorted(pieces.offset, start, side="right")) - 1
        hi = int(np.searchsorted(pieces.offset, stop, side="left"))
        ends = pieces.offset[lo + 1 : hi + 1].copy()
        ends[-1] = stop
        counts = np.diff(ends, prepend=start)
        cells = np.repeat(pieces.base[lo:hi], counts)
        cells += np.arange(start * envs, stop * envs, envs, dtype=np.int64)
        return cells

    def _take(self, source: Any, cells: np.ndarray, out: np.ndarray) -> None:
        """Copy the source's ``cells`` into ``out``."""
        if isinstance(source, np.ndarray) and source.flags.c_contiguous:
            np.take(source.reshape(-1, *self.feature), cells, axis=0, out=out, mode="clip")
        elif getattr(source, "release", None) is not None:  # a folder's mapped shards
            out[...] = source.take_cells(cells)
        else:
            out[...] = self._windowed(source, cells)

    def _windowed(self, source: Any, cells: np.ndarray) -> np.ndarray:
        """The cells, from windows of whole source rows read through the block cache."""
        envs = int(source.shape[1])
        rows = cells // envs
        lo, hi = int(rows.min()), int(rows.max()) + 1
        row_bytes = _row_bytes(source)
        if (hi - lo) * row_bytes > _WINDOW_BYTES and len(cells) > 1:
            half = len(cells) // 2  # runs lie close together in time: halves, narrower
            return np.concatenate(
                [self._windowed(source, cells[:half]), self._windowed(source, cells[half:])]
            )
        window = self.cache.rows(source, self.name, lo, hi, max(1, _BLOCK_BYTES // row_bytes))
        taken: np.ndarray = window.reshape(-1, *self.feature).take(cells - lo * envs, axis=0)
        return taken


class _BlockCache:
    """Blocks of source rows, the least recently used dropped first once over ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.blocks: OrderedDict[tuple[int, str, int], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()  # a writer's read-ahead thread reads here too

    def rows(self, source: Any, name: str, lo: int, hi: int, block: int) -> np.ndarray:
        """Rows ``lo..hi`` of ``source`` (all its env columns), from blocks of ``block`` rows."""
        first, last = lo // block, (hi - 1) // block
        parts = [self.get((id(source), name, k), source, block) for k in range(first, last + 1)]
        joined = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return joined[lo - first * block : hi - first * block]

    def get(self, key: tuple[int, str, int], source: Any, block: int) -> np.ndarray:
        with self._lock:
            found = self.blocks.get(key)
            if found is not None:
                self.blocks.move_to_end(key)
                return found
        start = key[2] * block
        rows = np.ascontiguousarray(source[start : min(start + block, len(source))])
        with self._lock:
            if key not in self.blocks:
                self.blocks[key] = rows
                self.held += rows.nbytes
            while self.held > self.limit and len(self.blocks) > 1:
                _, dropped = self.blocks.popitem(last=False)
                self.held -= dropped.nbytes
        return rows


def _row_bytes(source: Any) -> int:
    size: int = math.prod(source.shape[1:]) * np.dtype(source.dtype).itemsize
    return size


def _cache_bytes() -> int:
    room = available_bytes()
    return CACHE_BYTES if room is None else max(_BLOCK_BYTES, min(CACHE_BYTES, room // 8))
