"""The CUDA paths of Memory and sampling, checked against the same calls on the CPU.

Every test builds two memories from the same writes, one on the CPU and one on the device
under test, and asserts that what comes back (stored rows, samples by index, episodes, frame
stacks, replay batches, saved files) is bit for bit the same and lives on the device. They
skip where CUDA is absent (CI has no GPU); ``EXPCLI_TEST_DEVICE=cpu`` runs them against a
second CPU memory, which checks the tests themselves.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from expcli import Memory, PrioritizedSampler, RandomMemory, ReplayBuffer, SliceSampler
from expcli.memory.episodes import EpisodeIndex
from tests.format_catalogue import SUFFIXES
from tests.memory.conftest import assert_same_tensor

DEVICE = os.environ.get("EXPCLI_TEST_DEVICE", "cuda")

pytestmark = pytest.mark.skipif(
    DEVICE.startswith("cuda") and not torch.cuda.is_available(), reason="needs a CUDA device"
)

SIZE, ENVS = 12, 3


def _fill(memory: Memory, rows: int, seed: int) -> None:
    """Write ``rows`` full rows of seeded data: floats, frames, ints, flags, half floats."""
    rng = np.random.default_rng(seed)
    for _ in range(rows):
        memory.add_samples(
            observations=torch.from_numpy(rng.standard_normal((ENVS, 4)).astype(np.float32)),
            frames=rng.integers(0, 256, (ENVS, 6, 5), dtype=np.uint8),
            actions=torch.from_numpy(rng.integers(0, 7, (ENVS, 1))),
            rewards=rng.standard_normal(ENVS).astype(np.float32),
            halves=rng.standard_normal((ENVS, 2)).astype(np.float16),
            terminated=rng.random((ENVS, 1)) < 0.15,
            truncated=rng.random((ENVS, 1)) < 0.05,
        )


def _pair(rows: int, seed: int = 0) -> tuple[Memory, Memory]:
    memories = []
    for device in ("cpu", DEVICE):
        memory = RandomMemory(SIZE, num_envs=ENVS, device=device)
        memory.create_tensor("observations", 4, torch.float32)
        memory.create_tensor("frames", (6, 5), torch.uint8)
        memory.create_tensor("actions", 1, torch.int64)
        memory.create_tensor("rewards", 1, torch.float32)
        memory.create_tensor("halves", 2, torch.float16)
        memory.create_tensor("terminated", 1, torch.bool)
        memory.create_tensor("truncated", 1, torch.bool)
        _fill(memory, rows, seed)
        memories.append(memory)
    return memories[0], memories[1]


def _same(cpu: torch.Tensor, other: torch.Tensor) -> None:
    assert other.device.type == torch.device(DEVICE).type
    assert_same_tensor(cpu, other)


@pytest.mark.parametrize("rows", [5, SIZE, SIZE + 7, 3 * SIZE])
def test_stored_rows_and_circular_state_match_the_cpu(rows: int) -> None:
    cpu, dev = _pair(rows)
    assert dev.state == cpu.state and len(dev) == len(cpu)
    for name in cpu.get_tensor_names():
        _same(cpu.get_tensor_by_name(name), dev.get_tensor_by_name(name))


@pytest.mark.parametrize("rows", [7, SIZE + 5])
def test_sample_by_index_and_sequences_match_the_cpu(rows: int) -> None:
    cpu, dev = _pair(rows)
    names = ["observations", "frames", "halves", "terminated"]
    index = np.random.default_rng(1).integers(0, len(cpu), 50)
    for a, b in zip(
        cpu.sample_by_index(names, index)[0], dev.sample_by_index(names, index)[0], strict=True
    ):
        _same(a, b)
    for a, b in zip(cpu.sample_all(names)[0], dev.sample_all(names)[0], strict=True):
        _same(a, b)
    [[seq]] = dev.sample(["observations"], batch_size=4, sequence_length=3)
    assert seq.device.type == torch.device(DEVICE).type and seq.shape == (12, 4)


@pytest.mark.parametrize("rows", [9, SIZE, 2 * SIZE + 4])
def test_episodes_and_frame_stacks_match_the_cpu(rows: int) -> None:
    cpu, dev = _pair(rows)
    expected, got = cpu.episodes().to_dict(), dev.episodes().to_dict()
    assert expected.keys() == got.keys()
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key])
    index = np.arange(len(cpu))
    for key in ("frames", "observations"):
        stacks = [np.asarray(m.get(index, key, stack_num=3)) for m in (cpu, dev)]
        np.testing.assert_array_equal(stacks[1], stacks[0])
    np.testing.assert_array_equal(dev.unfinished_index(), cpu.unfinished_index())
    table = EpisodeIndex(dev.to_dataset()).episodes().to_dict()
    for key in expected:
        np.testing.assert_array_equal(table[key], expected[key])


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_device_memory_saves_and_loads_back_bit_for_bit(tmp_path: Path, suffix: str) -> None:
    cpu, dev = _pair(SIZE + 5)
    path = dev.save(str(tmp_path / f"run{suffix}"))
    back = Memory.from_file(path, device=DEVICE)
    assert back.state == cpu.state
    for name in cpu.get_tensor_names():
        _same(cpu.get_tensor_by_name(name), back.get_tensor_by_name(name))


def test_replay_batches_from_a_device_memory_match_the_cpu() -> None:
    cpu, dev = _pair(SIZE + 5)
    a = ReplayBuffer(cpu, batch_size=64, seed=3).sample()
    b = ReplayBuffer(dev, batch_size=64, seed=3).sample()
    assert set(a.keys()) == set(b.keys())
    for name in a.keys():
        _same(a[name], b[name])

    slices_a = ReplayBuffer(cpu, sampler=SliceSampler(slice_len=3), batch_size=12, seed=4).sample()
    slices_b = ReplayBuffer(dev, sampler=SliceSampler(slice_len=3), batch_size=12, seed=4).sample()
    for name in slices_a.keys():
        _same(slices_a[name], slices_b[name])


def test_prioritized_sampling_takes_device_priorities() -> None:
    cpu, dev = _pair(SIZE)
    buffers = [
        ReplayBuffer(m, sampler=PrioritizedSampler(alpha=0.6, beta=0.4), batch_size=32, seed=5)
        for m in (cpu, dev)
    ]
    infos = [rb.sample(return_info=True)[1] for rb in buffers]
    np.testing.assert_array_equal(np.asarray(infos[0]["index"]), np.asarray(infos[1]["index"]))
    errors = torch.linspace(0.1, 3.0, len(infos[0]["index"]))
    buffers[0].update_priority(infos[0]["index"], errors)
    buffers[1].update_priority(infos[1]["index"], errors.to(DEVICE))
    batches = [rb.sample(return_info=True) for rb in buffers]
    np.testing.assert_array_equal(
        np.asarray(batches[0][1]["index"]), np.asarray(batches[1][1]["index"])
    )
    for name in batches[0][0].keys():
        _same(batches[0][0][name], batches[1][0][name])


def test_extend_writes_device_tensors_round_robin() -> None:
    cpu, dev = _pair(4)
    rng = np.random.default_rng(8)
    rows = {
        "observations": rng.standard_normal((ENVS, 4)).astype(np.float32),
        "frames": rng.integers(0, 256, (ENVS, 6, 5), dtype=np.uint8),
        "actions": rng.integers(0, 7, (ENVS, 1)),
        "rewards": rng.standard_normal((ENVS, 1)).astype(np.float32),
        "halves": rng.standard_normal((ENVS, 2)).astype(np.float16),
        "terminated": np.zeros((ENVS, 1), bool),
        "truncated": np.zeros((ENVS, 1), bool),
    }
    ReplayBuffer(cpu).extend({k: torch.from_numpy(v) for k, v in rows.items()})
    ReplayBuffer(dev).extend({k: torch.from_numpy(v).to(DEVICE) for k, v in rows.items()})
    assert dev.state == cpu.state
    for name in cpu.get_tensor_names():
        _same(cpu.get_tensor_by_name(name), dev.get_tensor_by_name(name))


def test_a_collector_writes_the_same_rows_into_a_device_memory() -> None:
    pytest.importorskip("gymnasium")
    from expcli import Collector, ParallelEnv

    stored = []
    for device in ("cpu", DEVICE):
        with ParallelEnv.from_id("CartPole-v1", num_envs=4, para_mode="dummy") as env:
            memory = RandomMemory(memory_size=50, num_envs=4, device=device)
            stats = Collector(env, memory, policy=None, seed=0).collect(steps=260)
        stored.append((memory, stats.episodes.complete))
    (cpu, complete), (dev, dev_complete) = stored
    assert dev.state == cpu.state and dev_complete == complete
    for name in cpu.get_tensor_names():
        _same(cpu.get_tensor_by_name(name), dev.get_tensor_by_name(name))
