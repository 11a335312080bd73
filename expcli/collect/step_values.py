"""One step's transitions as the columns a memory row holds (shared by the collectors)."""

from __future__ import annotations

from typing import Any

import numpy as np

from expcli.collect.reward_dtypes import RewardsNote
from expcli.collect.spaces import SpaceLayout
from expcli.collect.step_outcome import StepOutcome

__all__ = ["step_values"]


def step_values(
    obs_rows: dict[str, np.ndarray],
    final_rows: dict[str, np.ndarray],
    act_layout: SpaceLayout,
    actions: Any,
    outcome: StepOutcome,
    rewards_note: RewardsNote,
    num_envs: int,
) -> dict[str, np.ndarray]:
    """``{tensor name: (num_envs, ...) values}`` of one step.

    Observations, next ones, actions, rewards (in the note's dtype, narrowing counted) and
    the two flags.
    """
    n = num_envs
    values: dict[str, np.ndarray] = {}
    for suffix, rows in obs_rows.items():
        values["observations" + suffix] = rows
    for suffix, rows in final_rows.items():
        values["next_observations" + suffix] = rows
    for suffix, rows in act_layout.rows(actions, n).items():
        values["actions" + suffix] = rows
    values["rewards"] = rewards_note.store(outcome.rewards, outcome.valid, n)
    values["terminated"] = np.asarray(outcome.terminated, dtype=bool).reshape(n, 1)
    values["truncated"] = np.asarray(outcome.truncated, dtype=bool).reshape(n, 1)
    return values
