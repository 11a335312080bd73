"""Benchmark episode fingerprints (``inspect --check``) against BLAKE2b over the same bytes.

What it measures
    Two ``--size-mb`` MiB datasets (default 1024) held in memory, so that only the hashing
    and the cutting are timed, not a reader: ``frames`` (4 envs, observations and
    next_observations 84x84 uint8, actions, rewards, flags; episodes of ~1,000 steps) and
    ``cartpole`` (16 envs, observations and next_observations 4 float32, actions int64,
    rewards float32, flags; 46 bytes a transition, episodes of ~22 steps). For each:
    ``episode_fingerprints(dataset)`` (chunks of the chronological pass, each laid out
    transition by transition, one hash update per episode piece per chunk) against the
    floor: ``hashlib.blake2b`` fed each tensor whole, one call per tensor.

How it times
    In this process, medians of ``--repeats`` (default 3), interleaved round-robin, so the
    machine's load hits every row alike. MB/s is the dataset's bytes over the time.

Target
    fingerprints >= 0.5x the floor's MB/s on frames (hashing dominates); on cartpole the
    per-episode work (a digest every 22 transitions) shows, and the figure says how much.

Run it
    python benchmarks/fingerprints.py [--size-mb 1024] [--repeats 3]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._report import fmt_ratio, load_average, version

MIB = 1 << 20
KINDS = ("fingerprints", "blake2b")


def make_dataset(kind: str, size_mb: int) -> Any:
    """``frames`` or ``cartpole`` data of about ``size_mb`` MiB, in memory."""
    from expcli.formats import Dataset
    from expcli.spec import CircularState

    rng = np.random.default_rng(0)
    if kind == "frames":
        envs, feature, dtype, done_rate = 4, (84, 84), np.uint8, 1e-3
    else:
        envs, feature, dtype, done_rate = 16, (4,), np.float32, 1 / 22
    row = 2 * int(np.prod(feature)) * np.dtype(dtype).itemsize + 8 + 4 + 1 + 1
    rows = size_mb * MIB // (row * envs)
    shape = (rows, envs, *feature)

    def values() -> np.ndarray:
        if dtype == np.uint8:
            return np.frombuffer(rng.bytes(int(np.prod(shape))), np.uint8).reshape(shape)
        return rng.standard_normal(shape, dtype=np.float32)

    tensors = {
        "observations": values(),
        "next_observations": values(),
        "actions": rng.integers(0, 4, (rows, envs, 1)),
        "rewards": rng.standard_normal((rows, envs, 1), dtype=np.float32),
        "terminated": rng.random((rows, envs, 1)) < done_rate,
        "truncated": np.zeros((rows, envs, 1), bool),
    }
    return Dataset(tensors, CircularState(0, 0, True), {})


def run_one(kind: str, dataset: Any) -> float:
    """Seconds for one measurement."""
    from expcli.summary.fingerprints import episode_fingerprints

    started = time.perf_counter()
    if kind == "fingerprints":
        episode_fingerprints(dataset)
    else:
        state = hashlib.blake2b(digest_size=16)
        for array in dataset.tensors.values():
            state.update(array)
        state.digest()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(
        f"episode fingerprints vs hashlib.blake2b over the same bytes: {args.size_mb} MiB "
        f"each, in memory, median of {args.repeats}"
    )
    print(
        f"python {platform.python_version()}, numpy {version('numpy')}, "
        f"{os.cpu_count()} cores, {load_average()}"
    )
    print()
    header = f"{'data':<9} {'what':<14} {'episodes':>9} {'seconds':>8} {'MB/s':>7} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    from expcli.summary.fingerprints import episode_fingerprints

    for name in ("frames", "cartpole"):
        dataset = make_dataset(name, args.size_mb)
        size = sum(array.nbytes for array in dataset.tensors.values())
        episodes = len(episode_fingerprints(dataset))  # also warms the code paths
        times: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for _ in range(args.repeats):
            for kind in KINDS:
                times[kind].append(run_one(kind, dataset))
        floor = statistics.median(times["blake2b"])
        for kind in KINDS:
            seconds = statistics.median(times[kind])
            count = f"{episodes:,}" if kind == "fingerprints" else ""
            print(
                f"{name:<9} {kind:<14} {count:>9} {seconds:>8.2f} {size / 1e6 / seconds:>7.0f} "
                f"{fmt_ratio(floor / seconds):>7}"
            )
        del dataset
    print()
    print("ratio: the floor's time over this row's (1.00x: as fast as BLAKE2b alone)")
    print("target: fingerprints >= 0.50x on frames")


if __name__ == "__main__":
    main()
