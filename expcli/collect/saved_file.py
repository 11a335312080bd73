"""What a collect run wrote: the one answer of every output kind (file, folder, spooled file)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["SavedFile"]


@dataclass(frozen=True, slots=True)
class SavedFile:
    """Where the dataset went, how big it is and what it holds.

    ``transitions`` and ``episodes`` (complete ones) count the file, which holds fewer
    than the run collected when the memory wrapped (``--memory-size``).
    """

    path: Path
    size_bytes: int
    transitions: int
    episodes: int
