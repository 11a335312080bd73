"""The statistics of ``meta/stats.json``: min, max, mean, std, count and LeRobot's quantiles.

LeRobot 0.4 (``lerobot.datasets.compute_stats``) computes each episode's statistics when it
saves the episode (``compute_episode_stats``) and folds them into the dataset's
(``aggregate_stats``): an episode's quantiles come from a histogram of 5,000 equal bins
between the episode's min and max (``RunningQuantileStats``, each value of a feature on its
own), interpolated inside the bin; the dataset's are the episodes' weighted by their counts.
Images are sampled (``sample_indices``: all frames of an episode up to 100, then about
``length ** 0.75``), halved in size past 300 pixels (``auto_downsample_height_width``),
taken per channel as bytes and divided by 255. ``QUANTILES`` normalisation (pi0.5) needs
``q01`` and ``q99``.

Here the same numbers come a slice of frames at a time, in bounded memory: a numeric
feature's histogram is binned between the episode's min and max, which the writer gives
before the first slice of an episode longer than one slice (``Quantiles.widen``); an image's
sampled bytes are counted per channel in 256 bins, from which the 5,000-bin histogram is
exact. Values that are not finite (NaN, inf) are left out of the quantiles; LeRobot's own
computation fails on them. Numeric features of more than ``QUANTILE_VALUES`` values a
frame get none. Min, max, mean and std are over every frame (images too), in
float64.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from expcli.formats.layouts.lerobot._features import Feature

__all__ = ["QUANTILES", "FeatureStats", "sampled_frames"]

QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
"""LeRobot's ``DEFAULT_QUANTILES`` under the keys it writes."""
BINS = 5000
"""``RunningQuantileStats``'s ``num_quantile_bins``."""
QUANTILE_VALUES = 256
"""Numeric features of more values a frame get no quantiles. LeRobot's histograms hold
``BINS`` float64 counts and ``BINS + 1`` edges a value: 20 MB an episode at 256 values,
330 MB for a flattened 4096-byte frame, binned with a ``np.histogram`` call a value a
slice. The features LeRobot normalises by quantiles (states, actions) are far narrower;
images have theirs per channel."""
_PAD = 1e-10  # LeRobot widens the histogram's range by this on each side


def sampled_frames(length: int) -> np.ndarray:
    """The frames of an episode whose images LeRobot's statistics read (``sample_indices``)."""
    count = max(min(length, 100), min(int(length**0.75), 10_000))
    return np.round(np.linspace(0, length - 1, count)).astype(np.int64)


def _downsampled(frames: np.ndarray) -> np.ndarray:
    """Frames ``(n, H, W, C)`` as ``auto_downsample_height_width`` shrinks them (past 300)."""
    height, width = frames.shape[1:3]
    if max(height, width) < 300:
        return frames
    factor = int(width / 150) if width > height else int(height / 150)
    return frames[:, ::factor, ::factor]


