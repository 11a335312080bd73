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

Here the same numbers come a slice of frames at a time, in bounded memory, with no
5,000-bin array for most: an episode read in one slice waits for others of its feature, up
to ``BATCH_VALUES`` values, and they are sorted side by side; a quantile's bin is then
found for its one value, and the values before and in it counted in the sorted column
(``_sorted_quantiles``); the edges are computed where asked, as ``np.linspace`` gives
them (``_Edges``). An episode of several slices is binned into histograms between its
min and max, which the writer gives before its first slice (``FeatureStats.widen``); an
image's sampled bytes are counted per channel in 256 bins, from which the 5,000-bin
histogram is exact. Values that are not finite (NaN, inf) are left out of the quantiles;
LeRobot's own computation fails on them. Numeric features of more than ``QUANTILE_VALUES``
values a frame get none. Min, max, mean and std are over every frame (images too), in
float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
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
_TARGETS = np.array(list(QUANTILES.values()))
_WALK = 8  # bins a value's first guess is moved, one at a time, before its bin is searched
BATCH_VALUES = 1 << 20
"""Short episodes' values sorted together, padded to the longest of them, up to this many
(4 MB of float32, and a few such arrays while their quantiles are found;
``FeatureStats.end_episode``)."""


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


class _Edges:
    """An episode's bin edges of each of its ``D`` columns, computed where they are asked for.

    LeRobot makes a column's 5,001 edges with ``np.linspace(low - 1e-10, high + 1e-10,
    5001)``: edge ``k`` is ``k * step + start`` in the values' float type (``k / 5000 *
    delta + start`` where the step is zero), the last ``stop``. ``at`` computes those
    numbers for the bins asked, the same as the call would, without the 5,001 a column.
    Where a column's edges are not finite or not in order (float16's few digits, a range
    near its type's limits), every column's are made whole by ``_edges``, as before.
    """

    def __init__(self, low: np.ndarray, high: np.ndarray) -> None:
        none = low > high  # columns of no finite value (``_finite_range``): about 0
        if none.any():
            low, high = np.where(none, 0, low).astype(low.dtype), np.where(none, 0, high)
            high = high.astype(low.dtype)
        with np.errstate(all="ignore"):
            self.start, self.stop = np.asarray(low - _PAD), np.asarray(high + _PAD)
            kind = np.result_type(self.start, self.stop)
            self.delta = np.subtract(self.stop, self.start, dtype=kind.type)
            self.step = self.delta / BINS
        self._steps = np.arange(BINS + 1, dtype=kind)  # linspace's, in its type
        self._zero = self.step == 0
        self._range = (low, high)
        self._whole: np.ndarray | None = None
        before_last = self._computed(np.full(len(self.start), BINS - 1))  # edges rise with k
        finite = np.isfinite(self.start) & np.isfinite(self.stop) & np.isfinite(before_last)
        self.bad = ~(finite & (before_last <= self.stop))
        """Columns whose edges ``np.linspace`` cannot give finite and in order."""

    def at(self, k: np.ndarray, columns: np.ndarray | None = None) -> np.ndarray:
        """The edges ``k`` ``(..., D)`` (``0 <= k <= BINS``), column ``d`` of the last axis.

        ``columns``: the column of each of ``k``, of its shape, instead.
        """
        if self.bad.any():
            if self._whole is None:
                low, high = self._range
                self._whole = np.stack([_edges(lo, hi) for lo, hi in zip(low, high, strict=True)])
            where = np.arange(len(self._whole)) if columns is None else columns
            return np.asarray(self._whole[where, k])
        return self._computed(k, columns)

    def _computed(self, k: np.ndarray, columns: np.ndarray | None = None) -> np.ndarray:
        start, stop, step = self.start, self.stop, self.step
        if columns is not None:
            start, stop, step = start[columns], stop[columns], step[columns]
        steps = self._steps[k]
        with np.errstate(all="ignore"):
            edge = steps * step + start
            if self._zero.any():  # linspace's path for a zero step (gh-5437)
                zero, delta = self._zero, self.delta
                if columns is not None:
                    zero, delta = zero[columns], delta[columns]
                edge = np.where(zero, steps / BINS * delta + start, edge)
        return np.where(k == BINS, stop, edge)


