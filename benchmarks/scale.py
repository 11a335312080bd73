"""Collecting to a sharded folder against collecting in memory, and against the disk.

Rows: CartPole (vector) and Acrobot (auto) end to end, folder vs in-memory (.npz) rate
(target >= 0.9); the constant 84x84x4 frame env to a folder vs ``dd ... conv=fsync`` of
the same byte count (target >= 70 %); peak RSS above the interpreter's baseline of a 1 GB
and a 4 GB frame collect (target <= 300 MB each, within 50 MB). Medians of ``--repeat``.
Run under ``flock /tmp/expcli-cpu.lock``; files go under ``--scratch`` and are removed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

EXPCLI = [sys.executable, "-m", "expcli"]
FRAME = "benchmarks.frame_env:ConstantFrame-v0"
FRAME_BYTES = 2 * 84 * 84 * 4 + 8 + 6  # observation twice, action, reward and flags
_PEAK = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
    "stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def timed(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def peak_mib(args: list[str]) -> float:
    out = subprocess.run([sys.executable, "-c", _PEAK, *args], check=True, capture_output=True)
    return int(out.stdout.split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/shards/bench"))
    parser.add_argument("--gb", type=float, nargs=2, default=(1.0, 4.0))
    a = parser.parse_args()
    a.scratch.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, float, float, str]] = []
    try:
        for env, mode, steps in (
            ("CartPole-v1", "vector", 200_000),
            ("Acrobot-v1", "auto", 50_000),
        ):
            base = [*EXPCLI, "collect", env, "--envs", "8", "--mode", mode, "--steps", str(steps)]
            mem, fold = [], []
            for _ in range(a.repeat):
                mem.append(timed([*base, "-o", str(a.scratch / "m.npz"), "--overwrite", "-q"]))
                fold.append(timed([*base, "-o", str(a.scratch / "f"), "--overwrite", "-q"]))
            m, f = statistics.median(mem), statistics.median(fold)
            rows.append((f"{env} {mode}: folder vs memory (s)", f, m, f"{m / f:.2f}x rate"))
        steps = int(a.gb[0] * 1e9 // FRAME_BYTES)
        frame = [*EXPCLI, "collect", FRAME, "--mode", "dummy", "--steps", str(steps)]
        coll, dd = [], []
        for _ in range(a.repeat):
            coll.append(timed([*frame, "-o", str(a.scratch / "fr"), "--overwrite", "-q"]))
            mib = steps * FRAME_BYTES // (1 << 20)
            dd.append(
                timed(
                    [
                        "dd",
                        "if=/dev/zero",
                        f"of={a.scratch / 'dd'}",
                        "bs=1M",
                        f"count={mib}",
                        "conv=fsync",
                        "status=none",
                    ]
                )
            )
            os.unlink(a.scratch / "dd")
        c, d = statistics.median(coll), statistics.median(dd)
        rows.append((f"frames {a.gb[0]} GB: folder collect vs dd (s)", c, d, f"{d / c:.0%} of dd"))
        base_rss = peak_mib([sys.executable, "-c", "import expcli.cli.app, torch, gymnasium"])
        peaks = []
        for gb in a.gb:
            n = int(gb * 1e9 // FRAME_BYTES)
            cmd = [*EXPCLI, "collect", FRAME, "--mode", "dummy", "--steps", str(n)]
            peaks.append(peak_mib([*cmd, "-o", str(a.scratch / "fr"), "--overwrite", "-q"]))
        above = [p - base_rss for p in peaks]
        rows.append(
            (
                f"peak RSS above baseline, {a.gb[0]} vs {a.gb[1]} GB (MiB)",
                above[0],
                above[1],
                f"differ by {abs(above[1] - above[0]):.0f} MiB",
            )
        )
    finally:
        shutil.rmtree(a.scratch, ignore_errors=True)
    print(f"{'measure':<52} {'a':>9} {'b':>9}  ratio")
    for name, x, y, ratio in rows:
        print(f"{name:<52} {x:>9.2f} {y:>9.2f}  {ratio}")


if __name__ == "__main__":
    main()