def _quantiles(hists: np.ndarray, edges: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``(len(QUANTILES), D)`` from histograms ``(D, BINS)``, as LeRobot interpolates them.

    ``RunningQuantileStats._compute_single_quantile``, there one column at a time.
    """
    cumsum = np.cumsum(hists, axis=1)
    rows = np.arange(len(hists))
    out = np.empty((len(QUANTILES), len(hists)))
    targets = np.array(list(QUANTILES.values()))[:, None] * counts[None, :]
    founds = np.stack([np.searchsorted(c, t) for c, t in zip(cumsum, targets.T, strict=True)], 1)
    for k, (target, found) in enumerate(zip(targets, founds, strict=True)):
        i = np.clip(found, 1, BINS - 1)
        before = cumsum[rows, i - 1]
        inside = cumsum[rows, i] - before
        low, high = edges[rows, i], edges[rows, i + 1]
        fraction = (target - before) / np.where(inside == 0, 1, inside)
        with np.errstate(all="ignore"):  # both sides of the choice are computed
            value = np.where(inside == 0, low, low + fraction * (high - low))
        value = np.where(found >= BINS, edges[:, -1], value)
        out[k] = np.where(found == 0, edges[:, 0], value)
    return out


class _Episode:
    """One episode's histograms of one feature (its values, one per column of ``D``)."""

    def __init__(self, image: bool, length: int) -> None:
        self.image = image
        self.frames = sampled_frames(length) if image else None
        self.seen = 0  # frames of the episode given so far
        self.samples = 0  # what LeRobot counts: frames (numeric) or sampled images
        self.low: np.ndarray | None = None
        self.high: np.ndarray | None = None
        self.hists: np.ndarray | None = None  # (D, BINS) counts
        self.edges: np.ndarray | None = None  # (D, BINS + 1)
        self.counts: np.ndarray | None = None  # images: (C, 256) bytes counted
        self.first: np.ndarray | None = None  # an episode of one frame: its values

    def widen(self, values: np.ndarray) -> None:
        """Take ``values`` ``(n, D)`` into the episode's range (before binning any)."""
        low, high = _finite_range(values)
        if self.low is None or self.high is None:
            self.low, self.high = low, high
        else:
            self.low, self.high = np.minimum(self.low, low), np.maximum(self.high, high)

    def add(self, rows: np.ndarray) -> None:
        """Bin the next frames of the episode."""
        first, self.seen = self.seen, self.seen + len(rows)
        if self.image:
            self._add_images(rows, first)
            return
        values = rows.reshape(len(rows), -1)
        if values.dtype == np.bool_:
            values = values.view(np.uint8)  # as np.histogram converts it
        self.samples += len(values)
        if self.first is None:
            self.first = values[0].astype(np.float64)
        if self.low is None:  # the episode is this slice: its range is the slice's
            self.widen(values)
        if self.edges is None or self.hists is None:
            assert self.low is not None and self.high is not None
            self.edges = _all_edges(self.low, self.high)
            self.hists = np.zeros((len(self.edges), BINS), np.int64)
        self.hists += _binned(values, self.edges)

    def _add_images(self, rows: np.ndarray, first: int) -> None:
        assert self.frames is not None
        picked = self.frames[(self.frames >= first) & (self.frames < first + len(rows))] - first
        if not len(picked):
            return
        frames = rows[picked]
        frames = frames[..., None] if frames.ndim == 3 else frames
        pixels = _downsampled(frames).reshape(-1, frames.shape[3])
        counts = np.stack(
            [np.bincount(pixels[:, c], minlength=256) for c in range(pixels.shape[1])]
        )
        self.counts = counts if self.counts is None else self.counts + counts
        self.samples += len(picked)

    def quantiles(self) -> np.ndarray | None:
        """``(len(QUANTILES), D)``, or None when the episode has nothing to count."""
        if self.image:
            return self._image_quantiles()
        if not self.samples or self.first is None:
            return None
        if self.samples < 2:  # LeRobot's _compute_basic_stats: the mean, here the one value
            return np.repeat(self.first[None], len(QUANTILES), axis=0)
        if self.hists is None or self.edges is None:
            return None
        return _quantiles(self.hists, self.edges, self.hists.sum(axis=1))

    def _image_quantiles(self) -> np.ndarray | None:
        if self.counts is None:
            return None
        levels = np.arange(256)
        hists, edges = [], []
        for counts in self.counts:
            present = counts > 0
            low, high = levels[present][[0, -1]]
            edges.append(np.linspace(low - _PAD, high + _PAD, BINS + 1))
            hists.append(np.histogram(levels[present], bins=edges[-1], weights=counts[present])[0])
        return _quantiles(np.stack(hists), np.stack(edges), self.counts.sum(axis=1)) / 255.0


def _binned(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``(D, BINS)`` counts of ``values`` ``(n, D)``, as ``np.histogram`` bins each column.

    Bin ``i`` holds ``edges[i] <= x < edges[i + 1]`` (the last ``<=``), values outside and
    NaN none: a first guess from the edges' span, moved a bin at a time until it holds.
    """
    columns = values.T
    rows = np.arange(len(edges))[:, None]
    first, last = edges[:, :1], edges[:, -1:]
    inside = (columns >= first) & (columns <= last)
    with np.errstate(all="ignore"):
        span = last.astype(np.float64) - first.astype(np.float64)
        guess = (columns.astype(np.float64) - first.astype(np.float64)) / span * BINS
    at = np.clip(np.nan_to_num(guess), 0, BINS - 1).astype(np.intp)
    while True:
        down = inside & (at > 0) & (columns < edges[rows, at])
        up = inside & (at < BINS - 1) & (columns >= edges[rows, np.minimum(at + 1, BINS)])
        if not (down.any() or up.any()):
            break
        at = at - down + up
    flat = (rows * BINS + at)[inside]
    return np.bincount(flat, minlength=len(edges) * BINS).reshape(len(edges), BINS)


def _all_edges(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``_edges`` of every column ``(D, BINS + 1)``, in one ``np.linspace`` where it can.

    One call over arrays computes each column as its own call would, unless a column's step
    is zero (``np.linspace`` then divides every column another way): those, and columns whose
    edges are not finite and in order, are done one at a time.
    """
    with np.errstate(all="ignore"):
        start, stop = low - _PAD, high + _PAD
        edges = np.linspace(start, stop, BINS + 1, axis=1)
    steps_zero = np.asarray(stop - start == 0)
    bad = ~np.isfinite(edges).all(axis=1) | (edges[:, 1:] < edges[:, :-1]).any(axis=1)
    if not (bad.any() or steps_zero.any()):
        return edges
    return np.stack([_edges(lo, hi) for lo, hi in zip(low, high, strict=True)])


def _edges(low: Any, high: Any) -> np.ndarray:
    """LeRobot's bin edges (in the values' own float type, as its arithmetic gives them).

    Where that type cannot hold them in order (float16's few digits, a float32 range near
    its limits) they are float64, where LeRobot's own computation fails.
    """
    with np.errstate(all="ignore"):
        edges = np.linspace(low - _PAD, high + _PAD, BINS + 1)
    if np.isfinite(edges).all() and not (edges[1:] < edges[:-1]).any():
        return edges
    with np.errstate(all="ignore"):
        edges = np.linspace(float(low) - _PAD, float(high) + _PAD, BINS + 1)
    if not np.isfinite(edges).all():  # a range wider than float64 holds: halved each side
        edges = 2 * np.linspace(float(low) / 2, float(high) / 2, BINS + 1)
    return edges


def _finite_range(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column, the min and max of the finite values (a column of none: 0 and 0)."""
    if values.dtype.kind != "f":
        return values.min(axis=0), values.max(axis=0)
    finite = np.isfinite(values)
    if finite.all():
        return values.min(axis=0), values.max(axis=0)
    low = np.where(finite, values, np.inf).min(axis=0)
    high = np.where(finite, values, -np.inf).max(axis=0)
    none = ~finite.any(axis=0)
    low[none], high[none] = 0, 0
    return low.astype(values.dtype), high.astype(values.dtype)


class FeatureStats:
    """Running min, max, mean, std, count and quantiles of one feature, as ``stats.json`` holds.

    Numeric features per value of the feature; images per channel, scaled to [0, 1] and
    shaped ``(C, 1, 1)``, as LeRobot's ``compute_episode_stats`` gives them. Frames come an
    episode at a time: ``start_episode``, optionally ``widen`` over all of its frames (needed
    when they come in more than one ``add``), ``add`` each slice, ``end_episode``.
    """

    def __init__(self, feature: Feature) -> None:
        self._image = feature.image or feature.video
        self._quantiled = self._image or math.prod(feature.spec.shape) <= QUANTILE_VALUES
        self._count = 0
        self._sum: np.ndarray | None = None
        self._squares: np.ndarray | None = None
        self._min: np.ndarray | None = None
        self._max: np.ndarray | None = None
        self._episode: _Episode | None = None
        self._quantiles: np.ndarray | None = None  # the episodes' so far, weighted
        self._samples = 0  # their weight: LeRobot's counts

    def start_episode(self, length: int) -> None:
        """Begin an episode of ``length`` frames."""
        self._episode = _Episode(self._image, length) if self._quantiled else None

    @property
    def ranged(self) -> bool:
        """Whether an episode's range must be known before its first ``add`` (``widen``)."""
        return self._quantiled and not self._image

    def widen(self, rows: np.ndarray) -> None:
        """Take frames of the current episode into the range its histograms span."""
        if self._episode is not None and not self._image and len(rows):
            values = rows.reshape(len(rows), -1)
            self._episode.widen(values.view(np.uint8) if values.dtype == np.bool_ else values)

    def add(self, rows: np.ndarray) -> None:
        """Count frames ``(n, *feature)``, the next ones of the current episode."""
        if not len(rows):
            return
        if self._episode is not None:
            self._episode.add(rows)
        with np.errstate(all="ignore"):  # inf and NaN are data too (signalling NaN payloads
            values = self._values(rows)  # flag "invalid" once widened): they end in the sums
            low, high = np.fmin.reduce(values, axis=0), np.fmax.reduce(values, axis=0)
            total, squares = values.sum(axis=0), np.square(values).sum(axis=0)
        if self._sum is None or self._squares is None or self._min is None or self._max is None:
            self._sum, self._squares, self._min, self._max = total, squares, low, high
        else:
            with np.errstate(all="ignore"):
                self._sum += total
                self._squares += squares
            self._min, self._max = np.fmin(self._min, low), np.fmax(self._max, high)
        self._count += len(rows)

    def end_episode(self) -> None:
        """Fold the current episode's quantiles into the dataset's, as ``aggregate_stats``."""
        episode, self._episode = self._episode, None
        found = None if episode is None else episode.quantiles()
        if episode is None or found is None:
            return
        weight = episode.samples
        if self._quantiles is None:
            self._quantiles, self._samples = found, weight
            return
        total = self._samples + weight
        with np.errstate(all="ignore"):  # float16 extremes overflow, as in LeRobot's
            self._quantiles = (self._quantiles * self._samples + found * weight) / total
        self._samples = total

    def to_json(self) -> dict[str, Any] | None:
        """The feature's entry in ``stats.json`` (None before any frame)."""
        if self._sum is None or self._squares is None or self._min is None or self._max is None:
            return None
        with np.errstate(all="ignore"):
            mean = self._sum / self._count
            std = np.sqrt(np.maximum(self._squares / self._count - np.square(mean), 0.0))
        out = {"min": self._min, "max": self._max, "mean": mean, "std": std}
        if self._quantiles is not None:
            out.update(zip(QUANTILES, self._quantiles, strict=True))
        shape = (-1, 1, 1) if self._image else (-1,)
        stats: dict[str, Any] = {
            k: np.nan_to_num(v).reshape(shape).tolist() for k, v in out.items()
        }
        stats["count"] = [self._count]
        return stats

    def _values(self, rows: np.ndarray) -> np.ndarray:
        if self._image:
            channels = rows.reshape(len(rows), -1, rows.shape[3] if rows.ndim == 4 else 1)
            return channels.reshape(-1, channels.shape[2]).astype(np.float64) / 255.0
        return rows.reshape(len(rows), -1).astype(np.float64)
