"""The dummy backend: every env in this process, stepped one after the other.

It is the reference the other backends are tested against. A ``Watchdog`` thread gives
up on an env's call that hangs (``step_timeout``) or outlasts ``interrupt()``; it can do
so only when the envs are stepped from the main thread and the hang is not in C code
(see ``watchdog``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from expcli.envs._batching import gather, take
from expcli.envs.backend import StepBatch
from expcli.envs.env_group import EnvGroup, GroupError
from expcli.envs.watchdog import Watchdog

__all__ = ["DummyBackend"]


class DummyBackend:
    """All envs in one in-process ``EnvGroup``.

    Raises:
        EnvError: A factory failed.
    """

    def __init__(
        self,
        factories: Sequence[Callable[[], gym.Env[Any, Any]]],
        restart_on_error: bool = False,
        no_warning: bool = True,
        step_timeout: float | None = None,
    ) -> None:
        try:
            self.group = EnvGroup(factories, 0, None, restart_on_error, no_warning)
        except GroupError as e:
            raise e.record.to_error() from None
        self.num_envs = len(self.group.envs)
        self.observation_space = self.group.envs[0].observation_space
        self.action_space = self.group.envs[0].action_space
        self.watchdog = Watchdog(self.group, step_timeout)

    @property
    def restarts(self) -> int:
        """Envs rebuilt after an error so far."""
        return self.group.restarts

    def step(
        self, ids: np.ndarray, actions: Sequence[Any] | np.ndarray, autoreset: bool
    ) -> StepBatch:
        """Step the envs ``ids``; see ``Backend.step``."""
        try:
            infos, restarted = self.group.step(ids, actions, autoreset)
        except GroupError as e:
            raise e.record.to_error() from None
        return gather(self.group.slots, ids, infos, restarted)

    def reset(
        self, ids: np.ndarray, seeds: Sequence[int | None], options: dict[str, Any] | None
    ) -> tuple[np.ndarray | list[Any], list[dict[str, Any]]]:
        """Reset the envs ``ids``; see ``Backend.reset``."""
        infos = self._run(self.group.reset, ids, seeds, options)
        return take(self.group.slots.obs, ids), infos

    def get_attr(self, ids: np.ndarray, key: str) -> list[Any]:
        """See ``Backend.get_attr``."""
        return list(self._run(self.group.get_attr, ids, key))

    def set_attr(self, ids: np.ndarray, key: str, values: Sequence[Any]) -> None:
        """See ``Backend.set_attr``."""
        self._run(self.group.set_attr, ids, key, values)

    def call(self, ids: np.ndarray, method: str, kwargs: Sequence[dict[str, Any]]) -> list[Any]:
        """See ``Backend.call``."""
        return list(self._run(self.group.call, ids, method, kwargs))

    def interrupt(self) -> None:
        """Give up on an env's call that takes more than a second from now on."""
        self.watchdog.interrupt()

    def close(self) -> None:
        """Close the envs; idempotent."""
        self.watchdog.close()
        self.group.close()

    def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except GroupError as e:
            raise e.record.to_error() from None
