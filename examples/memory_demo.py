"""The main job until `expcli collect` exists: fill a Memory with CartPole, save, load.

Steps 8 CartPole-v1 envs by hand with random actions into a ``RandomMemory``, saves it as
pt, npz and csv under ``runs/``, loads each file back and checks that the loaded memory
is the one saved (tensors bit for bit, circular state, ``sample_all`` order).
"""

from __future__ import annotations

import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from expcli import Memory, RandomMemory

NUM_ENVS, MEMORY_SIZE, STEPS = 8, 1_000, 1_250


def fill(memory: Memory) -> int:
    """Step the envs and store every transition; return the number of finished episodes."""
    envs = [gym.make("CartPole-v1") for _ in range(NUM_ENVS)]
    obs = np.stack([env.reset(seed=i)[0] for i, env in enumerate(envs)])
    episodes = 0
    for _ in range(STEPS):
        actions = np.array([env.action_space.sample() for env in envs])
        results = [env.step(int(a)) for env, a in zip(envs, actions, strict=True)]
        next_obs = np.stack([r[0] for r in results])
        terminated = np.array([r[2] for r in results])
        truncated = np.array([r[3] for r in results])
        memory.add_samples(
            observations=obs,
            next_observations=next_obs,
            actions=actions[:, None],
            rewards=np.array([r[1] for r in results], dtype=np.float32),
            terminated=terminated,
            truncated=truncated,
        )
        obs = next_obs.copy()
        for i in np.flatnonzero(terminated | truncated):
            obs[i] = envs[i].reset()[0]
            episodes += 1
    return episodes


def same(a: Memory, b: Memory) -> bool:
    """True when two memories hold the same bits, state and sample_all order."""
    names = a.get_tensor_names()
    if names != b.get_tensor_names() or (a.memory_index, a.env_index, a.filled) != (
        b.memory_index,
        b.env_index,
        b.filled,
    ):
        return False
    for x, y in zip(
        a.sample_all(names, sequence_length=2)[0],
        b.sample_all(names, sequence_length=2)[0],
        strict=True,
    ):
        assert x is not None and y is not None
        if x.dtype != y.dtype or x.numpy().tobytes() != y.numpy().tobytes():
            return False
    return True


def main() -> None:
    console = Console()
    memory = RandomMemory(MEMORY_SIZE, NUM_ENVS, device="cpu")
    space = gym.make("CartPole-v1").observation_space
    memory.create_tensor("observations", space, torch.float32)
    memory.create_tensor("next_observations", space, torch.float32)
    memory.create_tensor("actions", 1, torch.int64)
    memory.create_tensor("rewards", 1, torch.float32)
    memory.create_tensor("terminated", 1, torch.bool)
    memory.create_tensor("truncated", 1, torch.bool)
    memory.metadata["env_id"] = "CartPole-v1"

    start = time.perf_counter()
    episodes = fill(memory)
    elapsed = time.perf_counter() - start
    console.print(
        f"Collected {STEPS * NUM_ENVS:,} CartPole transitions ({episodes} episodes) in "
        f"{elapsed:.2f} s; memory holds {len(memory):,} (wrapped: {memory.filled})"
    )
    batch = memory.sample(["observations", "actions"], batch_size=256, sequence_length=4)
    console.print(f"Sampled 256 sequences of 4 steps: observations {tuple(batch[0][0].shape)}")

    table = Table("format", "file", "size", "loads back identical")
    Path("runs").mkdir(exist_ok=True)
    for fmt in ("pt", "npz", "csv"):
        path = memory.save(f"runs/demo.{fmt}")
        loaded = Memory.from_file(path, device="cpu")
        ok = same(memory, loaded)
        table.add_row(
            fmt, path, f"{Path(path).stat().st_size / 1e6:.2f} MB", "yes" if ok else "[red]NO[/red]"
        )
        if not ok:
            raise SystemExit(f"{path} did not load back identical")
    console.print(table)


if __name__ == "__main__":
    main()
