"""Tiny deterministic envs for the ParallelEnv tests (importable by worker processes)."""

from __future__ import annotations

import os
import signal
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class CountingEnv(gym.Env[np.ndarray, int]):
    """obs = [t, start, tag]; reward = action + t; terminates after ``horizon`` steps.

    ``start`` is drawn from the reset seed, so seeding is visible in the observations.
    """

    def __init__(
        self, horizon: int = 5, tag: int = 0, fail_at: int | None = None, how: str = "raise"
    ) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, (3,), np.float64)
        self.action_space = spaces.Discrete(3)
        self.horizon, self.tag, self.fail_at, self.how = horizon, tag, fail_at, how
        self.t, self.start, self.steps_total = 0, 0.0, 0
        self.greeting = "hello"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[override]
        super().reset(seed=seed)
        self.t = 0
        self.start = float(self.np_random.integers(0, 1000))
        if options and "start" in options:
            self.start = float(options["start"])
        return self._obs(), {"start": self.start}

    def step(self, action: int):  # type: ignore[override]
        self.steps_total += 1
        if self.fail_at is not None and self.steps_total == self.fail_at:
            if self.how == "exit":
                os._exit(3)
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"boom at step {self.steps_total}")
        self.t += 1
        terminated = self.t >= self.horizon
        info = {"t": self.t} if self.t % 2 == 0 else {}
        return self._obs(), float(action) + self.t, terminated, False, info

    def _obs(self) -> np.ndarray:
        return np.array([self.t, self.start, self.tag], dtype=np.float64)

    def add(self, x: int, y: int = 0) -> int:
        return self.tag + x + y


class DictEnv(CountingEnv):
    """CountingEnv with a Dict observation space (not shareable through shared memory)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.observation_space = spaces.Dict(
            {"t": spaces.Discrete(100), "pos": spaces.Box(-np.inf, np.inf, (2,), np.float64)}
        )

    def _obs(self) -> dict[str, Any]:  # type: ignore[override]
        return {"t": self.t, "pos": np.array([self.start, self.tag], dtype=np.float64)}


def counting(horizon: int = 5, tag: int = 0, **kwargs: Any) -> CountingEnv:
    """A factory usable across processes."""
    return CountingEnv(horizon=horizon, tag=tag, **kwargs)
