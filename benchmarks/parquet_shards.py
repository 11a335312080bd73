"""Benchmark sharded folders of Parquet shards against npz shards: collect rate, sampling cost.

What it measures
    * ``expcli collect`` of the frame envs of ``benchmarks.frame_env`` (84x84x4 uint8
      frames, 8 envs, dummy mode): ``ConstantFrame-v0`` (one constant frame: zstd has an
      easy time), ``PongFrames-v0`` (real Pong screens, 84x84 grayscale stacked by four,
      replayed) and ``NoisyFrames-v0`` (a worst case: background and a patch of 2-bit
      noise, which zstd shrinks only 8x) into a sharded folder, ``--shard-format npz`` and
      ``--shard-format parquet`` (zstd, its default; and snappy), each in a fresh process
      for a small and a large number of steps: the marginal rate (steps between the two
      over the time between them) cancels start-up; medians of ``--repeats`` run
      round-robin so that load hits all alike. Target (issue 23): Parquet >= 0.7x npz.
    * ``ReplayBuffer`` sampling (uniform batches of 256 transitions, every tensor gathered)
      from the large NoisyFrames run's two folders, opened lazily as ``expcli sample``
      opens them: npz shards are mapped, so a batch reads its rows; a Parquet shard is
      compressed, so a batch decodes each row group it touches. Medians of the batch times.

Run it
    python benchmarks/parquet_shards.py            # about 8 minutes on 2 cores; 2.9 GB of disk
    python benchmarks/parquet_shards.py --quick
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import fmt_rate, fmt_ratio, load_average, ratio, version

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENV_IDS = (
    "benchmarks.frame_env:ConstantFrame-v0",
    "benchmarks.frame_env:PongFrames-v0",
    "benchmarks.frame_env:NoisyFrames-v0",
)
ENVS = 8
# (name, collect options): npz shards, Parquet shards (zstd, the default), Parquet with snappy
VARIANTS = {
    "npz": ["--shard-format", "npz"],
    "parquet": ["--shard-format", "parquet"],
    "parquet snappy": ["--shard-format", "parquet", "--compression", "snappy"],
}


def collect(env_id: str, folder: Path, variant: str, steps: int) -> float:
    """Wall time of ``expcli collect`` of ``steps`` into ``folder`` (a fresh process)."""
    args = ["collect", env_id, "--envs", str(ENVS), "--mode", "dummy", "--steps", str(steps)]
    args += ["--seed", "0", "-q", "--overwrite", *VARIANTS[variant]]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "expcli", *args, "-o", str(folder)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,  # ALE's banner
        text=True,
    )
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"collect {env_id} failed:\n{done.stderr}")
    return seconds


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def sample_times(folder: Path, batches: int) -> tuple[float, float]:
    """Seconds to open the folder and draw the first batch; median seconds of the next ones."""
    from expcli.replay import RandomSampler, ReplayBuffer
    from expcli.replay.storages import DatasetStorage

    start = time.perf_counter()
    storage = DatasetStorage.open(folder)
    buffer = ReplayBuffer(storage, sampler=RandomSampler(), seed=0)
    buffer.sample(256)
    first = time.perf_counter() - start
    times = []
    for _ in range(batches):
        t = time.perf_counter()
        buffer.sample(256)
        times.append(time.perf_counter() - t)
    storage.close()
    return first, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # the large run must outlast start-up (about 2.5 s) many times over, or noise decides
    parser.add_argument("--small", type=int, default=3_200, help="steps of the small run")
    parser.add_argument("--large", type=int, default=51_200, help="steps of the large run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", type=int, default=20, help="sampled batches timed")
    parser.add_argument("--quick", action="store_true", help="800 and 4,800 steps, 2 repeats")
    options = parser.parse_args()
    if options.quick:
        options.small, options.large, options.repeats = 800, 4_800, 2
    print(f"# Parquet vs npz shards: 84x84x4 frames, {ENVS} envs, dummy mode")
    print(f"python {sys.version.split()[0]}, pyarrow {version('pyarrow')}, {load_average()}")
    work = Path(tempfile.mkdtemp(prefix="pqshards-bench-"))
    runs = [(env_id, kind) for env_id in ENV_IDS for kind in VARIANTS]
    try:
        times: dict[tuple[str, str, int], list[float]] = {}
        for _ in range(options.repeats):
            for steps in (options.small, options.large):
                for env_id, kind in runs:
                    folder = work / f"{env_id.split(':')[1]}-{kind.replace(' ', '-')}-{steps}"
                    seconds = collect(env_id, folder, kind, steps)
                    times.setdefault((env_id, kind, steps), []).append(seconds)
                    if steps == options.small:
                        shutil.rmtree(folder)
        print(f"\ncollect, {options.small:,} and {options.large:,} steps\n")
        print("| env | shards | small run (s) | large run (s) | marginal rate (steps/s) | "
              "vs npz | folder size |")  # fmt: skip
        print("|---|---|---|---|---|---|---|")
        for env_id in ENV_IDS:
            rates = {}
            for kind in VARIANTS:
                small = statistics.median(times[(env_id, kind, options.small)])
                large = statistics.median(times[(env_id, kind, options.large)])
                rates[kind] = (options.large - options.small) / max(large - small, 1e-9)
                name = f"{env_id.split(':')[1]}-{kind.replace(' ', '-')}-{options.large}"
                size = folder_bytes(work / name) / 2**20
                print(
                    f"| {env_id.split(':')[1]} | {kind} | {small:.2f} | {large:.2f} | "
                    f"{fmt_rate(rates[kind])} | {fmt_ratio(ratio(rates[kind], rates['npz']))} | "
                    f"{size:.1f} MiB |"
                )
        print("\nsampling (uniform, 256 transitions, every tensor), NoisyFrames large run\n")
        print("| shards | open + first batch (s) | median batch (ms) | vs npz |")
        print("|---|---|---|---|")
        medians = {}
        for kind in VARIANTS:
            name = f"{ENV_IDS[-1].split(':')[1]}-{kind.replace(' ', '-')}-{options.large}"
            folder = work / name
            first, median = sample_times(folder, options.batches)
            medians[kind] = median
            slower = ratio(median, medians["npz"])
            print(f"| {kind} | {first:.2f} | {median * 1e3:.1f} | {fmt_ratio(slower)} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
