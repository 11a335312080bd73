"""Envs and a wrapper of our own, registered with Gymnasium for the real-env tests.

A subprocess reaches them as ``tests.real_envs.own_envs:ExpcliReal/Puck-v0`` (Gymnasium
imports the module before the lookup), and the wrapper as
``--wrapper tests.real_envs.own_envs:drop_mission``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["PUCK", "PUCK_DICT_ACTIONS", "PuckEnv", "drop_mission"]

PUCK = "ExpcliReal/Puck-v0"
PUCK_DICT_ACTIONS = "ExpcliReal/PuckDictActions-v0"


class PuckEnv(gym.Env[dict[str, Any], Any]):
    """A puck pushed along a plane, seen through every kind of structured leaf.

    The observation is a Dict with a Discrete leaf (``phase``), a float32 Box (``pos``), a
    nested Dict (``sensors``: float64 Box and MultiBinary) and a Tuple (a Discrete that
    starts at -1 and a float32 Box). Noise comes from ``np_random``, so the seed decides
    everything; an episode ends when the puck leaves the table (terminated) or at the
    time limit (truncated). Rewards are float64 values that float32 cannot hold, and now
    and then -0.0. ``dict_actions`` swaps the Discrete action for a Dict one.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, dict_actions: bool = False) -> None:
        self.observation_space = spaces.Dict(
            {
                "phase": spaces.Discrete(3),
                "pos": spaces.Box(-2.0, 2.0, (2,), np.float32),
                "sensors": spaces.Dict(
                    {
                        "speed": spaces.Box(-np.inf, np.inf, (2,), np.float64),
                        "contact": spaces.MultiBinary(3),
                    }
                ),
                "last": spaces.Tuple(
                    (spaces.Discrete(3, start=-1), spaces.Box(0.0, 1.0, (1,), np.float32))
                ),
            }
        )
        if dict_actions:
            self.action_space: spaces.Space[Any] = spaces.Dict(
                {
                    "move": spaces.Discrete(3),
                    "force": spaces.Box(-1.0, 1.0, (2,), np.float32),
                }
            )
        else:
            self.action_space = spaces.Discrete(3)
        self._dict_actions = dict_actions
        self._pos = np.zeros(2, np.float32)
        self._speed = np.zeros(2, np.float64)
        self._t = 0
        self._last = 0

    def _obs(self) -> dict[str, Any]:
        contact = (np.abs(self._pos) > 1.0).astype(np.int8)
        return {
            "phase": self._t % 3,
            "pos": self._pos.copy(),
            "sensors": {
                "speed": self._speed.copy(),
                "contact": np.array([contact[0], contact[1], self._t % 2], np.int8),
            },
            "last": (self._last, np.array([self.np_random.random()], np.float32)),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        self._pos = self.np_random.uniform(-0.5, 0.5, 2).astype(np.float32)
        self._speed = self.np_random.normal(0.0, 0.1, 2)
        self._t = 0
        self._last = -1
        return self._obs(), {}

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        if self._dict_actions:
            move = int(action["move"])
            push = np.asarray(action["force"], np.float64)
        else:
            move = int(action)
            push = np.zeros(2)
        self._last = move - 1
        self._speed = 0.9 * self._speed + 0.05 * (move - 1) + 0.1 * push
        self._speed += self.np_random.normal(0.0, 0.05, 2)
        self._pos = np.clip(self._pos + self._speed, -2.0, 2.0).astype(np.float32)
        self._t += 1
        terminated = bool(np.abs(self._pos).max() >= 1.5)
        reward = -0.0 if self._t % 7 == 0 else float(self._speed.sum()) / 3.0
        return self._obs(), reward, terminated, False, {"t": self._t}


def drop_mission(env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
    """MiniGrid without its text ``mission`` leaf: a Dict of ``image`` and ``direction``."""
    keys = [k for k in env.observation_space.spaces if k != "mission"]
    return gym.wrappers.FilterObservation(env, keys)


if PUCK not in gym.registry:
    gym.register(PUCK, entry_point=PuckEnv, max_episode_steps=25)
if PUCK_DICT_ACTIONS not in gym.registry:
    gym.register(
        PUCK_DICT_ACTIONS, entry_point=PuckEnv, max_episode_steps=25, kwargs={"dict_actions": True}
    )
