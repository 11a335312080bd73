"""Policies of the observation alone: each env's transitions then do not depend on when the
others end, so a run and a by-hand loop over EnvPool see the same episodes."""

from __future__ import annotations

import numpy as np


def cartpole(obs: np.ndarray) -> np.ndarray:
    """Push the way the pole leans, except once the cart runs right: some episodes fall,
    others last to a short time limit."""
    return ((obs[:, 2] > 0) ^ (obs[:, 1] > 0.25)).astype(np.int64)
