"""The block cache of compressed files: draws through it equal numpy's fancy indexing of the
data loaded whole (HDF5 lzf, Parquet, a folder of Parquet shards; wrapped memories, several
env columns), each block is decoded once while held and counted exactly, the bound holds,
and two threads share it."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.errors import ConfigError
from expcli.formats import (
    Dataset,
    hdf5_format,
    open_lazy,
    parquet_format,
    sharded,
    write_dataset,
)
from expcli.formats.block_cache import BlockCache, CachedBlocks, CacheStats
from expcli.formats.row_gather import gather_flat
from expcli.spec import CircularState
from tests.formats.test_parquet import datasets  # skips without pyarrow

pytest.importorskip("h5py")

ROWS, ENVS = 12, 3


def counted_reads(array: np.ndarray) -> tuple[Callable[[int, int], np.ndarray], list[tuple]]:
    """A reader of ``array``'s rows, and the list of the ``(start, stop)`` it was asked for."""
    calls: list[tuple[int, int]] = []

    def read(start: int, stop: int) -> np.ndarray:
        calls.append((start, stop))
        return array[start:stop].copy()

    return read, calls


def blocks_of(array: np.ndarray, cache: BlockCache, rows: int = 4) -> tuple[CachedBlocks, list]:
    read, calls = counted_reads(array)
    bounds = [*range(0, len(array), rows), len(array)]
    return CachedBlocks(read, bounds, cache, "x", array.shape, array.dtype), calls


def frames(rows: int = ROWS, envs: int = ENVS) -> np.ndarray:
    return np.arange(rows * envs * 5, dtype=np.int32).reshape(rows, envs, 5)


def bits(array: Any) -> bytes:
    """The bytes of an array (NaN payloads compared as stored)."""
    return np.ascontiguousarray(array).view(np.uint8).tobytes()


# ------------------------------------------------------------------ the cache itself


def test_each_block_a_draw_touches_is_looked_up_once_and_decoded_once_while_held() -> None:
    data = frames()
    cache = BlockCache(1 << 20)
    blocks, calls = blocks_of(data, cache)  # blocks of rows 0-3, 4-7, 8-11
    assert np.array_equal(blocks.take(np.array([5, 0, 1, 5])), data[[5, 0, 1, 5]])
    assert calls == [(0, 4), (4, 8)]
    assert cache.stats() == CacheStats(
        0, 2, 2, 2 * data[:4].nbytes, 0, 2 * data[:4].nbytes, 1 << 20
    )
    cells = np.array([[3 * 9 + 2, 0], [3 * 2 + 1, 3 * 11]])  # (row 9, env 2), (0, 0) ...
    assert np.array_equal(blocks.take_cells(cells), data.reshape(-1, 5)[cells])
    assert calls == [(0, 4), (4, 8), (8, 12)]
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.blocks_decoded) == (1, 3, 3)
    assert stats.hit_rate == 0.25
    assert np.array_equal(blocks.read(2, 9), data[2:9]) and len(calls) == 3
    assert cache.stats().hits == 4  # three blocks, one lookup each
    later = cache.stats()
    blocks.take(np.array([-1]))
    assert (cache.stats() - later) == CacheStats(1, 0, 0, 0, 0, later.bytes_held, 1 << 20)


def test_blocks_handed_out_are_read_only() -> None:
    blocks, _ = blocks_of(frames(), BlockCache())
    with pytest.raises(ValueError, match="read-only"):
        blocks.block(0)[0] = 1


def test_the_bound_holds_and_draws_stay_right_when_blocks_go() -> None:
    data = frames(rows=40)
    block_bytes = data[:4].nbytes
    cache = BlockCache(3 * block_bytes)
    blocks, calls = blocks_of(data, cache)
    rng = np.random.default_rng(0)
    for _ in range(30):
        index = rng.integers(0, 40, 7)
        assert np.array_equal(blocks.take(index), data[index])
        assert cache.stats().bytes_held <= 3 * block_bytes
    stats = cache.stats()
    assert stats.evictions > 0 and stats.blocks_decoded == len(calls) == stats.misses
    assert stats.bytes_held == 3 * block_bytes  # full, never over


