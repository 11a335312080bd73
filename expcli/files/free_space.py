"""Room for an output.

Its size estimated up front (by its format: ``Format.estimated_size``), the free space of
its folder, and the one-line error when the two do not fit (checked before writing, and
raised again when the disk fills during the write).
"""

from __future__ import annotations

import errno as errnos
import os
from pathlib import Path

from expcli.errors import OutputError

__all__ = [
    "check_space",
    "disk_full_error",
    "format_size",
    "free_bytes",
    "recount_free",
]

DISK_FULL = frozenset({errnos.ENOSPC, errnos.EDQUOT})
"""Error numbers that mean the output's file system (or the user's quota) has no room."""


def free_bytes(folder: str | os.PathLike[str]) -> int | None:
    """Bytes an unprivileged user may still write in ``folder``'s file system.

    None when the platform cannot tell.
    """
    try:
        stats = os.statvfs(folder)
    except (OSError, AttributeError):  # AttributeError: no statvfs (Windows)
        return None
    return stats.f_bavail * stats.f_frsize


def check_space(target: Path, needed: int | None) -> None:
    """Refuse, before anything is written, an output of ``needed`` bytes that cannot fit.

    Raises:
        OutputError: The target's folder has fewer than ``needed`` bytes free.
    """
    if needed is None:
        return
    free = free_bytes(target.parent)
    if free is not None and free < needed:
        raise disk_full_error(target, needed, free=free)


def disk_full_error(
    target: Path,
    needed: int | None,
    code: int = errnos.ENOSPC,
    *,
    free: int | None = None,
) -> OutputError:
    """The one-line error for an output that does not fit.

    The folder, what the output needs (when known) and what is free.
    """
    folder = target.parent
    free = free_bytes(folder) if free is None else free
    what = "quota exceeded" if code == errnos.EDQUOT else "no space left on device"
    if free is None:
        message = f"{what} for {target.name}" + (
            f": it needs at least {format_size(needed)}" if needed is not None else ""
        )
    elif needed is None or needed <= free:  # the estimate fitted, the file did not
        message = f"{what}: {target.name} needs more than the {format_size(free)} free"
    else:
        message = (
            f"{what}: {target.name} needs at least {format_size(needed)}, {format_size(free)} free"
        )
    return OutputError(message, path=folder, errno=code, needed=needed, free=free)


def recount_free(error: BaseException, target: Path) -> BaseException:
    """``error``, or for a full disk the same error with the free space counted again.

    Once the partial output is deleted, what is free is what the user has to work with.
    """
    if not isinstance(error, OutputError) or error.errno not in DISK_FULL:
        return error
    return disk_full_error(target, error.needed, error.errno or errnos.ENOSPC)


def format_size(size: int) -> str:
    """``1234567`` -> ``1.2 MB (1,234,567 bytes)``: readable, and exact for a script."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit} ({size:,} bytes)"
    return f"{size:,} bytes"
