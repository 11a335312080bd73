"""``collect --wrapper MODULE:CALLABLE``: gymnasium wrappers applied right after ``gym.make``.

A wrapper spec names a callable of one env returning an env, such as a gymnasium
``Wrapper`` class (``minigrid.wrappers:ImgObsWrapper``) or a function in a file
(``wrap.py:flatten``). Specs are plain strings, so the env factories that carry them pickle
anywhere; each worker process or Ray actor imports them itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from expcli.errors import ConfigError
from expcli.named_callables import is_file_target, load_named

__all__ = ["apply_wrappers", "describe_wrappers", "portable_spec"]


def portable_spec(spec: str) -> str:
    """The spec with a file target made absolute, so workers find it from any folder."""
    target, sep, name = spec.rpartition(":")
    if sep and target and is_file_target(target):
        return f"{Path(target).resolve()}:{name}"
    return spec


def describe_wrappers(specs: Sequence[str]) -> list[dict[str, Any]]:
    """Import every wrapper (in this process) and describe it for the metadata.

    Raises:
        ConfigError: A spec cannot be imported or does not name a callable.
    """
    out = []
    for spec in specs:
        fn, description = load_named(spec, "wrapper")
        if not callable(fn):
            raise ConfigError(f"wrapper {spec!r} is a {type(fn).__name__}, not a callable")
        out.append(description)
    return out


def apply_wrappers(env: gym.Env[Any, Any], specs: Sequence[str]) -> gym.Env[Any, Any]:
    """``env`` wrapped by each spec in turn (the first is innermost).

    Raises:
        ConfigError: A spec cannot be imported, or a wrapper did not return an env.
    """
    for spec in specs:
        fn, _ = load_named(spec, "wrapper")
        wrapped = fn(env)
        if not isinstance(wrapped, gym.Env):
            raise ConfigError(
                f"wrapper {spec!r} returned {type(wrapped).__name__}; expected a gymnasium Env "
                "(a wrapper is called with the env and returns the wrapped env)"
            )
        env = wrapped
    return env
