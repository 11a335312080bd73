"""Atomic writes of files that are not datasets (a report, a figure), for the packages above.

The same temporary-file-then-rename as every dataset write (``_atomic``): an interrupted
write never leaves a half file under the target's name.
"""

from __future__ import annotations

from expcli.formats._atomic import atomic_path, atomic_write

__all__ = ["atomic_path", "atomic_write"]