def _quantiles(hists: np.ndarray, edges: _Edges) -> np.ndarray:
    """``(len(QUANTILES), D)`` from histograms ``(D, BINS)``, as LeRobot interpolates them.

    ``RunningQuantileStats._compute_single_quantile``, there one column at a time: the first
    bin whose cumulative count reaches the target, interpolated inside it.
    """
    cumsum = np.cumsum(hists, axis=1)
    counts = cumsum[:, -1]
    targets = _TARGETS[:, None] * counts[None, :]
    found = np.stack([np.searchsorted(c, t) for c, t in zip(cumsum, targets.T, strict=True)], 1)
    found = np.minimum(found, BINS - 1)  # never past the last bin: a target is at most the count
    rows = np.arange(len(hists))
    before = np.where(found > 0, cumsum[rows, np.maximum(found - 1, 0)], 0)
    return _interpolated(found, before, cumsum[rows, found] - before, targets, edges)


def _sorted_quantiles(ordered: np.ndarray, given: np.ndarray, edges: _Edges) -> np.ndarray:
    """``_quantiles`` of columns of values ``(C, n)``, sorted, no histogram made.

    ``given``: how many of each column's values are data (the rest, padding, sort after
    them). The first bin whose cumulative count reaches a target ``t`` holds the
    ``ceil(t)``-th value of those binned: that value's bin is found alone, and the values
    before and in it counted around it in the sorted column, not 5,000 bins a column.
    """
    rows = np.arange(len(ordered))
    first, last = edges.at(np.zeros_like(rows)), edges.at(np.full_like(rows, BINS))
    start, stop = np.zeros_like(rows), given
    if not (ordered[:, 0] >= first).all():  # -inf, or NaN and padding alone: left out
        start = _search(ordered, rows, first, start, stop, "left")
    if not (ordered[rows, given - 1] <= last).all():  # inf, or NaN and padding
        stop = _search(ordered, rows, last, start, stop, "right")
    targets = _TARGETS[:, None] * (stop - start)[None, :]
    rank = np.ceil(targets).astype(np.intp)  # 1-based; 0 only for a column of no value
    at = np.clip(start + rank - 1, 0, ordered.shape[1] - 1)  # (Q, C): the value's place
    found = np.where(rank > 0, _binned(ordered[rows, at], edges), 0).astype(np.intp)
    rows, start, stop = (np.broadcast_to(a, at.shape) for a in (rows, start, stop))
    low, high = edges.at(found), edges.at(found + 1)
    before = _search(ordered, rows, low, start, at, "left")  # below the bin: before ``at``
    after = _search(ordered, rows, high, at + 1, stop, "left")  # in it: from ``at`` on
    after = np.where(found == BINS - 1, stop, after)  # the last bin holds its upper edge
    return _interpolated(found, before - start, after - before, targets, edges)


def _search(
    ordered: np.ndarray,
    rows: np.ndarray,
    edge: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    side: str,
) -> np.ndarray:
    """In row ``rows`` of ``ordered`` between ``low`` and ``high``, where ``edge`` would go.

    ``np.searchsorted`` of many rows at once (``side="left"``: after the values below
    ``edge``; ``"right"``: or equal). Most are answered by the values at the two ends (a
    bin holds one value, mostly); the rest are halved, ``log2(n)`` steps.
    """

    def below(where: np.ndarray, at: np.ndarray, bound: np.ndarray) -> np.ndarray:
        value = ordered[where, np.clip(at, 0, ordered.shape[1] - 1)]
        return np.asarray(value < bound if side == "left" else value <= bound)

    some = low < high
    first, last = below(rows, low, edge), below(rows, high - 1, edge)
    found = np.where(some & first, high, low)  # none below: low; all below: high
    inner = some & first & ~last
    if inner.any():
        down, up = low[inner] + 1, high[inner] - 1  # the answer is in [down, up]
        where, bound = rows[inner], edge[inner]
        while (going := down < up).any():
            middle = (down + up) // 2
            ahead = going & below(where, middle, bound)
            down, up = np.where(ahead, middle + 1, down), np.where(going & ~ahead, middle, up)
        found[inner] = down
    return found


def _interpolated(
    found: np.ndarray,
    before: np.ndarray,
    inside: np.ndarray,
    targets: np.ndarray,
    edges: _Edges,
) -> np.ndarray:
    """The quantiles ``(len(QUANTILES), D)`` inside their bins ``found``, as LeRobot's rule.

    ``before``, ``inside``: the values before and in each bin; ``targets``: the counts the
    quantiles reach. Bin 0 is its lower edge, an empty bin its lower edge, else the edges
    interpolated (in the edges' own type, widened to float64 by the fraction, as LeRobot's).
    """
    low, high = edges.at(found), edges.at(found + 1)
    fraction = (targets - before) / np.where(inside == 0, 1, inside)
    with np.errstate(all="ignore"):  # both sides of the choice are computed
        value = np.where(inside == 0, low, low + fraction * (high - low))
    return np.where(found == 0, edges.at(np.zeros_like(found)), value).astype(np.float64)


