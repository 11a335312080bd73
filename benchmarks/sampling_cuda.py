"""Batches onto a CUDA GPU: what the pinned, ``non_blocking`` path costs against the copy floor.

Run it on a machine with a CUDA GPU (it exits at once without one)::

    python benchmarks/sampling_cuda.py [--steps 500] [--repeats 40]

Rows (medians of ``--repeats`` batches each, after warm-up, every batch waited for with
``torch.cuda.synchronize``):

* frames: 4-frame stacks of observations and next observations of 210x160x3 uint8 frames
  (Pong's size; random pixels, episodes of 20-200 steps), batches of 32 and 256, from a mapped
  ``.npz``. Against
  - the host-to-device floor: the batch's bytes copied from pinned memory that is already
    filled (no gather at all);
  - the same batch gathered on the CPU (``ReplayBuffer(...)`` without a device), then
    ``.to("cuda")`` from pageable memory: what a user writes by hand;
  - the CPU gather alone, to show what the copy adds.
* prefetch: ``prefetch=2`` and ``device="cuda"`` while a loop spends 10 ms per step on the
  GPU (matrix products): the wait per batch.
* low-dim: 256 CartPole-size transitions of 1 M from a ``Memory`` on the GPU, against torch's
  own index of each tensor on the GPU (the floor).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

STACK = 4
ENVS = 8
FRAME = (210, 160, 3)


def frames_dataset(folder: Path, steps: int) -> Path:
    """A mapped-``.npz`` run of ``steps`` x ``ENVS`` random frames with episode ends."""
    from expcli import Dataset, save
    from expcli.spec import CircularState

    rng = np.random.default_rng(0)
    shape = (steps, ENVS)
    observations = rng.integers(0, 256, (*shape, *FRAME), dtype=np.uint8)
    next_observations = np.empty_like(observations)
    next_observations[:-1] = observations[1:]
    next_observations[-1] = rng.integers(0, 256, (ENVS, *FRAME), dtype=np.uint8)
    ends = rng.random((*shape, 1)) < 1 / 100
    arrays = {
        "observations": observations,
        "next_observations": next_observations,
        "actions": rng.integers(0, 6, (*shape, 1), dtype=np.int64),
        "rewards": rng.standard_normal((*shape, 1), dtype=np.float32),
        "terminated": ends,
        "truncated": np.zeros_like(ends),
    }
    return save(Dataset(arrays, CircularState(0, 0, True)), folder / "frames.npz")


def median_ms(draw: Callable[[], object], repeats: int) -> float:
    for _ in range(3):
        draw()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        draw()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def frames_rows(path: Path, repeats: int) -> list[tuple[str, float, str]]:
    from expcli import ReplayBuffer

    rows: list[tuple[str, float, str]] = []
    for batch in (32, 256):
        cpu = ReplayBuffer(path, batch_size=batch, stack_num=STACK, seed=0)
        gpu = ReplayBuffer(path, batch_size=batch, stack_num=STACK, seed=0, device="cuda")
        sample = cpu.sample()
        nbytes = sum(t.numel() * t.element_size() for t in sample.values())
        pinned = {k: torch.empty_like(t).pin_memory().copy_(t) for k, t in sample.items()}

        def floor(pinned: dict = pinned) -> object:
            return {k: t.to("cuda", non_blocking=True) for k, t in pinned.items()}

        def by_hand(cpu: ReplayBuffer = cpu) -> object:
            return {k: t.to("cuda") for k, t in cpu.sample().items()}

        def expcli_gpu(gpu: ReplayBuffer = gpu) -> object:
            return gpu.sample()

        def cpu_only(cpu: ReplayBuffer = cpu) -> object:
            return cpu.sample()

        copy = median_ms(floor, repeats)
        mb = nbytes / 2**20
        rows.append((f"{batch} stacks ({mb:.0f} MiB): pinned copy alone (floor)", copy, "1.00x"))
        for label, draw in (
            ("expcli ReplayBuffer(device='cuda')", expcli_gpu),
            ("CPU gather, then .to('cuda') by hand", by_hand),
            ("CPU gather alone (no copy)", cpu_only),
        ):
            ms = median_ms(draw, repeats)
            rows.append((f"{batch} stacks: {label}", ms, f"{ms / copy:.2f}x"))
        gbs = nbytes / (copy * 1e-3) / 1e9
        rows.append((f"{batch} stacks: floor bandwidth {gbs:.1f} GB/s", copy, ""))
        cpu.close()
        gpu.close()
    return rows


def prefetch_rows(path: Path, steps: int) -> list[tuple[str, float, str]]:
    from expcli import ReplayBuffer

    a = torch.randn(4096, 4096, device="cuda")

    def gpu_step() -> None:  # about 10 ms of GPU work, waited for
        start = time.perf_counter()
        while time.perf_counter() - start < 0.010:
            (a @ a).sum().item()

    rows = []
    for prefetch in (None, 2):
        buffer = ReplayBuffer(
            path, batch_size=32, stack_num=STACK, seed=0, device="cuda", prefetch=prefetch
        )
        waits = []
        for i in range(steps + 5):
            start = time.perf_counter()
            batch = buffer.sample()
            torch.cuda.synchronize()
            if i >= 5:
                waits.append(time.perf_counter() - start)
            assert batch["observations"].device.type == "cuda"
            gpu_step()
        buffer.close()
        label = f"32 stacks, 10 ms GPU step, prefetch={prefetch}: wait per batch"
        rows.append((label, statistics.mean(waits) * 1e3, "<= 1 ms" if prefetch else ""))
    return rows


def lowdim_rows(repeats: int) -> list[tuple[str, float, str]]:
    from expcli import RandomMemory, ReplayBuffer

    steps, envs = 1_000_000 // 16, 16
    memory = RandomMemory(steps, num_envs=envs, device="cuda")
    rng = np.random.default_rng(0)
    specs = {
        "observations": (4, torch.float32),
        "next_observations": (4, torch.float32),
        "actions": (1, torch.int64),
        "rewards": (1, torch.float32),
        "terminated": (1, torch.bool),
        "truncated": (1, torch.bool),
    }
    for name, (size, dtype) in specs.items():
        memory.create_tensor(name, size, dtype)
        values = torch.from_numpy(rng.standard_normal((steps, envs, size))).to(dtype)
        memory.set_tensor_by_name(name, values.to("cuda"))
    memory.filled = True
    buffer = ReplayBuffer(memory, batch_size=256, seed=0)
    views = [memory.tensors_view[name] for name in specs]
    generator = torch.Generator(device="cuda").manual_seed(0)

    def floor() -> object:
        index = torch.randint(0, steps * envs, (256,), device="cuda", generator=generator)
        return [view[index] for view in views]

    def expcli_draw() -> object:
        return buffer.sample()

    low = median_ms(floor, repeats * 5)
    ours = median_ms(expcli_draw, repeats * 5)
    return [
        ("256 of 1M CartPole-size rows, Memory on GPU: torch index per tensor (floor)", low, ""),
        ("256 of 1M CartPole-size rows: expcli ReplayBuffer(Memory on GPU)", ours,
         f"{ours / low:.2f}x"),
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=500, help="rows of 8 envs (default 500)")
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure", file=sys.stderr)
        return 1
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        path = frames_dataset(Path(tmp), args.steps)
        rows = frames_rows(path, args.repeats)
        rows += prefetch_rows(path, args.repeats)
    rows += lowdim_rows(args.repeats)
    width = max(len(label) for label, _, _ in rows)
    print(f"{'what':<{width}}  {'ms':>8}  ratio")
    for label, ms, ratio in rows:
        print(f"{label:<{width}}  {ms:8.3f}  {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
