"""Summaries of datasets: tensor statistics, episode statistics and structural checks.

``summarize(path)`` reads any dataset expcli can read, in one streaming pass over chunks of
rows, and returns a ``Summary``: plain dataclasses that ``expcli inspect`` renders as rich
tables or as JSON. ``episode_fingerprints(path)`` gives each episode a digest of its data,
which the checks compare to find repeated episodes and episodes two datasets share.
Nothing here imports rich, typer or torch (torch is loaded by the ``.pt`` reader only when
a ``.pt`` file is read).
"""

from __future__ import annotations

from expcli.summary.checks import Finding
from expcli.summary.episodes import Distribution, EnvEpisodes, EpisodeStats
from expcli.summary.fingerprints import episode_fingerprints
from expcli.summary.latest import newest_dataset
from expcli.summary.overview import Summary, summarize
from expcli.summary.stats import TensorStats

__all__ = [
    "Distribution",
    "EnvEpisodes",
    "EpisodeStats",
    "Finding",
    "Summary",
    "TensorStats",
    "episode_fingerprints",
    "newest_dataset",
    "summarize",
]
