"""Datasets of any size (issue 15): one table, every ratio measured in this run.

Rows, medians of ``--repeats``:

* CartPole (vector) and Acrobot (auto), 8 envs, end to end: collecting to a sharded
  folder against collecting in memory into one ``.npz`` (target: folder rate >= 0.9x).
* The constant 84x84x4 frame env (``benchmarks.frame_env``, 8 envs, dummy mode) to a
  folder, against ``dd if=/dev/zero conv=fsync`` of the same bytes into the same folder:
  marginal rates from a small and a large run (start-up cancels; shown apart), target
  >= 70 % of dd's.
* Peak RSS above the interpreter's baseline (torch and gymnasium imported) of that frame
  collect at the two sizes (target <= 300 MiB each, within 50 MiB of each other), and of
  convert and sample on files of the two sizes (``_scale_readers``).

Run it alone: ``flock /tmp/expcli-cpu.lock python -m benchmarks.scale``. Files go under
``--scratch`` and are removed.
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

from benchmarks._report import fmt_ratio, load_average, ratio
from benchmarks._scale_readers import reader_cases

EXPCLI = [sys.executable, "-m", "expcli"]
FRAME = "benchmarks.frame_env:ConstantFrame-v0"
FRAME_ENVS = 8
FRAME_BYTES = 2 * 84 * 84 * 4 + 8 + 4 + 2  # observation twice, action, reward, two flags
_PEAK = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
    "stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)

Row = tuple[str, str, str, str, str]  # measure, small, large, ratio, target


def timed(args: list[str]) -> float:
    """Seconds one command takes, end to end, started with no dirty pages pending (so
    that one run's writeback does not slow the next)."""
    os.sync()
    start = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def timed_peak(args: list[str]) -> tuple[float, float]:
    """Seconds and peak RSS (MiB) of one command run in a child (started as ``timed``)."""
    os.sync()
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _PEAK, *args], check=True, capture_output=True)
    return time.perf_counter() - start, int(out.stdout.split()[-1]) / 1024


def collect_rows(scratch: Path, repeats: int) -> list[Row]:
    """Folder against in-memory collect, end to end."""
    rows = []
    for env, mode, steps in (("CartPole-v1", "vector", 200_000), ("Acrobot-v1", "auto", 50_000)):
        base = [*EXPCLI, "collect", env, "--envs", "8", "--mode", mode, "--steps", str(steps)]
        memory, folder = [], []
        for _ in range(repeats):
            memory.append(timed([*base, "-o", str(scratch / "m.npz"), "--overwrite", "-q"]))
            folder.append(timed([*base, "-o", str(scratch / "f"), "--overwrite", "-q"]))
        m, f = statistics.median(memory), statistics.median(folder)
        rows.append(
            (
                f"{env} {mode}, {steps:,} steps: memory, folder (s)",
                f"{m:.2f}",
                f"{f:.2f}",
                f"folder rate {fmt_ratio(ratio(m, f))}",
                ">= 0.9x",
            )
        )
    return rows