def test_a_full_cache_keeps_a_block_with_the_share_of_the_data_it_holds() -> None:
    """Four blocks held of forty announced: once full, about one decoded block in ten stays
    (each in place of one drawn at random), so that the cache holds an even sample."""
    block = np.zeros(1000, np.uint8)
    cache = BlockCache(4 * block.nbytes)
    cache.expect("data", 40 * block.nbytes)
    for key in range(2000):
        cache.get(key, block.copy)
    stats = cache.stats()
    assert stats.bytes_held == 4 * block.nbytes and stats.misses == 2000
    assert 150 < stats.evictions < 250  # about 1996 / 10
    small = BlockCache(4 * block.nbytes)
    small.expect("data", 40 * block.nbytes)
    for key in range(100):  # blocks of at most a 1024th of the bound: always kept
        small.get(key, lambda: np.zeros(3, np.uint8))
    assert small.stats().bytes_held == 300 and small.stats().evictions == 0


def test_a_block_larger_than_the_bound_is_used_and_never_kept() -> None:
    data = frames()
    cache = BlockCache(data[:4].nbytes - 1)
    blocks, calls = blocks_of(data, cache)
    for _ in range(2):
        assert np.array_equal(blocks.take(np.array([1])), data[[1]])
    assert len(calls) == 2 and cache.stats().bytes_held == 0


def test_a_failed_decode_reaches_the_caller_and_is_tried_again() -> None:
    cache = BlockCache()
    with pytest.raises(OSError, match="disk"):
        cache.get("k", lambda: (_ for _ in ()).throw(OSError("disk")))
    assert cache.get("k", lambda: np.ones(3)).sum() == 3
    assert cache.stats().misses == 2 and cache.stats().blocks_decoded == 1


def test_clear_lets_go_of_every_block_even_one_being_decoded() -> None:
    cache = BlockCache()
    cache.get("a", lambda: np.ones(10))

    def load_while_cleared() -> np.ndarray:
        cache.clear()
        return np.ones(10)

    cache.get("b", load_while_cleared)
    assert "a" not in cache and "b" not in cache and cache.stats().bytes_held == 0


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ConfigError, match="0 bytes or more"):
        BlockCache(-1)


def test_two_threads_wanting_one_block_decode_it_once() -> None:
    cache = BlockCache()
    asked, release = threading.Event(), threading.Event()
    decodes = []

    def slow_load() -> np.ndarray:
        decodes.append(1)
        asked.set()
        assert release.wait(5)
        return np.arange(4)

    results: list[np.ndarray] = []
    first = threading.Thread(target=lambda: results.append(cache.get("k", slow_load)))
    first.start()
    assert asked.wait(5)
    second = threading.Thread(target=lambda: results.append(cache.get("k", slow_load)))
    second.start()
    while cache.stats().hits == 0:  # the second thread waits on the first's decode
        threading.Event().wait(0.001)
    release.set()
    first.join(5)
    second.join(5)
    assert len(decodes) == 1 and len(results) == 2 and results[0] is results[1]
    assert (cache.stats().hits, cache.stats().misses) == (1, 1)


