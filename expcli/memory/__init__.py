"""Circular memories of torch tensors with skrl's API (this package owns torch).

Also the episode bookkeeping shared by memories, datasets and replay buffers, and the
batches (``DictBatch``, ``TemporalBatch``) that sampling hands out.

Each name is imported on first use, so that ``from expcli.memory import Memory`` loads no
torch: a CPU ``Memory`` is numpy arrays until torch is asked for (``memory.base``), and the
batches, which are torch, load it when they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from expcli._lazy_names import lazy_names

if TYPE_CHECKING:
    from expcli.memory.base import Memory
    from expcli.memory.batches import DictBatch, TemporalBatch
    from expcli.memory.episode_report import EpisodeReport
    from expcli.memory.episodes import Episode, EpisodeIndex, EpisodeTable
    from expcli.memory.random_memory import RandomMemory

__all__ = [
    "DictBatch",
    "Episode",
    "EpisodeIndex",
    "EpisodeReport",
    "EpisodeTable",
    "Memory",
    "RandomMemory",
    "TemporalBatch",
]

_HOMES = {
    "DictBatch": ".batches",
    "Episode": ".episodes",
    "EpisodeIndex": ".episodes",
    "EpisodeReport": ".episode_report",
    "EpisodeTable": ".episodes",
    "Memory": ".base",
    "RandomMemory": ".random_memory",
    "TemporalBatch": ".batches",
}

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
