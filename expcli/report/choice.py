"""Which episodes a report plays: the best, the worst, the median and a few at random.

They are picked among the complete episodes the statistics count (``CompleteEpisodes``, in
the order they ended: an episode's number is its place there, as in the report's charts),
by return, or by length in a dataset without rewards. An episode that is several of these
at once (a dataset of one episode) is played once, under all its names.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from expcli.summary.episodes import CompleteEpisodes

__all__ = ["RANDOM_EPISODES", "Chosen", "choose_episodes"]

RANDOM_EPISODES = 3
"""Episodes picked at random besides the best, the worst and the median."""


@dataclass(frozen=True, slots=True)
class Chosen:
    """An episode to play.

    Attributes:
        names: Why it was picked (``best``, ``worst``, ``median``, ``random``).
        number: Its place among the complete episodes in the order they ended (0 first).
        column: Its env column.
        rows: Its stored rows, oldest first.
        ret: Its return (rewards summed; 0 without rewards).
        terminated: Whether it ended with ``terminated`` (else ``truncated``).
    """

    names: tuple[str, ...]
    number: int
    column: int
    rows: np.ndarray
    ret: float
    terminated: bool

    @property
    def length(self) -> int:
        """Transitions of the episode."""
        return len(self.rows)


def choose_episodes(
    records: CompleteEpisodes,
    memory_size: int,
    *,
    by_return: bool,
    random: int = RANDOM_EPISODES,
    seed: int = 0,
) -> list[Chosen]:
    """The episodes to play: best, worst, median, then ``random`` others, seeded.

    ``records`` come in the order the episodes ended; ``by_return``: rank by return (else by
    length, for a dataset without rewards). Ties go to the episode that ended first.
    """
    if len(records) == 0:
        return []
    key = records.returns if by_return else records.lengths.astype(np.float64)
    key = np.where(np.isfinite(key), key, -np.inf)
    ranked = np.argsort(key, kind="stable")
    picks: dict[int, list[str]] = {}
    best = ranked[np.flatnonzero(key[ranked] == key[ranked[-1]])[0]]  # the first of the best
    for name, index in (
        ("best", best),
        ("worst", ranked[0]),
        ("median", ranked[(len(ranked) - 1) // 2]),
    ):
        picks.setdefault(int(index), []).append(name)
    others = np.setdiff1d(np.arange(len(records)), list(picks))
    drawn = np.random.default_rng(seed).permutation(others)[:random]
    for index in np.sort(drawn):
        picks.setdefault(int(index), []).append("random")
    out = []
    for index, names in picks.items():
        length, last = int(records.lengths[index]), int(records.last_rows[index])
        rows = (last - length + 1 + np.arange(length, dtype=np.int64)) % max(memory_size, 1)
        out.append(
            Chosen(
                names=tuple(names),
                number=index,
                column=int(records.columns[index]),
                rows=rows,
                ret=float(records.returns[index]),
                terminated=bool(records.terminated[index]),
            )
        )
    return out
