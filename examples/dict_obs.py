"""A Dict observation space for the README: ``--wrapper examples/dict_obs.py:DictObservation``.

Wraps CartPole so that each observation is ``{"pos": Box((2,), float32), "phase": Discrete(4)}``
(the cart's position and the pole's angle; which quarter of the state the cart's and the pole's
speeds are in), and reports the step within the episode as the info ``steps``. It makes
``runs/dict-env.npz``, the structured-spaces example::

    expcli collect CartPole-v1 --wrapper examples/dict_obs.py:DictObservation --infos \
        --envs 4 --steps 800 --mode dummy -o runs/dict-env.npz
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np


class DictObservation(gym.Wrapper[Any, Any, Any, Any]):
    """CartPole with ``{"pos": (x, angle), "phase": quarter of (x_dot, angle_dot)}``."""

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.observation_space = gym.spaces.Dict(
            {
                "pos": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
                "phase": gym.spaces.Discrete(4),
            }
        )
        self._steps = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Reset the env and the step count."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._steps = 0
        return self._split(obs), {**info, "steps": self._steps}

    def step(self, action: Any) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env; the info ``steps`` counts the episode's steps."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        return self._split(obs), reward, terminated, truncated, {**info, "steps": self._steps}

    @staticmethod
    def _split(obs: Any) -> dict[str, Any]:
        phase = 2 * int(obs[1] >= 0) + int(obs[3] >= 0)
        return {"pos": np.array([obs[0], obs[2]], np.float32), "phase": phase}
