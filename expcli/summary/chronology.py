"""Valid transitions in chronological order, read as chunks of rows (numpy only).

A circular memory keeps its oldest row where it writes next once it has wrapped (one row
further on for the env columns already written in the current row), and rows past the
write head are unwritten until it wraps. ``segments`` lists the stored rows in the order
they were written, each with the env columns that are valid in it; ``chunks`` reads them a
few megabytes at a time, so every statistic sees each valid transition exactly once and
never an unwritten one, whatever the size of the file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from expcli.spec import CircularState

__all__ = ["PASS_CHUNK_BYTES", "Chunk", "Segment", "chunks", "segments"]

PASS_CHUNK_BYTES = 8 << 20
"""About how many bytes of all tensors together one chunk of a chronological pass holds."""


@dataclass(frozen=True, slots=True)
class Segment:
    """Stored rows ``start..stop`` whose env columns ``first..last`` (exclusive) are valid."""

    start: int
    stop: int
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Chunk:
    """Rows ``start..stop`` of the named tensors, restricted to env columns ``first..last``.

    Attributes:
        arrays: Name to array shaped ``(stop - start, last - first, *feature)``.
    """

    start: int
    stop: int
    first: int
    last: int
    arrays: dict[str, np.ndarray]

    @property
    def columns(self) -> np.ndarray:
        """Indices of the env columns this chunk covers."""
        return np.arange(self.first, self.last)


def segments(state: CircularState, memory_size: int, num_envs: int) -> list[Segment]:
    """The valid stored rows of a memory in the order they were written, oldest first.

    Within a segment, transitions go row by row and, in a row, env column by env column:
    the order of skrl's flat view, starting at the oldest transition.
    """
    size, envs = memory_size, num_envs
    if size == 0 or envs == 0:
        return []
    m, e = state.memory_index, state.env_index
    if state.filled:
        parts = [(m, m + 1, e, envs), (m + 1, size, 0, envs), (0, m, 0, envs), (m, m + 1, 0, e)]
        if e == 0:
            parts = [(m, size, 0, envs), (0, m, 0, envs)]
    else:
        parts = [(0, m, 0, envs), (m, m + 1, 0, e)]
    return [Segment(*p) for p in parts if p[1] > p[0] and p[3] > p[2]]


def chunks(
    tensors: Mapping[str, Any],
    names: Iterable[str],
    parts: Iterable[Segment],
    chunk_bytes: int = PASS_CHUNK_BYTES,
) -> Iterator[Chunk]:
    """Read the named tensors segment by segment, a slice of rows at a time.

    Args:
        tensors: Name to array or ``LazyRows`` shaped ``(T, N, *feature)``.
        names: The tensors to read.
        parts: From ``segments``.
        chunk_bytes: About how many bytes of all the named tensors one chunk holds.
    """
    wanted = list(names)
    row_bytes = sum(
        math.prod(tensors[n].shape[1:]) * np.dtype(tensors[n].dtype).itemsize for n in wanted
    )
    step = max(1, chunk_bytes // max(1, row_bytes))
    for part in parts:
        whole_rows = part.first == 0 and part.last == _columns(tensors, wanted)
        for start in range(part.start, part.stop, step):
            stop = min(start + step, part.stop)
            arrays = {}
            for name in wanted:
                rows = np.asarray(tensors[name][start:stop])
                arrays[name] = rows if whole_rows else rows[:, part.first : part.last]
            yield Chunk(start, stop, part.first, part.last, arrays)


def _columns(tensors: Mapping[str, Any], names: list[str]) -> int:
    return int(tensors[names[0]].shape[1]) if names else 0
