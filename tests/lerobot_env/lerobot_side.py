"""LeRobot's half of the interop check; runs in ``.venv-lerobot`` (``make lerobot-env``).

``load ROOT EXPECTED.npz``: ``LeRobotDataset("expcli/check", root=ROOT)`` loads a folder
that expcli wrote, and every frame's features equal the arrays in ``EXPECTED.npz`` (one
array per feature, frames in ``index`` order; images ``(F, H, W, C)`` uint8).

``create ROOT FRAMES.npz``: LeRobot's own writer (``LeRobotDataset.create``, ``add_frame``,
``save_episode``) makes a v3.0 folder of numeric and image features; the frames it was given
are saved to ``FRAMES.npz`` for expcli's side to compare with. ``create-video`` does the
same with a video feature (``use_videos=True``: AV1 MP4s, lossy); ``create-states`` with
two numeric observation features (``observation.state``, ``observation.environment_state``)
and no image, a data file that expcli's table reader reads alone.

``frames ROOT OUT.npz``: every frame ``LeRobotDataset("expcli/check", root=ROOT)`` gives,
one array per feature in ``index`` order, its video features as uint8 ``(F, H, W, C)``
(LeRobot's float frames times 255, rounded: they are the decoded bytes over 255).

LeRobot decodes videos with torchcodec, or else with torchvision's ``VideoReader`` on PyAV;
this environment has neither (torchvision 0.29 dropped ``VideoReader``), so
``_pyav_video_reader`` gives torchvision the reader it had, on PyAV, and LeRobot's own
``decode_video_frames_torchvision`` picks the frames (its seek, its tolerance).

Several commands may follow one another (``COMMAND ROOT NPZ COMMAND ROOT NPZ ...``), so that
LeRobot is imported once. Prints one line ``ok ...`` per command and exits 0, or raises.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

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
    worst = _quantiles_as_lerobots(dataset)
    normalised = _quantiles_normalise(dataset)
    print(
        f"ok load: {frames} frames, {dataset.meta.total_episodes} episodes, features equal, "
        f"fps {dataset.fps}, task {dataset[0]['task']!r}, robot {dataset.meta.robot_type!r}, "
        f"quantiles within {worst:.1e} of LeRobot's, QUANTILES normalised {normalised}"
    )


def _quantiles_as_lerobots(dataset: Any) -> float:
    """The largest difference of the folder's q01...q99 from LeRobot's own computation.

    LeRobot's ``compute_episode_stats`` over each episode's frames (images given as PNG
    files, as its writer gives them) and ``aggregate_stats`` over the episodes.
    """
    import tempfile

    from lerobot.datasets.compute_stats import aggregate_stats, compute_episode_stats
    from PIL import Image

    stats = dataset.meta.stats
    features = dataset.meta.features
    names = [n for n in stats if n in features]
    images = [n for n in names if features[n]["dtype"] in ("image", "video")]
    episodes = []
    with tempfile.TemporaryDirectory() as folder:
        for e in range(dataset.meta.total_episodes):
            start = dataset.meta.episodes[e]["dataset_from_index"]
            stop = dataset.meta.episodes[e]["dataset_to_index"]
            data: dict[str, Any] = {n: [] for n in names}
            for i in range(start, stop):
                item = dataset[i]
                for n in names:
                    value = item[n].numpy()
                    if n in images:  # float (C, H, W) in [0, 1]: back to the PNG it was
                        pixels = np.round(np.moveaxis(value, 0, -1) * 255).astype(np.uint8)
                        path = f"{folder}/{e}-{i}-{len(data[n])}-{n}.png"
                        Image.fromarray(
                            pixels.squeeze(-1) if pixels.shape[-1] == 1 else pixels
                        ).save(path)
                        data[n].append(path)
                    else:
                        data[n].append(value)
            data = {n: v if n in images else np.stack(v) for n, v in data.items()}
            episodes.append(compute_episode_stats(data, features))
    theirs = aggregate_stats(episodes)
    worst = 0.0
    for n in names:
        for q in ("q01", "q10", "q50", "q90", "q99"):
            ours = np.asarray(stats[n][q], np.float64)
            want = np.asarray(theirs[n][q], np.float64).reshape(ours.shape)
            assert np.allclose(ours, want, rtol=1e-6, atol=1e-7), (n, q, ours, want)
            worst = max(worst, float(np.abs(ours - want).max()))
    return worst


def _quantiles_normalise(dataset: Any) -> str:
    """LeRobot's ``QUANTILES`` normaliser (pi0.5's) on a batch of the folder's frames."""
    import torch
    from lerobot.configs.types import FeatureType, NormalizationMode, PolicyFeature
    from lerobot.processor.converters import batch_to_transition
    from lerobot.processor.core import TransitionKey
    from lerobot.processor.normalize_processor import NormalizerProcessorStep

    features = {
        "observation.state": PolicyFeature(
            FeatureType.STATE, tuple(dataset.meta.shapes["observation.state"])
        ),
        "action": PolicyFeature(FeatureType.ACTION, tuple(dataset.meta.shapes["action"])),
    }
    modes = {
        FeatureType.STATE: NormalizationMode.QUANTILES,
        FeatureType.ACTION: NormalizationMode.QUANTILES,
    }
    step = NormalizerProcessorStep.from_lerobot_dataset(dataset, features, modes)
    batch = next(iter(torch.utils.data.DataLoader(dataset, batch_size=8)))
    out = step(batch_to_transition(batch))
    stats = dataset.meta.stats
    for name, got in (
        ("observation.state", out[TransitionKey.OBSERVATION]["observation.state"]),
        ("action", out[TransitionKey.ACTION]),
    ):
        low, high = (np.asarray(stats[name][q], np.float32) for q in ("q01", "q99"))
        want = 2 * (batch[name].numpy() - low) / (high - low) - 1
        assert torch.isfinite(got).all() and np.allclose(got.numpy(), want, atol=1e-5), name
    return f"{tuple(out[TransitionKey.ACTION].shape)} actions"


