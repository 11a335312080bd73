"""Envs registered with Gymnasium for the collect tests.

A subprocess reaches them with ids like ``tests.collect.registered_envs:ExpcliTest/Counting-v0``
(Gymnasium imports the module before the lookup).
"""

from __future__ import annotations

import gymnasium as gym

from tests.envs.toy_envs import CountingEnv

__all__ = ["COUNTING", "CRASHING"]

COUNTING = "ExpcliTest/Counting-v0"
CRASHING = "ExpcliTest/Crashing-v0"

if COUNTING not in gym.registry:
    gym.register(COUNTING, entry_point=CountingEnv, kwargs={"horizon": 5})
if CRASHING not in gym.registry:
    gym.register(CRASHING, entry_point=CountingEnv, kwargs={"horizon": 5, "fail_at": 40})
