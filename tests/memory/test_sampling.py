"""sample_by_index, sample_all and RandomMemory.sample, against skrl and brute force."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli import Memory, RandomMemory
from tests.memory.conftest import assert_same_tensor, timeline_memory

skrl_memories = pytest.importorskip("skrl.memories.torch")


def twin_memories(memory_size: int, num_envs: int, steps: int, seed: int = 0):
    """Our RandomMemory and skrl's, fed the same random data."""
    ours = RandomMemory(memory_size, num_envs, "cpu")
    ref = skrl_memories.RandomMemory(
        memory_size=memory_size, num_envs=num_envs, device="cpu", replacement=True
    )
    for memory in (ours, ref):
        memory.create_tensor("observations", size=6, dtype=torch.float32)
        memory.create_tensor("actions", size=1, dtype=torch.int64)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        obs = torch.from_numpy(rng.normal(size=(num_envs, 6)).astype(np.float32))
        act = torch.from_numpy(rng.integers(0, 100, (num_envs, 1)))
        ours.add_samples(observations=obs, actions=act)
        ref.add_samples(observations=obs, actions=act)
    return ours, ref


def assert_same_batches(a: list, b: list) -> None:
    assert len(a) == len(b)
    for part_a, part_b in zip(a, b, strict=True):
        assert len(part_a) == len(part_b)
        for x, y in zip(part_a, part_b, strict=True):
            if y is None:
                assert x is None
            else:
                assert_same_tensor(x, y)


NAMES = ["observations", "actions", "missing"]


@pytest.mark.parametrize("mini_batches", [1, 2, 3, 7])
@pytest.mark.parametrize("kind", ["list", "numpy", "torch"])
def test_sample_by_index_matches_skrl(mini_batches: int, kind: str) -> None:
    ours, ref = twin_memories(5, 3, 7)
    index = np.random.default_rng(1).integers(0, 15, 20)
    given_index = {"list": index.tolist(), "numpy": index, "torch": torch.from_numpy(index)}[kind]
    assert_same_batches(
        ours.sample_by_index(NAMES, given_index, mini_batches),
        ref.sample_by_index(NAMES, indexes=torch.from_numpy(index), mini_batches=mini_batches),
    )


@pytest.mark.parametrize("mini_batches", [1, 2, 4, 5])
def test_sample_all_matches_skrl(mini_batches: int) -> None:
    ours, ref = twin_memories(4, 3, 3)
    assert_same_batches(
        ours.sample_all(NAMES, mini_batches), ref.sample_all(NAMES, mini_batches=mini_batches)
    )


@pytest.mark.parametrize("mini_batches", [1, 3])
def test_sample_all_sequences_match_skrl_when_the_head_is_at_row_zero(mini_batches: int) -> None:
    ours, ref = twin_memories(4, 3, 8)
    assert ours.memory_index == 0 and ours.filled
    assert_same_batches(
        ours.sample_all(NAMES, mini_batches, 4),
        ref.sample_all(NAMES, mini_batches=mini_batches, sequence_length=4),
    )


@pytest.mark.parametrize(("steps", "partial"), [(7, 0), (9, 2), (3, 1), (4, 0)])
def test_sample_all_sequences_are_chronological_per_env(steps: int, partial: int) -> None:
    m = timeline_memory(Memory, 4, 3, steps, partial)
    [[time, env]] = m.sample_all(["time", "env"], sequence_length=2)
    time, env = time.view(3, 4), env.view(3, 4)
    for e in range(3):
        valid = min(4, steps + (1 if e < partial else 0))
        assert env[e, :valid].eq(e).all()
        assert time[e, :valid].tolist() == list(
            range(steps + (e < partial) - valid, steps + (e < partial))
        )


def test_uniform_indexes_match_skrl_for_the_same_seed() -> None:
    ours, ref = twin_memories(6, 4, 9)
    torch.manual_seed(123)
    a = ours.sample(NAMES, 64)
    torch.manual_seed(123)
    b = ref.sample(NAMES, batch_size=64)
    assert_same_batches(a, b)
    assert torch.equal(ours.get_sampling_indexes(), ref.get_sampling_indexes())


