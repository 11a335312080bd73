"""What every output kind of a collect run is given: the rows, the run's metadata, counts.

The output kinds (``single_file``, ``folder_run``, ``spool_run``, ``resume``) never see the
``CollectJob``: the job hands each the staging memory and episode tracker it collects
into (``RunRows``) and a ``MetadataProvider`` (the run's metadata, asked for when a shard
or the manifest is written).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from expcli.collect.episode_stats import EpisodeTracker
    from expcli.memory import Memory

__all__ = ["MetadataProvider", "RunRows"]

MetadataProvider = Callable[[tuple[int, int] | None], dict[str, Any]]
"""The run's metadata; its argument: (transitions, complete episodes) the output holds,
or None to count them from the memory."""


@dataclass(frozen=True, slots=True)
class RunRows:
    """Where a run's rows are collected: its memory and the episodes of its envs."""

    memory: Memory
    tracker: EpisodeTracker
