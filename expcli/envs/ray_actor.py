"""The body of a Ray actor: a slice of the envs in a dummy or subproc backend.

Env failures go back to the driver as values (``Failure``), so that it can tell them
from a dead actor.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.envs.backend import StepBatch
from expcli.envs.dummy_backend import DummyBackend
from expcli.errors import EnvError

if TYPE_CHECKING:
    import gymnasium as gym

__all__ = ["ActorHost", "Factory", "Failure"]

Factory = Callable[[], "gym.Env[Any, Any]"]


@dataclass(frozen=True)
class Failure:
    """An ``EnvError`` raised in an actor, as plain data with a backend-wide env index."""

    index: int | None
    message: str
    traceback: str | None

    @classmethod
    def of(cls, error: EnvError, offset: int) -> Failure:
        """The failure of ``error``, whose index counts from ``offset``."""
        message = error.detail
        index = None if error.index is None else error.index + offset
        return cls(index, message, error.remote_traceback)

    def to_error(self) -> EnvError:
        """The ``EnvError`` this failure stands for, with the remote traceback."""
        return EnvError(self.message, index=self.index, remote_traceback=self.traceback)


class ActorHost:
    """The body of an actor: envs ``offset ..`` in a dummy or subproc backend.

    Every method answers ``(value, restarts so far)`` or a ``Failure``, never raises for
    an env, so that the driver can tell env errors from a dead actor.
    """

    def __init__(
        self,
        factories: Sequence[Factory],
        offset: int,
        subproc: bool,
        num_workers: int | None,
        restart_on_error: bool,
        no_warning: bool,
        step_timeout: float | None = None,
    ) -> None:
        self.offset = offset
        self.inner: Any = None
        self.failure: Failure | None = None
        try:
            if subproc:
                from expcli.envs.subproc_backend import SubprocBackend

                self.inner = SubprocBackend(
                    factories,
                    num_workers,
                    restart_on_error,
                    no_warning,
                    label_offset=offset,
                    pin=False,
                    step_timeout=step_timeout,
                )
            else:
                self.inner = DummyBackend(factories, restart_on_error, no_warning, step_timeout)
        except EnvError as e:
            self.failure = Failure.of(e, offset)

    def ready(self) -> tuple[Any, int] | Failure:
        """The observation and action spaces, once the envs are built."""
        if self.failure is not None:
            return self.failure
        return (self.inner.observation_space, self.inner.action_space), 0

    def run(self, method: str, ids: np.ndarray, *args: Any) -> tuple[Any, int] | Failure:
        """``Backend.<method>`` on backend-wide ``ids``."""
        try:
            value = getattr(self.inner, method)(ids - self.offset, *args)
        except EnvError as e:
            return Failure.of(e, self.offset)
        if isinstance(value, StepBatch):
            value.restarted = [i + self.offset for i in value.restarted]
        return value, int(self.inner.restarts)

    def pid(self) -> int:
        """The actor's process id (tests kill it)."""
        return os.getpid()

    def close(self) -> None:
        """Close the envs this actor hosts."""
        if self.inner is not None:
            self.inner.close()
