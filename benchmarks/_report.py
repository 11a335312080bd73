"""Helpers the benchmark scripts share for their environment lines."""

from __future__ import annotations

import importlib.metadata
import os


def version(dist: str) -> str:
    """The installed version of a distribution, or "not installed"."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def load_average() -> str:
    """The 1-, 5- and 15-minute load: other work on the machine skews every figure."""
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
