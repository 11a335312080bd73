"""What a report shows of each tensor, gathered in the summary's own pass (a ``PassWatcher``).

Memory stays bounded whatever the dataset's size:

* a leaf of a few numbers per step keeps, per dimension (its first ``MAX_DIMS``), the
  exact min and max and a uniform sample of ``SAMPLE_ROWS`` transitions (bottom-k of random
  keys: each transition is equally likely to be kept, in any chunking), from which the
  distributions are drawn; one of a single number per step also counts its values exactly
  while they are at most ``MAX_VALUES`` distinct (rewards of -1, 0 and 1; discrete actions);
* an image leaf keeps, from at most ``FRAMES_PER_CHUNK`` transitions of each chunk, the
  histogram of each channel's values (uint8 images, exactly over those) and their mean
  frame (at the shown resolution).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.report.leaves import Kind, ShownLeaf

if TYPE_CHECKING:
    from expcli.summary.chronology import Chunk
    from expcli.summary.episodes import Pieces

__all__ = ["FRAMES_PER_CHUNK", "MAX_DIMS", "MAX_VALUES", "SAMPLE_ROWS", "Profile", "Profiler"]

SAMPLE_ROWS = 4096
"""Transitions sampled per leaf of numbers, for its distributions."""
MAX_DIMS = 32
"""Dimensions of a leaf of numbers profiled (its first ones)."""
MAX_VALUES = 64
"""Distinct values of a one-number leaf counted exactly (more: the sample's histogram)."""
FRAMES_PER_CHUNK = 16
"""Transitions of each chunk that an image leaf's histogram and mean frame see."""


@dataclass
class Profile:
    """What the pass found of one leaf.

    Attributes:
        leaf: The leaf.
        seen: Transitions seen.
        low: Per profiled dimension, the smallest finite value (NaN: none).
        high: Per profiled dimension, the largest finite value.
        sample: A uniform sample of rows ``(k, dims)`` (float64), for a leaf of numbers.
        counts: Each value's count (over every transition), for a leaf of one number
            per step with at most ``MAX_VALUES`` distinct values; else None.
        pixels: Per channel, the count of each value 0..255 over the frames looked at
            (uint8 or bool images only).
        frame_sum: The sum of the frames looked at, as shown (float64), and their count.
    """

    leaf: ShownLeaf
    seen: int = 0
    low: np.ndarray = field(default_factory=lambda: np.zeros(0))
    high: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sample: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    counts: dict[float, int] | None = field(default_factory=dict)
    pixels: np.ndarray | None = None
    frame_sum: np.ndarray | None = None
    frames_summed: int = 0

    @property
    def mean_frame(self) -> np.ndarray | None:
        """The mean of the frames looked at, as shown; None when none were."""
        if self.frame_sum is None or self.frames_summed == 0:
            return None
        return np.asarray(self.frame_sum / self.frames_summed)


class Profiler:
    """Profiles the given leaves, chunk by chunk (``summary.pass_watch.PassWatcher``).

    Args:
        leaves: The leaves to profile.
        seed: Seeds the sample: the same dataset gives the same report.
    """

    def __init__(self, leaves: Sequence[ShownLeaf], *, seed: int = 0) -> None:
        self.profiles = {leaf.name: Profile(leaf) for leaf in leaves}
        self._rng = np.random.default_rng(seed)
        self._keys: dict[str, np.ndarray] = {}

    def update(self, chunk: Chunk, pieces: Pieces | None) -> None:
        """One chunk of the pass (its pieces are not needed)."""
        for name, profile in self.profiles.items():
            values = chunk.arrays.get(name)
            if values is None or values.shape[0] * values.shape[1] == 0:
                continue
            rows = values.reshape(-1, *values.shape[2:])
            profile.seen += len(rows)
            if profile.leaf.kind is Kind.IMAGE:
                _look_at_frames(profile, rows)
            elif profile.leaf.kind is Kind.NUMBERS:
                self._numbers(profile, rows)

    def result(self) -> Mapping[str, Profile]:
        """Each leaf's profile, by name."""
        return self.profiles

    def _numbers(self, profile: Profile, rows: np.ndarray) -> None:
        flat = rows.reshape(len(rows), -1)[:, :MAX_DIMS]
        wide = flat.astype(np.float64)
        with np.errstate(invalid="ignore"):
            finite = np.where(np.isfinite(wide), wide, np.nan)
            low, high = _nan_reduce(np.fmin, finite), _nan_reduce(np.fmax, finite)
        if profile.low.size == 0:
            profile.low, profile.high = low, high
        else:
            profile.low, profile.high = np.fmin(profile.low, low), np.fmax(profile.high, high)
        if profile.counts is not None and flat.shape[1] == 1:
            column = flat[:, 0]
            if column.dtype.kind == "f":
                column = column[np.isfinite(column)]  # NaN and inf: the tensor table counts them
            values, counts = np.unique(column, return_counts=True)
            for value, count in zip(values.tolist(), counts.tolist(), strict=True):
                profile.counts[value] = profile.counts.get(value, 0) + count
            if len(profile.counts) > MAX_VALUES:
                profile.counts = None
        elif flat.shape[1] != 1:
            profile.counts = None
        # Bottom-k of uniform keys: the kept rows are a uniform sample of all rows seen.
        keys = self._rng.random(len(wide))
        kept = self._keys.get(profile.leaf.name)
        if kept is not None:
            keys, wide = np.concatenate([kept, keys]), np.concatenate([profile.sample, wide])
        if len(keys) > SAMPLE_ROWS:
            keep = np.argpartition(keys, SAMPLE_ROWS)[:SAMPLE_ROWS]
            keys, wide = keys[keep], wide[keep]
        self._keys[profile.leaf.name], profile.sample = keys, wide


def _nan_reduce(op: Any, values: np.ndarray) -> np.ndarray:
    """``op`` (fmin or fmax) down the rows, NaN where a column has no number."""
    return np.asarray(op.reduce(values, axis=0))


def _look_at_frames(profile: Profile, rows: np.ndarray) -> None:
    view = profile.leaf.view
    if view is None:
        return
    every = max(1, -(-len(rows) // FRAMES_PER_CHUNK))
    frames = view.picture(rows[::every])
    if frames.dtype.kind in "bu" and frames.dtype.itemsize == 1:
        values = frames.astype(np.uint8, copy=False)
        per_channel = values.reshape(*values.shape[:3], -1)
        counts = np.stack(
            [
                np.bincount(per_channel[..., c].reshape(-1), minlength=256)
                for c in range(per_channel.shape[3])
            ]
        )
        profile.pixels = counts if profile.pixels is None else profile.pixels + counts
    total = frames.sum(axis=0, dtype=np.float64)
    profile.frame_sum = total if profile.frame_sum is None else profile.frame_sum + total
    profile.frames_summed += len(frames)
