"""The two rich consoles: results to stdout, progress and errors to stderr."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def out_console() -> Console:
    """Where results go (stdout)."""
    from rich.console import Console

    return Console()


def err_console() -> Console:
    """Where progress, logs and errors go (stderr)."""
    from rich.console import Console

    return Console(stderr=True)
