"""Envs registered with Gymnasium for the collect tests.

A subprocess reaches them with ids like ``tests.collect.registered_envs:ExpcliTest/Counting-v0``
(Gymnasium imports the module before the lookup).
"""

from __future__ import annotations

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv, CartPoleVectorEnv

from tests.envs.toy_envs import CountingEnv

__all__ = ["COUNTING", "CRASHING", "NO_TIME_LIMIT", "OTHER_DEFAULT"]

COUNTING = "ExpcliTest/Counting-v0"
CRASHING = "ExpcliTest/Crashing-v0"

if COUNTING not in gym.registry:
    gym.register(COUNTING, entry_point=CountingEnv, kwargs={"horizon": 5})
if CRASHING not in gym.registry:
    gym.register(CRASHING, entry_point=CountingEnv, kwargs={"horizon": 5, "fail_at": 40})


class _CartPoleVectorWithoutTimeLimit(CartPoleVectorEnv):
    """A batched CartPole that cannot be given a time limit."""

    def __init__(
        self, num_envs: int = 1, render_mode: str | None = None, sutton_barto_reward: bool = False
    ) -> None:
        super().__init__(num_envs, 10**9, render_mode, sutton_barto_reward)


class _CartPoleVectorOtherReward(CartPoleVectorEnv):
    """A batched CartPole whose reward setting defaults otherwise than CartPoleEnv's."""

    def __init__(
        self,
        num_envs: int = 1,
        max_episode_steps: int = 500,
        render_mode: str | None = None,
        sutton_barto_reward: bool = True,
    ) -> None:
        super().__init__(num_envs, max_episode_steps, render_mode, sutton_barto_reward)


NO_TIME_LIMIT = "ExpcliTest/VectorWithoutTimeLimit-v0"
OTHER_DEFAULT = "ExpcliTest/VectorOtherReward-v0"
for _id, _vector in (
    (NO_TIME_LIMIT, _CartPoleVectorWithoutTimeLimit),
    (OTHER_DEFAULT, _CartPoleVectorOtherReward),
):
    if _id not in gym.registry:
        gym.register(_id, entry_point=CartPoleEnv, vector_entry_point=_vector, max_episode_steps=50)