def _pyav_video_reader() -> None:
    """Give torchvision back its PyAV ``VideoReader`` (removed in 0.29), which LeRobot calls."""
    import av
    import torch
    import torchvision.io

    if hasattr(torchvision.io, "VideoReader"):
        return

    class VideoReader:
        """torchvision's ``VideoReader`` with its ``pyav`` backend: frames RGB, channel first."""

        def __init__(self, path: str, stream: str = "video") -> None:
            self.container = av.open(path, metadata_errors="ignore")
            self._stream = self.container.streams.video[0]
            self._frames = self.container.decode(self._stream)

        def __iter__(self) -> VideoReader:
            return self

        def __next__(self) -> dict[str, object]:
            try:
                frame = next(self._frames)
            except av.error.EOFError:
                raise StopIteration from None
            pixels = torch.tensor(frame.to_rgb().to_ndarray()).permute(2, 0, 1)
            return {"data": pixels, "pts": float(frame.pts * frame.time_base)}

        def seek(self, time_s: float, keyframes_only: bool = False) -> VideoReader:
            offset = int(round(max(0.0, time_s) / self._stream.time_base))
            self.container.seek(offset, backward=True, any_frame=False, stream=self._stream)
            self._frames = self.container.decode(self._stream)
            return self

    torchvision.io.VideoReader = VideoReader


def frames(root: Path, out_path: Path) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    _pyav_video_reader()
    dataset = LeRobotDataset("expcli/check", root=root, video_backend="pyav")
    videos = set(dataset.meta.video_keys)
    assert videos, "no video feature"
    got: dict[str, list[np.ndarray]] = {}
    for i in range(len(dataset)):
        item = dataset[i]
        for name, value in item.items():
            if name == "task":
                continue
            array = value.numpy()
            if name in videos:  # float (C, H, W) in [0, 1]: the decoded bytes over 255
                scaled = np.moveaxis(array, 0, -1) * 255
                assert np.abs(scaled - np.round(scaled)).max() < 1e-3, name
                array = np.round(scaled).astype(np.uint8)
            got.setdefault(name, []).append(array)
    np.savez(out_path, **{name: np.stack(values) for name, values in got.items()})
    print(f"ok frames: {len(dataset)} frames, videos {sorted(videos)}")


def create(root: Path, frames_path: Path, video: bool = False, image: bool = True) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    seen: dict[str, Any] = (
        {"dtype": "image", "shape": (6, 5, 3), "names": ["height", "width", "channels"]}
        if image
        else {"dtype": "float32", "shape": (2,), "names": None}
    )
    features = {
        "observation.state": {"dtype": "float32", "shape": (3,), "names": None},
        "observation.image" if image else "observation.environment_state": seen,
        **(
            {
                "observation.images.cam": {
                    "dtype": "video",
                    "shape": (24, 32, 3),
                    "names": ["height", "width", "channels"],
                }
            }
            if video
            else {}
        ),
        "action": {"dtype": "float32", "shape": (2,), "names": None},
        "next.reward": {"dtype": "float32", "shape": (1,), "names": None},
        "next.done": {"dtype": "bool", "shape": (1,), "names": None},
    }
    dataset = LeRobotDataset.create(
        "expcli/made", fps=10, root=root, features=features, use_videos=video
    )
    rng = np.random.default_rng(0)
    saved: dict[str, list[np.ndarray]] = {name: [] for name in features}
    saved["episode_index"] = []
    for episode, length in enumerate((4, 3, 5)):
        for step in range(length):
            frame = {
                "observation.state": rng.normal(size=3).astype(np.float32),
                **(
                    {"observation.image": rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)}
                    if image
                    else {"observation.environment_state": rng.normal(size=2).astype(np.float32)}
                ),
                **({"observation.images.cam": _camera(rng, step)} if video else {}),
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


def _camera(rng: np.random.Generator, step: int) -> np.ndarray:
    """A smooth frame (a ramp that moves, plus a little noise), as a camera's would be."""
    rows, columns = np.mgrid[0:24, 0:32]
    ramp = (rows * 4 + columns * 3 + step * 9)[..., None] + np.array([0, 40, 80])
    return ((ramp + rng.integers(0, 8, ramp.shape)) % 256).astype(np.uint8)


if __name__ == "__main__":
    words = sys.argv[1:]
    for command, root, arrays in zip(words[::3], words[1::3], words[2::3], strict=True):
        if command == "create-video":
            create(Path(root), Path(arrays), video=True)
        elif command == "create-states":
            create(Path(root), Path(arrays), image=False)
        else:
            {"load": load, "create": create, "frames": frames}[command](Path(root), Path(arrays))