def test_two_threads_sampling_through_a_small_cache_get_their_own_rows() -> None:
    data = frames(rows=64, envs=4)
    cache = BlockCache(5 * data[:4].nbytes)
    blocks, _ = blocks_of(data, cache)
    errors: list[str] = []
    lookups = [0, 0]

    def sample(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(200):
            index = rng.integers(0, 64 * 4, 9)
            lookups[seed] += len(np.unique(index // 4 // 4))
            if not np.array_equal(blocks.take_cells(index), data.reshape(-1, 5)[index]):
                errors.append(f"thread {seed}: wrong cells")

    threads = [threading.Thread(target=sample, args=(seed,)) for seed in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    stats = cache.stats()
    assert not errors and stats.hits + stats.misses == sum(lookups)
    assert stats.bytes_held <= cache.max_bytes


# ------------------------------------------------------------------ through the formats


def written(dataset: Dataset, folder: Path, kind: str, shard_bytes: int = 200) -> Path:
    if kind == "hdf5 columns":  # tensors of cells chunked by env column, 24 bytes a chunk
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(hdf5_format, "COLUMN_CELL_BYTES", 1)
            patch.setattr(hdf5_format, "COLUMN_CHUNK_BYTES", 24)
            return write_dataset(dataset, folder / "data.h5", compression="lzf")
    if kind == "hdf5":
        return write_dataset(dataset, folder / "data.h5", compression="lzf")
    if kind == "parquet":
        return write_dataset(dataset, folder / "data.parquet")
    target = folder / "shards"
    sharded.write(dataset, target, overwrite=False, shard_bytes=shard_bytes, shard_format="parquet")
    return target


@pytest.mark.parametrize("kind", ["hdf5", "hdf5 columns", "parquet", "folder"])
@settings(max_examples=15, deadline=None)
@given(dataset=datasets(), seed=st.integers(0, 2**16))
def test_draws_through_the_cache_equal_numpy_fancy_indexing(
    kind: str, dataset: Dataset, seed: int
) -> None:
    """Random cells, rows and slices of every tensor, through a cache of a few blocks."""
    if kind == "folder" and not dataset.memory_size * dataset.num_envs:
        return  # a folder holds no empty shards
    rng = np.random.default_rng(seed)
    cache = BlockCache(300)
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        patch.setattr(parquet_format, "GROUP_BYTES", 150)  # groups of a row or two
        path = written(dataset, Path(folder), kind)
        lazy, close = open_lazy(path, cache=cache)
        try:
            for name, want in dataset.tensors.items():
                got, cells = lazy.tensors[name], want.shape[0] * want.shape[1]
                if not cells:
                    continue
                flat = want.reshape(cells, *want.shape[2:])
                index = rng.integers(0, cells, (3, 4))
                assert bits(gather_flat(got, index, want.shape[1])) == bits(flat[index])
                rows = rng.integers(-len(want), len(want), 5)
                if not isinstance(got, np.ndarray):  # a tensor of no bytes is one of zeros
                    assert bits(got.take(rows)) == bits(want[rows])
                start = int(rng.integers(0, len(want)))
                assert bits(got[start : start + 3]) == bits(want[start : start + 3])
        finally:
            close()
    assert cache.stats().bytes_held <= 300


def wrapped_frames(rows: int = 40, envs: int = 4) -> Dataset:
    """Frames of a memory that wrapped mid-row, with a few small tensors beside them."""
    rng = np.random.default_rng(3)
    tensors = {
        "observations": rng.integers(0, 255, (rows, envs, 6, 7), dtype=np.uint8),
        "actions": rng.integers(0, 4, (rows, envs)),
        "terminated": rng.random((rows, envs)) < 0.1,
    }
    return Dataset(tensors, CircularState(17, 2, True))


@pytest.mark.parametrize("kind", ["hdf5", "hdf5 columns", "parquet", "folder"])
def test_a_second_draw_of_the_same_cells_decodes_nothing(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parquet_format, "GROUP_BYTES", 1500)
    dataset = wrapped_frames()
    path = written(dataset, tmp_path, kind, shard_bytes=3000)  # shards of 14 rows
    cache = BlockCache()
    lazy, close = open_lazy(path, cache=cache)
    try:
        index = np.array([5, 77, 150, 2, 5])
        for _ in range(2):
            for name, want in dataset.tensors.items():
                got = gather_flat(lazy.tensors[name], index, 4)
                assert np.array_equal(got, want.reshape(160, *want.shape[2:])[index])
            if _ == 0:
                first = cache.stats()
        second = cache.stats() - first
        assert first.misses > 0 and first.hits + first.misses == second.hits
        assert second.misses == second.blocks_decoded == 0
    finally:
        close()


@pytest.mark.parametrize(
    ("memory_index", "groups"),
    [(0, [0, 2, 9]), (17, [0, 11, 12, 13])],  # file row 0 holds tensor row 0, or row 17
)
def test_a_parquet_draw_reads_each_row_group_it_touches_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory_index: int, groups: list[int]
) -> None:
    """Row groups of 2 rows (8 cells); the draw's cells lie in rows 0, 1, 4 and 18.

    A step-major file (``expcli-parquet/1``): its row groups are the cache's blocks.
    """
    import pyarrow.parquet as pq

    from expcli.formats.rows import WritePlan

    monkeypatch.setattr(parquet_format, "GROUP_BYTES", 2 * 4 * (42 + 8 + 1 + 40))
    dataset = Dataset(wrapped_frames().tensors, CircularState(memory_index, 0, True))
    path = tmp_path / "data.parquet"
    plan = WritePlan(path, "parquet")
    parquet_format.write(dataset, plan, order=parquet_format.RowOrder.STEPS)
    assert pq.ParquetFile(path).metadata.num_row_groups == 20
    read = []
    real = pq.ParquetFile.read_row_group

    def counting(self: Any, group: int, columns: Any = None, **kwargs: Any) -> Any:
        read.append((group, tuple(columns or ())))
        return real(self, group, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counting)
    cache = BlockCache()
    lazy, close = open_lazy(path, cache=cache)
    try:
        index = np.array([0, 7, 1, 16, 19, 75, 72, 3])
        observations = lazy.tensors["observations"]
        for _ in range(3):
            got = gather_flat(observations, index, 4)
            assert np.array_equal(got, dataset.tensors["observations"].reshape(160, 6, 7)[index])
        assert sorted(read) == [(g, ("observations",)) for g in groups]
        assert (cache.stats().hits, cache.stats().misses) == (2 * len(groups), len(groups))
    finally:
        close()


def test_a_draw_from_a_file_chunked_by_column_decodes_only_the_columns_it_touches(
    tmp_path: Path,
) -> None:
    """Frames of 4 envs in chunks of 5 rows of one column: a draw's cells lie in 3 of them."""
    import h5py

    dataset = wrapped_frames()  # 40 rows x 4 envs of 6x7 uint8 frames (42 bytes a cell)
    path = write_dataset(dataset, tmp_path / "frames.h5", compression="lzf")
    with pytest.MonkeyPatch.context() as patch:  # cells of 42 B count as frames here
        patch.setattr(hdf5_format, "COLUMN_CELL_BYTES", 42)
        patch.setattr(hdf5_format, "COLUMN_CHUNK_BYTES", 5 * 42)
        path = write_dataset(dataset, tmp_path / "frames.h5", compression="lzf", overwrite=True)
    with h5py.File(path) as f:
        assert f["observations"].chunks == (5, 1, 6, 7) and f["actions"].chunks == (40, 4)
    cache = BlockCache()
    lazy, close = open_lazy(path, cache=cache)
    try:
        want = dataset.tensors["observations"].reshape(160, 6, 7)
        index = np.array(
            [1, 5, 13, 17, 21, 150, 13]
        )  # rows 0, 1, 3, 4, 5, 37; envs 1, 1, 1, 1, 1, 2
        got = gather_flat(lazy.tensors["observations"], index, 4)
        assert np.array_equal(got, want[index])
        stats = cache.stats()  # rows 0-4 of env 1, rows 5-9 of env 1, rows 35-39 of env 2
        assert (stats.misses, stats.blocks_decoded, stats.bytes_decoded) == (3, 3, 3 * 5 * 42)
        rows = lazy.tensors["observations"].take(np.array([38, 2]))  # whole rows, all 4 envs
        assert np.array_equal(rows, dataset.tensors["observations"][[38, 2]])
        assert np.array_equal(
            lazy.tensors["observations"][3:12], dataset.tensors["observations"][3:12]
        )
    finally:
        close()
