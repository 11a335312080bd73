"""What one step of a batch of envs gives (``StepOutcome``) and what steps them (``Stepper``).

The base of every stepper module (``steppers``, ``envpool_stepper``): they import it, and
``steppers.make_stepper`` imports them, so the arrows run one way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["HasSpaces", "StepOutcome", "Stepper"]


@dataclass(slots=True)
class StepOutcome:
    """One step of every env.

    Attributes:
        next_obs: The observations the policy sees next (after any reset).
        final_obs: Each env's true next observation for the transition just made.
        rewards: float rewards ``(N,)``.
        terminated: bool ``(N,)``.
        truncated: bool ``(N,)`` (also set where the collector cut an episode short).
        valid: Which envs made a transition (None: all of them).
        infos: One dict per env (a sequence: EnvPool's are built when read).
    """

    next_obs: Any
    final_obs: Any
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    valid: np.ndarray | None
    infos: Sequence[dict[str, Any]]


class HasSpaces(Protocol):
    """What has the (per env) observation and action spaces of a batch of envs."""

    @property
    def observation_space(self) -> Any:
        """One env's observation space."""
        ...

    @property
    def action_space(self) -> Any:
        """One env's action space."""
        ...


class Stepper(HasSpaces, Protocol):
    """Resets and steps a batch of envs."""

    num_envs: int

    def reset(self, seed: int | None) -> Any:
        """Reset every env (seeded when ``seed`` is an int); the first observations."""
        ...

    def step(self, actions: Any) -> StepOutcome:
        """Step every env with its action (an array, or a batched Dict/Tuple of arrays)."""
        ...

    def close(self) -> None:
        """Close the envs."""
        ...
