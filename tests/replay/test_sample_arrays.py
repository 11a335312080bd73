"""``ReplayBuffer.sample_arrays`` draws what ``sample`` draws, as numpy arrays (issue 42).

Each sampler, through each kind of storage, against a buffer with the same seed that goes
the torch way (``sample``): the same indexes, the same info, the same values and dtypes,
batch after batch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli import (
    PrioritizedSampler,
    RandomMemory,
    RandomSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    SliceSampler,
)
from expcli.formats.sharded import write as write_folder
from expcli.replay import DatasetStorage, MemoryStorage, Sampler
from tests.format_catalogue import SUFFIXES
from tests.replay.episode_data import make_memory

SAMPLERS: dict[str, Callable[[], Sampler]] = {
    "random": RandomSampler,
    "prioritized": PrioritizedSampler,
    "without_replacement": SamplerWithoutReplacement,
    "slice": lambda: SliceSampler(slice_len=3),
    "slice_short": lambda: SliceSampler(slice_len=4, strict_length=False),
}


def assert_same_draw(torch_buffer: ReplayBuffer, numpy_buffer: ReplayBuffer, size: int) -> None:
    batch, info = torch_buffer.sample(size, return_info=True)
    arrays, array_info = numpy_buffer.sample_arrays(size)
    assert info.keys() == array_info.keys()
    for key, value in info.items():
        assert np.array_equal(np.asarray(value), array_info[key]), key
    assert list(batch) == list(arrays)
    for name, tensor in batch.items():
        array = arrays[name]
        assert isinstance(array, np.ndarray), name
        assert str(tensor.dtype).removeprefix("torch.") == str(array.dtype), name
        assert np.array_equal(tensor.numpy(), array, equal_nan=True), name


@pytest.fixture
def memory() -> RandomMemory:
    return make_memory(20, 4, [4] * 26 + [1, 1], seed=0)  # wrapped, mid-row, short episodes


@pytest.mark.parametrize("sampler", list(SAMPLERS), ids=list(SAMPLERS))
@pytest.mark.parametrize("source", ["memory", *SUFFIXES, "folder"])
def test_every_sampler_draws_the_torch_paths_batches(
    memory: RandomMemory, tmp_path: Path, sampler: str, source: str
) -> None:
    def storage() -> Any:
        if source == "memory":
            return memory
        path = tmp_path / ("data" + source if source.startswith(".") else "shards")
        if path.exists():
            pass
        elif source == "folder":  # many shards of a few rows
            write_folder(memory.to_dataset(), path, overwrite=False, shard_bytes=3 * 40)
        else:
            memory.save(path)
        return DatasetStorage.open(path)

    torch_buffer = ReplayBuffer(storage(), sampler=SAMPLERS[sampler](), seed=7)
    numpy_buffer = ReplayBuffer(storage(), sampler=SAMPLERS[sampler](), seed=7)
    for size in (12, 24, 12):  # one epoch and more of the sampler without replacement
        assert_same_draw(torch_buffer, numpy_buffer, size)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    sampler=st.sampled_from(list(SAMPLERS)),
    slices=st.integers(1, 6),
    stack_num=st.integers(1, 3),
)
def test_any_seed_draws_the_same_batch_both_ways(
    seed: int, sampler: str, slices: int, stack_num: int
) -> None:
    memory = make_memory(9, 3, [3] * 11, seed=seed % 1000)
    buffers = [
        ReplayBuffer(memory, sampler=SAMPLERS[sampler](), seed=seed, stack_num=stack_num)
        for _ in range(2)
    ]
    assert_same_draw(*buffers, slices * 12)


def test_stacks_that_the_storage_cannot_make_are_made_by_the_buffer(
    memory: RandomMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As for a memory on a GPU: the buffer stacks the frames (``get``), both ways."""
    monkeypatch.setattr(MemoryStorage, "can_stack", property(lambda self: False))
    buffers = [ReplayBuffer(memory, seed=3, stack_num=3) for _ in range(2)]
    assert_same_draw(*buffers, 16)
    arrays, _ = buffers[1].sample_arrays(4)
    assert arrays["observations"].shape == (4, 3, 2)


def test_sampling_arrays_settles_the_prefetcher_first(memory) -> None:
    plain = ReplayBuffer(memory, batch_size=8, seed=5)
    ahead = ReplayBuffer(memory, batch_size=8, seed=5, prefetch=2)
    with ahead:
        for _ in range(3):
            assert_same_draw(plain, ahead, 8)
            expected = plain.sample()
            got = ahead.sample()
            for name in expected:
                assert torch.equal(expected[name], got[name])
