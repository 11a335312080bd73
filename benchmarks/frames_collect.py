"""Frames once (issue 27): collect rate to a folder when the disk is the limit, full vs once.

``expcli collect benchmarks.frame_env:NoisyFrames-v0`` (84x84x4 uint8 frames, stepping that
costs next to nothing) to a sharded folder in ``--dir``, with ``--frames full`` and
``--frames once``: a small and a large run of each, in fresh processes, ``--repeats`` times,
medians. The marginal rate (the large run's extra steps over its extra seconds) cancels
start-up; start-up is the small run's time less its steps at that rate. Beside them: the
disk's own write rate with an fsync (what a shard write waits for), and bare stepping of
the same envs with pre-drawn actions and no storage (the ceiling).

    .venv/bin/python benchmarks/frames_collect.py --dir /var/tmp
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

import numpy as np
from _report import fmt_rate, fmt_ratio, load_average
from frame_env import NoisyFrames

ROOT = Path(__file__).resolve().parents[1]
ENV_ID = "benchmarks.frame_env:NoisyFrames-v0"


def disk_rate(folder: Path, mib: int = 1024) -> float:
    """Bytes per second of writing ``mib`` MiB to ``folder`` and fsyncing it."""
    block = np.random.default_rng(0).integers(0, 256, 1 << 20, dtype=np.uint8).tobytes()
    path = folder / "disk-rate.bin"
    started = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    seconds = time.perf_counter() - started
    path.unlink()
    return mib * (1 << 20) / seconds


def bare_rate(envs: int, steps: int) -> float:
    """Env steps per second of ``envs`` NoisyFrames envs, pre-drawn actions, nothing kept."""
    pool = [NoisyFrames() for _ in range(envs)]
    for n, env in enumerate(pool):
        env.reset(seed=n)
    actions = np.random.default_rng(0).integers(0, 4, (steps, envs))
    started = time.perf_counter()
    for t in range(steps):
        for n, env in enumerate(pool):
            *_, terminated, truncated, _ = env.step(actions[t, n])
            if terminated or truncated:
                env.reset()
    return steps * envs / (time.perf_counter() - started)


def collect_seconds(folder: Path, frames: str, envs: int, steps: int) -> tuple[float, int]:
    """Wall seconds of one ``expcli collect`` to a fresh folder, and its bytes on disk."""
    target = folder / f"run-{frames}-{steps}"
    shutil.rmtree(target, ignore_errors=True)
    command = [sys.executable, "-m", "expcli", "collect", ENV_ID, "--envs", str(envs)]
    command += ["--mode", "dummy", "--steps", str(steps), "--frames", frames, "-q"]
    started = time.perf_counter()
    subprocess.run([*command, "-o", str(target)], check=True, cwd=ROOT, capture_output=True)
    seconds = time.perf_counter() - started
    size = sum(p.stat().st_size for p in target.iterdir())
    shutil.rmtree(target)
    return seconds, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("."), help="a folder on the disk")
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--small", type=int, default=10_000, help="steps of the small run")
    parser.add_argument("--large", type=int, default=50_000, help="steps of the large run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"# frames once, collect: {ENV_ID}, {args.envs} envs, folder in {args.dir}")
    print(f"# {load_average()}")
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        folder = Path(name)
        disk = statistics.median(disk_rate(folder) for _ in range(args.repeats))
        bare = statistics.median(bare_rate(args.envs, 2000) for _ in range(args.repeats))
        print(f"# disk: {disk / 1e6:.0f} MB/s written and fsynced; bare stepping {bare:,.0f}/s")
        results = {}
        for frames in ("full", "once"):
            runs = {
                steps: [
                    collect_seconds(folder, frames, args.envs, steps) for _ in range(args.repeats)
                ]
                for steps in (args.small, args.large)
            }
            small = statistics.median(s for s, _ in runs[args.small])
            large = statistics.median(s for s, _ in runs[args.large])
            per_step = runs[args.large][0][1] / args.large
            marginal = (args.large - args.small) / (large - small)
            results[frames] = (small, large, marginal, per_step, small - args.small / marginal)
    print()
    print(
        "| form | bytes/transition | small s | large s | marginal steps/s | MB/s written "
        "| start-up s | rate vs full | vs bare stepping |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for frames, (small, large, marginal, per_step, startup) in results.items():
        print(
            f"| {frames} | {per_step:,.0f} | {small:.2f} | {large:.2f} | {fmt_rate(marginal)} "
            f"| {marginal * per_step / 1e6:.0f} | {startup:.2f} "
            f"| {fmt_ratio(marginal / results['full'][2])} | {fmt_ratio(marginal / bare)} |"
        )


if __name__ == "__main__":
    main()
