"""Sampling from compressed sources through the block cache: ms per batch and hit rate.

What it measures
    ``ReplayBuffer`` batches (every tensor gathered) from the same frame data stored as a
    mapped ``.npz`` (the floor) and as compressed sources: lzf HDF5, zstd Parquet, a
    folder of zstd Parquet shards. Two workloads: uniform (256 transitions) and slices
    (``SliceSampler``: 32 slices of 16 steps). Each source is opened once per cache size
    (``DatasetStorage.open(path, cache_bytes=...)``) and warmed until it is full or a batch
    decodes nothing new (at most 3 s), so the figures are the steady state; the hit rate
    and the MiB decoded per batch are those of the timed batches (``storage.cache_stats()``).
    Figures are medians of repeats run round-robin over the sources, so that load on the
    machine hits all alike; the ratio is to the npz's time in the same run.

    ``--group-mib`` also writes the Parquet file at other row-group sizes (the writer's
    ``GROUP_BYTES``) and times a scan of each (every tensor read in order, as a convert
    reads it): what a smaller group costs a scan against what it saves a random draw.

The data
    ``--steps`` steps of 8 envs of 84x84 uint8 frames, observations and next observations
    (real Pong screens through ``benchmarks.frame_env.PongFrames``, subsampled to 84x84,
    when ale_py is installed; else frames of background and a patch of 2-bit noise),
    actions, rewards and the episode flags. ``report(floor, sources)`` times and prints any
    files (``benchmarks/sampling.py`` may call it on its own data).

Run it
    python benchmarks/_sampling_blocks.py                      # 4,000 steps, about 2 minutes
    python benchmarks/_sampling_blocks.py --cache-mib 128 512 --group-mib 32 8
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _report import load_average

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENVS = 8
UNIFORM, SLICES, SLICE_LEN = 256, 32, 16
WORKLOADS = ("uniform", "slice")
MIB = 1 << 20


def frame_data(steps: int, envs: int = ENVS, seed: int = 0) -> dict[str, np.ndarray]:
    """Frames of ``steps`` steps of ``envs`` envs, ``(steps, envs, 84, 84)`` uint8, and the rest."""
    screens = _screens(steps + 1, seed)
    offsets = np.arange(envs) * (len(screens) // envs)  # envs far apart in the recording
    frames = screens[(np.arange(steps + 1)[:, None] + offsets) % len(screens)]
    rng = np.random.default_rng(seed)
    return {
        "observations": frames[:-1],
        "next_observations": frames[1:],
        "actions": rng.integers(0, 6, (steps, envs)),
        "rewards": rng.standard_normal((steps, envs), dtype=np.float32),
        "terminated": rng.random((steps, envs)) < 0.002,
        "truncated": np.zeros((steps, envs), bool),
    }


def _screens(count: int, seed: int) -> np.ndarray:
    """``count`` 84x84 screens: Pong's when ale_py is there, else noise on a background."""
    try:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from frame_env import PongFrames

        return PongFrames._record(count)[:, -1]
    except ImportError:
        rng = np.random.default_rng(seed)
        screens = np.zeros((count, 84, 84), np.uint8)
        screens[:, 20:60, 10:70] = rng.integers(0, 4, (count, 40, 60), dtype=np.uint8) * 60
        return screens


def write_sources(folder: Path, steps: int, group_mib: Sequence[int] = ()) -> dict[str, Path]:
    """The frame data as npz, lzf HDF5, zstd Parquet (and at each ``group_mib``) and shards."""
    from expcli.formats import Dataset, parquet_format, sharded, write_dataset
    from expcli.spec import CircularState

    dataset = Dataset(frame_data(steps), CircularState(0, 0, True))
    paths = {
        "npz (mapped)": write_dataset(dataset, folder / "frames.npz"),
        "hdf5 lzf": write_dataset(dataset, folder / "frames.h5", compression="lzf"),
        "parquet zstd": write_dataset(dataset, folder / "frames.parquet"),
    }
    sharded.write(dataset, folder / "shards", overwrite=False, shard_format="parquet")
    paths["parquet shards"] = folder / "shards"
    default = parquet_format.GROUP_BYTES
    try:
        for mib in group_mib:
            parquet_format.GROUP_BYTES = mib * MIB
            path = write_dataset(dataset, folder / f"frames-{mib}.parquet")
            paths[f"parquet zstd, {mib} MB groups"] = path
    finally:
        parquet_format.GROUP_BYTES = default
    return paths


@dataclass
class Timing:
    """A source's batches of one workload: seconds per batch and the cache's counts."""

    seconds: list[float] = field(default_factory=list)
    hits: int = 0
    lookups: int = 0
    decoded: int = 0
    batches: int = 0


