"""ReplayDataset under torch's DataLoader: over a sharded folder with two workers, every
transition once per epoch, a new order each epoch, the same stream for the same seed (and
for any number of workers), batches equal to ``ReplayBuffer.batch`` of the same indexes
from the memory the folder was written from; it pickles to its path and options; workers
stay flat in memory at two data sizes."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from expcli import (
    InvalidTypeError,
    InvalidValueError,
    ReplayBuffer,
    SliceSampler,
    save,
)
from expcli.errors import ConfigError
from expcli.formats import sharded
from expcli.formats.dataset import Dataset
from expcli.replay import ReplayBatchSampler, ReplayDataset
from expcli.spec import CircularState
from tests.memory_probe import Run, assert_flat, frames_data, run_child
from tests.replay.episode_data import make_memory

MEMORY = make_memory(40, 3, [3] * 45 + [1], seed=3, p_done=0.15)  # wrapped, mid-row


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The memory as a folder of 15 shards (8 transitions each)."""
    path = tmp_path_factory.mktemp("torch_dataset") / "run"
    sharded.write(MEMORY.to_dataset(), path, overwrite=False, shard_bytes=200)
    return path


def epochs(data: ReplayDataset, epochs: int, **loader: object) -> list[list[tuple]]:
    """Each epoch's ``(batch, info)`` items through a DataLoader."""
    kwargs = {"sampler": data.sampler, "batch_size": None, "num_workers": 0, **loader}
    kwargs["pin_memory"] = torch.cuda.is_available()
    loaded = DataLoader(data, **kwargs)  # type: ignore[arg-type]
    out = []
    for epoch in range(epochs):
        data.set_epoch(epoch)
        out.append(list(loaded))
    return out


def test_two_workers_yield_every_transition_once_an_epoch_and_the_buffer_batches(
    folder: Path,
) -> None:
    data = ReplayDataset(folder, 16, stack_num=4, seed=7)
    assert len(data.sampler) == 8  # 120 transitions: 7 full batches and one of 8
    loaded = epochs(data, 2, num_workers=2, persistent_workers=True)
    orders = [torch.cat([info["index"] for _, info in epoch]) for epoch in loaded]
    for order in orders:
        assert sorted(order.tolist()) == list(range(120))
    assert not torch.equal(orders[0], orders[1])  # set_epoch reached the persistent workers
    reference = ReplayBuffer(MEMORY, stack_num=4)  # the memory the folder was written from
    for batch, info in loaded[1]:
        assert len(info["index"]) in (16, 8)
        expected = reference.batch(info["index"])
        assert set(batch) == set(expected) and batch["observations"].shape[1] == 4
        for name in expected:
            assert torch.equal(batch[name], expected[name]), name
    # the same seed gives the same stream, in the same order, without workers too
    again = epochs(ReplayDataset(folder, 16, stack_num=4, seed=7), 2)
    assert [torch.cat([i["index"] for _, i in e]).tolist() for e in again] == [
        o.tolist() for o in orders
    ]
    other = epochs(ReplayDataset(folder, 16, stack_num=4, seed=8), 1)
    assert torch.cat([i["index"] for _, i in other[0]]).tolist() != orders[0].tolist()


def test_with_replacement_an_epoch_draws_the_batches_asked(folder: Path) -> None:
    data = ReplayDataset(folder, 32, replacement=True, num_batches=5, seed=1, names=["rewards"])
    loaded = epochs(data, 2, num_workers=2)
    for epoch in loaded:
        assert len(epoch) == 5
        for batch, info in epoch:
            assert list(batch) == ["rewards"] and batch["rewards"].shape == (32, 1)
            assert info["index"].shape == (32,) and 0 <= int(info["index"].min())
            assert int(info["index"].max()) < 120
            assert torch.equal(
                batch["rewards"], ReplayBuffer(MEMORY).batch(info["index"])["rewards"]
            )
    drawn = [torch.cat([i["index"] for _, i in e]) for e in loaded]
    assert not torch.equal(drawn[0], drawn[1])
    assert len(ReplayDataset(folder, 32, replacement=True).sampler) == 120 // 32


@pytest.mark.parametrize(("suffix", "compression"), [(".h5", "gzip"), (".csv", None)])
def test_workers_forked_after_a_batch_here_open_the_file_themselves(
    tmp_path: Path, suffix: str, compression: str | None
) -> None:
    """A batch drawn in this process leaves the file open (HDF5's library state, a CSV
    file's scratch file) when the workers fork; they leave that handle alone and open
    their own, and the stream is the same with and without them."""
    path = save(MEMORY, tmp_path / f"run{suffix}", compression=compression)
    reference = ReplayBuffer(MEMORY, stack_num=2)
    with ReplayDataset(path, 16, stack_num=2, seed=3) as data:
        here = torch.cat([i["index"] for _, i in epochs(data, 1)[0]])
        for _ in range(2):  # and again, after this process read through its handle
            assert data._opened is not None  # open as the workers fork
            forked = epochs(data, 1, num_workers=2)[0]
            assert torch.equal(torch.cat([i["index"] for _, i in forked]), here)
            for batch, info in forked:
                expected = reference.batch(info["index"])
                assert all(torch.equal(batch[name], expected[name]) for name in expected)
            assert torch.equal(torch.cat([i["index"] for _, i in epochs(data, 1)[0]]), here)