def frame_rows(scratch: Path, repeats: int, sizes: tuple[float, float]) -> list[Row]:
    """Frame collect against dd (marginal rates), and the collect's peak RSS."""
    steps = [int(gb * 1e9 // (FRAME_BYTES * FRAME_ENVS)) * FRAME_ENVS for gb in sizes]
    nbytes = [n * FRAME_BYTES for n in steps]
    base_rss = timed_peak([sys.executable, "-c", "import expcli.cli.app, torch, gymnasium"])[1]
    runs: dict[int, list[tuple[float, float]]] = {0: [], 1: []}
    dd: dict[int, list[float]] = {0: [], 1: []}
    for _ in range(repeats):
        for i, n in enumerate(steps):
            command = [*EXPCLI, "collect", FRAME, "--mode", "dummy", "--envs", str(FRAME_ENVS)]
            command += ["--steps", str(n), "-o", str(scratch / "fr"), "--overwrite", "-q"]
            runs[i].append(timed_peak(command))
            shutil.rmtree(scratch / "fr")
            target = scratch / "dd"
            dd[i].append(
                timed(
                    ["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={nbytes[i] >> 20}"]
                    + ["conv=fsync", "status=none"]
                )
            )
            os.unlink(target)
    t = [statistics.median(s for s, _ in runs[i]) for i in (0, 1)]
    peak = [statistics.median(p for _, p in runs[i]) - base_rss for i in (0, 1)]
    d = [statistics.median(dd[i]) for i in (0, 1)]
    extra = (nbytes[1] - nbytes[0]) / 1e6
    rate, dd_rate = extra / (t[1] - t[0]), extra / (d[1] - d[0])
    startup = t[0] - nbytes[0] / 1e6 / rate
    per_run = sorted(
        (nbytes[1] - nbytes[0]) / (b[0] - a[0]) / ((nbytes[1] - nbytes[0]) / (y - x))
        for a, b, x, y in zip(runs[0], runs[1], dd[0], dd[1], strict=True)
    )
    spread = ", ".join(f"{r:.0%}" for r in per_run)
    label = f"frames {sizes[0]:g} / {sizes[1]:g} GB"
    return [
        (f"{label}: collect to folder (s)", f"{t[0]:.2f}", f"{t[1]:.2f}", "", ""),
        (f"{label}: dd conv=fsync (s)", f"{d[0]:.2f}", f"{d[1]:.2f}", "", ""),
        (
            "frames: marginal MB/s, collect vs dd",
            f"{rate:.0f}",
            f"{dd_rate:.0f}",
            f"{rate / dd_rate:.0%} of dd (start-up {startup:.1f} s)",
            ">= 70 %",
        ),
        ("frames: collect vs dd, run by run (sorted)", "", "", spread, ""),
        (
            f"{label}: collect peak RSS above baseline (MiB)",
            f"{peak[0]:.0f}",
            f"{peak[1]:.0f}",
            f"differ by {abs(peak[1] - peak[0]):.0f} MiB",
            "<= 300, < 50 apart",
        ),
    ]


def reader_rows(scratch: Path, repeats: int, sizes: tuple[float, float]) -> list[Row]:
    """Convert and sample on files of the two sizes: seconds and peak RSS."""
    small, large = (reader_cases(scratch, gb, repeats) for gb in sizes)
    rows = []
    for label in small:
        (s0, p0), (s1, p1) = small[label], large[label]
        rows.append(
            (
                f"{label}: s / peak MiB",
                f"{s0:.2f} / {p0:.0f}",
                f"{s1:.2f} / {p1:.0f}",
                f"peaks differ by {abs(p1 - p0):.0f} MiB",
                "<= 300, < 50 apart",
            )
        )
    mapped = large["sample 256 from .npz (mapped)"][0]
    for label in ("sample 256 from .h5", "sample 256 from gzip .h5"):
        rows.append(
            (
                f"{label} vs .npz mapped, {sizes[1]:g} GB",
                "",
                "",
                f"time {fmt_ratio(ratio(large[label][0], mapped))}",
                "",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", type=float, nargs=2, default=(1.0, 4.0), help="GB, small large")
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/expcli-scale"))
    parser.add_argument("--skip", choices=("collect", "frames", "readers"), nargs="*", default=())
    a = parser.parse_args()
    a.scratch.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    try:
        if "collect" not in a.skip:
            rows += collect_rows(a.scratch, a.repeats)
        if "frames" not in a.skip:
            rows += frame_rows(a.scratch, a.repeats, a.sizes)
        if "readers" not in a.skip:
            rows += reader_rows(a.scratch, a.repeats, a.sizes)
    finally:
        shutil.rmtree(a.scratch, ignore_errors=True)
    print(f"\nDatasets of any size: medians of {a.repeats}; {load_average()}")
    print(f"| measure | {a.sizes[0]:g} GB or a | {a.sizes[1]:g} GB or b | ratio | target |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