def test_sample_shapes_and_mini_batches() -> None:
    m, _ = twin_memories(6, 4, 9)
    batches = m.sample(["observations", "actions", "nope"], 10, mini_batches=3, sequence_length=2)
    assert [b[0].shape[0] for b in batches] == [7, 7, 6]
    assert batches[0][0].shape[1:] == (6,) and batches[0][1].dtype == torch.int64
    assert all(b[2] is None for b in batches)
    assert len(m.get_sampling_indexes()) == 20


def test_without_replacement_draws_distinct_items_and_caps_the_batch() -> None:
    m = RandomMemory(50, 4, "cpu", replacement=False)
    m.create_tensor("x", 1, torch.int64)
    for t in range(60):
        m.add_samples(x=np.full((4, 1), t))
    for size in (1, 30, 150, 199, 200, 500):
        m.sample(["x"], size)
        index = m.get_sampling_indexes().numpy()
        assert len(index) == min(size, 200) and len(np.unique(index)) == len(index)
        assert index.min() >= 0 and index.max() < 200


def test_sampling_is_reproducible_with_torch_seed() -> None:
    m = timeline_memory(RandomMemory, 30, 3, 45)
    results = []
    for _ in range(2):
        torch.manual_seed(7)
        results.append(m.sample(["time"], 16, sequence_length=3)[0][0])
    assert torch.equal(*results)


def test_errors_when_there_is_not_enough_data() -> None:
    m = RandomMemory(5, 2, "cpu")
    m.create_tensor("x", 1)
    with pytest.raises(ValueError, match="holds 0"):
        m.sample(["x"], 4)
    m.add_samples(x=np.ones((2, 1)))
    m.add_samples(x=np.ones((2, 1)))
    with pytest.raises(ValueError, match="sequences of 3"):
        m.sample(["x"], 4, sequence_length=3)
    with pytest.raises(ValueError, match="positive"):
        m.sample(["x"], 0)


def brute_force_sequences(m: Memory, length: int) -> list[tuple[int, int]]:
    """Every (env, first time) of a run of ``length`` consecutive writes still in memory."""
    time = m.tensors["time"][:, :, 0].numpy()
    runs = []
    n_valid = len(m)
    # the valid slots are the n_valid most recent writes
    order = (
        sorted(
            (
                (int(time[t, e]), e)
                for t in range(m.memory_size)
                for e in range(m.num_envs)
                if time[t, e] > 0
            ),
            key=lambda te: (te[0], te[1]),
        )[-n_valid:]
        if n_valid
        else []
    )
    per_env: dict[int, list[int]] = {}
    for t, e in order:
        per_env.setdefault(e, []).append(t)
    for e, times in per_env.items():
        for i in range(len(times) - length + 1):
            window = times[i : i + length]
            assert window == list(range(window[0], window[0] + length))
            runs.append((e, window[0]))
    return sorted(runs)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 7), st.integers(1, 4), st.integers(0, 20), st.integers(0, 3), st.integers(1, 5)
)
def test_sequences_never_mix_envs_nor_cross_the_write_head(
    memory_size: int, num_envs: int, steps: int, partial: int, length: int
) -> None:
    partial = min(partial, num_envs - 1)
    m = RandomMemory(memory_size, num_envs, "cpu", replacement=False)
    m.create_tensor("time", 1, torch.int64)
    m.create_tensor("env", 1, torch.int64)
    for clock in range(1, steps + 1):  # time 0 marks an unwritten slot
        m.add_samples(time=np.full((num_envs, 1), clock), env=np.arange(num_envs)[:, None])
    for e in range(partial):
        m.add_samples(time=np.array([steps + 1]), env=np.array([e]))
    expected = brute_force_sequences(m, length)
    if not expected:
        with pytest.raises(ValueError):
            m.sample(["time"], 1, sequence_length=length)
        return
    # without replacement and a batch larger than the population: every valid start once
    [[time, env]] = m.sample(["time", "env"], 10_000, sequence_length=length)
    time, env = time.view(-1, length), env.view(-1, length)
    assert (env == env[:, :1]).all(), "a sequence mixes envs"
    assert (time[:, 1:] - time[:, :-1] == 1).all(), "a sequence is not consecutive in time"
    drawn = sorted(zip(env[:, 0].tolist(), time[:, 0].tolist(), strict=True))
    assert drawn == expected
