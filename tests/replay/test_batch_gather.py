"""Batches gathered once per tensor equal the brute-force reference, from every storage.

The reference (``episode_data.Reference``) walks each env column by its write clock, never
using the circular state; the storages are the memory itself, and the same data as a
mapped ``.npz`` (small tensors packed in records), a chunked ``.h5`` read by slices (or
chunked by env column, through the block cache), and folders of npz and Parquet shards of
a few rows each.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expcli import RandomMemory, ReplayBuffer, save
from expcli.errors import ConfigError
from expcli.formats import hdf5_format
from expcli.formats.dataset import Dataset
from expcli.formats.sharded import write as write_folder
from expcli.replay.storages import DatasetStorage, MemoryStorage, Storage
from expcli.spec import CircularState
from tests.format_catalogue import SHARD_FORMATS, SUFFIXES
from tests.replay.episode_data import Reference, memories

SOURCES = ("memory", *SUFFIXES, ".h5 by column", *(f"{shards} shards" for shards in SHARD_FORMATS))


def with_next(memory: RandomMemory) -> Dataset:
    """The memory's data and a ``next_observations`` unlike any observation."""
    dataset = memory.to_dataset()
    tensors = dict(dataset.tensors)
    tensors["next_observations"] = tensors["observations"] + 1000
    return Dataset(tensors, dataset.state, dataset.metadata)


