"""Picklable recipes for building envs where they run (in process, in workers, in actors)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from expcli.errors import InvalidTypeError

__all__ = ["EnvFactory", "as_factory"]

Factory = Callable[[], gym.Env[Any, Any]]


@dataclass(frozen=True)
class EnvFactory:
    """Makes ``gym.make(env_id, **kwargs)`` and applies ``wrappers`` to it.

    Wrappers are ``MODULE:CALLABLE`` specs (see ``env_wrappers``): plain data, so the factory
    pickles anywhere.
    """

    env_id: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    wrappers: tuple[str, ...] = ()

    def __call__(self) -> gym.Env[Any, Any]:
        """Make the env and wrap it."""
        env = gym.make(self.env_id, **self.kwargs)
        if self.wrappers:
            from expcli.envs.env_wrappers import apply_wrappers

            env = apply_wrappers(env, self.wrappers)
        return env


class _Cloudpickled:
    """A callable that crosses process boundaries through cloudpickle (lambdas, closures)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def __call__(self) -> Any:
        return self.fn()

    def __getstate__(self) -> bytes:
        import cloudpickle

        return bytes(cloudpickle.dumps(self.fn))

    def __setstate__(self, state: bytes) -> None:
        self.fn = pickle.loads(state)  # the user's own factory, sent by this process


class _Given(_Cloudpickled):
    """An env instance handed over by the user: itself in process, a pickled copy elsewhere."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(lambda: env)
        self.env = env

    def __getstate__(self) -> bytes:
        import cloudpickle

        return bytes(cloudpickle.dumps(self.env))

    def __setstate__(self, state: bytes) -> None:
        env = pickle.loads(state)
        self.env = env
        self.fn = lambda: env


def as_factory(env: gym.Env[Any, Any] | Callable[[], gym.Env[Any, Any]]) -> Factory:
    """A picklable zero-argument factory for an env instance or a factory.

    Raises:
        TypeError: ``env`` is neither a ``gymnasium.Env`` nor callable.
    """
    if isinstance(env, EnvFactory):
        return env
    if isinstance(env, gym.Env):
        return _Given(env)
    if callable(env):
        return _Cloudpickled(env)
    raise InvalidTypeError(
        f"expected a gymnasium.Env or a zero-argument factory, got {type(env).__name__}"
    )