def measure(
    floor: Path,
    sources: dict[str, Path],
    cache_bytes: int | None = None,
    repeats: int = 5,
    budget: float = 0.5,
) -> dict[tuple[str, str], Timing]:
    """Time uniform and slice batches from ``floor`` (a mapped file) and each source.

    Every source is opened with a block cache of ``cache_bytes`` (None: the default) and
    warmed up; batches are counted to take about ``budget`` seconds, and the repeats run
    round-robin. Returns the timings by (label, workload); the floor's label is "floor".
    """
    from sampling import time_batches

    from expcli.formats.block_cache import DEFAULT_CACHE_BYTES
    from expcli.replay import DatasetStorage, RandomSampler, ReplayBuffer, SliceSampler

    labelled = {"floor": floor, **sources}
    storages = {
        label: DatasetStorage.open(path, cache_bytes=cache_bytes or DEFAULT_CACHE_BYTES)
        for label, path in labelled.items()
    }
    draws: dict[tuple[str, str], Callable[[], object]] = {}
    for label, storage in storages.items():
        uniform = ReplayBuffer(storage, sampler=RandomSampler(), batch_size=UNIFORM, seed=0)
        slices = ReplayBuffer(
            storage,
            sampler=SliceSampler(slice_len=SLICE_LEN),
            batch_size=SLICES * SLICE_LEN,
            seed=0,
        )
        draws[label, "uniform"], draws[label, "slice"] = uniform.sample, slices.sample
    counts = {}
    for key, draw in draws.items():  # warm up (fill the cache), then calibrate
        warm_up(draw, storages[key[0]])
        per = time_batches(draw, 5) / 5
        counts[key] = max(5, int(budget / max(per, 1e-6)))
    timings = {key: Timing() for key in draws}
    for _ in range(repeats):
        for key, draw in draws.items():
            storage = storages[key[0]]
            before = storage.cache_stats()
            seconds = time_batches(draw, counts[key])
            since = storage.cache_stats() - before
            timing = timings[key]
            timing.seconds.append(seconds / counts[key])
            timing.hits += since.hits
            timing.lookups += since.hits + since.misses
            timing.decoded += since.bytes_decoded
            timing.batches += counts[key]
    for storage in storages.values():
        storage.close()
    return timings


def warm_up(draw: Callable[[], object], storage: Any, seconds: float = 3.0) -> None:
    """Draw until a batch decodes nothing new (the cache holds what it will) or ``seconds``.

    A cache of small blocks (HDF5 chunks of one env column) takes many batches to fill:
    timing it after a few would count the filling as the steady state.
    """
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        before = storage.cache_stats()
        for _ in range(5):
            draw()
        since = storage.cache_stats() - before
        if not since.misses or since.bytes_held >= 0.9 * since.max_bytes:
            return


def report(
    floor: Path,
    sources: dict[str, Path] | Sequence[Path],
    cache_bytes: int | None = None,
    repeats: int = 5,
) -> None:
    """Print the table of ``measure``: each source (labelled, or by its name) against ``floor``."""
    from expcli.formats.block_cache import DEFAULT_CACHE_BYTES

    labelled = sources if isinstance(sources, dict) else {Path(p).name: Path(p) for p in sources}
    cache = cache_bytes or DEFAULT_CACHE_BYTES
    print(table(measure(floor, labelled, cache, repeats), cache))


def table(timings: dict[tuple[str, str], Timing], cache_bytes: int) -> str:
    """The timings as a table: ms per batch, ratio to the floor, hit rate, MiB decoded."""
    lines = [
        f"block cache {cache_bytes / MIB:,.0f} MiB",
        f"{'source':<32} {'workload':<8} {'ms/batch':>9} {'spread':>7} {'vs npz':>7} "
        f"{'hit rate':>9} {'MiB decoded/batch':>18}",
    ]
    for workload in WORKLOADS:
        floor = statistics.median(timings["floor", workload].seconds)
        for (label, kind), timing in timings.items():
            if kind != workload:
                continue
            ms = statistics.median(timing.seconds) * 1e3
            spread = (max(timing.seconds) - min(timing.seconds)) / statistics.median(timing.seconds)
            name = "npz (mapped), the floor" if label == "floor" else label
            rate = f"{timing.hits / timing.lookups:.1%}" if timing.lookups else "-"
            decoded = timing.decoded / timing.batches / MIB if timing.lookups else 0.0
            lines.append(
                f"{name:<32} {workload:<8} {ms:>9.2f} {spread:>7.0%} "
                f"{ms / (floor * 1e3):>6.2f}x {rate:>9} {decoded:>18.1f}"
            )
    return "\n".join(lines)


def scan_seconds(paths: dict[str, Path], repeats: int = 5) -> dict[str, float]:
    """Median seconds to read every tensor of each file in order, slice by slice (no cache)."""
    from expcli.formats import open_lazy
    from expcli.formats.lazy import row_chunks

    times: dict[str, list[float]] = {label: [] for label in paths}
    for _ in range(repeats):
        for label, path in paths.items():
            start = time.perf_counter()
            dataset, close = open_lazy(path)
            for tensor in dataset.tensors.values():
                step = row_chunks(tensor).step
                for first in row_chunks(tensor):
                    np.asarray(tensor[first : first + step])
            close()
            times[label].append(time.perf_counter() - start)
    return {label: statistics.median(seconds) for label, seconds in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4000, help="steps of 8 envs (default 4000)")
    parser.add_argument("--cache-mib", type=int, nargs="+", default=[0], help="0: the default")
    parser.add_argument("--group-mib", type=int, nargs="*", default=[], help="Parquet groups")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"machine: {os.cpu_count()} cores; {load_average()}")
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_sources(Path(tmp), args.steps, args.group_mib)
        frames = 2 * args.steps * ENVS * 84 * 84 / MIB
        print(
            f"data: {args.steps:,} steps x {ENVS} envs of 84x84 uint8 observations and next "
            f"observations ({frames:,.0f} MiB decoded); uniform {UNIFORM} transitions, "
            f"slices {SLICES} x {SLICE_LEN} steps; medians of {args.repeats} repeats"
        )
        floor = paths.pop("npz (mapped)")
        for mib in args.cache_mib:
            print()
            report(floor, paths, mib * MIB or None, args.repeats)
        if args.group_mib:
            files = {k: v for k, v in paths.items() if "groups" in k or k == "parquet zstd"}
            print("\nscan (every tensor read in order, as convert reads it), median seconds")
            for label, seconds in scan_seconds(files, args.repeats).items():
                print(f"  {label:<32} {seconds:.2f}")
    print(f"\n{load_average()} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
