"""A small wrapped two-env dataset whose episodes are known by heart."""

from __future__ import annotations

import numpy as np

from expcli.formats import Dataset
from expcli.spec import CircularState

T, N = 6, 2

# With state (memory_index=2, env_index=1, filled): column 0 is oldest at row 3, column 1
# at row 2. Column 0 terminates at rows 4 and 1; column 1 terminates at row 3 and is
# truncated at row 5.
CHRONOLOGICAL = [[3, 4, 5, 0, 1, 2], [2, 3, 4, 5, 0, 1]]
EPISODES = [[[3, 4], [5, 0, 1], [2]], [[2, 3], [4, 5], [0, 1]]]


WRAPPED = CircularState(2, 1, True)


def make_dataset(state: CircularState = WRAPPED) -> Dataset:
    t = np.arange(T)[:, None]
    j = np.arange(N)[None, :]
    observations = np.stack([t + 0 * j, 0 * t + j, 10 * t + j], axis=-1).astype(np.float32)
    terminated = np.zeros((T, N, 1), dtype=bool)
    terminated[[4, 1], 0] = True
    terminated[3, 1] = True
    truncated = np.zeros((T, N, 1), dtype=bool)
    truncated[5, 1] = True
    tensors = {
        "observations": observations,
        "next_observations": observations + np.float32(0.5),
        "actions": (t * N + j)[..., None].astype(np.int64),
        "rewards": (t + j / 10)[..., None].astype(np.float32),
        "terminated": terminated,
        "truncated": truncated,
        "infos/lives": (100 + t * N + j)[..., None].astype(np.int64),
        "log_prob": (-(t * N + j) / 7)[..., None].astype(np.float64),
    }
    return Dataset(tensors, state, {"env_id": "Toy-v0", "seed": 3})