class _Episode:
    """One episode's histograms of one feature (its values, one per column of ``D``)."""

    def __init__(self, image: bool, length: int) -> None:
        self.image = image
        self.length = length
        self.frames = sampled_frames(length) if image else None
        self.seen = 0  # frames of the episode given so far
        self.samples = 0  # what LeRobot counts: frames (numeric) or sampled images
        self.low: np.ndarray | None = None
        self.high: np.ndarray | None = None
        self.hists: np.ndarray | None = None  # (D, BINS) counts: an episode of slices
        self.edges: _Edges | None = None
        self.counts: np.ndarray | None = None  # images: (C, 256) bytes counted
        self.first: np.ndarray | None = None  # an episode of one frame: its values
        self.values: np.ndarray | None = None  # a short one in one slice: binned later

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
        if self.low is None and 2 <= len(values) == self.length:
            self.values = values.copy()  # with other episodes' (_episodes_quantiles)
            return
        if self.low is None:  # the episode is this slice: its range is the slice's
            self.widen(values)
        if self.edges is None:
            assert self.low is not None and self.high is not None
            self.edges = _Edges(self.low, self.high)
        self.hists = _counted(_binned(values, self.edges), self.hists)

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
        if self.values is not None:
            return np.asarray(_episodes_quantiles([self.values])[0])
        if self.edges is None or self.hists is None:
            return None
        return _quantiles(self.hists, self.edges)

    def _image_quantiles(self) -> np.ndarray | None:
        if self.counts is None:
            return None
        levels = np.arange(256)
        present = self.counts > 0
        lows = np.array([levels[p][0] for p in present])
        highs = np.array([levels[p][-1] for p in present])
        edges = _Edges(lows, highs)
        bins = _binned(np.broadcast_to(levels[:, None], (256, len(lows))), edges)
        hists = np.zeros((len(lows), BINS))  # float, as np.histogram's weighted counts
        for c, (at, counts) in enumerate(zip(bins.T, self.counts, strict=True)):
            np.add.at(hists[c], at[present[c]], counts[present[c]])
        return _quantiles(hists, edges) / 255.0


def _episodes_quantiles(episodes: list[np.ndarray]) -> np.ndarray:
    """``(E, len(QUANTILES), D)``: each episode's quantiles (``(n, D)`` values, whole).

    The episodes' columns side by side, each padded to the longest episode with a value
    that sorts last, sorted at once (``_sorted_quantiles``): each column's edges are its
    episode's, so the numbers are those each episode would have alone. Where some column's
    edges fall back to ``_edges``, each episode is done alone, as its edges then are.
    """
    columns = episodes[0].shape[1]
    kind = episodes[0].dtype
    last = np.nan if kind.kind == "f" else np.iinfo(kind).max  # NaN sorts after inf
    ordered = np.full((len(episodes) * columns, max(len(v) for v in episodes)), last, kind)
    for i, v in enumerate(episodes):
        ordered[i * columns : (i + 1) * columns, : len(v)] = v.T
    ordered.sort(axis=1)
    given = np.repeat([len(v) for v in episodes], columns)
    low, high = ordered[:, 0], ordered[np.arange(len(ordered)), given - 1]
    if kind.kind == "f" and not (np.isfinite(low) & np.isfinite(high)).all():
        ranges = [_finite_range(v) for v in episodes]  # inf or NaN at an end: left out
        low, high = np.concatenate([r[0] for r in ranges]), np.concatenate([r[1] for r in ranges])
    edges = _Edges(low, high)
    if edges.bad.any() and len(episodes) > 1:
        return np.concatenate([_episodes_quantiles([v]) for v in episodes])
    found = _sorted_quantiles(ordered, given, edges)
    return found.reshape(len(QUANTILES), len(episodes), columns).transpose(1, 0, 2)


