"""Benchmark the Parquet write rate episode by episode against step-major, in one run.

What it measures
    ``convert`` of an npz file read lazily and ``write`` of a dataset held in memory to
    one Parquet file, its rows
    episode by episode (``expcli-parquet/2``, the default) and time after time
    (``RowOrder.STEPS``, the ``/1`` layout), for CartPole-like numbers (4 float32
    observations and next observations, 8 envs) and 84x84 Atari-like frames (8 envs,
    episodes of about 100 steps). The episode writer has three paths: a source in memory
    is gathered from (``memory``); a lazy source waits in a window of the latest
    transitions where its episodes end (``npz``, as here); else in a spool of file rows
    that spills to disk (``npz spool``: this run forces it, as an episode that runs on
    for most of a large file would). With ``--sampling``: uniform batches of 256 a second
    drawn by ``ReplayBuffer`` from each order's file (its block cache cold: the first 50
    batches; then warm: the next 200). Each write rate is marginal: the raw megabytes
    between a small and a large run over the seconds between them (medians of
    ``--repeats``, run round-robin over the orders), so that start-up costs cancel. The
    target: episodes >= 0.8x steps.

Run it
    python benchmarks/parquet_order.py [--scale 1.0] [--repeats 3] [--sampling]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def _cartpole(steps: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    envs = 8
    observations = rng.standard_normal((steps, envs, 4)).astype(np.float32)
    return {
        "observations": observations,
        "next_observations": np.roll(observations, -1, axis=0),
        "actions": rng.integers(0, 2, (steps, envs, 1)),
        "rewards": np.ones((steps, envs, 1), np.float32),
        "terminated": rng.random((steps, envs, 1)) < 0.04,
        "truncated": np.zeros((steps, envs, 1), bool),
    }


def _frames(steps: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    envs = 8
    frames = np.zeros((steps, envs, 84, 84), np.uint8)
    frames[:, :, 20:60, 10:70] = rng.integers(0, 4, (steps, envs, 40, 60), dtype=np.uint8) * 60
    return {
        "observations": frames,
        "actions": rng.integers(0, 6, (steps, envs, 1)),
        "rewards": rng.integers(-1, 2, (steps, envs, 1)).astype(np.float32),
        "terminated": rng.random((steps, envs, 1)) < 0.01,
        "truncated": np.zeros((steps, envs, 1), bool),
    }


def _seconds(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _write(dataset: Any, npz: Path, source: str, order: Any, folder: Path) -> None:
    """Write one Parquet file in ``order`` from ``dataset`` in memory or ``npz`` read lazily.

    ``source`` ``npz spool``: as ``npz``, but no window fits, so the spool is used.
    """
    from expcli.formats import _parquet_episode_groups as groups
    from expcli.formats import open_lazy
    from expcli.formats import parquet_format as pf
    from expcli.formats.rows import WritePlan

    plan = WritePlan(folder / "out.parquet", "parquet")
    if source == "memory":
        pf.write(dataset, plan, order=order)
        return
    lazy, close = open_lazy(npz)
    window = groups.window_rows
    try:
        if source == "npz spool":
            groups.window_rows = lambda *_: 1 << 62  # type: ignore[assignment]
        pf.write(lazy, plan, order=order)
    finally:
        groups.window_rows = window
        close()


def sampling(folder: Path, scale: float) -> None:
    """Print uniform batches a second from a file of each order (cold cache, then warm)."""
    from expcli.formats import Dataset
    from expcli.formats import parquet_format as pf
    from expcli.formats.rows import WritePlan
    from expcli.replay import ReplayBuffer
    from expcli.spec import CircularState

    print(f"\n{'case':14} {'order':9} {'cold batches/s':>14} {'warm batches/s':>14}")
    rng = np.random.default_rng(1)
    for case, tensors in (
        ("CartPole-like", _cartpole(int(60_000 * scale), rng)),
        ("84x84 frames", _frames(int(2_000 * scale), rng)),
    ):
        dataset = Dataset(tensors, CircularState(0, 0, True), {"env_id": "X-v0"})
        for order in (pf.RowOrder.STEPS, pf.RowOrder.EPISODES):
            path = folder / f"sample-{order}.parquet"
            pf.write(dataset, WritePlan(path, "parquet"), order=order)
            buffer = ReplayBuffer(str(path), seed=0)
            rates = []
            for count in (50, 200):
                start = time.perf_counter()
                for _ in range(count):
                    buffer.sample_arrays(256)
                rates.append(count / (time.perf_counter() - start))
            print(f"{case:14} {order!s:9} {rates[0]:14.0f} {rates[1]:14.0f}")


def main() -> None:
    """Print the table: case, source, MB/s of each order, and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the run sizes")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sampling", action="store_true", help="also time uniform sampling")
    args = parser.parse_args()

    from expcli.formats import Dataset, write_dataset
    from expcli.formats import parquet_format as pf
    from expcli.spec import CircularState

    cases = {
        "CartPole-like": (_cartpole, (20_000, 100_000)),
        "84x84 frames": (_frames, (500, 2_500)),
    }
    print(
        f"{'case':14} {'source':9} {'steps MB/s':>10} {'episodes MB/s':>13} {'ratio':>6}"
        f"  (marginal, median of {args.repeats})"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for case, (make, sizes) in cases.items():
            rng = np.random.default_rng(0)
            runs = []
            for steps in (int(s * args.scale) for s in sizes):
                tensors = make(steps, rng)
                dataset = Dataset(tensors, CircularState(0, 0, True), {"env_id": "X-v0"})
                npz = write_dataset(dataset, folder / f"{steps}.npz")
                runs.append((dataset, npz, sum(a.nbytes for a in tensors.values()) / 1e6))
            for source in ("npz", "npz spool", "memory"):
                orders = (pf.RowOrder.STEPS, pf.RowOrder.EPISODES)
                times: dict[tuple[Any, int], list[float]] = {}
                for _ in range(args.repeats):  # round-robin: load on the machine hits both
                    for order in orders:
                        for at, (dataset, npz, _) in enumerate(runs):
                            call = functools.partial(_write, dataset, npz, source, order, folder)
                            times.setdefault((order, at), []).append(_seconds(call))
                megabytes = runs[1][2] - runs[0][2]
                rates = {}
                for order in orders:
                    small, large = (statistics.median(times[order, at]) for at in (0, 1))
                    rates[order] = megabytes / max(large - small, 1e-9)
                steps_rate, episodes_rate = rates[pf.RowOrder.STEPS], rates[pf.RowOrder.EPISODES]
                print(
                    f"{case:14} {source:9} {steps_rate:10.0f} {episodes_rate:13.0f} "
                    f"{episodes_rate / steps_rate:6.2f}"
                )
        if args.sampling:
            sampling(folder, args.scale)


if __name__ == "__main__":
    main()
