"""Benchmark the LeRobot v3.0 layout: convert an expcli folder to it and back, peak memory.

What it measures
    * ``expcli convert DIR LR --layout lerobot`` and ``expcli convert LR BACK`` (a sharded
      npz folder), each in a fresh process, for a small and a large folder of the same
      transitions (64 float32 observations and next observations, 4 float32 actions,
      reward, both flags; 8 env columns, episodes of 200 steps): wall time, MB/s of tensor
      bytes, and the process's peak RSS (``ru_maxrss`` of the child) at both sizes.
    * Next to it, pyarrow alone on the same frames held in memory: ``pq.write_table``
      (snappy, as LeRobot writes) of one table with the LeRobot columns, and
      ``pq.read_table`` of that file: what a Parquet round trip costs with no layout work.
    * The cost of ``meta/stats.json``'s quantiles (q01...q99, LeRobot's computation): the
      layout written in this process from 100k frames held in memory (``--stats-frames``),
      with them and with none (numeric features past ``QUANTILE_VALUES`` get none: the
      limit set to 0), median of 3, and their ratio.
    * LeRobot 0.4.4's own writer (``LeRobotDataset.create``, ``add_frame`` per frame,
      ``save_episode``) on ``--lerobot-frames`` of the same frames, in ``.venv-lerobot``
      (``make lerobot-env``; skipped when it is not built): frames per second, as its
      per-frame Python path would take hours for the large folder.

Run it
    python benchmarks/lerobot_layout.py             # 1 GB: about 3 minutes on 2 cores
    python benchmarks/lerobot_layout.py --quick     # 0.1 GB
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _report import fmt_rate, fmt_ratio, load_average, ratio, version

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from expcli.formats import Dataset  # noqa: E402
from expcli.formats.layouts import write_layout  # noqa: E402
from expcli.formats.layouts.lerobot import _stats  # noqa: E402
from expcli.formats.registry import write_dataset  # noqa: E402
from expcli.spec import CircularState  # noqa: E402

ENVS, OBS, EPISODE = 8, 64, 200
ROW_BYTES = ENVS * (2 * OBS * 4 + 4 * 4 + 4 + 2)
LEROBOT_PYTHON = ROOT / ".venv-lerobot" / "bin" / "python"

_LEROBOT_WRITER = """
import sys, time, numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset
frames, root = int(sys.argv[1]), sys.argv[2]
f = {"observation.state": {"dtype": "float32", "shape": (64,), "names": None},
     "next.observation.state": {"dtype": "float32", "shape": (64,), "names": None},
     "action": {"dtype": "float32", "shape": (4,), "names": None},
     "next.reward": {"dtype": "float32", "shape": (1,), "names": None},
     "next.terminated": {"dtype": "bool", "shape": (1,), "names": None},
     "next.truncated": {"dtype": "bool", "shape": (1,), "names": None}}
rng = np.random.default_rng(0)
obs = rng.normal(size=(frames, 64)).astype(np.float32)
start = time.perf_counter()
d = LeRobotDataset.create("bench/lr", fps=1, root=root, features=f, use_videos=False)
for i in range(frames):
    d.add_frame({"observation.state": obs[i], "next.observation.state": obs[i],
                 "action": obs[i, :4], "next.reward": obs[i, :1],
                 "next.terminated": np.array([False]), "next.truncated": np.array([False]),
                 "task": "bench"})
    if i % 200 == 199:
        d.save_episode()
d.finalize()
print(time.perf_counter() - start)
"""


def transitions(rows: int, metadata: dict[str, object]) -> Dataset:
    """``rows`` rows of ``ENVS`` env columns, episodes of ``EPISODE`` steps."""
    rng = np.random.default_rng(0)
    observations = rng.normal(size=(rows, ENVS, OBS)).astype(np.float32)
    ends = np.zeros((rows, ENVS, 1), bool)
    ends[EPISODE - 1 :: EPISODE] = True
    tensors = {
        "observations": observations,
        "next_observations": np.roll(observations, -1, axis=0),
        "actions": rng.normal(size=(rows, ENVS, 4)).astype(np.float32),
        "rewards": rng.normal(size=(rows, ENVS, 1)).astype(np.float32),
        "terminated": ends,
        "truncated": np.zeros_like(ends),
    }
    return Dataset(tensors, CircularState(0, 0, True), {"env_id": "Bench-v0", **metadata})


def make_folder(rows: int, target: Path) -> None:
    """An expcli sharded folder of ``rows`` rows of ``ENVS`` env columns."""
    write_dataset(transitions(rows, {}), target)


def run(args: list[str]) -> tuple[float, float]:
    """Seconds and peak RSS (MB) of ``expcli ARGS`` in a fresh process."""
    start = time.perf_counter()
    # GNU time's %M: the child's own peak (ru_maxrss of a child forked from this large
    # process would count this process's pages)
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", sys.executable, "-m", "expcli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"expcli {' '.join(args)} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - start, int(done.stderr.split()[-1]) / 1024


def pyarrow_round_trip(rows: int, path: Path) -> tuple[float, float]:
    """``pq.write_table`` and ``pq.read_table`` seconds of the same frames as one table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    frames = rows * ENVS
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(frames, OBS)).astype(np.float32)
    table = pa.table(
        {
            "observation.state": pa.FixedSizeListArray.from_arrays(obs.reshape(-1), OBS),
            "next.observation.state": pa.FixedSizeListArray.from_arrays(obs.reshape(-1), OBS),
            "action": pa.FixedSizeListArray.from_arrays(obs[:, :4].reshape(-1), 4),
            "next.reward": obs[:, 0],
            "next.terminated": np.zeros(frames, bool),
            "next.truncated": np.zeros(frames, bool),
            "index": np.arange(frames),
        }
    )
    start = time.perf_counter()
    pq.write_table(table, path, compression="snappy", row_group_size=EPISODE)
    written = time.perf_counter() - start
    start = time.perf_counter()
    pq.read_table(path)
    return written, time.perf_counter() - start


