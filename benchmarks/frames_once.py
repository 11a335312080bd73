"""Frames once (issue 27): bytes on disk and sampling time, next observations full vs once.

The data: ``NoisyFrames-v0`` (``frame_env``: 84x84x4 uint8 frames that compress as Atari's
roughly do) or, with ``--env pong``, ``PongFrames-v0`` (real Pong screens, 4x84x84), ``--envs``
envs stepped ``--steps`` times each with episodes of ``--length`` steps, recorded as the
Collector does (each next observation is the env's, the true final frame at an episode end).
Written as npz, HDF5 (lzf), Parquet (zstd) and sharded folders (npz and Parquet shards) in
both forms; then 256 transitions with their next observations drawn from the npz file and the
npz-shard folder opened as mapped ``ReplayBuffer`` storages, ``--draws`` times, median reported.

    .venv/bin/python benchmarks/frames_once.py --envs 8 --steps 500 --env pong
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _report import fmt_ratio, load_average
from frame_env import NoisyFrames, PongFrames

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from expcli import save
from expcli.formats import sharded
from expcli.formats.dataset import Dataset
from expcli.replay.storages import DatasetStorage
from expcli.spec import CircularState, FramesForm


def recorded(envs: int, steps: int, length: int, pong: bool = False) -> Dataset:
    """Steps of ``envs`` NoisyFrames (or PongFrames) envs, as ``steps`` memory rows hold them."""
    shape = (steps, envs, *((4, 84, 84) if pong else (84, 84, 4)))
    observations, following = np.empty(shape, np.uint8), np.empty(shape, np.uint8)
    terminated = np.zeros((steps, envs, 1), bool)
    truncated = np.zeros((steps, envs, 1), bool)
    for n in range(envs):
        env = PongFrames(length=length) if pong else NoisyFrames(length=length)
        seed = n
        frame, _ = env.reset(seed=seed)
        for t in range(steps):
            observations[t, n] = frame
            frame, _, term, trunc, _ = env.step(0)
            following[t, n] = frame
            terminated[t, n], truncated[t, n] = term, trunc
            if term or trunc:
                seed += envs
                frame, _ = env.reset(seed=seed)
    tensors = {
        "observations": observations,
        "next_observations": following,
        "actions": np.zeros((steps, envs, 1), np.int64),
        "rewards": np.ones((steps, envs, 1), np.float32),
        "terminated": terminated,
        "truncated": truncated,
    }
    env_id = "PongFrames-v0" if pong else "NoisyFrames-v0"
    return Dataset(tensors, CircularState(0, 0, filled=True), {"env_id": env_id})


def on_disk(path: Path) -> int:
    """Bytes of a file, or of every file of a folder."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.iterdir())
    return path.stat().st_size


def convert_to_folder(
    dataset: Dataset, path: Path, compression: str | None, shards: str | None, frames: str
) -> None:
    """Write ``dataset`` as a sharded folder (shards of 32 MB)."""
    sharded.write(
        dataset,
        path,
        overwrite=True,
        shard_bytes=32 << 20,
        shard_format=shards,
        compression=compression,
        frames=FramesForm(frames),
    )


def sample_seconds(path: Path, draws: int, batch: int = 256) -> float:
    """Median seconds of gathering ``batch`` transitions' observations and next observations.

    Through the storage's own ``gather``, as ``ReplayBuffer.sample`` reads a batch (a
    folder's mapped pages let go of as it goes).
    """
    storage = DatasetStorage.open(path)
    names = ["observations", "next_observations"]
    rng = np.random.default_rng(0)
    times = []
    for _ in range(draws):
        index = rng.integers(0, storage.capacity, batch)
        started = time.perf_counter()
        storage.gather(names, index)
        times.append(time.perf_counter() - started)
    storage.close()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--env", choices=("noisy", "pong"), default="noisy")
    args = parser.parse_args()
    dataset = recorded(args.envs, args.steps, args.length, args.env == "pong")
    print(
        f"# frames once: {dataset.metadata['env_id']}, {args.envs} envs x {args.steps} steps, "
        f"episodes of {args.length}"
    )
    print(f"# {load_average()}")
    rows = []
    with tempfile.TemporaryDirectory(dir=".") as folder:
        sizes: dict[tuple[str, str], int] = {}
        samples: dict[tuple[str, str], float] = {}
        kinds = (
            (".npz", None, None),
            (".h5", "lzf", None),
            (".parquet", "zstd", None),
            ("folder-npz", None, None),
            ("folder-parquet", "zstd", "parquet"),
        )
        for suffix, compression, shards in kinds:
            for frames in ("full", "once"):
                path = Path(folder) / f"data-{frames}{suffix}"
                started = time.perf_counter()
                if suffix.startswith("folder"):
                    convert_to_folder(dataset, path, compression, shards, frames)
                else:
                    save(dataset, path, compression=compression, frames=frames)
                seconds = time.perf_counter() - started
                sizes[(suffix, frames)] = on_disk(path)
                rows.append((f"{suffix} {compression or 'stored'} {frames}", path, seconds))
                if suffix in (".npz", "folder-npz"):
                    sample_seconds(path, 5)  # warm the page cache
                    samples[(suffix, frames)] = sample_seconds(path, args.draws)
        print("| file | form | bytes | vs full | write s |")
        print("| --- | --- | ---: | ---: | ---: |")
        for label, _, seconds in rows:
            suffix, _, frames = label.split()
            size = sizes[(suffix, frames)]
            ratio = fmt_ratio(size / sizes[(suffix, "full")])
            print(
                f"| {suffix} {label.split()[1]} | {frames} | {size:,} | {ratio} | {seconds:.2f} |"
            )
        print()
        print("| 256 transitions + next obs, mapped | form | median ms | vs full |")
        print("| --- | --- | ---: | ---: |")
        for (suffix, frames), seconds in samples.items():
            ratio = fmt_ratio(seconds / samples[(suffix, "full")])
            print(f"| {suffix} | {frames} | {seconds * 1e3:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
