"""Trusted references for EnvPool's envs: its C++ generator replayed in numpy, by-hand loops.

EnvPool seeds env ``i`` with ``std::mt19937(seed + i)`` and draws reset states with
libstdc++'s ``uniform_real_distribution<double>``: two 32-bit outputs make one double in
[0, 1) (``generate_canonical``), scaled to [a, b). numpy's MT19937 with legacy seeding is
the same generator, so the test knows EnvPool's exact (double) initial states, and can set
Gymnasium's env to them; ``float32(state) == EnvPool's first observation`` checks it.
"""

from __future__ import annotations

import numpy as np


class StdUniform:
    """``std::uniform_real_distribution<double>(a, b)`` over ``std::mt19937(seed)``."""

    def __init__(self, seed: int) -> None:
        self.bits = np.random.MT19937(0)
        self.bits._legacy_seeding(seed)

    def __call__(self, low: float, high: float) -> float:
        lo, hi = (int(self.bits.random_raw()) for _ in range(2))
        unit = (lo + hi * 2.0**32) / 2.0**64
        unit = unit if unit < 1.0 else float(np.nextafter(1.0, 0.0))
        return unit * (high - low) + low


def initial_state(env_id: str, draw: StdUniform) -> np.ndarray:
    """The state EnvPool's C++ env draws at a reset (its ``Reset()``), as Gymnasium holds it."""
    if env_id.startswith("MountainCar"):
        return np.array([draw(-0.6, -0.4), 0.0])
    if env_id.startswith("CartPole"):
        return np.array([draw(-0.05, 0.05) for _ in range(4)])
    if env_id.startswith("CliffWalking"):
        return np.array(36)  # no draw: every episode starts in the corner
    raise ValueError(f"no reference for {env_id}")
