"""Do rows that start where the last episode ended do so by chance, or are they resets?

A vector env's next-step autoreset recorded as a transition gives a row that starts from
the final observation of the episode before it and shows no step (reward 0, no end). But
a real first step can look the same: a new Blackjack hand may be dealt exactly as the
last one ended, and the player may draw a card without going bust. So such rows fail the
check only when they are more frequent than chance makes them in the data itself.

Chance is measured on the data: how often the first observation of an episode equals the
final observation of another episode (any pair but the consecutive one). For continuous
observations that is never, and one such row fails; for Blackjack it is about 0.5 %.
Observations are counted by a 64-bit hash of their bytes, at most ``MAX_DISTINCT`` of each
kind, so memory stays bounded whatever the number of episodes.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["EpisodeStarts"]

MAX_DISTINCT = 1 << 16
"""Distinct first (and final) observations counted; more are left out of the estimate."""

SIGNIFICANCE = 1e-3
"""Rows fail when chance would give at least as many with a smaller probability."""


class EpisodeStarts:
    """First observations of episodes against final ones, across the data.

    Args:
        observations: Names of the observation tensors (leaves) of a row.
        next_observations: Their ``next_observations`` counterparts, in the same order.
    """

    def __init__(self, observations: Sequence[str], next_observations: Sequence[str]) -> None:
        self.observations = list(observations)
        self.next_observations = list(next_observations)
        self._firsts: Counter[int] = Counter()
        self._finals: Counter[int] = Counter()
        self._first_count = 0
        self._final_count = 0
        self.consecutive_same = 0  # first observations equal to the final one just before
        self.quiet = 0  # rows after an end that show no step

    def update(
        self,
        arrays: Mapping[str, np.ndarray],
        after_end: np.ndarray,
        done: np.ndarray,
        same: np.ndarray,
        no_step: np.ndarray,
    ) -> None:
        """Count one chunk.

        ``after_end`` marks episodes' first rows, ``done`` their last, ``same`` the rows whose
        observation equals the previous row's next observation, ``no_step`` the rows with reward 0
        and no end (all ``(rows, columns)``).
        """
        self.consecutive_same += int(np.count_nonzero(after_end & same))
        self.quiet += int(np.count_nonzero(after_end & no_step))
        self._first_count += self._count(arrays, self.observations, after_end, self._firsts)
        self._final_count += self._count(arrays, self.next_observations, done, self._finals)

    @staticmethod
    def _count(
        arrays: Mapping[str, np.ndarray], names: list[str], mask: np.ndarray, seen: Counter[int]
    ) -> int:
        rows = np.argwhere(mask)
        for i, j in rows.tolist():
            key = hash(tuple(arrays[name][i, j].tobytes() for name in names))
            if key in seen or len(seen) < MAX_DISTINCT:
                seen[key] += 1
        return len(rows)

    def chance(self) -> float:
        """The share of (first, final) pairs of different episodes that are equal."""
        equal = sum(n * self._finals[key] for key, n in self._firsts.items() if key in self._finals)
        pairs = self._first_count * self._final_count - self._first_count
        return max(equal - self.consecutive_same, 0) / pairs if pairs > 0 else 0.0

    def by_chance(self, count: int) -> bool:
        """Whether chance explains ``count`` rows without a step from the final observation.

        Chance explains them when they are no more than a Poisson tail above ``SIGNIFICANCE``
        allows.
        """
        return _poisson_tail(count, self.chance() * self.quiet) >= SIGNIFICANCE


def _poisson_tail(count: int, mean: float) -> float:
    """P(X >= count) for X ~ Poisson(mean)."""
    if count <= 0:
        return 1.0
    if mean <= 0:
        return 0.0
    below = sum(math.exp(k * math.log(mean) - mean - math.lgamma(k + 1)) for k in range(count))
    return max(0.0, 1.0 - below)
