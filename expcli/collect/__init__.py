"""Collecting experience: a Collector steps envs with a policy into a Memory.

``Collector`` is the library API; ``expcli collect`` is a thin layer over it.
"""

from expcli.collect.collector import Collector, CollectStats, Progress
from expcli.collect.episode_stats import EpisodeSummary, EpisodeTracker

__all__ = ["CollectStats", "Collector", "EpisodeSummary", "EpisodeTracker", "Progress"]
