"""Benchmark training-batch sampling: expcli's ReplayBuffer against torchrl and tianshou.

What it measures
    One dataset of ``--transitions`` transitions (default 1,000,000 = 62,500 steps x 16
    envs; observations (4, float32), actions (1, int64), rewards (1, float32), terminated
    and truncated (1, bool); an episode ends about every 100 steps) is loaded into every
    contender, then batches per second are timed for three workloads:

    * uniform: 256 transitions drawn with replacement, every tensor gathered;
    * slice: 32 sequences of 16 consecutive steps of one env that never cross an episode
      end (512 transitions), every tensor gathered;
    * prioritized: 256 transitions drawn in proportion to priority^alpha (alpha 0.6, beta
      0.4, importance weights), then a priority update of those 256 (one per batch).

    Contenders, same process, same data:

    * expcli ``ReplayBuffer`` over a ``Memory``, and over the same data saved as ``.pt``
      and loaded memory-mapped;
    * torchrl ``ReplayBuffer`` with ``RandomSampler`` / ``SliceSampler(traj_key=...,
      cache_values=True)`` / ``PrioritizedSampler`` over ``LazyTensorStorage`` (and
      ``LazyMemmapStorage`` for uniform); its storage holds each env's steps contiguously,
      with an episode id per step, as its slice sampler requires;
    * tianshou ``ReplayBuffer`` (uniform), ``PrioritizedReplayBuffer`` and, for slices, the
      closest thing it has: ``ReplayBuffer(stack_num=16)`` sampling 32 frame stacks of the
      observations (other keys unstacked).

    The sum-tree's update of 256 priorities is also timed on its own (median microseconds).
    ``ReplayDataset`` under torch's ``DataLoader`` is timed in its two forms, the batch
    sampler's and the map-style ``shuffle=True`` one, with 0 and 2 workers, and their ratio
    (``_sampling_loader.py``).

How it times
    Each contender's batch count is calibrated to a time budget (at least 10 batches), and
    the repeats (default 5) run round-robin over the contenders so that load on the machine
    hits all alike. Figures are medians; the spread of the repeats is printed. The garbage
    collector is paused inside timed loops.

Run it
    python benchmarks/sampling.py              # 1,000,000 transitions, about 2 minutes
    python benchmarks/sampling.py --quick      # 100,000 transitions, fast check
    python benchmarks/sampling.py --workloads prioritized   # one workload only
    python benchmarks/sampling.py --quick --workloads loader  # the two DataLoader forms
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from _report import load_average, version

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NUM_ENVS = 16
WORKLOADS = ("uniform", "slice", "prioritized")
SECTIONS = ("frames", "prefetch", "compressed", "loader")  # _sampling_frames.py, _blocks, _loader
BATCH = {"uniform": 256, "slice": 512, "prioritized": 256}
SLICE_LEN = 16
ALPHA, BETA = 0.6, 0.4
TARGET = 1.5

Draw = Callable[[], object]


@dataclass
class Contender:
    label: str
    role: str  # "expcli" | "peer" | "floor" | "fallback" (expcli without numba: not judged)
    draws: dict[str, Draw]
    notes: list[str] = field(default_factory=list)


def make_arrays(steps: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (steps, NUM_ENVS)
    return {
        "observations": rng.standard_normal((*shape, 4), dtype=np.float32),
        "actions": rng.integers(0, 4, (*shape, 1), dtype=np.int64),
        "rewards": rng.standard_normal((*shape, 1), dtype=np.float32),
        "terminated": rng.random((*shape, 1)) < 0.008,
        "truncated": rng.random((*shape, 1)) < 0.002,
    }


def priority_stream(count: int, size: int) -> Callable[[], np.ndarray]:
    values = np.random.default_rng(1).random((count, size)) * 3
    position = [0]

    def next_values() -> np.ndarray:
        position[0] = (position[0] + 1) % count
        return values[position[0]]

    return next_values


# ------------------------------------------------------------------------ contenders


def expcli_contenders(arrays: dict[str, np.ndarray], folder: Path) -> list[Contender]:
    from expcli import (
        Dataset,
        PrioritizedSampler,
        RandomMemory,
        ReplayBuffer,
        SliceSampler,
        load,
        save,
    )
    from expcli.spec import CircularState

    dataset = Dataset(arrays, CircularState(0, 0, True))
    memory = RandomMemory.from_dataset(dataset, "cpu")
    path = save(dataset, folder / "bench.pt")
    mapped = load(path)
    npz = save(dataset, folder / "bench.npz")
    out = []
    for label, storage in (
        ("expcli ReplayBuffer (Memory)", memory),
        ("expcli ReplayBuffer (.pt, mmap)", mapped),
        ("expcli ReplayBuffer (.npz path, mapped)", npz),
    ):
        uniform = ReplayBuffer(storage, batch_size=BATCH["uniform"], seed=0)
        slices = ReplayBuffer(
            storage, sampler=SliceSampler(slice_len=SLICE_LEN), batch_size=BATCH["slice"], seed=0
        )
        prioritized = ReplayBuffer(
            storage,
            sampler=PrioritizedSampler(ALPHA, BETA),
            batch_size=BATCH["prioritized"],
            seed=0,
        )
        priorities = priority_stream(64, BATCH["prioritized"])

        def per_step(rb: ReplayBuffer = prioritized, next_p=priorities) -> None:
            _, info = rb.sample(return_info=True)
            rb.update_priority(info["index"], next_p())

        out.append(
            Contender(
                label,
                "expcli",
                {
                    "uniform": uniform.sample,
                    "slice": slices.sample,
                    "prioritized": per_step,
                },
            )
        )
    # what a user without numba gets (not held to the target)
    fallback = ReplayBuffer(
        memory,
        sampler=PrioritizedSampler(ALPHA, BETA, compiled=False),
        batch_size=BATCH["prioritized"],
        seed=0,
    )
    priorities = priority_stream(64, BATCH["prioritized"])

    def fallback_step() -> None:
        _, info = fallback.sample(return_info=True)
        fallback.update_priority(info["index"], priorities())

    label = "expcli ReplayBuffer (Memory), numpy sum-tree"
    out.append(Contender(label, "fallback", {"prioritized": fallback_step}))
    return out


def floor_contenders(arrays: dict[str, np.ndarray]) -> list[Contender]:
    """numpy alone, uniform draws: every tensor packed in one record per transition (the
    floor: one gather), and the same tensors as separate columns (one gather each)."""
    count = next(iter(arrays.values())).shape[0] * NUM_ENVS
    columns = {k: v.reshape(count, -1) for k, v in arrays.items()}
    width = sum(c.shape[1] * c.dtype.itemsize for c in columns.values())
    packed = np.zeros((count, -(-width // 8) * 8), np.uint8)
    at = 0
    for column in columns.values():
        size = column.shape[1] * column.dtype.itemsize
        packed[:, at : at + size] = column.view(np.uint8).reshape(count, size)
        at += size
    rng = np.random.default_rng(0)
    batch = BATCH["uniform"]

    def records() -> object:
        return packed.take(rng.integers(0, count, batch), axis=0)

    def separate() -> object:
        index = rng.integers(0, count, batch)
        return [c.take(index, axis=0) for c in columns.values()]

    return [
        Contender("numpy: one packed record per transition (floor)", "floor", {"uniform": records}),
        Contender("numpy: separate columns", "floor", {"uniform": separate}),
    ]


def torchrl_contenders(arrays: dict[str, np.ndarray], folder: Path) -> list[Contender]:
    try:
        from tensordict import TensorDict
        from torchrl.data import (
            LazyMemmapStorage,
            LazyTensorStorage,
            PrioritizedSampler,
            RandomSampler,
            ReplayBuffer,
            SliceSampler,
        )
    except ImportError:
        return []
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    # env-major: each env's steps contiguous, with an episode id per step
    steps = len(arrays["observations"])
    columns = {
        k: torch.from_numpy(
            np.ascontiguousarray(v.swapaxes(0, 1)).reshape(steps * NUM_ENVS, *v.shape[2:])
        )
        for k, v in arrays.items()
    }
    done = (columns["terminated"] | columns["truncated"]).reshape(NUM_ENVS, steps)
    ends = torch.cumsum(done.long(), dim=1) - done.long()  # episode number within the env
    episode = (ends + torch.arange(NUM_ENVS)[:, None] * steps).reshape(-1)
    data = TensorDict({**columns, "episode": episode}, [steps * NUM_ENVS])
    n = len(data)

    def buffer(sampler: object, batch: int, storage: object = None) -> ReplayBuffer:
        rb = ReplayBuffer(
            storage=storage or LazyTensorStorage(n), sampler=sampler, batch_size=batch
        )
        rb.extend(data)
        return rb

    uniform = buffer(RandomSampler(), BATCH["uniform"])
    mapped = buffer(
        RandomSampler(), BATCH["uniform"], LazyMemmapStorage(n, scratch_dir=str(folder / "torchrl"))
    )
    slices = buffer(
        SliceSampler(slice_len=SLICE_LEN, traj_key="episode", cache_values=True), BATCH["slice"]
    )
    draws: dict[str, Draw] = {"uniform": uniform.sample, "slice": slices.sample}
    notes = [
        "torchrl: storage env-major with an episode id, as SliceSampler needs; "
        "SliceSampler draws trajectories uniformly, then a start within one"
    ]
    try:
        prioritized = buffer(PrioritizedSampler(n, ALPHA, BETA), BATCH["prioritized"])
        priorities = priority_stream(64, BATCH["prioritized"])

        def per_step() -> None:
            _, info = prioritized.sample(return_info=True)
            prioritized.update_priority(info["index"], torch.from_numpy(priorities()))

        draws["prioritized"] = per_step
    except RuntimeError:
        notes.append(torchrl_prioritized_note())
    mapped_contender = Contender(
        "torchrl ReplayBuffer (LazyMemmapStorage)", "peer", {"uniform": mapped.sample}
    )
    main = Contender("torchrl ReplayBuffer (LazyTensorStorage)", "peer", draws, notes)
    return [main, mapped_contender]


def torchrl_prioritized_note() -> str:
    """Why torchrl's PrioritizedSampler cannot run: its sum-tree is only in its C++ extension."""
    try:
        import torchrl._torchrl  # noqa: F401
    except ImportError as e:
        reason = str(e).rsplit(": ", 1)[-1][:60]
        if "undefined symbol" in str(e):
            reason = f"undefined symbol {reason[:40]}...: built against another torch"
    else:
        reason = "unknown"
    return (
        f"torchrl {version('torchrl')} PrioritizedSampler not run: its sum-tree lives only in "
        f"the C++ extension torchrl._torchrl (no Python fallback), which does not load "
        f"against torch {torch.__version__} ({reason})"
    )


