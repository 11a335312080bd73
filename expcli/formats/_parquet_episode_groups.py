"""The row groups of a Parquet file written episode by episode, in file order.

Two passes over the source, both in time order: the first reads only the flags, to find
the episodes (``_parquet_episodes.find_episodes``); the second reads every column a chunk
of transitions at a time, and hands a row group on as soon as every row before its end
is read. Between the two, the transitions read wait in one of two places:

- a window in time (``_windowed``): a ring of the latest transitions, as many as the
  episodes ever need at once (known from the first pass), each row group gathered from it
  as from tensors in memory. Taken where that ring fits in ``RAM_BYTES``: episodes that
  end, as most do.
- a ``Spool`` (``_spooled``): each transition put at its file row, in memory up to
  ``RAM_BYTES`` and in temporary files past it. Taken where the window would not fit: an
  episode that runs on for most of the file holds every transition after its start.

A source held in memory whole (numpy tensors, a folder's shard) needs neither: each row
group gathers its cells from the tensors directly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from expcli.formats import _parquet_spool
from expcli.formats._parquet_columns import Carry, Column, positions
from expcli.formats._parquet_episodes import Episodes, find_episodes
from expcli.formats._parquet_spool import Spool

__all__ = ["RowGroup", "episode_groups", "window_rows"]

RowGroup = tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray]]
"""A row group: its bookkeeping columns, its transitions' flat cells, each column's rows."""

CellsOf = Callable[[Any, np.ndarray], np.ndarray]
"""The rows ``(n, *feature)`` of a tensor at flat cells (increasing but for one wrap)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Shape:
    """Where a file's transitions lie in the tensors, and how they are cut.

    Attributes:
        start: The first transition's flat cell.
        cells: ``T * N``.
        envs: N.
        count: The transitions the file stores (written first, then any never written).
        written: Those written.
        chunks: Chronological ``(first, stop)`` of the transitions read at a time.
        group: File rows of one row group.
    """

    start: int
    cells: int
    envs: int
    count: int
    written: int
    chunks: Sequence[tuple[int, int]]
    group: int


def episode_groups(
    tensors: dict[str, Any],
    stored: list[Column],
    shape: Shape,
    carry: Carry,
    fps: float,
    io: tuple[CellsOf, Callable[[dict[str, np.ndarray], int], np.ndarray], Path],
) -> tuple[Iterator[RowGroup], Carry]:
    """The row groups in file order, and the carry after the file's transitions.

    ``io``: how a tensor's cells are read, whether each of the first ``n`` transitions of
    some flag rows ended its episode, and the target (where a spool's files go).
    """
    cells_of, done, target = io
    flags = [c.spec.name for c in stored if c.spec.name in ("terminated", "truncated")]

    def done_of(flat: np.ndarray, n: int) -> np.ndarray:
        return done({name: cells_of(tensors[name], flat) for name in flags}, n)

    written = [(f, min(s, shape.written)) for f, s in shape.chunks if f < shape.written]
    where = (shape.start, shape.cells, shape.envs)
    episodes, after = find_episodes(written, done_of, where, carry)
    after = dataclasses.replace(after, index=after.index + shape.count - shape.written)
    if all(isinstance(tensors[c.spec.name], np.ndarray) for c in stored):
        return _gathered(tensors, stored, shape, episodes, (carry, fps)), after
    span = window_rows(episodes, shape)
    if span * sum(c.row_bytes for c in stored) <= _parquet_spool.RAM_BYTES:
        return _windowed(tensors, stored, shape, episodes, (carry, fps), (cells_of, span)), after
    return _spooled(tensors, stored, shape, episodes, (carry, fps), io), after


def _bounds(shape: Shape) -> list[tuple[int, int]]:
    return [(g, min(g + shape.group, shape.count)) for g in range(0, shape.count, shape.group)]


def _gathered(
    tensors: dict[str, Any],
    stored: list[Column],
    shape: Shape,
    episodes: Episodes,
    book: tuple[Carry, float],
) -> Iterator[RowGroup]:
    """Row groups gathered from tensors held in memory."""
    flat_of = {
        c.spec.name: tensors[c.spec.name].reshape(shape.cells, *tensors[c.spec.name].shape[2:])
        for c in stored
    }
    for first, stop in _bounds(shape):
        columns, flat = episodes.bookkeeping(first, stop, (shape.start, shape.cells), *book)
        yield columns, flat, {name: np.take(rows, flat, axis=0) for name, rows in flat_of.items()}


