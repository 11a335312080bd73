"""Circular memories of torch tensors with skrl's API (this package owns torch).

Also the episode bookkeeping shared by memories, datasets and replay buffers, and the
batches (``DictBatch``, ``TemporalBatch``) that sampling hands out.
"""

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