def tianshou_contender(arrays: dict[str, np.ndarray]) -> Contender | None:
    try:
        from tianshou.data import Batch, PrioritizedReplayBuffer
        from tianshou.data import ReplayBuffer as TianshouBuffer
    except ImportError:
        return None
    steps = len(arrays["observations"])
    n = steps * NUM_ENVS
    # one env column after another, each a contiguous run of steps
    flat = {
        k: np.ascontiguousarray(v.swapaxes(0, 1)).reshape(n, *v.shape[2:])
        for k, v in arrays.items()
    }
    done = flat["terminated"][:, 0] | flat["truncated"][:, 0]
    done[steps - 1 :: steps] = True  # an env's column ends where the next one begins

    def filled(buffer: TianshouBuffer) -> TianshouBuffer:
        obs = flat["observations"]
        buffer.set_batch(
            Batch(
                obs=obs,
                act=flat["actions"][:, 0],
                rew=flat["rewards"][:, 0],
                terminated=flat["terminated"][:, 0],
                truncated=flat["truncated"][:, 0],
                done=done,
                obs_next=obs,
            )
        )
        buffer._size, buffer._insertion_idx, buffer.last_index = n, 0, np.array([n - 1])
        return buffer

    uniform = filled(TianshouBuffer(n))
    stacked = filled(TianshouBuffer(n, stack_num=SLICE_LEN))
    prioritized = filled(PrioritizedReplayBuffer(n, alpha=ALPHA, beta=BETA))
    prioritized.weight[np.arange(n)] = 1.0
    priorities = priority_stream(64, BATCH["prioritized"])

    def per_step() -> None:
        _, index = prioritized.sample(BATCH["prioritized"])
        prioritized.update_weight(index, priorities())

    return Contender(
        "tianshou ReplayBuffer / PrioritizedReplayBuffer",
        "peer",
        {
            "uniform": lambda: uniform.sample(BATCH["uniform"]),
            "slice": lambda: stacked.sample(BATCH["slice"] // SLICE_LEN),
            "prioritized": per_step,
        },
        [
            "tianshou: one ReplayBuffer of all envs (its fastest layout; obs_next shares obs); "
            "slice = ReplayBuffer(stack_num=16).sample(32): frame stacks of obs and obs_next, "
            "the closest it has to sequence sampling",
            f"tianshou's PrioritizedReplayBuffer walks its binary sum-tree in numba-compiled "
            f"code (numba {version('numba')}), level by level over the batch; expcli's 16-ary "
            f"tree: {expcli_tree_kind()}",
        ],
    )


def expcli_tree_kind() -> str:
    from expcli.replay.sum_tree import compiled_available

    if compiled_available():
        return f"numba-compiled (numba {version('numba')}), one call per batch"
    return "numpy (numba not installed), about 30 array operations per batch"


# ---------------------------------------------------------------------------- timing


def time_batches(draw: Draw, count: int) -> float:
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(count):
            draw()
        return time.perf_counter() - start
    finally:
        if gc_was_enabled:
            gc.enable()


def measure(contenders: list[Contender], repeats: int, budget: float) -> dict:
    results: dict[tuple[str, str], list[float]] = {}
    plan = [(c, w) for c in contenders for w in WORKLOADS if w in c.draws]
    counts = {}
    for c, w in plan:  # warm up and calibrate
        per = max(time_batches(c.draws[w], 5) / 5, 1e-7)
        counts[c.label, w] = max(10, int(budget / per))
    for _ in range(repeats):
        for c, w in plan:
            count = counts[c.label, w]
            results.setdefault((c.label, w), []).append(count / time_batches(c.draws[w], count))
    return results


def time_tree_update(capacity: int, repeats: int = 2000) -> tuple[float, float, float]:
    """Median microseconds of a 256-priority update at random indexes: the SumTree alone,
    the sampler's (with its checks), and the numpy SumTree alone."""
    from expcli import PrioritizedSampler, RandomMemory
    from expcli.replay import MemoryStorage, SumTree

    rng = np.random.default_rng(0)
    tree = SumTree(capacity)
    tree.update(np.arange(capacity), 1.0)
    numpy_tree = SumTree(capacity, compiled=False)
    numpy_tree.update(np.arange(capacity), 1.0)
    memory = RandomMemory(capacity // NUM_ENVS, NUM_ENVS, "cpu")
    memory.create_tensor("x", 1)
    memory.filled = True
    storage = MemoryStorage(memory)
    sampler = PrioritizedSampler(ALPHA, BETA)
    sampler.update(storage, None)
    raw, full, numpy_raw = [], [], []
    for _ in range(repeats):
        index, values = rng.integers(0, capacity, 256), rng.random(256)
        start = time.perf_counter()
        tree.update(index, values)
        middle = time.perf_counter()
        sampler.update_priority(index, values)
        end = time.perf_counter()
        numpy_tree.update(index, values)
        raw.append(middle - start)
        full.append(end - middle)
        numpy_raw.append(time.perf_counter() - end)
    return median_us(raw), median_us(full), median_us(numpy_raw)


def median_us(seconds: list[float]) -> float:
    return statistics.median(seconds) * 1e6


# --------------------------------------------------------------------------- report


def report(
    contenders: list[Contender],
    results: dict,
    tree_us: tuple[float, float, float],
    extra: list[tuple[str, float, bool]],
) -> None:
    print(
        f"{'workload':<12} {'contender':<48} {'batches/s':>10} {'spread':>7} "
        f"{'vs fastest peer':>16}"
    )
    verdicts = []
    for w in WORKLOADS:
        rows = [(c, results[c.label, w]) for c in contenders if (c.label, w) in results]
        if not rows:
            continue
        peers = [statistics.median(r) for c, r in rows if c.role == "peer"]
        best = max(peers) if peers else None
        for c, runs in rows:
            rate = statistics.median(runs)
            spread = (max(runs) - min(runs)) / rate
            versus = f"{rate / best:.2f}x" if best else "-"
            print(f"{w:<12} {c.label:<48} {rate:>10,.0f} {spread:>7.0%} {versus:>16}")
        ours = [statistics.median(r) for c, r in rows if c.role == "expcli"]
        floors = [statistics.median(r) for c, r in rows if c.role == "floor"]
        if floors:
            slowest = max(floors) / min(ours)  # times the floor's time per batch
            text = f"{w}: every expcli row <= 2x the packed floor"
            verdicts.append((text, slowest, slowest <= 2))
        if best:
            worst = min(ours) / best
            verdicts.append(
                (f"{w}: every expcli row >= {TARGET}x the fastest peer", worst, worst >= TARGET)
            )
        print()
    raw, full, numpy_raw = tree_us
    print(
        f"sum-tree update of 256 priorities: {raw:.1f} us median "
        f"(PrioritizedSampler.update_priority with its checks: {full:.1f} us; "
        f"numpy sum-tree: {numpy_raw:.1f} us)"
    )
    verdicts.append(("sum-tree update of 256 priorities < 100 us", raw, raw < 100))
    for c in contenders:
        for note in c.notes:
            print(f"  note - {note}")
    print(f"  note - {load_average()} at the end")
    print()
    print("targets:")
    for text, value, met in verdicts + extra:
        unit = "us" if "us" in text else "ms" if "ms" in text else "x"
        print(f"  {'PASS' if met else 'FAIL'}  {text}  (measured {value:.2f}{unit})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transitions", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="100,000 transitions")
    parser.add_argument(
        "--workloads",
        nargs="+",
        choices=WORKLOADS + SECTIONS,
        default=list(WORKLOADS + SECTIONS),
        help="time only these (default: all)",
    )
    parser.add_argument(
        "--pong", type=int, default=8000, help="Pong transitions (8 envs) for frames, prefetch"
    )
    parser.add_argument(
        "--block-steps", type=int, default=4000, help="steps of 8 envs for compressed"
    )
    args = parser.parse_args(argv)
    transitions = args.transitions or (100_000 if args.quick else 1_000_000)
    steps = transitions // NUM_ENVS
    budget = 0.15 if args.quick else 0.4
    print(
        f"machine: {os.cpu_count()} cores, {platform.machine()}; {load_average()}; "
        f"python {platform.python_version()}"
    )
    libs = ", ".join(f"{d} {version(d)}" for d in ("torchrl", "tensordict", "tianshou"))
    print(f"torch {torch.__version__}, numpy {np.__version__}; {libs}")
    print(
        f"data: {steps * NUM_ENVS:,} transitions = {steps:,} steps x {NUM_ENVS} envs; "
        f"medians of {args.repeats} repeats, round-robin"
    )
    arrays = make_arrays(steps)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        contenders = expcli_contenders(arrays, folder)
        contenders += floor_contenders(arrays)
        contenders += torchrl_contenders(arrays, folder)
        tianshou = tianshou_contender(arrays)
        contenders += [tianshou] if tianshou else []
        for contender in contenders:
            contender.draws = {w: d for w, d in contender.draws.items() if w in args.workloads}
        results = measure(contenders, args.repeats, budget)
        tree_us = time_tree_update(steps * NUM_ENVS)
        extra = []
        if "frames" in args.workloads or "prefetch" in args.workloads:
            from _sampling_frames import frames_table, pong_run, prefetch_table

            if "frames" in args.workloads:
                extra += frames_table(folder, args.pong, args.repeats)
            else:
                pong_run(folder, args.pong)
            if "prefetch" in args.workloads:
                extra += prefetch_table(folder)
        if "loader" in args.workloads:
            from _sampling_loader import loader_table

            extra += loader_table(folder / "bench.npz", args.repeats, budget)
        if "compressed" in args.workloads:
            from _sampling_blocks import report as blocks_report
            from _sampling_blocks import write_sources

            print(f"\ncompressed sources: {args.block_steps:,} steps of 8 envs of 84x84 frames")
            (folder / "blocks").mkdir()
            paths = write_sources(folder / "blocks", args.block_steps, [])
            floor = paths.pop("npz (mapped)")
            blocks_report(floor, paths, None, args.repeats)
        print()
        report(contenders, results, tree_us, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
