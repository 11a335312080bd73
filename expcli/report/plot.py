"""``inspect --plot FILE``: one page of returns and lengths, the picture for a paper or a PR.

Four panels (two without rewards): the histogram of returns (``inspect --json``'s edges
and counts), the histogram of lengths, and both over the episodes in the order they ended
with a rolling mean. PNG, SVG or PDF by the file's suffix. A PNG also carries, in a text
chunk ``expcli``, the numbers it shows and where each panel lies in pixels, so that what
it draws can be checked against them.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli._version import __version__
from expcli.errors import ConfigError
from expcli.files.atomic import atomic_path
from expcli.report._svg import COLORS, figure, house_style
from expcli.report.charts import MAX_MARKS, histogram_bars, rolling_mean, thinned
from expcli.report.page import title_of
from expcli.summary.episodes import histogram
from expcli.summary.overview import Summary

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["DPI", "PLOT_SUFFIXES", "plot_suffix", "write_plot"]

PLOT_SUFFIXES = (".png", ".svg", ".pdf")
"""What ``--plot`` writes, by the file's suffix."""
DPI = 150
"""Pixels per inch of a PNG: 10 x 6.5 inches make 1500 x 975 pixels."""
_SIZE = (10.0, 6.5)


def write_plot(summary: Summary, target: str | os.PathLike[str]) -> Path:
    """Write the figure of ``summary``'s episodes to ``target`` (atomically).

    ``summary`` must carry its episode records (``summarize(..., episode_records=True)``).

    Raises:
        ConfigError: ``target``'s suffix is not one of ``PLOT_SUFFIXES``.
        OutputError: The file cannot be written.
    """
    path = Path(target)
    suffix = plot_suffix(path)
    with house_style():
        fig, numbers = _figure(summary)
    metadata: dict[str, Any] = {"Title": f"{title_of(summary)}: returns and lengths"}
    if suffix == ".png":
        metadata["Software"] = f"expcli {__version__}"
        metadata["expcli"] = json.dumps(numbers, allow_nan=False)
    elif suffix == ".svg":
        metadata["Date"] = None
    else:
        metadata["CreationDate"] = None
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=suffix[1:], dpi=DPI, metadata=metadata)
    return path


def plot_suffix(target: str | os.PathLike[str]) -> str:
    """The plot's format, from ``target``'s suffix (``.png``, ``.svg`` or ``.pdf``).

    Raises:
        ConfigError: Another suffix.
    """
    suffix = Path(target).suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise ConfigError(
            f"--plot {target}: the suffix says the format; use one of {', '.join(PLOT_SUFFIXES)}"
        )
    return suffix


def _figure(summary: Summary) -> tuple[Any, dict[str, Any]]:
    """The figure, and the numbers it shows with its panels' places (PNG pixels)."""
    fig = figure(*_SIZE)
    stats = summary.episodes
    records = None if stats is None else stats.records
    numbers: dict[str, Any] = {"complete": 0 if stats is None else stats.complete, "panels": {}}
    fig.suptitle(f"{title_of(summary)}: {numbers['complete']:,} complete episodes", fontsize=11)
    if stats is None or records is None or len(records) == 0:
        ax = fig.add_subplot()
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no complete episodes", ha="center", va="center", fontsize=14)
        return fig, numbers
    with_returns = math.isfinite(stats.returns.mean)
    lengths = records.lengths.astype(np.float64)
    panels: list[tuple[str, str, Any]] = []
    if with_returns:
        panels.append(("returns", "return", stats.histogram))
    panels.append(("lengths", "length (transitions)", histogram(lengths)))
    grid = fig.subplots(2, len(panels), squeeze=False)
    for column, (key, label, (edges, counts)) in enumerate(panels):
        ax = grid[0, column]
        color = COLORS[0] if key == "returns" else COLORS[1]
        histogram_bars(ax, edges, counts, color)
        ax.set_xlabel(label)
        ax.set_ylabel("episodes")
        ax.set_title(
            f"{label.split()[0]}s: "
            + _stats_line(stats.returns if key == "returns" else stats.lengths)
        )
        numbers["panels"][key] = {"edges": list(edges), "counts": list(counts), "color": color}
        values = records.returns if key == "returns" else lengths
        _over_order(grid[1, column], values, color, label.split()[0])
    fig.draw_without_rendering()  # the layout, so that the panels' places are final
    for column, (key, _, _) in enumerate(panels):
        numbers["panels"][key].update(_place(fig, grid[0, column]))
    return fig, numbers


def _over_order(ax: Axes, values: np.ndarray, color: str, label: str) -> None:
    shown = thinned(len(values), MAX_MARKS)
    ax.plot(shown, values[shown], ".", color=color, alpha=0.4, markersize=3)
    window = max(1, len(values) // 20)
    mean = rolling_mean(values, window)
    ax.plot(shown, mean[shown], "-", color="#222222", lw=1.3, label=f"rolling mean ({window})")
    ax.set_xlabel("episode (in the order they ended)")
    ax.set_ylabel(label)
    ax.legend(frameon=False, loc="best")


def _stats_line(dist: Any) -> str:
    return ", ".join(
        f"{name} {getattr(dist, name):.4g}" for name in ("mean", "std", "min", "median", "max")
    )


def _place(fig: Any, ax: Axes) -> dict[str, Any]:
    """Where a panel's axes lie in the PNG, top-left origin, and their data limits."""
    box = ax.get_window_extent()
    scale = DPI / fig.dpi
    height = fig.get_figheight() * DPI
    return {
        "box": [box.x0 * scale, height - box.y1 * scale, box.x1 * scale, height - box.y0 * scale],
        "xlim": list(ax.get_xlim()),
        "ylim": list(ax.get_ylim()),
    }
