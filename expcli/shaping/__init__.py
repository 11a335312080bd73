"""Reshape datasets by whole episodes: merge, split, filter.

The verbs live in ``verbs``; ``episode_table`` finds the episodes, ``where`` and
``selectors`` choose among them, ``regrouped`` writes the chosen ones, ``lineage`` records
where they came from.
"""

from expcli.shaping.verbs import Incomplete, ShapeResult, filter_episodes, merge, split

__all__ = ["Incomplete", "ShapeResult", "filter_episodes", "merge", "split"]
