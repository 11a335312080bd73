"""The episodes of a random memory found the slow way, and the data a verb should write.

Built on ``tests.replay.episode_data``: every sample carries its write ``clock``, so an
env column's chronological order is its slots sorted by clock and an episode's end order
is the clock of its last sample; nothing here reads the circular state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from expcli import RandomMemory
from expcli.formats.dataset import Dataset
from tests.replay.episode_data import Reference


@dataclass(frozen=True)
class Episode:
    """One episode: its env column, flat indexes oldest first, and what filters read."""

    env: int
    cells: list[int]
    complete: bool
    returns: float
    terminated: bool
    truncated: bool


def episodes(memory: RandomMemory) -> list[Episode]:
    """The episodes in expcli's index order.

    Closed ones by the clock of their last sample, then the open ones in column order.
    """
    ref = Reference.of(memory)
    clock = memory.tensors["clock"].numpy().reshape(-1)
    found = []
    for env, start, _, length, returns, terminated, truncated, complete in ref.episodes():
        column = ref.columns[env]
        first = column.index(start)
        cells = column[first : first + length]
        found.append(Episode(env, cells, complete, returns, terminated, truncated))
    closed = sorted(
        (e for e in found if ref.done[e.cells[-1]]), key=lambda e: int(clock[e.cells[-1]])
    )
    still_open = [e for e in found if not ref.done[e.cells[-1]]]
    return closed + still_open


def rows_of(dataset: Dataset, chosen: list[Episode]) -> dict[str, np.ndarray]:
    """Each tensor's rows of the chosen episodes, one after the other: ``(rows, *feature)``."""
    out = {}
    for name, array in dataset.tensors.items():
        flat = np.asarray(array).reshape(-1, *array.shape[2:])
        cells = [c for e in chosen for c in e.cells]
        out[name] = flat[np.asarray(cells, dtype=np.int64)]
    return out
