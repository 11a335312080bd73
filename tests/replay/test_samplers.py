"""Samplers against their definitions: statistics, epochs, slices against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli import (
    ConfigError,
    PrioritizedSampler,
    RandomMemory,
    ReplayBuffer,
    SamplerWithoutReplacement,
    SchemaError,
    SliceSampler,
)
from expcli.replay.sum_tree import compiled_available
from tests.replay.episode_data import Reference, make_memory, memories


def full_memory(memory_size: int = 10, num_envs: int = 3, seed: int = 0) -> RandomMemory:
    return make_memory(memory_size, num_envs, [num_envs] * (memory_size + 4), seed=seed)


# ------------------------------------------------------------------- prioritized


SUM_TREES = [
    pytest.param(False, id="numpy-tree"),
    pytest.param(
        True,
        id="compiled-tree",
        marks=pytest.mark.skipif(not compiled_available(), reason="numba is not installed"),
    ),
]


@pytest.mark.parametrize("compiled", SUM_TREES)
def test_prioritized_frequencies_match_p_alpha_within_three_standard_errors(
    compiled: bool,
) -> None:
    memory = full_memory(4, 3)  # 12 transitions
    alpha = 0.7
    sampler = PrioritizedSampler(alpha=alpha, beta=0.5, compiled=compiled)
    buffer = ReplayBuffer(memory, sampler=sampler, seed=11)
    priorities = np.random.default_rng(5).random(12) * 3
    buffer.update_priority(np.arange(12), priorities)
    draws = np.concatenate([buffer.sample(1000, return_info=True)[1]["index"] for _ in range(100)])
    counts = np.bincount(draws, minlength=12)
    p = (priorities + 1e-8) ** alpha
    p /= p.sum()
    n = len(draws)
    assert n == 100_000
    assert (np.abs(counts - n * p) <= 3 * np.sqrt(n * p * (1 - p))).all(), (counts, n * p)


@pytest.mark.parametrize("compiled", SUM_TREES)
def test_importance_weights_are_torchrl_and_per_weights(compiled: bool) -> None:
    memory = full_memory(5, 2)
    sampler = PrioritizedSampler(alpha=0.6, beta=0.4, eps=0.01, compiled=compiled)
    buffer = ReplayBuffer(memory, sampler=sampler, seed=0)
    priorities = np.linspace(0.1, 4.0, 10)
    buffer.update_priority(np.arange(10), priorities)
    batch, info = buffer.sample(64, return_info=True)
    p = (priorities + 0.01) ** 0.6
    probability = p / p.sum()
    weights = (10 * probability) ** -0.4
    expected = weights[info["index"]] / weights.max()
    np.testing.assert_allclose(info["priority_weight"], expected, rtol=1e-6)
    assert info["priority_weight"].dtype == np.float32
    memory_values = memory.sample_by_index(["clock"], info["index"])[0][0]
    assert (batch["clock"] == memory_values).all()


def test_new_transitions_get_the_largest_priority_seen() -> None:
    memory = make_memory(6, 1, [3], seed=0)
    sampler = PrioritizedSampler(alpha=1.0, beta=1.0, eps=0.0)
    buffer = ReplayBuffer(memory, sampler=sampler, seed=0)
    buffer.update_priority([0, 1, 2], [0.0, 5.0, 2.0])
    memory.add_samples(clock=np.array([[99]]))  # written outside the buffer: index 3
    buffer.sample(1)
    assert sampler.tree is not None and sampler.tree.leaves.tolist() == [0, 5, 2, 5, 0, 0]
    index = buffer.extend({"clock": np.array([[100], [101]])})
    assert index.tolist() == [4, 5]
    assert sampler.tree.leaves.tolist() == [0, 5, 2, 5, 5, 5]
    drawn = buffer.sample(2000, return_info=True)[1]["index"]
    assert 0 not in drawn  # zero priority: never drawn


def test_update_priority_is_checked() -> None:
    buffer = ReplayBuffer(full_memory(), sampler=PrioritizedSampler(), batch_size=4)
    for bad in (-1.0, np.nan, np.inf):
        with pytest.raises(ConfigError, match="non-negative"):
            buffer.update_priority([0, 1], [1.0, bad])
    with pytest.raises(ConfigError, match="one each"):
        buffer.update_priority([0, 1, 2], [1.0, 2.0])
    for bad_index in (30, -1):
        with pytest.raises(ConfigError, match="out of range"):
            buffer.update_priority([bad_index], [1.0])
    with pytest.raises(ConfigError, match="PrioritizedSampler"):
        ReplayBuffer(full_memory()).update_priority([0], [1.0])
    with pytest.raises(ConfigError, match="non-negative"):
        PrioritizedSampler(alpha=-1)
    with pytest.raises(ConfigError, match="serves no buffer"):
        PrioritizedSampler().update_priority([0], [1.0])
    sampler = buffer.sampler
    assert isinstance(sampler, PrioritizedSampler)
    sampler.update_priority([3], [2.0])  # torchrl's signature, straight on the sampler
    assert sampler.tree is not None and sampler.tree[3] == pytest.approx((2.0 + 1e-8) ** 0.6)


# ------------------------------------------------------------ without replacement


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("batch_size", [1, 7, 30, 64])
def test_without_replacement_covers_each_index_once_per_epoch(drop_last, batch_size) -> None:
    memory = full_memory(10, 3)  # 30 transitions
    sampler = SamplerWithoutReplacement(drop_last=drop_last)
    buffer = ReplayBuffer(memory, sampler=sampler, batch_size=batch_size, seed=3)
    if drop_last and batch_size > 30:
        with pytest.raises(ConfigError, match="drop_last"):
            buffer.sample()
        return
    for _ in range(3):
        epoch = [info["index"] for info in (b for b in _epoch(buffer))]
        drawn = np.concatenate(epoch)
        if drop_last:
            assert all(len(i) == batch_size for i in epoch)
            assert len(drawn) == 30 // batch_size * batch_size
            assert len(set(drawn.tolist())) == len(drawn)
        else:
            assert sorted(drawn.tolist()) == list(range(30))


def _epoch(buffer: ReplayBuffer):
    while True:
        _, info = buffer.sample(return_info=True)
        yield info
        if buffer.sampler.ran_out:
            return


def test_iterating_a_buffer_gives_one_epoch() -> None:
    memory = full_memory(10, 3)
    buffer = ReplayBuffer(memory, sampler=SamplerWithoutReplacement(), batch_size=8, seed=0)
    clocks = np.concatenate([b["clock"].numpy().reshape(-1) for b in buffer])
    assert sorted(clocks.tolist()) == sorted(memory.tensors["clock"].numpy().reshape(-1).tolist())
    batches = list(ReplayBuffer(memory, batch_size=8))
    assert len(batches) == 30 // 8 and all(b.n_elems() == 8 for b in batches)


# ----------------------------------------------------------------------- slices


def brute_force_starts(ref: Reference, steps: int, cross: bool) -> list[int]:
    starts = []
    for column in ref.columns:
        for p in range(len(column) - steps + 1):
            window = column[p : p + steps - 1]
            if cross or not any(ref.done[i] for i in window):
                starts.append(column[p])
    return sorted(starts)


@settings(max_examples=60, deadline=None)
@given(memory=memories, steps=st.integers(1, 5), cross=st.booleans())
def test_slice_starts_and_slices_match_brute_force(memory, steps, cross) -> None:
    ref = Reference.of(memory)
    sampler = SliceSampler(slice_len=steps, cross_episodes=cross)
    buffer = ReplayBuffer(memory, sampler=sampler, seed=0)
    expected = brute_force_starts(ref, steps, cross)
    assert sorted(sampler.valid_starts(buffer.storage, steps).tolist()) == expected
    if not expected:
        with pytest.raises(ConfigError, match=f"no slice of {steps} steps"):
            buffer.sample(steps * 4)
        return
    batch, info = buffer.sample(steps * 4, return_info=True)
    assert info["index"].shape == (4, steps)
    for row in info["index"].tolist():
        column = ref.columns[row[0] % ref.num_envs]
        p = column.index(row[0])
        assert row == column[p : p + steps]  # consecutive steps, oldest first
        if not cross:
            assert not any(ref.done[i] for i in row[:-1])
    clock = memory.tensors["clock"].numpy().reshape(-1)
    assert batch["clock"][..., 0].tolist() == clock[info["index"]].tolist()
    assert batch.lengths.tolist() == [steps] * 4


def brute_force_short_slices(ref: Reference, steps: int, cross: bool) -> dict[int, int]:
    """Start -> length of the slice from there, stopping at an episode end or the head."""
    lengths = {}
    for column in ref.columns:
        for p, start in enumerate(column):
            run = column[p : p + steps]
            if not cross:
                ends = [k for k, i in enumerate(run) if ref.done[i]]
                run = run[: ends[0] + 1] if ends else run
            lengths[start] = len(run)
    return lengths


@settings(max_examples=60, deadline=None)
@given(memory=memories, steps=st.integers(1, 5), cross=st.booleans())
def test_short_slices_stop_at_episode_ends_and_are_padded(memory, steps, cross) -> None:
    ref = Reference.of(memory)
    sampler = SliceSampler(slice_len=steps, cross_episodes=cross, strict_length=False)
    buffer = ReplayBuffer(memory, sampler=sampler, seed=1)
    expected = brute_force_short_slices(ref, steps, cross)
    assert sorted(sampler.valid_starts(buffer.storage, steps).tolist()) == sorted(expected)
    batch, info = buffer.sample(steps * 6, return_info=True)
    clock = memory.tensors["clock"].numpy().reshape(-1)
    for b, (row, length) in enumerate(zip(info["index"], info["lengths"], strict=True)):
        column = ref.columns[int(row[0]) % ref.num_envs]
        p = column.index(int(row[0]))
        assert length == expected[int(row[0])]
        assert row[:length].tolist() == column[p : p + length]
        got = batch["clock"][b, :, 0].tolist()
        assert got == [clock[i] for i in row[:length]] + [0] * (steps - length)
    assert batch.lengths.tolist() == info["lengths"].tolist()


def test_slices_run_over_the_wrap_point_but_never_across_the_write_head() -> None:
    memory = make_memory(6, 1, [1] * 9, seed=0, p_done=0.0)  # rows hold steps 7,8,9,4,5,6
    sampler = SliceSampler(slice_len=4)
    buffer = ReplayBuffer(memory, sampler=sampler, seed=0)
    assert sorted(sampler.valid_starts(buffer.storage, 4).tolist()) == [3, 4, 5]
    seen = {tuple(row) for row in buffer.sample(400, return_info=True)[1]["index"].tolist()}
    assert seen == {(3, 4, 5, 0), (4, 5, 0, 1), (5, 0, 1, 2)}


def test_slice_sampler_options() -> None:
    memory = full_memory(10, 2)
    buffer = ReplayBuffer(memory, sampler=SliceSampler(num_slices=4), seed=0)
    memory.tensors["terminated"][:] = False
    memory.set_tensor_by_name("truncated", np.zeros((10, 2, 1), bool))
    assert buffer.sample(12)["clock"].shape == (4, 3, 1)
    with pytest.raises(ConfigError, match="multiple"):
        buffer.sample(10)
    with pytest.raises(ConfigError, match="exactly one"):
        SliceSampler()
    with pytest.raises(ConfigError, match="at least 1"):
        SliceSampler(slice_len=0)


def test_an_empty_buffer_has_nothing_to_sample() -> None:
    memory = RandomMemory(4, 2, "cpu")
    memory.create_tensor("observations", 1)
    for sampler in (None, PrioritizedSampler(), SamplerWithoutReplacement()):
        with pytest.raises(SchemaError, match="no transitions"):
            ReplayBuffer(memory, sampler=sampler).sample(2)
