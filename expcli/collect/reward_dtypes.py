"""The dtype rewards are stored in, and what storing them narrower changed.

Envs give float64 rewards (Python floats); expcli stores float32 by default, as skrl does,
or float64 when asked. The narrowing is never silent: the metadata says what the env gave,
what was stored and how many stored rewards differ from the env's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["RewardsNote"]


@dataclass
class RewardsNote:
    """Rewards stored as ``dtype``; counts the rewards that storing changed.

    Attributes:
        dtype: The stored dtype's name (``float32`` or ``float64``).
        env_dtype: The dtype of the rewards the envs gave (None before the first step).
        changed: Stored rewards whose value differs from the env's (rounded by narrowing).
    """

    dtype: str
    env_dtype: str | None = None
    changed: int = 0

    def store(self, rewards: Any, valid: np.ndarray | None, num_envs: int) -> np.ndarray:
        """One step's rewards as ``(num_envs, 1)`` of ``dtype``, counting what changed."""
        given = np.asarray(rewards)
        if given.dtype == object:
            given = given.astype(np.float64)
        if self.env_dtype is None:
            self.env_dtype = given.dtype.name
        with np.errstate(over="ignore"):  # a reward beyond float32 becomes inf: counted below
            out = given.astype(self.dtype, copy=False).reshape(num_envs, 1)
        if out.dtype != given.dtype:
            differs = out[:, 0] != given.reshape(num_envs)
            if valid is not None:
                differs &= valid
            if differs.any():
                differs &= ~np.isnan(given.reshape(num_envs).astype(np.float64))
                self.changed += int(np.count_nonzero(differs))
        return out

    @property
    def narrowed(self) -> bool:
        """Whether the stored dtype cannot hold every value of the env's dtype."""
        if self.env_dtype is None:
            return False
        return not np.can_cast(np.dtype(self.env_dtype), np.dtype(self.dtype), "safe")

    def to_json(self) -> dict[str, Any]:
        """The ``rewards`` entry of the dataset's metadata."""
        return {
            "dtype": self.dtype,
            "env_dtype": self.env_dtype,
            "narrowed": self.narrowed,
            "values_changed": self.changed,
        }
