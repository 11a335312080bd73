"""ReplayDataset as a map-style dataset of transitions, as PyTorch users write it: the real
DataLoader with ``shuffle=True``, two workers and the default collate gives every transition
once an epoch, each batch equal to ``ReplayBuffer.batch`` of the indexes drawn (found from the
memory's ``clock``, which numbers the transitions); ``len`` counts what a circular memory that
is not full holds; an index past it is an ``IndexError`` that names the file, in a worker too."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._utils import ExceptionWrapper
from torch.utils.data import DataLoader, RandomSampler, default_collate

from expcli import ExpcliError, IndexOutOfRangeError, InvalidValueError, ReplayBuffer, save
from expcli.errors import ConfigError, InvalidTypeError
from expcli.formats import sharded
from expcli.replay import ReplayDataset
from tests.replay.episode_data import make_memory

MEMORY = make_memory(40, 3, [3] * 45 + [1], seed=3, p_done=0.15)  # wrapped: 120 held
REFERENCE = ReplayBuffer(MEMORY, stack_num=4)  # the memory the folder was written from


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The memory as a folder of 15 shards (8 transitions each)."""
    path = tmp_path_factory.mktemp("map_style") / "run"
    sharded.write(MEMORY.to_dataset(), path, overwrite=False, shard_bytes=200)
    return path


@pytest.fixture(scope="module")
def stacked(folder: Path) -> ReplayDataset:
    """A dataset of the folder's transitions with stacks of 4 frames."""
    return ReplayDataset(folder, stack_num=4)


def indexes_of(batch: dict[str, torch.Tensor]) -> np.ndarray:
    """The flat indexes of a batch's transitions, found from their clocks."""
    clocks = REFERENCE.batch(np.arange(120))["clock"][:, 0].tolist()
    where = {clock: flat for flat, clock in enumerate(clocks)}
    return np.array([where[int(c)] for c in batch["clock"][:, 0]])


def assert_batch_of(batch: dict[str, torch.Tensor], index: np.ndarray) -> None:
    """``batch`` is ``ReplayBuffer.batch(index)`` of the memory, name for name."""
    expected = REFERENCE.batch(index)
    assert isinstance(batch, dict) and set(batch) == set(expected)
    for name in expected:
        assert batch[name].dtype == expected[name].dtype, name
        assert torch.equal(batch[name], expected[name]), name


def test_shuffled_batches_of_two_workers_hold_every_transition_once_as_the_buffer_has_it(
    folder: Path,
) -> None:
    data = ReplayDataset(folder, stack_num=4)
    assert len(data) == 120
    loader = DataLoader(data, batch_size=32, shuffle=True, num_workers=2)
    drawn = []
    for batch in loader:
        index = indexes_of(batch)
        assert batch["observations"].shape == (len(index), 4, 2)  # frame stacks
        assert_batch_of(batch, index)
        drawn.append(index)
    assert [len(i) for i in drawn] == [32, 32, 32, 24]
    order = np.concatenate(drawn)
    assert sorted(order.tolist()) == list(range(120))
    assert order.tolist() != list(range(120))  # shuffled


def test_a_seeded_sampler_draws_the_indexes_it_names(folder: Path) -> None:
    """The indexes known in advance: a sampler with a fixed generator, two workers."""
    data = ReplayDataset(folder, stack_num=4)
    seeded = RandomSampler(data, generator=torch.Generator().manual_seed(5))
    order = np.array(list(RandomSampler(data, generator=torch.Generator().manual_seed(5))))
    loader = DataLoader(data, batch_size=50, sampler=seeded, num_workers=2)
    batches = list(loader)
    assert len(batches) == 3
    for start, batch in zip(range(0, 120, 50), batches, strict=True):
        assert_batch_of(batch, order[start : start + 50])
    one = data[7]  # a transition: the batch's row, without the batch dimension
    assert one["observations"].shape == (4, 2) and one["rewards"].shape == (1,)
    assert_batch_of(default_collate([one]), np.array([7]))
    assert_batch_of(default_collate([data[np.int64(7)], data[torch.tensor(3)]]), np.array([7, 3]))


@settings(max_examples=30, deadline=None)
@given(index=st.lists(st.integers(0, 119), max_size=40))
def test_collated_items_are_the_batch_at_their_indexes(
    stacked: ReplayDataset, index: list[int]
) -> None:
    data = stacked
    items = data.__getitems__(index)
    assert len(items) == len(index)
    if index:
        assert_batch_of(default_collate(items), np.array(index))
        singles = default_collate([data[i] for i in index])
        assert_batch_of(singles, np.array(index))


