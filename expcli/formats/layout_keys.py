"""The metadata keys the layout readers and writers set, and what a writer says it lost.

A leaf module: the keys every episode-wise layout reader sets (``SEAMS_KEY``,
``STARTS_CUT_KEY``), and what every layout writer says of what it cannot keep
(``warn_losses``, ``LOSSES_KEY``). Beside the row types, outside ``layouts``, so that
the registry and the summary name them without running ``layouts/__init__``; the layout
names, ``Layout``, are ``formats.rows``'.
"""

from __future__ import annotations

import warnings
from pathlib import Path

__all__ = ["LOSSES_KEY", "SEAMS_KEY", "STARTS_CUT_KEY", "warn_losses"]

SEAMS_KEY = "seams_marked_truncated"
"""Metadata key listing the rows a reader marked ``truncated`` between glued episodes."""

STARTS_CUT_KEY = "episode_starts_cut"
"""Metadata key (one env column) listing the rows that start an episode whose beginning an
edit (``expcli filter``, ``merge``, ``split``) left out: such an episode is incomplete."""


LOSSES_KEY = "lost_in_layout"
"""expcli metadata key listing what a write to a foreign layout could not keep."""


def warn_losses(path: Path, layout: str, losses: list[str], *, recorded: bool = True) -> None:
    """Say in one warning line what a layout written to ``path`` does not keep.

    ``recorded``: the file's metadata lists them too (``LOSSES_KEY``); where the layout keeps
    no metadata (skrl, tianshou), the line says that it is the only record.
    """
    if not losses:
        return
    where = "" if recorded else f" ({layout} files keep no metadata: this line is the only record)"
    warnings.warn(
        f"{path}: the {layout} layout does not keep {'; '.join(losses)}{where}",
        UserWarning,
        stacklevel=3,
    )
