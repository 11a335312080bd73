"""A synthetic env that is never the bottleneck: a constant uint8 frame, a fixed-length
episode. Importing this module registers ``ConstantFrame-v0`` (84x84x4 by default;
``shape`` kwarg), so ``expcli collect benchmarks.frame_env:ConstantFrame-v0`` finds it."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class ConstantFrame(gym.Env[np.ndarray, np.int64]):
    """Returns the same frame every step; episodes last ``length`` steps."""

    def __init__(self, shape: tuple[int, ...] = (84, 84, 4), length: int = 1000) -> None:
        self.observation_space = gym.spaces.Box(0, 255, tuple(shape), np.uint8)
        self.action_space = gym.spaces.Discrete(4)
        self._frame = np.full(tuple(shape), 7, np.uint8)
        self._length, self._t = length, 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._frame, {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        return self._frame, 1.0, False, self._t >= self._length, {}


if "ConstantFrame-v0" not in gym.registry:
    gym.register("ConstantFrame-v0", entry_point=ConstantFrame)