def quantile_cost(frames: int, work: Path) -> tuple[float, float]:
    """Median seconds of writing the layout in process, with quantiles and with none."""
    import logging
    import statistics

    rows = max(EPISODE, frames // ENVS // EPISODE * EPISODE)
    dataset = transitions(rows, {"render_fps": 50})
    logging.disable(logging.WARNING)
    limit = _stats.QUANTILE_VALUES
    seconds: dict[int, list[float]] = {limit: [], 0: []}
    try:
        for _ in range(3):
            for values in (limit, 0):  # interleaved: both see the same load
                _stats.QUANTILE_VALUES = values
                start = time.perf_counter()
                write_layout(dataset, work / "stats", "lerobot", overwrite=False)
                seconds[values].append(time.perf_counter() - start)
                shutil.rmtree(work / "stats")
    finally:
        _stats.QUANTILE_VALUES = limit
        logging.disable(logging.NOTSET)
    return statistics.median(seconds[limit]), statistics.median(seconds[0])


def lerobot_writer(frames: int, root: Path) -> float | None:
    """Frames per second of LeRobot's own writer, or None when its environment is not built."""
    if not LEROBOT_PYTHON.is_file():
        return None
    done = subprocess.run(
        [str(LEROBOT_PYTHON), "-c", _LEROBOT_WRITER, str(frames), str(root)],
        capture_output=True,
        text=True,
        check=True,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    return frames / float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gb", type=float, default=1.0, help="size of the large folder")
    parser.add_argument("--quick", action="store_true", help="0.1 GB")
    parser.add_argument("--lerobot-frames", type=int, default=4000)
    parser.add_argument("--stats-frames", type=int, default=100_000)
    options = parser.parse_args()
    large = 0.1 if options.quick else options.gb
    print(f"expcli LeRobot layout; pyarrow {version('pyarrow')}; {load_average()}")
    print(
        "| GB | expcli -> lerobot s | MB/s | peak RSS MB | lerobot -> expcli s | MB/s "
        "| peak RSS MB | pyarrow write_table s | read_table s | to / write_table "
        "| back / read_table |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        for size in (large / 4, large):
            rows = max(EPISODE, int(size * 1e9 / ROW_BYTES) // EPISODE * EPISODE)
            source, lr, back = work / "src", work / "lr", work / "back"
            make_folder(rows, source)
            to_s, to_rss = run(["convert", str(source), str(lr), "--layout", "lerobot"])
            back_s, back_rss = run(["convert", str(lr), str(back)])
            write_s, read_s = pyarrow_round_trip(rows, work / "plain.parquet")
            mb = rows * ROW_BYTES / 1e6
            print(
                f"| {rows * ROW_BYTES / 1e9:.2f} | {to_s:.1f} | {fmt_rate(mb / to_s)} "
                f"| {to_rss:.0f} | {back_s:.1f} | {fmt_rate(mb / back_s)} | {back_rss:.0f} "
                f"| {write_s:.1f} | {read_s:.1f} | {fmt_ratio(ratio(to_s, write_s))} "
                f"| {fmt_ratio(ratio(back_s, read_s))} |"
            )
            for path in (source, lr, back):
                shutil.rmtree(path)
        quantiles, none = quantile_cost(options.stats_frames, work)
        print(
            f"\nquantiles (stats.json q01...q99), {options.stats_frames:,} frames written in "
            f"process: {quantiles:.2f} s with them, {none:.2f} s without "
            f"({fmt_ratio(ratio(quantiles, none))})"
        )
        rate = lerobot_writer(options.lerobot_frames, work / "lerobot")
        frames = f"{options.lerobot_frames} frames"
        if rate is None:
            print("LeRobot's writer: skipped (.venv-lerobot not built: make lerobot-env)")
        else:
            print(f"LeRobot 0.4.4 writer (add_frame, save_episode), {frames}: {rate:,.0f} frames/s")


if __name__ == "__main__":
    main()
