"""A hand-written Pendulum-v1 policy for ``expcli collect --policy examples/mypolicy.py:act``.

``act`` gets one batch of observations, ``(num_envs, 3)`` rows of ``cos(theta), sin(theta),
theta_dot``, and returns ``(num_envs, 1)`` torques in Pendulum's ``[-2, 2]``: a damped push
toward upright, enough to show a policy that is not random.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def act(observations: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Torques for a batch of Pendulum observations."""
    cos, sin, speed = observations[:, 0], observations[:, 1], observations[:, 2]
    angle = np.arctan2(sin, cos)
    torque = -2.0 * angle - 0.5 * speed
    return np.clip(torque, -2.0, 2.0).astype(np.float32)[:, None]