def storage_of(source: str, memory: RandomMemory, dataset: Dataset, folder: Path) -> Storage:
    if source == "memory":
        memory.create_tensor("next_observations", (2,), torch.float32)
        memory.tensors["next_observations"][:] = torch.from_numpy(
            dataset.tensors["next_observations"]
        )
        return MemoryStorage(memory)
    if source.endswith("shards"):
        path = folder / source.replace(" ", "-")
        row_bytes = sum(
            int(np.prod(a.shape[1:])) * a.dtype.itemsize for a in dataset.tensors.values()
        )
        write_folder(
            dataset,
            path,
            overwrite=True,
            shard_bytes=2 * row_bytes,  # a shard of two or three rows: many shards
            shard_format=source.split()[0],
        )
    elif source == ".h5 by column":  # every tensor with features in chunks of 2 rows a column
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(hdf5_format, "COLUMN_CELL_BYTES", 1)
            patch.setattr(hdf5_format, "COLUMN_CHUNK_BYTES", 16)
            path = save(dataset, folder / "columns.h5")
    else:
        path = save(dataset, folder / f"data{source}")
    return DatasetStorage.open(path)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    memory=memories,
    stack_num=st.integers(1, 4),
    source=st.sampled_from(SOURCES),
    draw=st.data(),
)
def test_batches_equal_the_reference(
    tmp_path: Path, memory: RandomMemory, stack_num: int, source: str, draw: st.DataObject
) -> None:
    ref = Reference.of(memory)
    valid = ref.valid()
    index = np.array(
        draw.draw(st.lists(st.sampled_from(valid), min_size=1, max_size=12)), dtype=np.int64
    )
    dataset = with_next(memory)
    flat = {k: np.asarray(v).reshape(-1, *v.shape[2:]) for k, v in dataset.tensors.items()}
    storage = storage_of(source, memory, dataset, tmp_path)
    names = sorted(dataset.tensors)
    batch = storage.gather(names, index, stack_num=stack_num)
    for name in names:
        got = batch[name].numpy()
        if stack_num > 1 and name in ("observations", "next_observations"):
            stacks = np.array([ref.stack(int(i), stack_num) for i in index])
            expected = flat["observations"][stacks]
            if name == "next_observations":  # the stack the following step sees
                expected = np.concatenate(
                    [expected[:, 1:], flat["next_observations"][index][:, None]], axis=1
                )
        else:
            expected = flat[name][index]
        assert got.dtype == expected.dtype and np.array_equal(got, expected), (name, source)
    slices = index[: len(index) // 2 * 2].reshape(2, -1)  # a (slices, steps) index
    if slices.size:
        two = storage.gather(["observations", "rewards"], slices, stack_num=stack_num)
        assert np.array_equal(two["rewards"].numpy(), flat["rewards"][slices])
        tail = (stack_num,) if stack_num > 1 else ()
        assert two["observations"].shape == (*slices.shape, *tail, 2)
    if isinstance(storage, DatasetStorage):
        storage.close()


def test_small_tensors_are_packed_and_frames_are_not(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    tensors = {
        "observations": rng.integers(0, 255, (50, 3, 16, 16, 3), dtype=np.uint8),
        "actions": rng.integers(0, 5, (50, 3, 1)),
        "rewards": rng.random((50, 3, 1), dtype=np.float32),
        "terminated": rng.random((50, 3, 1)) < 0.1,
    }
    path = save(Dataset(tensors, CircularState(7, 1, True)), tmp_path / "d.npz")
    storage = DatasetStorage.open(path)
    index = rng.integers(0, 150, 40)
    batch = storage.gather(sorted(tensors), index)
    packed = storage._packed_rows()
    assert packed is not None and packed.names == {"actions", "rewards", "terminated"}
    for name, array in tensors.items():
        assert np.array_equal(batch[name].numpy(), array.reshape(150, *array.shape[2:])[index])
    assert not batch["rewards"].is_contiguous()  # a view of the records drawn
    with pytest.raises(IndexError):
        storage.gather(["rewards"], np.array([150]))
    last = storage.gather(["rewards"], np.array([-1]))["rewards"]  # from the end, as numpy's
    assert np.array_equal(last.numpy(), tensors["rewards"][-1, -1:])
    empty = storage.gather(["rewards", "observations"], index[:0])
    assert empty["observations"].shape == (0, 16, 16, 3) and empty["rewards"].shape == (0, 1)
    storage.close()


def test_empty_index_with_stacks(tmp_path: Path) -> None:
    memory = RandomMemory(4, 2, "cpu")
    memory.create_tensor("observations", (2,), torch.float32)
    memory.create_tensor("terminated", 1, torch.bool)
    memory.add_samples(observations=np.ones((2, 2), np.float32), terminated=np.zeros((2, 1), bool))
    batch = MemoryStorage(memory).gather(["observations"], np.zeros(0, np.int64), stack_num=3)
    assert batch["observations"].shape == (0, 3, 2)


def frames_file(folder: Path) -> Path:
    rng = np.random.default_rng(3)
    tensors = {
        "observations": rng.integers(0, 255, (40, 2, 32, 32), dtype=np.uint8),
        "next_observations": rng.integers(0, 255, (40, 2, 32, 32), dtype=np.uint8),
        "rewards": rng.random((40, 2, 1), dtype=np.float32),
        "terminated": rng.random((40, 2, 1)) < 0.1,
    }
    return save(Dataset(tensors, CircularState(0, 0, True)), folder / "frames.npz")


def test_pinning_without_cuda_changes_nothing_and_a_missing_gpu_is_one_error(
    tmp_path: Path,
) -> None:
    path = frames_file(tmp_path)
    plain = ReplayBuffer(path, batch_size=8, stack_num=3, seed=0).sample()
    pinned = ReplayBuffer(path, batch_size=8, stack_num=3, seed=0, pin_memory=True).sample()
    for name in plain:
        assert torch.equal(plain[name], pinned[name])
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA device"):
            ReplayBuffer(path, device="cuda")
    with pytest.raises(ConfigError, match="not a device"):
        ReplayBuffer(path, device="gpu please")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_batches_land_on_the_gpu_from_pinned_memory(tmp_path: Path) -> None:
    path = frames_file(tmp_path)
    here = ReplayBuffer(path, batch_size=8, stack_num=3, seed=0)
    there = ReplayBuffer(path, batch_size=8, stack_num=3, seed=0, device="cuda")
    assert there._pin
    for _ in range(3):
        cpu, gpu = here.sample(), there.sample()
        torch.cuda.synchronize()
        for name in cpu:
            assert gpu[name].device.type == "cuda"
            assert torch.equal(gpu[name].cpu(), cpu[name])


def test_big_rows_of_a_folder_are_copied_into_place(tmp_path: Path) -> None:
    """Frames of 16 KiB and more are copied row by row from the shards' mappings."""
    rng = np.random.default_rng(5)
    tensors = {
        "observations": rng.integers(0, 255, (30, 3, 128, 128), dtype=np.uint8),
        "next_observations": rng.integers(0, 255, (30, 3, 128, 128), dtype=np.uint8),
        "terminated": rng.random((30, 3, 1)) < 0.2,
    }
    dataset = Dataset(tensors, CircularState(11, 2, True))
    folder = tmp_path / "frames"
    write_folder(dataset, folder, overwrite=True, shard_bytes=4 * 3 * 2 * 128 * 128)
    assert len(list(folder.glob("shard-*.npz"))) > 5
    index = rng.integers(0, 90, 64)
    names = sorted(tensors)
    expected = MemoryStorage(RandomMemory.from_dataset(dataset, "cpu")).gather(
        names, index, stack_num=3
    )
    got = DatasetStorage.open(folder).gather(names, index, stack_num=3)
    for name in names:
        assert torch.equal(got[name], expected[name]), name


def test_a_pinned_batch_is_the_tensors_its_outputs_were_allocated_as(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gather(pin_memory=True)`` hands on the allocator's own tensors, not copies or views.

    Without CUDA here, the allocator's tensors are plain ones: what is checked is that the
    batch is made of them (torch knows those to be pinned) and holds the unpinned values.
    """
    from expcli.replay import storages

    made: list[torch.Tensor] = []

    def plain_empty(tensors: dict[int, torch.Tensor]) -> object:
        def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
            tensor = torch.from_numpy(np.empty(shape, dtype))
            array = tensor.numpy()
            tensors[id(array)] = tensor
            made.append(tensor)
            return array

        return empty

    monkeypatch.setattr(storages, "cuda_available", lambda: True)
    monkeypatch.setattr(storages, "pinned_empty", plain_empty)
    storage = DatasetStorage.open(frames_file(tmp_path))
    index = np.array([[0, 5, 9], [3, 3, 7]])
    names = storage.names()
    pinned = storage.gather(names, index, stack_num=2, pin_memory=True)
    plain = storage.gather(names, index, stack_num=2)
    assert made and all(any(t is m for m in made) for t in pinned.values())
    for name in names:
        assert torch.equal(pinned[name], plain[name]), name
