"""matplotlib figures as SVG text to put inside a page, and the house style of the charts.

Figures are made as ``matplotlib.figure.Figure`` objects, never through pyplot: no global
state, no GUI backend. Text stays text (``svg.fonttype: none``: the browser's own sans-serif,
no font embedded, no font fetched), the ids of each figure carry its own salt (several
figures share one page, and their clip paths must not collide), and no date is written,
so the same dataset gives the same page.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from expcli.errors import MissingDependencyError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["COLORS", "STYLE", "figure", "house_style", "require", "svg_text"]

COLORS = ("#3b6fb6", "#d9822b", "#3c9d5d", "#c23b3b", "#7b5ea7", "#8c6d46", "#d36fae", "#6f7782")
"""Series colours, in order."""

STYLE: dict[str, Any] = {
    "svg.fonttype": "none",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial", "sans-serif"],
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 8.5,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 100,
}
"""rc parameters of every chart (and the series colours, ``COLORS``)."""


def require() -> None:
    """Import matplotlib and Pillow, or say in one line which ``pip install`` brings them.

    Raises:
        MissingDependencyError: One of them is not installed.
    """
    for module, name in (("matplotlib", "matplotlib"), ("PIL", "Pillow")):
        try:
            __import__(module)
        except ImportError as e:
            raise MissingDependencyError(
                name, "report", "the report and the plot of inspect (--html, --plot)"
            ) from e


def figure(width: float, height: float, *, laid_out: bool = True) -> Figure:
    """A blank figure of ``width`` x ``height`` inches.

    Laid out by matplotlib's constrained layout unless ``laid_out`` is false (the caller
    places the axes: quicker, for figures drawn once per episode).
    """
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained" if laid_out else None)


def svg_text(fig: Figure, salt: str) -> str:
    """The figure as an ``<svg>`` element (no XML declaration), its ids salted with ``salt``."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


@contextlib.contextmanager
def house_style() -> Iterator[None]:
    """Matplotlib's settings while charts are made: ``STYLE`` and ``COLORS``."""
    import matplotlib
    from cycler import cycler

    settings: Any = {**STYLE, "axes.prop_cycle": cycler(color=list(COLORS))}
    with matplotlib.rc_context(settings):
        yield
