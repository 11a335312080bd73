"""``ReplayBuffer(stack_num=K)``: frames stored once, stacked at sample time.

The reference keeps each episode's frames in plain lists while the data is written and
stacks them the way frame-stacking wrappers (and EnvPool) do: the episode's first frame
repeated at its start, the next observation's stack being the one the following step sees.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from expcli import RandomMemory, ReplayBuffer, SliceSampler
from expcli.errors import ConfigError

K = 3


def stream(rows: int, num_envs: int, seed: int) -> tuple[RandomMemory, dict[str, np.ndarray]]:
    """A memory of ``rows`` rows (unique frame numbers) and each transition's stacks."""
    memory = RandomMemory(rows, num_envs, "cpu")
    memory.create_tensor("observations", 1, torch.int64)
    memory.create_tensor("next_observations", 1, torch.int64)
    memory.create_tensor("rewards", 1, torch.float32)
    memory.create_tensor("terminated", 1, torch.bool)
    rng = np.random.default_rng(seed)
    frame = iter(range(1, 10**6))
    episode = [[next(frame)] for _ in range(num_envs)]  # each env's frames so far
    stacks = {name: np.zeros((rows, num_envs, K), np.int64) for name in ("obs", "next")}
    for t in range(rows):
        nxt = np.array([next(frame) for _ in range(num_envs)])
        done = rng.random(num_envs) < 0.25
        for i in range(num_envs):
            padded = [episode[i][0]] * (K - 1) + episode[i]
            stacks["obs"][t, i] = padded[-K:]
            stacks["next"][t, i] = (padded + [nxt[i]])[-K:]
            episode[i] = [next(frame)] if done[i] else episode[i] + [nxt[i]]
        memory.add_samples(
            observations=stacks["obs"][t, :, -1:],
            next_observations=nxt[:, None],
            rewards=np.zeros((num_envs, 1), np.float32),
            terminated=done[:, None],
        )
    return memory, stacks


def test_sampled_stacks_are_the_episodes_last_frames() -> None:
    memory, stacks = stream(40, 3, seed=1)
    assert memory.get_tensor_by_name("terminated").sum() >= 10  # many episode starts
    buffer = ReplayBuffer(memory, batch_size=256, seed=0, stack_num=K)
    batch, info = buffer.sample(return_info=True)
    index = info["index"]
    assert batch["observations"].shape == (256, K, 1)
    flat = {name: stacks[name].reshape(-1, K) for name in stacks}
    assert np.array_equal(batch["observations"][..., 0].numpy(), flat["obs"][index])
    assert np.array_equal(batch["next_observations"][..., 0].numpy(), flat["next"][index])
    assert batch["rewards"].shape == (256, 1)  # other tensors are not stacked


def test_slices_are_stacked_per_step_and_stack_num_is_checked() -> None:
    memory, stacks = stream(30, 2, seed=2)
    buffer = ReplayBuffer(
        memory, sampler=SliceSampler(slice_len=4), batch_size=32, seed=0, stack_num=K
    )
    batch, info = buffer.sample(return_info=True)
    index = info["index"]
    assert index.ndim == 2 and batch["observations"].shape == (*index.shape, K, 1)
    flat = stacks["next"].reshape(-1, K)
    assert np.array_equal(batch["next_observations"][..., 0].numpy(), flat[index])
    with pytest.raises(ConfigError, match="stack_num must be at least 1, got 0"):
        ReplayBuffer(memory, stack_num=0)
