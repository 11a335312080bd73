"""A synthetic env that burns about 1 ms of CPU per step (for ``distributed.py``).

Registered as ``ExpcliBench/Burn-v0``; name it ``benchmarks.burn_env:ExpcliBench/Burn-v0``
so that Ray's workers import this module (the repository root on ``PYTHONPATH``).
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np

BURN_ID = "ExpcliBench/Burn-v0"
BURN_SECONDS = 0.001


class BurnEnv(gym.Env[np.ndarray, int]):
    """Four float observations, two actions, episodes of 200 steps; each step spins 1 ms."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.t = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 4).astype(np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        end = time.thread_time() + BURN_SECONDS  # CPU time: a busy machine slows it alike
        while time.thread_time() < end:
            pass
        self.t += 1
        obs = self.np_random.uniform(-1, 1, 4).astype(np.float32)
        return obs, 1.0, False, self.t >= 200, {}


if BURN_ID not in gym.registry:
    gym.register(BURN_ID, entry_point=BurnEnv)
