"""The names of the layouts, and the metadata key every episode-wise layout reader sets.

A leaf module (it imports only ``errors``), so that the format table and the command line
name layouts without loading the layout modules. Also what every layout writer says of
what it cannot keep (``warn_losses``, ``LOSSES_KEY``).
"""

from __future__ import annotations

import warnings
from enum import StrEnum
from pathlib import Path

from expcli.errors import ConfigError

__all__ = ["LOSSES_KEY", "SEAMS_KEY", "STARTS_CUT_KEY", "Layout", "warn_losses"]

SEAMS_KEY = "seams_marked_truncated"
"""Metadata key listing the rows a reader marked ``truncated`` between glued episodes."""

STARTS_CUT_KEY = "episode_starts_cut"
"""Metadata key (one env column) listing the rows that start an episode whose beginning an
edit (``expcli filter``, ``merge``, ``split``) left out: such an episode is incomplete."""


class Layout(StrEnum):
    """A layout a dataset is written in: ``EXPCLI`` is expcli's own schema."""

    EXPCLI = "expcli"
    SKRL = "skrl"
    TIANSHOU = "tianshou"
    MINARI = "minari"
    D4RL = "d4rl"
    LEROBOT = "lerobot"

    @classmethod
    def parse(cls, name: str, *, foreign: bool = False, any_case: bool = False) -> Layout:
        """The layout spelled ``name`` (``any_case``: in any case).

        ``foreign``: one other than ``EXPCLI``.

        Raises:
            ConfigError: No such layout, naming the ones there are.
        """
        choices = [layout for layout in cls if not foreign or layout is not cls.EXPCLI]
        wanted = name.lower() if any_case else name
        for layout in choices:
            if wanted == layout.value:
                return layout
        raise ConfigError(f"unknown layout {name!r}; expected one of {', '.join(choices)}")


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
