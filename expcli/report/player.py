"""The episode player's data: the chosen episodes read back from the dataset, bounded.

A second, short read after the summary's pass: only the cells of the chosen episodes
(``formats.row_gather.gather_flat``: a file's blocks or rows that hold them), a group
at a time. Each episode gets

* the frames of each image leaf (``_frames``: PNG, within its share of ``FRAME_BUDGET``);
* the values of each leaf of numbers (observations, actions) at ``MAX_POINTS`` steps at
  most, evenly spread, their first ``MAX_LINES`` dimensions;
* the rewards of every step, summed over those steps' spans (a reward between two shown
  steps is never lost), and a text leaf's string at each shown step.

Whatever the dataset's size, the player holds at most ``FRAME_BUDGET`` characters of
frames, and its reads hold a group of cells at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from expcli.formats.row_gather import gather_flat
from expcli.report._frames import EpisodeFrames, encode_frames
from expcli.report.choice import Chosen
from expcli.report.leaves import Kind, Role, ShownLeaf
from expcli.space_json import decode_text

__all__ = [
    "FRAME_BUDGET",
    "MAX_FRAMES",
    "MAX_LINES",
    "MAX_POINTS",
    "Played",
    "Series",
    "play",
]

FRAME_BUDGET = 16_000_000
"""Characters of frame images (base64 PNG) in a report, all episodes together."""
MAX_FRAMES = 500
"""Frames of one episode at most (a longer one shows every k-th)."""
MAX_POINTS = 1000
"""Steps of an episode whose values its line plots show at most."""
MAX_LINES = 8
"""Dimensions of a leaf of numbers drawn as lines (its first ones)."""
_GROUP_BYTES = 16 << 20
_REWARD_GROUP = 1 << 20


@dataclass(frozen=True, slots=True)
class Series:
    """A leaf's values over an episode, at the shown steps.

    Attributes:
        leaf: The leaf.
        values: ``(steps, dims)`` float64: its first ``MAX_LINES`` dimensions.
    """

    leaf: ShownLeaf
    values: np.ndarray


@dataclass(frozen=True, slots=True)
class Played:
    """One chosen episode, as the player shows it.

    Attributes:
        chosen: Which episode, and why.
        steps: The shown steps (within the episode) of the line plots and strips.
        rewards: Rewards summed from each shown step to the next (the last: to the end).
        series: Observations and actions of numbers, leaf by leaf.
        texts: Each text leaf's string at the shown steps.
        frames: Each image leaf's frames.
    """

    chosen: Chosen
    steps: np.ndarray
    rewards: np.ndarray | None
    series: tuple[Series, ...]
    texts: Mapping[str, tuple[str, ...]]
    frames: Mapping[str, EpisodeFrames]


def play(
    tensors: Mapping[str, Any],
    num_envs: int,
    chosen: Sequence[Chosen],
    leaves: Sequence[ShownLeaf],
    *,
    ranges: Mapping[str, tuple[float, float]],
    progress: Callable[[float], None] | None = None,
) -> list[Played]:
    """Read the chosen episodes' data from ``tensors`` (arrays or lazy tensors).

    Args:
        tensors: The dataset's tensors, ``(T, N, *feature)``.
        num_envs: ``N``.
        chosen: The episodes.
        leaves: The dataset's leaves (``leaves.leaves``).
        ranges: Each leaf's (min, max) over the dataset: how images that are not uint8
            become bytes.
        progress: Called with the fraction of episodes read so far.
    """
    images = [leaf for leaf in leaves if leaf.kind is Kind.IMAGE and leaf.role is Role.OBSERVATION]
    shares = max(1, len(chosen) * len(images))
    out = []
    for done, episode in enumerate(chosen):
        cells = episode.rows * num_envs + episode.column
        steps = _shown_steps(episode.length)
        series, texts, frames = [], {}, {}
        for leaf in leaves:
            if leaf.role not in (Role.OBSERVATION, Role.ACTION):
                continue
            tensor = tensors[leaf.name]
            if leaf.kind is Kind.IMAGE and leaf.role is Role.OBSERVATION:
                frames[leaf.name] = _frames(
                    tensor, cells, num_envs, leaf, FRAME_BUDGET // shares, ranges.get(leaf.name)
                )
            elif leaf.kind is Kind.TEXT:
                codes = _gather(tensor, cells[steps], num_envs)
                texts[leaf.name] = tuple(str(s) for s in decode_text(codes.reshape(len(steps), -1)))
            elif leaf.kind is Kind.NUMBERS:
                values = _gather(tensor, cells[steps], num_envs).reshape(len(steps), -1)
                series.append(Series(leaf, values[:, :MAX_LINES].astype(np.float64)))
        rewards = None
        if "rewards" in tensors:
            rewards = _reward_sums(tensors["rewards"], cells, num_envs, steps)
        out.append(Played(episode, steps, rewards, tuple(series), texts, frames))
        if progress is not None:
            progress((done + 1) / len(chosen))
    return out


def _shown_steps(length: int) -> np.ndarray:
    if length <= MAX_POINTS:
        return np.arange(length, dtype=np.int64)
    return np.unique(np.linspace(0, length - 1, MAX_POINTS).round().astype(np.int64))


def _gather(tensor: Any, cells: np.ndarray, num_envs: int) -> np.ndarray:
    """The cells of a tensor, a group of at most ``_GROUP_BYTES`` read at a time."""
    feature = tuple(tensor.shape[2:])
    cell_bytes = max(1, int(np.prod(feature, dtype=np.int64)) * np.dtype(tensor.dtype).itemsize)
    group = max(1, _GROUP_BYTES // cell_bytes)
    if len(cells) <= group:
        return np.asarray(gather_flat(tensor, cells, num_envs))
    parts = [
        gather_flat(tensor, cells[i : i + group], num_envs) for i in range(0, len(cells), group)
    ]
    return np.concatenate(parts)


def _reward_sums(tensor: Any, cells: np.ndarray, num_envs: int, steps: np.ndarray) -> np.ndarray:
    """Rewards summed (float64) over each span from a shown step to the next."""
    sums = np.zeros(len(steps), dtype=np.float64)
    for start in range(0, len(cells), _REWARD_GROUP):
        part = gather_flat(tensor, cells[start : start + _REWARD_GROUP], num_envs)
        rewards = np.asarray(part, dtype=np.float64).reshape(len(part), -1).sum(axis=1)
        span = np.searchsorted(steps, np.arange(start, start + len(part)), side="right") - 1
        sums += np.bincount(span, weights=rewards, minlength=len(steps))
    return sums


def _frames(
    tensor: Any,
    cells: np.ndarray,
    num_envs: int,
    leaf: ShownLeaf,
    budget: int,
    value_range: tuple[float, float] | None,
) -> EpisodeFrames:
    view = leaf.view
    assert view is not None  # an image leaf

    def read(steps: np.ndarray) -> np.ndarray:
        return view.picture(np.asarray(gather_flat(tensor, cells[steps], num_envs)))

    return encode_frames(
        read,
        len(cells),
        budget=budget,
        max_frames=MAX_FRAMES,
        to_bytes=lambda pictures: as_bytes(pictures, value_range),
    )


def as_bytes(pictures: np.ndarray, value_range: tuple[float, float] | None) -> np.ndarray:
    """Pictures as uint8: uint8 as they are, booleans as 0 and 255, others scaled.

    Numbers other than bytes map ``value_range`` (the leaf's min and max) onto 0..255.
    """
    if pictures.dtype == np.uint8:
        return pictures
    if pictures.dtype.kind == "b":
        return pictures.astype(np.uint8) * np.uint8(255)
    low, high = value_range if value_range is not None else (0.0, 255.0)
    span = high - low if np.isfinite(high - low) and high > low else 1.0
    with np.errstate(invalid="ignore"):
        scaled = (np.asarray(pictures, dtype=np.float64) - low) * (255.0 / span)
    return np.clip(np.nan_to_num(scaled), 0, 255).round().astype(np.uint8)
