"""The contract between ``ParallelEnv`` and its backends (dummy, subproc, ray, ray-subproc).

A backend hosts ``num_envs`` environments, indexed globally from 0, and runs commands on
any subset of them given as an int64 array of global ids. It knows nothing of the
asynchronous modes beyond ``autoreset``: the facade decides which envs to step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    import gymnasium as gym

__all__ = ["Backend", "StepBatch"]


@dataclass
class StepBatch:
    """Results of one step of some envs, in the order of the ids that were stepped.

    Attributes:
        obs: Observations, stacked into an array when the observation space has a fixed
            numeric shape, else a list.
        rewards: float64 rewards.
        terminated: bool flags.
        truncated: bool flags.
        infos: One dict per env (empty when the env said nothing).
        restarted: Global ids of envs rebuilt after an error (``restart_on_error``).
    """

    obs: np.ndarray | list[Any]
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    infos: list[dict[str, Any]]
    restarted: list[int] = field(default_factory=list)


class Backend(Protocol):
    """What every backend offers; every method raises ``EnvError`` when an env fails."""

    num_envs: int
    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]

    def step(
        self, ids: np.ndarray, actions: Sequence[Any] | np.ndarray, autoreset: bool
    ) -> StepBatch:
        """Step the envs ``ids`` with ``actions[i]`` for ``ids[i]``.

        With ``autoreset`` a finished env is reset at once (its last observation in
        ``info["ended_state"]``).
        """
        ...

    def reset(
        self, ids: np.ndarray, seeds: Sequence[int | None], options: dict[str, Any] | None
    ) -> tuple[np.ndarray | list[Any], list[dict[str, Any]]]:
        """Reset the envs ``ids`` with one seed each (None: no seed); observations and infos."""
        ...

    def get_attr(self, ids: np.ndarray, key: str) -> list[Any]:
        """``getattr(env, key, None)`` of each env (through wrappers)."""
        ...

    def set_attr(self, ids: np.ndarray, key: str, values: Sequence[Any]) -> None:
        """``setattr(env.unwrapped-or-wrapper, key, value)`` for each env."""
        ...

    def call(self, ids: np.ndarray, method: str, kwargs: Sequence[dict[str, Any]]) -> list[Any]:
        """``env.<method>(**kwargs[i])`` of each env; the results."""
        ...

    def interrupt(self) -> None:
        """Give up, from now on, on a call that takes more than ``INTERRUPT_GRACE`` seconds.

        The call raises ``StepInterrupted``. Safe from a signal handler or another thread.
        """
        ...

    def close(self) -> None:
        """Close every env and release every process and buffer; idempotent."""
        ...
