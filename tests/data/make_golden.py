"""Write the golden files of the ``expcli/1`` schema: ``python -m tests.data.make_golden``.

Run it only when the schema changes on purpose (and say so in the commit): the golden
files are committed so that ``tests/test_golden.py`` reads bytes written by an earlier
expcli, and a reader or writer that drifts from the schema fails there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from expcli.formats import Dataset, write_dataset
from expcli.spec import CircularState

HERE = Path(__file__).parent
NAMES = ("golden.pt", "golden.npz", "golden.csv", "golden.h5", "golden_episodes.parquet")
"""Written by ``main``. ``golden.parquet`` is not: it is the step-major ``expcli-parquet/1``
file expcli 0.1.0 wrote, kept so that files of that layout are still read as they were."""


def golden_dataset() -> Dataset:
    """Three rows of two envs, wrapped once; values chosen to be exact in every format."""
    observations = (np.arange(12, dtype=np.float32).reshape(3, 2, 2) - 4) / 4
    observations[0, 0, 0] = np.nan
    observations[1, 1, 1] = -0.0
    observations[2, 0, 1] = np.inf
    return Dataset(
        {
            "observations": observations,
            "actions": np.array([[[0], [1]], [[2], [3]], [[1], [0]]], dtype=np.int64),
            "rewards": np.array([[[0.5], [-1]], [[2], [0]], [[1e-3], [3]]], dtype=np.float32),
            "terminated": np.array([[[0], [0]], [[1], [0]], [[0], [1]]], dtype=bool),
            "truncated": np.array([[[0], [1]], [[0], [0]], [[0], [0]]], dtype=bool),
            "infos/steps": np.array([[7, 8], [9, 10], [11, 12]], dtype=np.int32),
            "frames": np.arange(24, dtype=np.uint8).reshape(3, 2, 2, 2),
        },
        CircularState(memory_index=1, env_index=1, filled=True),
        {
            "env_id": "Golden-v0",
            "seed": 7,
            "created": "2025-01-01T00:00:00+00:00",
            "collector": {"mode": "dummy", "steps": 6},
        },
    )


def main() -> None:
    dataset = golden_dataset()
    for name in NAMES:
        write_dataset(dataset, HERE / name, overwrite=True)


if __name__ == "__main__":
    main()
