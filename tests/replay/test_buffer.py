"""ReplayBuffer: storages, batch sizes, transforms, writing, prefetching and seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli import (
    ConfigError,
    DictBatch,
    PrioritizedSampler,
    RandomMemory,
    RandomSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    SchemaError,
    SliceSampler,
    TemporalBatch,
    load,
)
from expcli.replay import DatasetStorage, MemoryStorage
from tests.format_catalogue import SUFFIXES
from tests.memory.conftest import assert_same_tensor, unpacked
from tests.replay.episode_data import make_memory, memories


@pytest.fixture
def memory() -> RandomMemory:
    return make_memory(20, 4, [4] * 26 + [1, 1], seed=0)  # wrapped, mid-row


def test_batches_hold_the_rows_at_the_drawn_indexes(memory) -> None:
    buffer = ReplayBuffer(memory, batch_size=32, seed=0)
    batch, info = buffer.sample(return_info=True)
    assert isinstance(batch, DictBatch) and batch.n_elems() == 32
    assert set(batch) == set(memory.get_tensor_names())
    for name in batch:
        [[expected]] = memory.sample_by_index([name], info["index"])
        assert torch.equal(batch[name], expected)
    assert buffer.sample(5).n_elems() == 5  # the call's batch size wins


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_dataset_file_is_a_read_only_storage(memory, tmp_path, suffix) -> None:
    path = memory.save(tmp_path / f"data{suffix}")
    from_path = ReplayBuffer(path, batch_size=16, seed=4)
    from_dataset = ReplayBuffer(load(path), batch_size=16, seed=4)
    from_memory = ReplayBuffer(memory, batch_size=16, seed=4)
    assert isinstance(from_path.storage, DatasetStorage)
    assert isinstance(from_memory.storage, MemoryStorage)
    assert len(from_path) == len(memory)
    for a, b, c in zip(from_path, from_dataset, from_memory, strict=True):
        for name in a:
            assert torch.equal(a[name], b[name]) and torch.equal(a[name], c[name])
    with pytest.raises(ConfigError, match="read-only"):
        from_path.extend({"clock": np.zeros((1, 1), np.int64)})


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")
def test_a_pt_dataset_is_sampled_memory_mapped(memory, tmp_path) -> None:
    path = memory.save(tmp_path / "mapped.pt")
    buffer = ReplayBuffer(path, batch_size=8)
    assert str(path) in Path("/proc/self/maps").read_text()  # the file is mapped, not read
    assert buffer.sample().n_elems() == 8


def test_transform_runs_on_every_batch(memory) -> None:
    def scale(batch: DictBatch) -> DictBatch:
        out = batch.get(["observations"], clone=True)
        out.set("observations", out["observations"] * 10)
        return out

    plain = ReplayBuffer(memory, batch_size=8, seed=1).sample()
    scaled = ReplayBuffer(memory, batch_size=8, seed=1, transform=scale).sample()
    assert list(scaled) == ["observations"]
    assert torch.equal(scaled["observations"], plain["observations"] * 10)


def test_names_select_tensors_and_unknown_names_fail(memory) -> None:
    batch = ReplayBuffer(memory, names=["clock"]).sample(3)
    assert list(batch) == ["clock"]
    with pytest.raises(SchemaError, match="'nope'"):
        ReplayBuffer(memory, names=["nope"]).sample(3)


def test_batch_size_rules(memory) -> None:
    with pytest.raises(ConfigError, match="no batch size"):
        ReplayBuffer(memory).sample()
    with pytest.raises(ConfigError, match="prefetch needs a batch_size"):
        ReplayBuffer(memory, prefetch=2)
    with pytest.raises(ConfigError, match="at least 1"):
        ReplayBuffer(memory, batch_size=0)
    with pytest.raises(ConfigError, match="at least 1"):
        ReplayBuffer(memory).sample(0)
    with pytest.raises(ConfigError, match="cannot use a int"):
        ReplayBuffer(3)


def test_same_seed_same_batches(memory) -> None:
    for sampler in (RandomSampler, PrioritizedSampler, SamplerWithoutReplacement):
        a = [ReplayBuffer(memory, sampler=sampler(), seed=9).sample(6, True)[1]["index"]]
        b = [ReplayBuffer(memory, sampler=sampler(), seed=9).sample(6, True)[1]["index"]]
        assert np.array_equal(a[0], b[0])


def test_extend_and_add_write_round_robin() -> None:
    memory = RandomMemory(3, 2, "cpu")
    memory.create_tensor("x", 1, torch.int64)
    buffer = ReplayBuffer(memory, batch_size=2)
    assert buffer.add({"x": np.array([0])}) == 0
    index = buffer.extend({"x": np.arange(1, 6)[:, None]})
    assert index.tolist() == [1, 2, 3, 4, 5]
    assert buffer.extend({"x": torch.tensor([[6], [7]])}).tolist() == [0, 1]
    assert memory.tensors["x"][:, :, 0].tolist() == [[6, 7], [2, 3], [4, 5]]
    assert memory.filled and len(buffer) == 6
    with pytest.raises(ConfigError, match="common first dimension"):
        buffer.extend({"x": np.zeros((2, 1)), "y": np.zeros((3, 1))})


# ---------------------------------------------------------------------- prefetch


def draw_sequence(memory_seed: int, prefetch: int | None, sampler_factory, actions) -> list:
    """Sample, update priorities, write into the memory and extend, in a fixed script."""
    memory = make_memory(30, 4, [4] * 20, seed=memory_seed)
    buffer = ReplayBuffer(
        memory, sampler=sampler_factory(), batch_size=16, prefetch=prefetch, seed=5
    )
    out = []
    rng = np.random.default_rng(0)
    for step in range(40):
        batch, info = buffer.sample(return_info=True)
        out.append(
            (
                info["index"].tolist(),
                batch["clock"].reshape(-1).tolist(),
                info.get("priority_weight", np.zeros(1)).tolist(),
            )
        )
        action = actions[step % len(actions)]
        if action == "priority" and isinstance(buffer.sampler, PrioritizedSampler):
            buffer.update_priority(info["index"], rng.random(info["index"].size))
        elif action == "write":  # another writer: the buffer sees the memory change
            memory.add_samples(
                clock=np.full((4, 1), 1000 + step),
                observations=np.zeros((4, 2)),
                rewards=np.zeros((4, 1)),
                terminated=np.zeros((4, 1), bool),
                truncated=np.zeros((4, 1), bool),
            )
        elif action == "extend":
            buffer.extend({"clock": np.full((4, 1), 2000 + step)})
    buffer.close()
    return out


@pytest.mark.parametrize(
    "sampler_factory",
    [
        RandomSampler,
        lambda: PrioritizedSampler(0.8, 0.5),
        SamplerWithoutReplacement,
        lambda: SliceSampler(slice_len=4),
    ],
    ids=["random", "prioritized", "without-replacement", "slice"],
)
@pytest.mark.parametrize("actions", [["none"], ["priority", "none", "write", "extend", "none"]])
def test_prefetching_does_not_change_the_batches(sampler_factory, actions) -> None:
    expected = draw_sequence(1, None, sampler_factory, actions)
    for depth in (1, 3):
        assert draw_sequence(1, depth, sampler_factory, actions) == expected


def test_prefetched_iteration_and_a_call_with_another_batch_size(memory) -> None:
    buffer = ReplayBuffer(
        memory, sampler=SamplerWithoutReplacement(), batch_size=7, seed=2, prefetch=2
    )
    plain = ReplayBuffer(memory, sampler=SamplerWithoutReplacement(), batch_size=7, seed=2)
    with buffer:
        for a, b in zip(buffer, plain, strict=True):
            assert torch.equal(a["clock"], b["clock"])
        assert torch.equal(buffer.sample(3)["clock"], plain.sample(3)["clock"])
        assert torch.equal(buffer.sample()["clock"], plain.sample()["clock"])


def test_prefetch_reports_errors_when_the_batch_is_taken() -> None:
    memory = RandomMemory(4, 1, "cpu")
    memory.create_tensor("x", 1)
    with ReplayBuffer(memory, batch_size=2, prefetch=2) as buffer:
        with pytest.raises(SchemaError, match="no transitions"):
            buffer.sample()
        buffer.extend({"x": np.ones((2, 1))})
        assert buffer.sample().n_elems() == 2


# ---------------------------------------------------------- episodes and slices


def test_slice_batches_are_temporal_and_episodes_batch_works_on_the_buffer(memory) -> None:
    buffer = ReplayBuffer(memory, sampler=SliceSampler(slice_len=2), batch_size=8, seed=0)
    batch = buffer.sample()
    assert isinstance(batch, TemporalBatch) and batch["clock"].shape == (4, 2, 1)
    assert batch.flatten().n_elems() == 8
    episodes = buffer.episodes_batch(["clock"])
    assert episodes.n_elems() == len(memory.episodes())
    assert int(episodes.lengths.sum()) == len(memory)


@settings(max_examples=60, deadline=None)
@given(
    memory=memories,
    more=st.lists(st.integers(1, 9), min_size=0, max_size=6),
    reset=st.booleans(),
)
def test_written_since_names_exactly_the_slots_that_changed(memory, more, reset) -> None:
    storage = MemoryStorage(memory)
    before = storage.revision()
    clock = memory.tensors["clock"].numpy().reshape(-1).copy()
    if reset:
        memory.reset()
    tick = int(clock.max()) + 1
    for chunk in more:
        n = chunk if memory.num_envs == 1 else min(chunk, memory.num_envs - memory.env_index)
        memory.add_samples(clock=np.arange(tick, tick + n)[:, None])
        tick += n
    written = storage.written_since(before)
    changed = np.flatnonzero(memory.tensors["clock"].numpy().reshape(-1) != clock)
    if written is None:  # allowed only when the answer is not a plain run of slots
        assert (
            reset
            or sum(more) >= memory.memory_size * memory.num_envs
            or (memory.num_envs == 1 and max(more, default=0) >= memory.memory_size)
        )
    else:
        assert sorted(set(written.tolist())) == changed.tolist()
        assert len(written) == len(set(written.tolist()))


# ------------------------------------------------------------ a packed memory


@settings(max_examples=25, deadline=None)
@given(
    chunks=st.lists(st.integers(1, 9), min_size=1, max_size=30),
    seed=st.integers(0, 2**16),
    stack_num=st.integers(1, 3),
    names=st.sampled_from([None, ("rewards", "terminated"), ("clock", "big")]),
    slices=st.booleans(),
)
def test_a_packed_memory_gives_the_batches_of_an_unpacked_one(
    chunks: list[int], seed: int, stack_num: int, names: tuple[str, ...] | None, slices: bool
) -> None:
    """Records drawn in one gather (and the per-tensor path beside them) change no bit."""
    buffers = []
    for memory in (make_memory(7, 3, chunks, seed), unpacked_memory(7, 3, chunks, seed)):
        memory.create_tensor("big", 40, torch.float64)  # 320 bytes a transition: not packed
        memory.tensors["big"][:] = torch.arange(7 * 3 * 40.0).reshape(7, 3, 40)
        sampler = SliceSampler(slice_len=2, strict_length=False) if slices else RandomSampler()
        buffers.append(
            ReplayBuffer(memory, sampler=sampler, batch_size=6, seed=seed, stack_num=stack_num)
        )
        buffers[-1].names = names
    packed, plain = (b.storage.memory for b in buffers)  # type: ignore[attr-defined]
    assert packed.packed.names == {"clock", "observations", "rewards", "terminated", "truncated"}
    assert plain.packed is None
    for _ in range(3):
        got, expected = buffers[0].sample(), buffers[1].sample()
        assert list(got) == list(expected)
        for name in got:
            assert_same_tensor(got[name], expected[name])


def unpacked_memory(*args: Any) -> RandomMemory:
    with unpacked():
        return make_memory(*args)


def test_a_packed_memorys_batch_is_one_gather_of_records() -> None:
    memory = make_memory(20, 4, [4] * 26 + [1, 1], seed=0)
    storage = MemoryStorage(memory)
    index = np.array([3, 70, 5])
    batch = storage.gather(["observations", "rewards"], index)
    assert not batch["rewards"].is_contiguous()  # a field of the records drawn
    assert np.may_share_memory(batch["rewards"].numpy(), batch["observations"].numpy())
    for name in batch:
        assert torch.equal(batch[name], memory.tensors_view[name][index])
