"""The row groups of a Parquet file written episode by episode, in file order.

Two passes over the source, both in time order: the first reads only the flags, to find
the episodes (``_parquet_episodes.find_episodes``); the second reads every column a chunk
of transitions at a time and puts each transition at its file row in a ``Spool``, which
hands a row group on as soon as every row before its end is there. A source held in
memory whole (numpy tensors, a folder's shard) needs no spool: each row group gathers its
cells from the tensors directly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from expcli.formats._parquet_columns import Carry, Column, positions
from expcli.formats._parquet_episodes import Episodes, find_episodes
from expcli.formats._parquet_spool import Spool

__all__ = ["RowGroup", "episode_groups"]

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
        yield columns, flat, {name: rows[flat] for name, rows in flat_of.items()}


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
            spool.put(
                place,
                {
                    name: np.ascontiguousarray(values).reshape(len(values), -1).view(np.uint8)
                    for name, values in rows.items()
                },
            )
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
    values = {}
    for name, (kind, feature) in kinds.items():
        raw = spool.take(name, first, stop)
        values[name] = raw.view(kind).reshape(stop - first, *feature)
    return columns, flat, values