def _binned(values: np.ndarray, edges: _Edges, given: np.ndarray | None = None) -> np.ndarray:
    """The bin ``(n, D)`` of each of ``values`` ``(n, D)``, as ``np.histogram`` bins a column.

    Bin ``i`` holds ``edges[i] <= x < edges[i + 1]`` (the last ``<=``); values outside, NaN
    and those ``given`` marks false are left out (``BINS``): a first guess from the edges'
    span, moved a bin at a time until it holds.
    """
    first, last = (
        edges.at(np.zeros(values.shape[1], np.intp)),
        edges.at(np.full(values.shape[1], BINS)),
    )
    inside = (values >= first) & (values <= last)
    if given is not None:
        inside &= given
    with np.errstate(all="ignore"):
        span = last.astype(np.float64) - first.astype(np.float64)
        guess = (values.astype(np.float64) - first.astype(np.float64)) / span * BINS
    at = np.clip(np.nan_to_num(guess), 0, BINS - 1).astype(np.intp)
    down = inside & (at > 0) & (values < edges.at(at))
    up = inside & (at < BINS - 1) & (values >= edges.at(at + 1))
    at += up.view(np.int8) - down.view(np.int8)
    rows, columns = np.nonzero(down | up)  # the values moved: looked at again, alone
    for _ in range(_WALK):
        if not len(rows):
            return np.where(inside, at, BINS).astype(np.int16)
        k, x = at[rows, columns], values[rows, columns]
        down = (k > 0) & (x < edges.at(k, columns))
        up = (k < BINS - 1) & (x >= edges.at(k + 1, columns))
        at[rows, columns] = k + up.view(np.int8) - down.view(np.int8)
        rows, columns = rows[down | up], columns[down | up]
    # columns the guess missed by more (edges of a zero step, all one number): searched
    for d in np.flatnonzero(np.bincount(columns)):  # (np.unique imports numpy.ma)
        whole = edges.at(np.arange(BINS + 1), np.full(BINS + 1, d))
        found = np.searchsorted(whole, values[:, d], side="right") - 1
        at[:, d] = np.minimum(found, BINS - 1)  # the last bin holds its upper edge
    return np.where(inside, at, BINS).astype(np.int16)


def _counted(bins: np.ndarray, hists: np.ndarray | None) -> np.ndarray:
    """Histograms ``(D, BINS)``: ``hists`` (or none) with the values binned ``(n, D)`` added."""
    columns = bins.shape[1]
    total = np.zeros((columns, BINS), np.int64) if hists is None else hists
    flat = (np.arange(columns) * BINS + bins)[bins < BINS]
    return total + np.bincount(flat, minlength=columns * BINS).reshape(columns, BINS)


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
    """Per column, the min and max of the finite values (a column of none: inf and -inf).

    A column of no finite value among all of an episode's stays so; ``_Edges`` spans 0 then.
    """
    if values.dtype.kind != "f":
        return values.min(axis=0), values.max(axis=0)
    finite = np.isfinite(values)
    if finite.all():
        return values.min(axis=0), values.max(axis=0)
    low = np.where(finite, values, np.inf).min(axis=0)
    high = np.where(finite, values, -np.inf).max(axis=0)
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
        self._pending: list[np.ndarray] = []  # short episodes' values, not yet binned
        self._longest = 0  # rows of the longest of them

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
        """Fold the current episode's quantiles into the dataset's, as ``aggregate_stats``.

        A short episode given in one slice waits for others, up to ``BATCH_VALUES`` values,
        to be binned with them; the episodes are folded in their order all the same.
        """
        episode, self._episode = self._episode, None
        if episode is None:
            return
        if episode.values is not None:
            self._pending.append(episode.values)
            self._longest = max(self._longest, len(episode.values))
            if len(self._pending) * self._longest * episode.values.shape[1] >= BATCH_VALUES:
                self._flush()
            return
        self._flush()
        found = episode.quantiles()
        if found is not None:
            self._fold([found], [episode.samples])

    def _flush(self) -> None:
        """Fold the waiting episodes' quantiles, in order."""
        if self._pending:
            self._fold(_episodes_quantiles(self._pending), [len(v) for v in self._pending])
            self._pending, self._longest = [], 0

    def _fold(self, episodes: Sequence[np.ndarray] | np.ndarray, weights: Sequence[int]) -> None:
        """Fold episodes' quantiles, of ``weights`` samples, one at a time into those so far."""
        with np.errstate(all="ignore"):  # float16 extremes overflow, as in LeRobot's
            for found, weight in zip(episodes, weights, strict=True):
                if self._quantiles is None:
                    self._quantiles, self._samples = found, weight
                    continue
                total = self._samples + weight
                self._quantiles = (self._quantiles * self._samples + found * weight) / total
                self._samples = total

    def to_json(self) -> dict[str, Any] | None:
        """The feature's entry in ``stats.json`` (None before any frame)."""
        self._flush()
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
