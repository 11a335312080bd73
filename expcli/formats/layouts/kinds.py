"""The names of the layouts, and the metadata key every episode-wise layout reader sets.

A leaf module (it imports only ``errors``), so that the format table and the command line
name layouts without loading the layout modules.
"""

from __future__ import annotations

from enum import StrEnum

from expcli.errors import ConfigError

__all__ = ["SEAMS_KEY", "STARTS_CUT_KEY", "Layout"]

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
