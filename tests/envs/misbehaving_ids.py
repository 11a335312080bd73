"""``MisbehavingEnv`` registered with Gymnasium, for ``expcli collect`` in a subprocess.

``tests.envs.misbehaving_ids:ExpcliTest/Misbehaving-v0 --env-kwargs '{"how": "loop"}'``.
"""

from __future__ import annotations

import gymnasium as gym

from tests.envs.toy_envs import MisbehavingEnv

__all__ = ["MISBEHAVING", "MISBEHAVING_ID"]

MISBEHAVING = "ExpcliTest/Misbehaving-v0"
MISBEHAVING_ID = f"tests.envs.misbehaving_ids:{MISBEHAVING}"

if MISBEHAVING not in gym.registry:
    gym.register(MISBEHAVING, entry_point=MisbehavingEnv, kwargs={"how": "none"})
