"""LeRobot's half of the interop check; runs in ``.venv-lerobot`` (``make lerobot-env``).

``load ROOT EXPECTED.npz``: ``LeRobotDataset("expcli/check", root=ROOT)`` loads a folder
that expcli wrote, and every frame's features equal the arrays in ``EXPECTED.npz`` (one
array per feature, frames in ``index`` order; images ``(F, H, W, C)`` uint8).

``create ROOT FRAMES.npz``: LeRobot's own writer (``LeRobotDataset.create``, ``add_frame``,
``save_episode``) makes a v3.0 folder of numeric and image features; the frames it was given
are saved to ``FRAMES.npz`` for expcli's side to compare with.

Prints one line ``ok ...`` and exits 0, or raises.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def load(root: Path, expected_path: Path) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset("expcli/check", root=root)
    expected = dict(np.load(expected_path))
    frames = len(dataset)
    assert frames == len(expected["index"]), (frames, len(expected["index"]))
    assert dataset.meta.total_episodes == int(expected["episode_index"].max()) + 1
    for i in range(frames):
        item = dataset[i]
        for name, values in expected.items():
            got = item[name].numpy()
            want = values[i]
            if got.ndim == 3 and want.ndim == 3 and got.shape[0] == want.shape[2]:
                # LeRobot gives images channel first, as float32 in [0, 1]
                got = np.round(np.moveaxis(got, 0, -1) * 255).astype(np.uint8)
            assert np.array_equal(got.reshape(want.shape), want), (name, i, got, want)
        assert isinstance(item["task"], str) and item["task"], item["task"]
    stats = dataset.meta.stats
    assert stats is not None and "action" in stats, stats
    print(f"ok load: {frames} frames, {dataset.meta.total_episodes} episodes, features equal")


def create(root: Path, frames_path: Path) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    features = {
        "observation.state": {"dtype": "float32", "shape": (3,), "names": None},
        "observation.image": {
            "dtype": "image",
            "shape": (6, 5, 3),
            "names": ["height", "width", "channels"],
        },
        "action": {"dtype": "float32", "shape": (2,), "names": None},
        "next.reward": {"dtype": "float32", "shape": (1,), "names": None},
        "next.done": {"dtype": "bool", "shape": (1,), "names": None},
    }
    dataset = LeRobotDataset.create(
        "expcli/made", fps=10, root=root, features=features, use_videos=False
    )
    rng = np.random.default_rng(0)
    saved: dict[str, list[np.ndarray]] = {name: [] for name in features}
    saved["episode_index"] = []
    for episode, length in enumerate((4, 3, 5)):
        for step in range(length):
            frame = {
                "observation.state": rng.normal(size=3).astype(np.float32),
                "observation.image": rng.integers(0, 256, (6, 5, 3), dtype=np.uint8),
                "action": rng.normal(size=2).astype(np.float32),
                "next.reward": rng.normal(size=1).astype(np.float32),
                "next.done": np.array([step == length - 1 and episode != 1]),
            }
            dataset.add_frame({**frame, "task": "pick"})
            for name, value in frame.items():
                saved[name].append(value)
            saved["episode_index"].append(np.array(episode))
        dataset.save_episode()
    dataset.finalize()
    np.savez(frames_path, **{name: np.stack(v) for name, v in saved.items()})
    print(f"ok create: {len(saved['action'])} frames in 3 episodes")


if __name__ == "__main__":
    command, root, arrays = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    {"load": load, "create": create}[command](root, arrays)
