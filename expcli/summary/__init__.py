"""Summaries of datasets: tensor statistics, episode statistics and structural checks.

``summarize(path)`` reads any dataset expcli can read, in one streaming pass over chunks of
rows, and returns a ``Summary``: plain dataclasses that ``expcli inspect`` renders as rich
tables or as JSON. Nothing here imports rich, typer or torch (torch is loaded by the
``.pt`` reader only when a ``.pt`` file is read).
"""

from __future__ import annotations

from expcli.summary.checks import Finding
from expcli.summary.episodes import Distribution, EnvEpisodes, EpisodeStats
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
    "newest_dataset",
    "summarize",
]