def _ready_at(episodes: Episodes, shape: Shape, ends: np.ndarray) -> np.ndarray:
    """Where the reading stands when file rows ``..ends`` are all there, each.

    A chunk's stop: the first at which ``Episodes.complete`` reaches ``ends``.
    """
    written = episodes.written
    slot = np.searchsorted(episodes.offsets, np.minimum(ends, written) - 1, side="right") - 1
    latest = episodes.latest if len(episodes.latest) else np.zeros(1, np.int64)
    need = np.where(ends > written, ends, latest[np.maximum(slot, 0)] + 1)
    stops = np.array([stop for _, stop in shape.chunks], np.int64)
    return stops[np.minimum(np.searchsorted(stops, need), len(stops) - 1)]


def window_rows(episodes: Episodes, shape: Shape) -> int:
    """The most transitions the episodes need held at once, read in time order.

    Before row group ``g`` is handed on, the source is read up to its ready position, and
    every transition from the earliest one a row at or after ``g``'s first holds is still
    needed: the one at that row, or the first of a later episode (they start in order).
    """
    bounds = _bounds(shape)
    if not bounds:
        return 0
    firsts = np.array([first for first, _ in bounds], np.int64)
    ready = _ready_at(episodes, shape, np.array([stop for _, stop in bounds], np.int64))
    held = firsts.copy()  # rows never written: their position is their row
    inside = firsts < episodes.written
    if inside.any():
        at = firsts[inside]
        slot = np.searchsorted(episodes.offsets, at, side="right") - 1
        own = episodes.firsts[slot] + (at - episodes.offsets[slot]) * episodes.envs
        later = np.append(episodes.firsts, episodes.written)[slot + 1]
        held[inside] = np.minimum(own, later)
    return int((ready - held).max())


def _windowed(
    tensors: dict[str, Any],
    stored: list[Column],
    shape: Shape,
    episodes: Episodes,
    book: tuple[Carry, float],
    read: tuple[CellsOf, int],
) -> Iterator[RowGroup]:
    """Row groups gathered from a ring of the latest ``span`` transitions read in time."""
    cells_of, span = read
    ring = {
        c.spec.name: np.empty((span, *c.spec.shape), np.dtype(tensors[c.spec.name].dtype))
        for c in stored
    }
    bounds = _bounds(shape)
    due = 0  # the next group to hand on
    for first, stop in shape.chunks:
        flat = positions(shape.start + first, stop - first, shape.cells)
        low = first % span
        cut = min(stop - first, span - low)  # the rest wraps to the ring's start
        for name, held in ring.items():
            rows = cells_of(tensors[name], flat)
            held[low : low + cut] = rows[:cut]
            held[: len(rows) - cut] = rows[cut:]
        ready = episodes.complete(stop) if stop < shape.count else shape.count
        while due < len(bounds) and bounds[due][1] <= ready:
            group_first, group_stop = bounds[due]
            columns, flat_cells = episodes.bookkeeping(
                group_first, group_stop, (shape.start, shape.cells), *book
            )
            slots = (flat_cells - shape.start) % max(shape.cells, 1) % span
            yield columns, flat_cells, {n: np.take(held, slots, axis=0) for n, held in ring.items()}
            due += 1


def _spooled(
    tensors: dict[str, Any],
    stored: list[Column],
    shape: Shape,
    episodes: Episodes,
    book: tuple[Carry, float],
    io: tuple[CellsOf, Callable[[dict[str, np.ndarray], int], np.ndarray], Path],
) -> Iterator[RowGroup]:
    """Row groups of a source read a chunk at a time, its rows put in a spool until due."""
    cells_of, _, target = io
    bounds = _bounds(shape)
    kinds = {c.spec.name: (np.dtype(tensors[c.spec.name].dtype), c.spec.shape) for c in stored}
    per_env = episodes.by_env(shape.start)
    with Spool(target, {c.spec.name: c.row_bytes for c in stored}) as spool:
        due = 0  # the next group to hand on
        for first, stop in shape.chunks:
            flat = positions(shape.start + first, stop - first, shape.cells)
            rows = {c.spec.name: cells_of(tensors[c.spec.name], flat) for c in stored}
            place = episodes.rows_at(first, stop, shape.start, per_env)
            spool.put(place, spool.records(rows))
            ready = episodes.complete(stop) if stop < shape.count else shape.count
            while due < len(bounds) and bounds[due][1] <= ready:
                yield _taken(spool, bounds[due], episodes, shape, book, kinds)
                spool.drop_before(bounds[due][1])
                due += 1


def _taken(
    spool: Spool,
    bound: tuple[int, int],
    episodes: Episodes,
    shape: Shape,
    book: tuple[Carry, float],
    kinds: dict[str, tuple[np.dtype[Any], tuple[int, ...]]],
) -> RowGroup:
    """Row group ``bound`` taken from the spool."""
    first, stop = bound
    columns, flat = episodes.bookkeeping(first, stop, (shape.start, shape.cells), *book)
    raw, values = spool.take(first, stop), {}
    for name, (kind, feature) in kinds.items():
        values[name] = raw[name].view(kind).reshape(stop - first, *feature)
    return columns, flat, values
