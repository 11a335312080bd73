"""Sampling a dataset left on disk: ``LazyRows.take`` equals numpy's indexing and reads only
what it is asked for; a ReplayBuffer over a file read lazily draws the same batches, slices,
frame stacks and episodes, bit for bit, as one over the same data in memory, in every format,
with HDF5 chunks and episodes crossing each other."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli import RandomSampler, ReplayBuffer, SliceSampler, load, save
from expcli.formats import hdf5_format, open_lazy
from expcli.formats.lazy import LazyRows
from expcli.formats.row_gather import SPAN_BYTES
from expcli.replay import DatasetStorage
from tests.format_catalogue import FILE_FORMATS, OTHER_COMPRESSIONS, suffix_of
from tests.replay.episode_data import make_memory

FILES = {
    **{fmt: (fmt, None) for fmt in FILE_FORMATS},
    **{f"{fmt}-{codec}": (fmt, codec) for fmt, codec in OTHER_COMPRESSIONS},
}
"""Label -> (format, compression): every file format, and each with every other compression."""


def lazy_over(array: np.ndarray, calls: list[tuple[int, int]], block_rows: int | None) -> LazyRows:
    def read(start: int, stop: int) -> np.ndarray:
        calls.append((start, stop))
        return array[start:stop].copy()

    return LazyRows(array.shape, array.dtype, read, block_rows=block_rows)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 300),
    width=st.sampled_from([1, 3, 40_000]),
    block_rows=st.one_of(st.none(), st.integers(1, 50)),
    data=st.data(),
)
def test_take_equals_numpy_and_reads_only_near_the_rows(rows, width, block_rows, data) -> None:
    array = np.arange(rows * width, dtype=np.float32).reshape(rows, width)
    index = np.asarray(
        data.draw(st.lists(st.integers(-rows, rows - 1), max_size=40)), dtype=np.int64
    )
    calls: list[tuple[int, int]] = []
    lazy = lazy_over(array, calls, block_rows)
    np.testing.assert_array_equal(lazy.take(index.reshape(-1, 1)), array[index.reshape(-1, 1)])
    calls.clear()
    np.testing.assert_array_equal(lazy.take(index), array[index])
    wanted = set((index % rows).tolist())
    for start, stop in calls:
        assert start in wanted and stop - 1 in wanted  # a slice starts and ends at asked rows
        assert (stop - start - 1) * array.itemsize * width < SPAN_BYTES
        if block_rows:
            assert start // block_rows == (stop - 1) // block_rows  # one block per slice
    assert len(calls) <= len(wanted)


def test_take_refuses_rows_outside() -> None:
    lazy = lazy_over(np.zeros((5, 2)), [], None)
    with pytest.raises(IndexError):
        lazy.take(np.array([5]))
    with pytest.raises(IndexError):
        lazy.take(np.array([0.5]))


@pytest.fixture(scope="module")
def data_files(tmp_path_factory) -> dict[str, Path]:
    """One wrapped memory (episodes of a few steps, 3 envs, mid-row) in every format; HDF5
    chunks of 3 rows, so that slices, stacks and episodes cross chunk boundaries."""
    folder = tmp_path_factory.mktemp("lazy")
    memory = make_memory(40, 3, [3] * 45 + [1], seed=3, p_done=0.15)
    memory.create_tensor("frames", (7, 5), torch.uint8)
    frames = memory.tensors["frames"]
    frames.copy_(torch.randint(0, 255, frames.shape, dtype=torch.uint8))
    paths = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hdf5_format, "CHUNK_BYTES", 3 * 3 * 35)  # three rows of frames
        for label, (fmt, compression) in FILES.items():
            path = folder / f"{label}{suffix_of(fmt)}"
            paths[label] = save(memory, path, compression=compression)
    with hdf5_format.Hdf5Reader(paths["hdf5-gzip"]) as reader:
        assert reader.dataset("frames").chunks[0] == 3
    return paths


def assert_same_draws(lazy: ReplayBuffer, eager: ReplayBuffer, draws: int) -> None:
    """``draws`` batches of 30 from each buffer hold the same indexes and tensors, bit for bit."""
    for _ in range(draws):
        a, info_a = lazy.sample(30, return_info=True)
        b, info_b = eager.sample(30, return_info=True)
        np.testing.assert_array_equal(info_a["index"], info_b["index"])
        assert set(a) == set(b)
        for name in a:
            assert a[name].dtype == b[name].dtype and torch.equal(a[name], b[name]), name


@pytest.mark.parametrize("label", list(FILES))
def test_lazy_batches_equal_eager_ones(data_files, label) -> None:
    path = data_files[label]
    storage = DatasetStorage.open(path)
    frames = storage.arrays()["frames"]
    assert isinstance(frames, LazyRows) or not frames.flags.owndata  # left on disk, or mapped
    eager = load(data_files["npz"])
    eager.tensors = {name: np.array(array) for name, array in eager.tensors.items()}
    for make in (RandomSampler, lambda: SliceSampler(slice_len=5)):
        lazy_buffer = ReplayBuffer(storage, sampler=make(), seed=11)
        eager_buffer = ReplayBuffer(eager, sampler=make(), seed=11)
        assert_same_draws(lazy_buffer, eager_buffer, 3)
    lazy_buffer, eager_buffer = ReplayBuffer(storage), ReplayBuffer(eager)
    assert len(lazy_buffer) == 120  # wrapped: every slot holds a transition
    index = np.random.default_rng(0).permutation(120)
    for stack in (1, 4):
        np.testing.assert_array_equal(
            lazy_buffer.get(index, "frames", stack_num=stack),
            eager_buffer.get(index, "frames", stack_num=stack),
        )
    a, b = lazy_buffer.episodes_batch(), eager_buffer.episodes_batch()
    for name in b:
        assert torch.equal(a[name], b[name]), name
    storage.close()


def test_a_lazily_opened_dataset_backs_a_buffer(data_files) -> None:
    dataset, close = open_lazy(data_files["hdf5-gzip"])
    try:
        assert isinstance(dataset.tensors["frames"], LazyRows)
        lazy = ReplayBuffer(dataset, seed=5).sample(50)
        eager = ReplayBuffer(load(data_files["hdf5-gzip"]), seed=5).sample(50)
        for name in eager:
            assert torch.equal(lazy[name], eager[name]), name
    finally:
        close()


@pytest.mark.parametrize("chunks", [None, (4,)])
def test_a_d4rl_file_is_read_lazily_as_eagerly(tmp_path, chunks) -> None:
    """D4RL rows stay in the file (contiguous: mapped; chunked: read by slices), and the
    ``next_observations`` derived per slice equal those derived from the whole file."""
    import h5py

    rng = np.random.default_rng(2)
    rows = 37
    path = tmp_path / "d4rl.h5"
    with h5py.File(path, "w") as h5:
        h5.create_dataset("observations", data=rng.random((rows, 3), dtype=np.float32))
        h5.create_dataset("actions", data=rng.integers(0, 4, rows).astype(np.uint16))
        h5.create_dataset("rewards", data=rng.random(rows), chunks=chunks)
        h5.create_dataset("terminals", data=rng.random(rows) < 0.2)
        h5.create_dataset("timeouts", data=np.arange(rows) % 9 == 8)
    lazy, close = open_lazy(path)
    try:
        eager = load(path)
        assert isinstance(lazy.tensors["next_observations"], LazyRows)
        assert lazy.metadata == eager.metadata
        for name, array in eager.tensors.items():
            got = lazy.tensors[name]
            pieces = [got[start : start + 5] for start in range(0, rows, 5)]  # per slice
            assert np.concatenate(pieces).tobytes() == array.tobytes(), name
            assert got[:].dtype == array.dtype
    finally:
        close()
    a = ReplayBuffer(path, sampler=SliceSampler(slice_len=3), seed=1).sample(12)
    b = ReplayBuffer(eager, sampler=SliceSampler(slice_len=3), seed=1).sample(12)
    for name in b:
        assert torch.equal(a[name], b[name]), name