@pytest.mark.parametrize("target", ["run.npz", "run.h5", "run"])
def test_len_is_what_a_circular_memory_that_is_not_full_holds(tmp_path: Path, target: str) -> None:
    memory = make_memory(40, 3, [3] * 10 + [2], seed=1)  # 32 samples: 10 rows and 2 of a row
    assert not memory.filled
    path = tmp_path / target
    if target == "run":
        sharded.write(memory.to_dataset(), path, overwrite=False, shard_bytes=200)
    else:
        save(memory, path)
    data = ReplayDataset(path)
    assert len(data) == 32 and len(list(data)) == 32  # iteration stops at the IndexError
    last = data[31]
    assert torch.equal(last["clock"], ReplayBuffer(memory).batch([31])["clock"][0])
    with pytest.raises(IndexError, match=r"index 32 is out of range.*transitions 0\.\.31"):
        data[32]


def test_an_index_out_of_range_is_an_index_error_naming_the_file(folder: Path) -> None:
    data = ReplayDataset(folder)
    for index in (120, -1, np.int64(500)):
        with pytest.raises(IndexError, match=r"is out of range.*transitions 0\.\.119") as caught:
            data[index]
        error = caught.value
        assert isinstance(error, IndexOutOfRangeError) and isinstance(error, ExpcliError)
        assert error.path == str(folder) and error.index == int(index)
        assert str(error).startswith(f"{folder}: index {int(index)} is out of range")
    with pytest.raises(IndexError, match="index 120 is out of range"):
        data.__getitems__([0, 5, 120, 121])
    with pytest.raises(IndexError, match="index -3 is out of range"):
        data[np.array([0, -3])]  # the batch form too
    with pytest.raises(InvalidValueError):  # what it was before: still one
        data[np.array([0, 120])]
    with pytest.raises(InvalidTypeError, match="indexed by integers"):
        data[0.5]
    # raised in a worker, a DataLoader rebuilds it from its message in the main process
    try:
        data.__getitems__([200])
    except IndexError:
        wrapped = ExceptionWrapper(sys.exc_info(), where="in DataLoader worker process 1")
    with pytest.raises(IndexOutOfRangeError, match="index 200 is out of range"):
        wrapped.reraise()


def test_the_batch_sampler_needs_a_batch_size(folder: Path) -> None:
    data = ReplayDataset(folder)
    assert repr(data) == f"ReplayDataset({str(folder)!r}, 120 transitions)"
    with pytest.raises(ConfigError, match="made without batch_size"):
        data.sampler  # noqa: B018
    with pytest.raises(ConfigError, match="seed, drop_last|drop_last, seed"):
        ReplayDataset(folder, drop_last=True, seed=0)
    batched = ReplayDataset(folder, 16, seed=0)
    assert len(batched) == 120 and len(batched.sampler) == 8
    assert len(batched[np.arange(3)][1]["index"]) == 3  # the fast path's items: batches


def test_a_transform_cut_into_transitions(folder: Path) -> None:
    """A transform runs on the gathered batch; its result is cut into rows."""
    data = ReplayDataset(folder, transform=lambda b: (b["rewards"] * 2, [b["clock"]]))
    rewards, (clock,) = data[4]
    assert torch.equal(rewards, REFERENCE.batch([4])["rewards"][0] * 2)
    assert torch.equal(clock, REFERENCE.batch([4])["clock"][0])
    whole = ReplayDataset(folder, transform=lambda b: b["rewards"].sum())
    with pytest.raises(InvalidValueError, match="first dimension must be 1"):
        whole[4]
    text = ReplayDataset(folder, transform=lambda b: "summary")
    with pytest.raises(InvalidTypeError, match="cannot be cut into transitions: str"):
        text[4]


def test_workers_forked_with_the_file_open_here_open_their_own(tmp_path: Path) -> None:
    """An HDF5 file read here first (its handle open as the workers fork), and a copy as a
    spawned worker gets it (the path and options, pickled): the same transitions."""
    path = save(MEMORY, tmp_path / "run.h5", compression="gzip")
    data = ReplayDataset(path, stack_num=4)
    assert_batch_of(default_collate([data[0]]), np.array([0]))
    assert data._opened is not None
    loader = DataLoader(data, batch_size=40, shuffle=True, num_workers=2)
    drawn = []
    for batch in loader:
        index = indexes_of(batch)
        assert_batch_of(batch, index)
        drawn += index.tolist()
    assert sorted(drawn) == list(range(120))
    copy = pickle.loads(pickle.dumps(data))
    assert copy._opened is None and len(copy) == 120 and repr(copy) == repr(data)
    assert_batch_of(default_collate(copy.__getitems__([119, 3])), np.array([119, 3]))
    copy.close()
    data.close()
