"""The report's charts, as inline SVG: episodes, actions, observations, rewards, other tensors.

Every number drawn comes from the summary (``inspect --json``'s numbers: the histogram of
returns, the counts of endings, the per-column counts) or from the pass's profiles
(``profile``) and the episodes the statistics count (``CompleteEpisodes``); nothing is read
again. Each chart is bounded in size: at most ``MAX_MARKS`` points per series (more
episodes show as a band of min and max per bucket), at most ``MAX_BARS`` bars, at most
``profile.MAX_DIMS`` small panels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.report._frames import png_uri
from expcli.report._svg import COLORS, figure, svg_text
from expcli.report.leaves import Kind, ShownLeaf
from expcli.report.profile import Profile
from expcli.summary.episodes import CompleteEpisodes, EpisodeStats, histogram

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "MAX_BARS",
    "MAX_MARKS",
    "Chart",
    "endings_chart",
    "histogram_bars",
    "leaf_chart",
    "lengths_chart",
    "per_env_chart",
    "returns_chart",
    "rolling_mean",
    "thinned",
    "timeline_chart",
]

MAX_MARKS = 2000
"""Points of a series drawn at most."""
MAX_BARS = 64
"""Bars of a bar chart at most (more env columns: a histogram of them)."""
_BINS = 30
_PANELS_PER_ROW = 4


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart: ``key`` names it in the page (``chart-KEY``).

    ``picture``: an image shown beside it (a PNG data URI), such as an image leaf's mean frame;
    ``wide``: whether it takes the page's width.
    """

    key: str
    title: str
    svg: str
    note: str = ""
    picture: str = ""
    wide: bool = False


def returns_chart(stats: EpisodeStats) -> Chart | None:
    """The histogram of complete episodes' returns: ``inspect --json``'s edges and counts."""
    edges, counts = stats.histogram
    if not counts:
        return None
    fig = figure(4.6, 2.6)
    ax = fig.add_subplot()
    bars = histogram_bars(ax, edges, counts, COLORS[0])
    for i, bar in enumerate(bars):
        bar.set_gid(f"returns-bin-{i}")
    ax.set_xlabel("return")
    ax.set_ylabel("episodes")
    note = (
        f"{stats.complete:,} complete episodes in {len(counts)} bins (inspect --json's histogram)"
    )
    return _chart(fig, "returns", "Returns", note)


def lengths_chart(records: CompleteEpisodes) -> Chart | None:
    """The histogram of complete episodes' lengths."""
    if len(records) == 0:
        return None
    edges, counts = histogram(records.lengths.astype(np.float64))
    fig = figure(4.6, 2.6)
    ax = fig.add_subplot()
    histogram_bars(ax, edges, counts, COLORS[1])
    ax.set_xlabel("length (transitions)")
    ax.set_ylabel("episodes")
    return _chart(fig, "lengths", "Lengths")


