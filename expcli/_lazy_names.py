"""A package's public names, each imported from its module when first asked for (PEP 562).

A package face lists where each name lives; ``lazy_names`` gives it the module
``__getattr__`` and ``__dir__`` that import the home module on first use and keep the
value, so that importing the package loads none of its heavy modules (torch, gymnasium).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``.

    ``homes`` maps each lazy name to its module: absolute, or relative to the package
    (``".base"``).
    """
    namespace = sys.modules[package].__dict__

    def get(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        namespace[name] = value
        return value

    def listed() -> list[str]:
        return sorted({*namespace, *homes})

    return get, listed
