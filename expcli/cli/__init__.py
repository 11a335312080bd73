"""The ``expcli`` command: a thin Typer layer over the library.

Only this package imports typer and rich, and heavy libraries (torch, gymnasium, h5py,
ray) are imported inside command bodies, so ``expcli --help`` stays fast.
"""

from __future__ import annotations

from expcli.cli.app import app, main

__all__ = ["app", "main"]