def timeline_chart(records: CompleteEpisodes, with_returns: bool) -> Chart | None:
    """Returns and lengths over the episodes in the order they ended, with a rolling mean."""
    if len(records) == 0:
        return None
    panels = [("length", records.lengths.astype(np.float64), COLORS[1])]
    if with_returns:
        panels.insert(0, ("return", records.returns, COLORS[0]))
    window = max(1, len(records) // 20)
    fig = figure(9.4, 1.9 * len(panels) + 0.3)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (label, values, color) in zip(axes, panels, strict=True):
        number = np.arange(len(values))
        if len(values) <= MAX_MARKS:
            ax.plot(number, values, ".", color=color, alpha=0.45, markersize=3, label=label)
        else:  # a band of each bucket's min and max
            low, high, middle = _buckets(values, MAX_MARKS)
            ax.fill_between(middle, low, high, color=color, alpha=0.3, lw=0, label=f"{label} range")
        mean = rolling_mean(values, window)
        shown = thinned(len(mean), MAX_MARKS)
        ax.plot(shown, mean[shown], "-", color="#222222", lw=1.2, label=f"rolling mean ({window})")
        ax.set_ylabel(label)
        ax.legend(loc="best", frameon=False)
    axes[-1].set_xlabel("episode (in the order they ended)")
    _whole_numbers(axes[-1].xaxis)
    return _chart(fig, "timeline", "Over the episodes")


def endings_chart(stats: EpisodeStats) -> Chart:
    """Terminated, truncated and incomplete episodes: ``inspect --json``'s counts."""
    fig = figure(4.6, 1.7)
    ax = fig.add_subplot()
    labels = ["terminated", "truncated", "incomplete"]
    values = [stats.terminated, stats.truncated, stats.incomplete]
    bars = ax.barh(labels, values, color=[COLORS[2], COLORS[1], COLORS[7]])
    for bar, label in zip(bars, labels, strict=True):
        bar.set_gid(f"endings-{label}")
    ax.bar_label(bars, labels=[f"{v:,}" for v in values], padding=3, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("episodes")
    ax.margins(x=0.15)
    return _chart(fig, "endings", "How episodes ended")


def per_env_chart(stats: EpisodeStats) -> Chart | None:
    """Complete episodes and their mean return per env column (a histogram past ``MAX_BARS``)."""
    per_env = stats.per_env
    if len(per_env) < 2:
        return None
    complete = np.array([env.complete for env in per_env], dtype=np.float64)
    means = np.array([env.return_mean for env in per_env], dtype=np.float64)
    fig = figure(9.4, 2.3)
    left, right = fig.subplots(1, 2)
    if len(per_env) <= MAX_BARS:
        left.bar(np.arange(len(per_env)), complete, color=COLORS[0])
        right.bar(np.arange(len(per_env)), np.nan_to_num(means), color=COLORS[2])
        for ax in (left, right):
            ax.set_xlabel("env column")
            _whole_numbers(ax.xaxis)
        note = ""
    else:
        for ax, values, color in ((left, complete, COLORS[0]), (right, means, COLORS[2])):
            edges, counts = histogram(values)
            if counts:
                histogram_bars(ax, edges, counts, color)
            ax.set_ylabel("env columns")
        note = f"{len(per_env):,} env columns: histograms of their values"
    left.set_title("complete episodes")
    right.set_title("mean return")
    return _chart(fig, "per-env", "Per env column", note)


def leaf_chart(profile: Profile) -> Chart | None:
    """The distribution of one leaf: bars of its values, per-dimension histograms, or pixels."""
    leaf = profile.leaf
    if profile.seen == 0:
        return None
    if leaf.kind is Kind.IMAGE:
        return _image_chart(profile)
    if leaf.kind is not Kind.NUMBERS:
        return None
    if profile.counts is not None and (leaf.discrete or len(profile.counts) <= 16):
        return _counts_chart(profile)
    return _dims_chart(profile)


def _counts_chart(profile: Profile) -> Chart:
    leaf, counts = profile.leaf, profile.counts or {}
    values = sorted(counts)
    fig = figure(4.6, 2.4)
    ax = fig.add_subplot()
    labels = [_value(v) for v in values]
    bars = ax.bar(range(len(values)), [counts[v] for v in values], color=COLORS[0])
    for i, bar in enumerate(bars):
        bar.set_gid(f"{_key(leaf.name)}-value-{i}")
    ax.set_xticks(range(len(values)), labels, rotation=0 if len(values) <= 12 else 90)
    if len(values) <= 12:
        ax.bar_label(bars, labels=[f"{counts[v]:,}" for v in values], padding=2, fontsize=7)
        ax.margins(y=0.12)
    ax.set_xlabel("value")
    ax.set_ylabel("transitions")
    note = f"every transition counted ({profile.seen:,})"
    if leaf.bounds is not None:
        note += f"; space {leaf.bounds.text}"
    return _chart(fig, _key(leaf.name), leaf.name, note)


def _dims_chart(profile: Profile) -> Chart | None:
    leaf, sample = profile.leaf, profile.sample
    dims = sample.shape[1] if sample.ndim == 2 else 0
    if dims == 0 or len(sample) == 0:
        return None
    columns = min(_PANELS_PER_ROW, dims)
    rows = math.ceil(dims / columns)
    fig = figure(9.4, 1.6 * rows + 0.2)
    axes = np.atleast_1d(fig.subplots(rows, columns, squeeze=False)).reshape(-1)
    low_bounds, high_bounds = _bounds(leaf, dims)
    outside = 0
    for d, ax in enumerate(axes):
        if d >= dims:
            ax.set_axis_off()
            continue
        values = sample[:, d][np.isfinite(sample[:, d])]
        low, high = float(profile.low[d]), float(profile.high[d])
        if values.size and math.isfinite(low) and math.isfinite(high):
            span = high - low
            ax.hist(values, bins=_BINS, range=(low, high) if span > 0 else None, color=COLORS[0])
            _draw_bounds(ax, low, high, low_bounds[d], high_bounds[d])
        if low < low_bounds[d] or high > high_bounds[d]:
            outside += 1
            ax.set_title(f"{d}: outside the space", color=COLORS[3])
        else:
            ax.set_title(f"{d}: {_value(low)} .. {_value(high)}")
        ax.tick_params(labelleft=False, left=False)
    shown = f"first {dims} of {leaf.dims} dimensions; " if leaf.dims > dims else ""
    note = (
        f"{shown}histograms of a uniform sample of {len(sample):,} of {profile.seen:,} "
        "transitions between each dimension's exact min and max"
    )
    if leaf.bounds is not None:
        note += f"; space {leaf.bounds.text} (dashed where it falls near the data)"
    if outside:
        note += f"; {outside} dimension(s) hold values outside the space"
    return _chart(fig, _key(leaf.name), leaf.name, note)


def _image_chart(profile: Profile) -> Chart | None:
    leaf, pixels = profile.leaf, profile.pixels
    if pixels is None:
        return None
    fig = figure(4.6, 2.4)
    ax = fig.add_subplot()
    names = ["grey"] if len(pixels) == 1 else ["red", "green", "blue", "alpha"][: len(pixels)]
    colors = ["#555555"] if len(pixels) == 1 else [COLORS[3], COLORS[2], COLORS[0], COLORS[7]]
    for counts, name, color in zip(pixels, names, colors, strict=False):
        total = max(1, int(counts.sum()))
        ax.step(np.arange(256), counts / total, where="mid", color=color, lw=1, label=name)
    ax.set_yscale("log")
    ax.set_xlim(0, 255)
    ax.set_xlabel("pixel value")
    ax.set_ylabel("share of pixels")
    ax.legend(frameon=False)
    note = (
        f"pixel values of {profile.frames_summed:,} of {profile.seen:,} frames "
        "(a few from each chunk read), and their mean frame"
    )
    mean = profile.mean_frame
    picture = "" if mean is None else png_uri(np.clip(mean, 0, 255).round().astype(np.uint8))
    return _chart(fig, _key(leaf.name), leaf.name, note, picture)


def _chart(fig: Any, key: str, title: str, note: str = "", picture: str = "") -> Chart:
    """The chart of a figure: its SVG, salted with its key; wide when over 6 inches."""
    return Chart(key, title, svg_text(fig, key), note, picture, fig.get_figwidth() > 6)


def _whole_numbers(axis: Any) -> None:
    """Ticks at whole numbers only (episodes, env columns)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def histogram_bars(ax: Axes, edges: Sequence[float], counts: Sequence[int], color: str) -> Any:
    """A histogram's bars, each from its left edge to the next (a bin of no width: 1 wide)."""
    left = np.asarray(edges[:-1], dtype=np.float64)
    widths = np.diff(np.asarray(edges, dtype=np.float64))
    widths = np.where(widths > 0, widths, 1.0)
    bars = ax.bar(left, counts, width=widths, align="edge", color=color, edgecolor="white", lw=0.5)
    return bars


def _bounds(leaf: ShownLeaf, dims: int) -> tuple[np.ndarray, np.ndarray]:
    """The space's low and high bound of each of the first ``dims`` dimensions (±inf: none)."""
    if leaf.bounds is None:
        return np.full(dims, -np.inf), np.full(dims, np.inf)
    shape = leaf.bounds.shape
    low = np.broadcast_to(leaf.bounds.low, shape).reshape(-1)[:dims]
    high = np.broadcast_to(leaf.bounds.high, shape).reshape(-1)[:dims]
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)


def _draw_bounds(ax: Axes, low: float, high: float, lower: float, upper: float) -> None:
    """The space's bounds as dashed lines where they lie within a span of the data."""
    span = max(high - low, abs(high) * 1e-6, 1e-12)
    for bound in (lower, upper):
        if math.isfinite(bound) and low - span <= bound <= high + span:
            ax.axvline(bound, color=COLORS[3], ls="--", lw=1)


def _buckets(values: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Min, max and middle index of ``count`` equal buckets of ``values``."""
    edges = np.linspace(0, len(values), count + 1).astype(np.int64)
    starts = edges[:-1][np.diff(edges) > 0]
    finite = np.where(np.isfinite(values), values, np.nan)
    low = np.fmin.reduceat(finite, starts)
    high = np.fmax.reduceat(finite, starts)
    stops = np.append(starts[1:], len(values))
    return low, high, (starts + stops - 1) / 2


def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    """The mean of each value and the ``window - 1`` before it (fewer at the start)."""
    finite = np.where(np.isfinite(values), values, 0.0)
    total = np.concatenate([[0.0], np.cumsum(finite)])
    count = np.concatenate([[0], np.cumsum(np.isfinite(values))])
    stop = np.arange(1, len(values) + 1)
    start = np.maximum(0, stop - window)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((total[stop] - total[start]) / (count[stop] - count[start]))


def thinned(length: int, count: int) -> np.ndarray:
    """At most ``count`` indices of ``range(length)``, evenly spread, the last included."""
    if length <= count:
        return np.arange(length)
    return np.unique(np.linspace(0, length - 1, count).round().astype(np.int64))


def _value(value: float) -> str:
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def _key(name: str) -> str:
    """A tensor's name as a page id: ``observations/image`` -> ``observations-image``."""
    return "".join(c if c.isalnum() else "-" for c in name)