@settings(max_examples=80, deadline=None)
@given(
    count=st.integers(1, 60),
    batch_size=st.integers(1, 70),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**32),
    epoch=st.integers(0, 5),
)
def test_an_epoch_holds_each_index_at_most_once_and_every_one_unless_dropped(
    count: int, batch_size: int, drop_last: bool, seed: int, epoch: int
) -> None:
    if drop_last and count < batch_size:
        with pytest.raises(ConfigError, match="drop_last drops every batch"):
            ReplayBatchSampler(count, batch_size, drop_last=drop_last)
        return
    sampler = ReplayBatchSampler(count, batch_size, drop_last=drop_last, seed=seed)
    sampler.set_epoch(epoch)
    batches = list(sampler)
    assert len(batches) == len(sampler)
    assert all(len(b) == batch_size for b in batches[:-1])
    drawn = np.concatenate(batches)
    assert len(np.unique(drawn)) == len(drawn)
    if drop_last:
        assert len(batches[-1]) == batch_size and len(drawn) == count - count % batch_size
    else:
        assert sorted(drawn.tolist()) == list(range(count))
    assert all(np.array_equal(a, b) for a, b in zip(batches, sampler, strict=True))


def test_the_dataset_pickles_to_its_path_and_options(folder: Path, tmp_path: Path) -> None:
    """What a spawned worker gets: a few hundred bytes, whatever the data's size; the copy
    opens the folder itself on its first batch and gives the same batches."""
    big = tmp_path / "big"
    memory = make_memory(400, 3, [3] * 450, seed=4, p_done=0.15)
    sharded.write(memory.to_dataset(), big, overwrite=False, shard_bytes=2000)
    small_data, big_data = ReplayDataset(folder, 16, seed=1), ReplayDataset(big, 16, seed=1)
    small_data[np.arange(4)]  # opened here: the handle is not pickled
    sizes = [len(pickle.dumps(d)) for d in (small_data, big_data)]
    assert max(sizes) < 1000 and abs(sizes[0] - sizes[1]) < 32, sizes
    copy = pickle.loads(pickle.dumps(small_data))
    index = np.array([5, 0, 119, 5])
    assert copy._opened is None
    a, b = copy[index], small_data[index]
    assert torch.equal(a[1]["index"], b[1]["index"])
    assert all(torch.equal(a[0][name], b[0][name]) for name in b[0])
    copy.close()
    with small_data:
        pass
    assert small_data._opened is None  # closed; the next batch opens it again
    assert small_data[index][1]["index"].tolist() == [5, 0, 119, 5]


def test_batch_gathers_as_sample_does_and_refuses_indexes_outside(folder: Path) -> None:
    drawn = ReplayBuffer(folder, sampler=SliceSampler(slice_len=4, strict_length=False), seed=2)
    batch, info = drawn.sample(32, return_info=True)
    again = ReplayBuffer(folder).batch(info["index"], info["lengths"])
    assert torch.equal(again.lengths, batch.lengths)
    assert all(torch.equal(again[name], batch[name]) for name in batch)
    buffer = ReplayBuffer(folder, stack_num=2, transform=lambda b: b["observations"])
    assert buffer.batch(np.array([3, 4])).shape == (2, 2, 2)
    assert ReplayBuffer(folder).batch([])["rewards"].shape == (0, 1)
    with pytest.raises(InvalidValueError, match=r"transitions 0\.\.119"):
        buffer.batch([0, 120])
    with pytest.raises(InvalidValueError, match="out of range"):
        buffer.batch([-1])
    with pytest.raises(InvalidTypeError, match="integers"):
        buffer.batch([0.5])


def test_sampler_options_that_contradict_are_refused(folder: Path) -> None:
    with pytest.raises(ConfigError, match="num_batches is for draws with replacement"):
        ReplayDataset(folder, 16, num_batches=3)
    with pytest.raises(ConfigError, match="drop_last is for epochs without replacement"):
        ReplayBatchSampler(10, 2, replacement=True, drop_last=True)
    with pytest.raises(ConfigError, match="batch_size must be at least 1"):
        ReplayBatchSampler(10, 0)
    with pytest.raises(InvalidValueError, match="epoch must be non-negative"):
        ReplayBatchSampler(10, 2).set_epoch(-1)


_EPOCH = """
import resource, sys
from torch.utils.data import DataLoader
from expcli.replay import ReplayDataset
data = ReplayDataset(sys.argv[1], 1024, seed=0)
loader = DataLoader(data, sampler=data.sampler, batch_size=None, num_workers=2)
assert sum(len(info["index"]) for _, info in loader) == data.sampler.count
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


@pytest.mark.slow  # two fresh interpreters that import torch, and 200 MiB written: ~7 s
def test_workers_stay_flat_in_memory_through_an_epoch(tmp_path: Path) -> None:
    """An epoch over a folder of 4 KiB frames in 4 MiB shards, two workers, batches of 4 MiB:
    neither the main process's peak nor its workers' (the largest, read from
    ``RUSAGE_CHILDREN``) grows with the data; the small size already fills a worker's
    mapped shards (32 MiB)."""
    runs: dict[float, Run] = {}

    def epoch(mib: float) -> Run:
        if mib not in runs:
            path = tmp_path / f"{mib:.0f}"
            data = Dataset(frames_data(mib, compressible=False), CircularState(0, 0, True))
            sharded.write(data, path, overwrite=False, shard_bytes=4 << 20)
            runs[mib] = run_child(
                ["-c", _EPOCH, str(path)], 120, imports=("torch", "expcli.replay")
            )
        return runs[mib]

    def workers(mib: float) -> Run:
        run = epoch(mib)
        peak = int(run.stdout.split()[-1]) / 1024 if run.returncode == 0 else 0.0
        return dataclasses.replace(run, peak_mb=peak)

    assert_flat(epoch, 40, 160)
    assert_flat(workers, 40, 160)
