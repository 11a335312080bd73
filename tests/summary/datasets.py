"""Datasets for the summary tests: small, with known episodes, wrapped or not."""

from __future__ import annotations

import numpy as np

from expcli.formats import Dataset
from expcli.formats.layouts._episodes import column_rows
from expcli.spec import CircularState


def random_dataset(
    size: int = 7,
    envs: int = 3,
    state: CircularState | None = None,
    *,
    seed: int = 0,
    done_rate: float = 0.25,
    metadata: dict | None = None,
) -> Dataset:
    """A dataset of random values whose unwritten rows hold junk (huge numbers and NaN),
    which no statistic may see."""
    rng = np.random.default_rng(seed)
    state = state or CircularState(0, 0, True)
    observations = rng.normal(3.0, 2.0, (size, envs, 2)).astype(np.float32)
    tensors = {
        "observations": observations,
        "next_observations": rng.normal(size=(size, envs, 2)).astype(np.float32),
        "actions": rng.integers(-5, 5, (size, envs, 1)),
        "rewards": rng.normal(1.0, 1.0, (size, envs, 1)).astype(np.float32),
        "terminated": rng.random((size, envs, 1)) < done_rate,
        "truncated": rng.random((size, envs, 1)) < done_rate / 2,
        "log_prob": rng.normal(-1e6, 1e-3, (size, envs)).astype(np.float64),
    }
    dataset = Dataset(tensors, state, dict(metadata or {}))
    written = np.zeros((size, envs), dtype=bool)
    for j, rows in enumerate(column_rows(dataset)):
        written[rows, j] = True
    for name, array in tensors.items():
        if array.dtype.kind == "f":
            array[~written] = np.nan if name == "rewards" else 1e30
        elif array.dtype.kind == "i":
            array[~written] = 10**12
        else:
            array[~written] = True
    return dataset
