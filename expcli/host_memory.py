"""How much memory this machine can still give: refusing, before allocating, what cannot fit.

A run or a batch far larger than the machine would otherwise end in an allocator
traceback, or in swapping until the kernel kills the process; one line naming the
estimate is better. The figure is Linux's ``MemAvailable`` (free memory plus what the
kernel can reclaim), lowered to what a cgroup v2 memory limit leaves; elsewhere the free
physical pages. When neither can be read, nothing is refused.
"""

from __future__ import annotations

import os
from pathlib import Path

from expcli.errors import ConfigError

__all__ = ["available_bytes", "check_fits", "format_bytes"]


def available_bytes() -> int | None:
    """Bytes this process can still allocate without swapping, or None when unknown."""
    available = _meminfo_available()
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, OSError, ValueError):
            return None
    limit = _cgroup_room()
    return available if limit is None else min(available, limit)


def check_fits(
    needed: int, what: str, advice: str, *, path: str | os.PathLike[str] | None = None
) -> None:
    """Refuse ``needed`` bytes when the machine has fewer available.

    Raises:
        ConfigError: One line: [``path``:] ``what`` needs about N, more than the M available;
            ``advice``. The error's ``path`` is ``path``.
    """
    available = available_bytes()
    if available is not None and needed > available:
        raise ConfigError(
            f"{what} needs about {format_bytes(needed)}, more than the "
            f"{format_bytes(available)} of memory available; {advice}",
            path=path,
        )


def format_bytes(size: float) -> str:
    """``1.5 GB``-style (powers of 1000), up to exabytes."""
    for unit, scale in (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    if size >= 1e3:
        return f"{size / 1e3:.1f} kB"
    return f"{int(size)} B"


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """What a cgroup v2 ``memory.max`` leaves above ``memory.current``, if one applies."""
    root = Path("/sys/fs/cgroup")
    try:
        limit = (root / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(0, int(limit) - int((root / "memory.current").read_text()))
    except (OSError, ValueError):
        return None
