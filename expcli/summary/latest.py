"""Which dataset ``expcli inspect`` reads when no file is named: the newest under ``runs/``."""

from __future__ import annotations

import os
from pathlib import Path

from expcli.errors import ConfigError
from expcli.formats.table import format_from_suffix, suffix_help

__all__ = ["RUNS", "newest_dataset"]

RUNS = Path("runs")
"""Where ``expcli collect`` writes by default."""

_UNFINISHED = (".partial", ".tmp")


def newest_dataset(folder: str | os.PathLike[str] = RUNS) -> Path:
    """The most recently modified dataset file under ``folder`` (searched recursively).

    Files count when their suffix names a format of the table (``.pt``, ``.npz``, ``.csv``,
    ``.h5``, ``.hdf5``, and registered ones); hidden files and folders, unfinished writes
    (``.partial``, ``.tmp``) and ``*.meta.json`` sidecars do not. Ties go to the later name.

    Raises:
        ConfigError: ``folder`` holds no dataset file.
    """
    root = Path(folder)
    found: list[tuple[int, str, Path]] = []
    if root.is_dir():
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if name.startswith(".") or name.endswith(_UNFINISHED):
                    continue
                if format_from_suffix(name) is None:
                    continue
                path = Path(dirpath) / name
                try:
                    found.append((path.stat().st_mtime_ns, str(path), path))
                except OSError:  # removed meanwhile
                    continue
    if not found:
        raise ConfigError(
            f"no FILE given and no dataset ({suffix_help()}) under {root}/; "
            "name a file, or collect one first with `expcli collect`"
        )
    return max(found)[2]
