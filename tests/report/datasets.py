"""Small datasets for the report tests: frames whose every pixel says where it was stored."""

from __future__ import annotations

import numpy as np

from expcli.formats import Dataset
from expcli.spec import CircularState

HEIGHT, WIDTH = 12, 10
ACTIONS = 3


def frames_dataset(
    rows: int = 40,
    envs: int = 2,
    *,
    state: CircularState | None = None,
    seed: int = 0,
    height: int = HEIGHT,
    width: int = WIDTH,
) -> Dataset:
    """uint8 RGB frames (each unlike any other: its row, env and noise), Discrete actions,
    rewards of -1, 0 and 1, and episodes of 3 to 9 steps ending terminated or truncated."""
    rng = np.random.default_rng(seed)
    frames = rng.integers(0, 256, (rows, envs, height, width, 3), dtype=np.uint8)
    frames[:, :, 0, 0, 0] = np.arange(rows, dtype=np.uint8)[:, None]
    frames[:, :, 0, 0, 1] = np.arange(envs, dtype=np.uint8)[None, :]
    terminated = np.zeros((rows, envs, 1), bool)
    truncated = np.zeros((rows, envs, 1), bool)
    for env in range(envs):
        row = int(rng.integers(2, 9))
        while row < rows:
            (terminated if rng.random() < 0.7 else truncated)[row, env] = True
            row += int(rng.integers(3, 10))
    tensors = {
        "observations": frames,
        "next_observations": np.roll(frames, -1, axis=0),
        "actions": rng.integers(0, ACTIONS, (rows, envs, 1)),
        "rewards": rng.choice(np.float32([-1, 0, 0, 0, 1]), (rows, envs, 1)),
        "terminated": terminated,
        "truncated": truncated,
    }
    metadata = {
        "env_id": "Synthetic/Frames-v0",
        "observation_space": {"type": "Box", "low": 0, "high": 255,
                              "shape": [height, width, 3], "dtype": "uint8"},
        "action_space": {"type": "Discrete", "n": ACTIONS, "start": 0},
        "seed": seed,
    }  # fmt: skip
    return Dataset(tensors, state or CircularState(0, 0, True), metadata)
