"""Frame-stack batches and prefetching, for ``benchmarks/sampling.py``.

* frames: 4-frame stacks of observations and next observations (Pong, 210x160x3 uint8),
  batches of 32 and 256, from the run as a mapped ``.npz`` and as a sharded folder, against
  numpy's fancy-index gather of the same bytes from the ``.npz`` loaded in memory (the
  floor: the stacks of observations and of next observations, no episode starts looked
  at; numpy maps no ``.npz`` member, whatever ``mmap_mode`` says, so every page is
  resident, where expcli's mapping lets go of its pages after each batch). Targets: <= 2x
  the floor; the folder <= 1.2x the file.
* prefetch: the wait per batch of a loop that spends 10 ms per step on its own (a sleep,
  and torch matrix products on one thread), with and without ``prefetch=2``. Target:
  <= 1 ms of waiting per batch.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

STACK = 4
BATCHES = (32, 256)


def pong_run(folder: Path, steps: int) -> Path:
    """``steps`` Pong transitions (8 envs) collected by expcli (``--seed 0``), as an ``.npz``."""
    path = folder / "pong.npz"
    subprocess.run(
        [sys.executable, "-m", "expcli", "collect", "ale_py:ALE/Pong-v5", "--envs", "8",
         "--steps", str(steps), "--seed", "0", "--output", str(path), "--overwrite"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return path


def _median_ms(draw: Callable[[], object], count: int) -> float:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        draw()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def frames_table(folder: Path, steps: int, repeats: int) -> list[tuple[str, float, bool]]:
    """Print the frame-stack table; return its verdicts."""
    from expcli import ReplayBuffer, convert

    npz = pong_run(folder, steps)
    shards = folder / "pong"
    convert(npz, shards, overwrite=True)
    loaded = np.load(npz)  # read whole: numpy maps no npz member
    obs, nxt = loaded["observations"], loaded["next_observations"]
    rows, envs = obs.shape[:2]
    flat_obs = obs.reshape(rows * envs, *obs.shape[2:])
    flat_next = nxt.reshape(rows * envs, *nxt.shape[2:])
    rng = np.random.default_rng(0)

    def floor(batch: int) -> Callable[[], object]:
        def draw() -> object:
            index = rng.integers(envs * STACK, rows * envs, batch)
            stacks = index[:, None] - np.arange(STACK - 1, -1, -1)[None] * envs
            return flat_obs[stacks], flat_next[stacks]

        return draw

    buffers = {
        (label, batch): ReplayBuffer(source, batch_size=batch, stack_num=STACK, seed=0)
        for label, source in (("file", npz), ("folder", shards))
        for batch in BATCHES
    }
    times: dict[tuple[str, int], list[float]] = {}
    count = 8
    for _ in range(repeats):  # round-robin, so that load on the machine hits all alike
        for batch in BATCHES:
            times.setdefault(("floor", batch), []).append(_median_ms(floor(batch), count))
            for label in ("file", "folder"):
                draw = buffers[label, batch].sample
                times.setdefault((label, batch), []).append(_median_ms(draw, count))
    print(
        f"\nframe stacks: {rows * envs:,} Pong transitions (210x160x3), {STACK} frames of "
        f"observations and next observations; ms per batch, medians of {repeats}"
    )
    print(f"{'batch':>6} {'numpy floor':>12} {'.npz':>8} {'x floor':>8} {'folder':>8} "
          f"{'x floor':>8} {'x file':>7}")  # fmt: skip
    verdicts = []
    for batch in BATCHES:
        floor_ms, file_ms, folder_ms = (
            statistics.median(times[label, batch]) for label in ("floor", "file", "folder")
        )
        print(
            f"{batch:>6} {floor_ms:>12.2f} {file_ms:>8.2f} {file_ms / floor_ms:>8.2f} "
            f"{folder_ms:>8.2f} {folder_ms / floor_ms:>8.2f} {folder_ms / file_ms:>7.2f}"
        )
        for text, ratio, bound in (
            ("file <= 2x the floor", file_ms / floor_ms, 2.0),
            ("folder <= 2x the floor", folder_ms / floor_ms, 2.0),
            ("folder <= 1.2x the file", folder_ms / file_ms, 1.2),
        ):
            verdicts.append((f"frames {batch}: {text}", ratio, ratio <= bound))
    for buffer in buffers.values():
        buffer.close()
    return verdicts


def prefetch_table(folder: Path) -> list[tuple[str, float, bool]]:
    """Print the waits of a 10 ms training step with and without prefetching."""
    from expcli import ReplayBuffer

    npz = folder / "pong.npz"
    torch.set_num_threads(1)
    work = torch.randn(128, 128)

    def step(kind: str) -> None:
        if kind == "sleep":
            time.sleep(0.010)
            return
        end = time.perf_counter() + 0.010
        while time.perf_counter() < end:
            torch.mm(work, work)

    print("\nprefetch: a loop spending 10 ms a step on its own, 32 Pong stacks a batch")
    print(f"{'step':>8} {'prefetch':>9} {'mean ms':>8} {'median ms':>10} {'p90 ms':>7}")
    verdicts = []
    for kind in ("sleep", "torch"):
        for prefetch in (None, 2):
            buffer = ReplayBuffer(npz, batch_size=32, stack_num=STACK, seed=0, prefetch=prefetch)
            buffer.sample()
            waits = []
            for _ in range(60):
                start = time.perf_counter()
                buffer.sample()
                waits.append((time.perf_counter() - start) * 1e3)
                step(kind)
            buffer.close()
            mean = statistics.mean(waits)
            print(
                f"{kind:>8} {prefetch or 0:>9} {mean:>8.2f} {statistics.median(waits):>10.2f} "
                f"{np.percentile(waits, 90):>7.2f}"
            )
            if prefetch:
                verdicts.append((f"prefetch, {kind} step: mean wait <= 1 ms", mean, mean <= 1))
    return verdicts
