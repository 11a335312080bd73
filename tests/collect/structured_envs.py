"""Small envs with Dict, Tuple and Text spaces, registered with Gymnasium for the tests.

Worker processes reach them with ids like ``tests.collect.structured_envs:ExpcliTest/Phase-v0``.
Everything they draw comes from the reset seed, so an env stepped by hand gives the same
transitions as a collected one.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["ARM", "PHASE", "TEXT", "ArmEnv", "PhaseEnv", "TextEnv", "registry_kept"]

PHASE = "ExpcliTest/Phase-v0"
ARM = "ExpcliTest/Arm-v0"
TEXT = "ExpcliTest/Text-v0"


class PhaseEnv(gym.Env[dict[str, Any], int]):
    """Dict observations: a float32 ``pos`` Box leaf and a Discrete ``phase`` leaf.

    Rewards are float64 values that float32 cannot hold exactly (``pos[0] / 3``).
    """

    observation_space = spaces.Dict(
        {
            "pos": spaces.Box(-10.0, 10.0, (2,), np.float32),
            "phase": spaces.Discrete(4, start=1),
        }
    )
    action_space = spaces.Discrete(3)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[override]
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.phase = int(self.np_random.integers(1, 5))
        return self._obs(), {}

    def step(self, action: int):  # type: ignore[override]
        self.pos = (self.pos + np.float32([(int(action) - 1) * 0.5, 0.25])).astype(np.float32)
        self.phase = (self.phase + int(action)) % 4 + 1
        terminated = bool(np.abs(self.pos).max() > 1.5)
        return self._obs(), float(self.pos[0]) / 3, terminated, False, {}

    def _obs(self) -> dict[str, Any]:
        return {"pos": self.pos.copy(), "phase": self.phase}


class ArmEnv(gym.Env[tuple[Any, ...], dict[str, Any]]):
    """Tuple observations (a Box and a Discrete) and Dict actions (``move``, ``force``)."""

    observation_space = spaces.Tuple((spaces.Box(-5.0, 5.0, (3,), np.float32), spaces.Discrete(5)))
    action_space = spaces.Dict(
        {"move": spaces.Discrete(3), "force": spaces.Box(-1.0, 1.0, (2,), np.float32)}
    )

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[override]
        super().reset(seed=seed)
        self.x = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        self.k = 0
        return (self.x.copy(), self.k), {}

    def step(self, action: dict[str, Any]):  # type: ignore[override]
        assert self.action_space.contains(action), action
        move, force = int(action["move"]), np.asarray(action["force"], np.float32)
        self.x = self.x + np.float32(move - 1) * 0.5
        self.x[:2] += force
        self.x = np.clip(self.x, -5, 5).astype(np.float32)
        self.k = (self.k + move) % 5
        reward = float(move) + float(force.sum())
        return (self.x.copy(), self.k), reward, self.k == 4, False, {}


class TextEnv(gym.Env[dict[str, Any], int]):
    """Dict observations with a gymnasium ``Text`` leaf (``word``) and a Discrete leaf."""

    observation_space = spaces.Dict(
        {"word": spaces.Text(max_length=5, min_length=1, charset="abcé"), "n": spaces.Discrete(6)}
    )
    action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[override]
        super().reset(seed=seed)
        self.word = "a"
        return {"word": self.word, "n": 0}, {}

    def step(self, action: int):  # type: ignore[override]
        self.word = (self.word + "béc"[int(self.np_random.integers(3))])[-5:]
        n = len(self.word)
        return {"word": self.word, "n": n}, float(action), n == 5 and int(action) == 1, False, {}


for _id, _entry, _steps in ((PHASE, PhaseEnv, 8), (ARM, ArmEnv, 6), (TEXT, TextEnv, 7)):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_entry, max_episode_steps=_steps)


@contextmanager
def registry_kept() -> Iterator[None]:
    """Leave Gymnasium's registry (and the modules that fill it) as they were.

    A test that imports ``minigrid`` registers some hundred envs in this process; other
    tests list the registry. The envs and modules added meanwhile are removed again.
    """
    envs, modules = set(gym.registry), set(sys.modules)
    try:
        yield
    finally:
        for env_id in set(gym.registry) - envs:
            del gym.registry[env_id]
        for name in set(sys.modules) - modules:
            if name.split(".")[0] == "minigrid":
                del sys.modules[name]
