"""``PassWatcher``: what else looks at the rows while ``summarize`` reads them.

``summarize`` reads a dataset once, chunk by chunk in chronological order, and cuts each
chunk into episode pieces. A caller that wants more from that pass (a report's samples of
each tensor, its counts of actions) hands ``summarize`` a watcher: it sees every chunk and
its pieces as the statistics do, so it needs no second pass, and its episodes are the
ones the statistics count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset
    from expcli.summary.chronology import Chunk
    from expcli.summary.episodes import Pieces

__all__ = ["PassWatcher", "WatcherFactory"]


class PassWatcher(Protocol):
    """Sees each chunk of a summary's pass."""

    def update(self, chunk: Chunk, pieces: Pieces | None) -> None:
        """One chunk of valid transitions, oldest first, and its episode pieces.

        ``pieces`` is None for a chunk without rows.
        """


class WatcherFactory(Protocol):
    """Makes the watcher of a dataset once it is open (its tensors left on disk)."""

    def __call__(self, dataset: Dataset) -> PassWatcher:
        """The watcher of ``dataset``'s pass."""
