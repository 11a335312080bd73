"""Helpers the benchmark scripts share: environment lines, peak memory, rates and ratios."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path


def version(dist: str) -> str:
    """The installed version of a distribution, or "not installed"."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def load_average() -> str:
    """The 1-, 5- and 15-minute load: other work on the machine skews every figure."""
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def peak_rss_kib() -> int:
    """Peak resident memory of this process so far (Linux VmHWM), in KiB."""
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])


def ratio(x: float | None, ref: float | None) -> float | None:
    """``x / ref``, or None when either is unknown (or the reference is zero)."""
    return None if x is None or not ref else x / ref


def fmt_ratio(r: float | None) -> str:
    """A ratio as ``1.23x`` ("-" when unknown)."""
    return "-" if r is None else f"{r:.2f}x"


def fmt_rate(x: float | None) -> str:
    """A rate with a k, M or G suffix ("-" when unknown)."""
    if x is None:
        return "-"
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.2f}{unit}"
    return f"{x:.1f}"
