"""An episode's strips under the player: observations of numbers, actions, rewards.

One SVG per episode, its panels stacked on one step axis: each leaf of numbers (an
observation leaf, an action leaf) in its own panel named after it, its first dimensions
as lines, then the rewards (summed over each span between shown steps, so a sparse reward
is never dropped) and the return so far. ``Strips.cursor`` says where the step axis
lies in the figure, so that the page can draw the player's cursor over it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from expcli.report._svg import COLORS, figure, svg_text
from expcli.report.leaves import Role
from expcli.report.player import Played

__all__ = ["Strips", "strips"]

_WIDTH, _LEFT, _RIGHT = 9.4, 1.7, 0.75  # inches: the figure, the names' margin, the legends'


@dataclass(frozen=True, slots=True)
class Strips:
    """An episode's strips.

    Attributes:
        svg: The figure.
        cursor: Where steps lie, in fractions of the figure: ``left`` and ``right`` (of
            the first and last step) from its left edge, ``top`` and ``bottom`` from its top.
    """

    svg: str
    cursor: dict[str, float]


def strips(played: Played, salt: str) -> Strips | None:
    """The strips of one episode; None when it has nothing to draw."""
    from matplotlib.ticker import MaxNLocator

    panels: list[tuple[str, np.ndarray, bool]] = [
        (s.leaf.name, s.values, s.leaf.discrete)
        for s in played.series
        if s.leaf.role is Role.OBSERVATION
    ] + [
        (s.leaf.name, s.values, s.leaf.discrete)
        for s in played.series
        if s.leaf.role is Role.ACTION
    ]
    if played.rewards is not None:
        panels.append(("reward", played.rewards[:, None], False))
        panels.append(("return so far", np.cumsum(played.rewards)[:, None], False))
    if not panels:
        return None
    steps = played.steps
    heights = [1.3 if values.shape[1] > 1 else 0.8 for _, values, _ in panels]
    height = sum(heights) + 0.55
    fig = figure(_WIDTH, height, laid_out=False)
    fig.subplots_adjust(
        left=_LEFT / _WIDTH,
        right=1 - _RIGHT / _WIDTH,
        top=1 - 0.1 / height,
        bottom=0.45 / height,
        hspace=0.12,
    )
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False, height_ratios=heights)[:, 0]
    for ax, (name, values, discrete) in zip(axes, panels, strict=True):
        if name == "reward":
            ax.plot(steps, values[:, 0], drawstyle="steps-mid", color=COLORS[2], lw=1)
        elif name == "return so far":
            ax.plot(steps, values[:, 0], color="#222222", lw=1.2)
        else:
            style = {"drawstyle": "steps-post"} if discrete else {}
            if discrete:
                ax.yaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
            for d in range(values.shape[1]):
                ax.plot(steps, values[:, d], lw=1, label=str(d), **style)
            if values.shape[1] > 1:
                ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=7)
        ax.set_ylabel(name, rotation=0, ha="right", va="center", fontsize=8)
    axes[-1].set_xlabel("step")
    last = max(1, int(steps[-1]) if len(steps) else 1)
    axes[-1].set_xlim(0, last)
    svg = svg_text(fig, salt)  # lays the figure out: the axes' places are final from here
    first_box, last_box = axes[0].get_position(), axes[-1].get_position()
    cursor = {
        "left": float(first_box.x0),
        "right": float(first_box.x1),
        "top": float(1 - first_box.y1),
        "bottom": float(1 - last_box.y0),
        "last": float(last),
    }
    return Strips(svg, cursor)
