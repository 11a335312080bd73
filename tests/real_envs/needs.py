"""Missing env packages: a skip with the reason on a workstation, a failure in CI.

The real-env tests are the project's proof that data replays bit for bit; CI (``CI=true``)
must run every one of them, so a package missing there is an error, never a quiet skip.
"""

from __future__ import annotations

import importlib
import os
import warnings

import pytest

__all__ = ["in_ci", "missing_packages", "require"]


def missing_packages(names: tuple[str, ...]) -> list[str]:
    """The packages among ``names`` that cannot be imported here.

    Imported with warnings silenced: Box2D's SWIG module warns while it initialises, and
    pytest's ``filterwarnings = error`` turns that into a crash of the interpreter.
    """
    missing = []
    for name in names:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def in_ci() -> bool:
    """Whether the environment says this is a CI run (``CI=true``, as CI services set it)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def require(names: tuple[str, ...]) -> None:
    """Skip (or in CI fail) the calling test when one of the packages cannot be imported."""
    missing = missing_packages(names)
    if not missing:
        return
    reason = f"needs {', '.join(missing)}: pip install -e '.[test-envs,ray]' (make test does)"
    if in_ci():
        pytest.fail(f"{reason}; CI runs every real env, skipping none")
    pytest.skip(reason)
