"""A dataset to look at: an HTML report with charts and an episode player, and a plot.

``write_report(DATASET, html="report.html", plot="returns.png")`` reads the dataset once
through ``summarize`` (the numbers of ``inspect --json``, which the page shows and carries),
looking at every chunk on the way, then reads back the few episodes its player shows: the
best, the worst, the median and a few at random. The page is one file with everything
inline; its size is bounded (frames downsampled, episodes chosen, charts thinned) and so is
the memory it takes, whatever the dataset's size.

Charts are drawn with matplotlib (inline SVG) and frames encoded with Pillow (PNG, lossless),
both from the ``report`` extra: ``pip install "expcli[report]"``. Without them,
``write_report`` raises ``MissingDependencyError`` saying so. Importing this package loads
neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from expcli.report.build import HTML_SUFFIXES, PLOT_SUFFIXES, write_report

__all__ = ["HTML_SUFFIXES", "PLOT_SUFFIXES", "write_report"]


def __getattr__(name: str) -> object:
    """Import each public name from its module on first use."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from expcli.report import build

    return getattr(build, name)
