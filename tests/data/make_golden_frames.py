"""Write the golden files of the once form: ``python -m tests.data.make_golden_frames``.

Schema ``expcli/2``: ``next_observations`` stored once (``formats.frames``). Run it only
when that form changes on purpose (and say so in the commit): ``tests/test_golden.py``
reads the committed files, so a reader that drifts from the form fails there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from expcli.formats import Dataset, sharded, write_dataset
from expcli.spec import CircularState, FramesForm

HERE = Path(__file__).parent
NAMES = ("golden_frames.pt", "golden_frames.npz", "golden_frames.h5", "golden_frames.parquet")
FOLDER = "golden_frames_folder"
"""npz shards of two rows each: each keeps its last row (no wrap)."""


def golden_frames_dataset() -> Dataset:
    """Four rows of two envs, full; 8x8 uint8 frames, one episode end at row 1 of env 0.

    ``next_observations`` is the next row's frame but at the episode end (the true last
    frame, 255 - it) and in the newest row, 3 (frames never stored as observations: 7 + the
    first row's).
    """
    observations = (np.arange(4 * 2 * 64).reshape(4, 2, 8, 8) % 251).astype(np.uint8)
    following = np.roll(observations, -1, axis=0).copy()
    following[1, 0] = 255 - following[1, 0]
    following[3] = following[3] + 7
    terminated = np.zeros((4, 2, 1), dtype=bool)
    terminated[1, 0] = True
    return Dataset(
        {
            "observations": observations,
            "next_observations": following,
            "actions": np.array([[[0], [1]], [[2], [3]], [[1], [0]], [[3], [2]]], np.int64),
            "terminated": terminated,
        },
        CircularState(memory_index=0, env_index=0, filled=True),
        {"env_id": "GoldenFrames-v0", "created": "2026-11-27T00:00:00+00:00"},
    )


def main() -> None:
    dataset = golden_frames_dataset()
    for name in NAMES:
        write_dataset(dataset, HERE / name, overwrite=True, frames="once")
    row_bytes = sum(array[0].nbytes for array in dataset.tensors.values())
    sharded.write(
        dataset, HERE / FOLDER, overwrite=True, shard_bytes=2 * row_bytes, frames=FramesForm.ONCE
    )


if __name__ == "__main__":
    main()
