"""A ReplayBuffer over a compressed file (lzf HDF5, Parquet, a folder of Parquet shards)
draws through a bounded block cache the same batches, slices and frame stacks, bit for
bit, as one over the same data in memory, and its storage reports what the cache did."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from expcli import RandomSampler, ReplayBuffer, SliceSampler, load, save
from expcli.errors import ConfigError
from expcli.formats import hdf5_format, parquet_format, sharded
from expcli.formats.block_cache import DEFAULT_CACHE_BYTES, CacheStats
from expcli.replay import DatasetStorage
from tests.replay.episode_data import make_memory
from tests.replay.test_lazy_storage import assert_same_draws

pytest.importorskip("pyarrow", reason="pyarrow cannot be installed on this Python")

FRAME = (17, 16)  # above what a storage packs in memory (256 bytes a transition)
FRAME_BYTES = 17 * 16


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A wrapped memory (3 envs, mid-row) as npz, lzf HDF5 (chunks of 3 rows), Parquet
    (groups of 2 rows) and a folder of Parquet shards (of 7 rows)."""
    folder = tmp_path_factory.mktemp("blocks")
    memory = make_memory(40, 3, [3] * 45 + [1], seed=3, p_done=0.15)
    memory.create_tensor("frames", FRAME, torch.uint8)
    frames = memory.tensors["frames"]
    frames.copy_(torch.randint(0, 255, frames.shape, dtype=torch.uint8))
    row_bytes = 3 * sum(t[0, 0].numel() * t.element_size() for t in memory.tensors.values())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hdf5_format, "CHUNK_BYTES", 3 * 3 * FRAME_BYTES)
        patch.setattr(parquet_format, "GROUP_BYTES", 2 * (row_bytes + 3 * 36))
        paths = {
            "npz": save(memory, folder / "data.npz"),
            "h5-lzf": save(memory, folder / "data.h5", compression="lzf"),
            "parquet": save(memory, folder / "data.parquet"),
        }
        paths["folder"] = folder / "shards"
        shards = {"shard_bytes": 7 * row_bytes, "shard_format": "parquet"}
        sharded.write(load(paths["npz"]), paths["folder"], overwrite=False, **shards)
    return paths


@pytest.mark.parametrize("label", ["h5-lzf", "parquet", "folder"])
def test_batches_through_a_small_cache_equal_those_from_memory(
    files: dict[str, Path], label: str
) -> None:
    bound = 6 * 3 * 3 * FRAME_BYTES  # six chunks of frames
    storage = DatasetStorage.open(files[label], cache_bytes=bound)
    eager = load(files["npz"])
    eager.tensors = {name: np.array(array) for name, array in eager.tensors.items()}
    for make in (RandomSampler, lambda: SliceSampler(slice_len=5)):
        lazy_buffer = ReplayBuffer(storage, sampler=make(), seed=11, stack_num=4)
        eager_buffer = ReplayBuffer(eager, sampler=make(), seed=11, stack_num=4)
        for _ in range(4):
            assert_same_draws(lazy_buffer, eager_buffer, 1)
            assert storage.cache_stats().bytes_held <= bound
    stats = storage.cache_stats()
    assert stats.hits > 0 and stats.misses == stats.blocks_decoded > 0
    assert stats.evictions > 0 and stats.max_bytes == bound
    storage.close()
    assert storage.cache_stats().bytes_held == 0  # closing lets go of the blocks


@pytest.mark.parametrize("label", ["h5-lzf", "parquet", "folder"])
def test_a_draw_repeated_is_served_from_the_cache(files: dict[str, Path], label: str) -> None:
    storage = DatasetStorage.open(files[label])
    assert storage.cache_stats().max_bytes == DEFAULT_CACHE_BYTES
    storage.gather(["frames", "rewards"], np.array([50]))  # reads the small tensors whole
    index = np.array([[0, 61, 119], [7, 8, 9]])  # rows 0, 20, 39, 2, 2, 3
    opened = storage.cache_stats()
    first = storage.gather(["frames", "rewards"], index)
    drawn = storage.cache_stats() - opened
    again = storage.gather(["frames", "rewards"], index)
    since = storage.cache_stats() - opened - drawn
    assert since.misses == since.blocks_decoded == since.bytes_decoded == 0
    assert since.hits == drawn.hits + drawn.misses > 0
    if label == "h5-lzf":
        assert drawn.misses == 4  # frames in chunks 0, 1, 6 and 13 (of 3 rows)
    assert all(torch.equal(first[name], again[name]) for name in first)
    assert first["frames"].shape == (2, 3, FRAME_BYTES)
    storage.close()


def test_a_mapped_file_reports_an_idle_cache(files: dict[str, Path]) -> None:
    storage = DatasetStorage.open(files["npz"])
    storage.gather(["frames"], np.arange(10))
    assert storage.cache_stats() == CacheStats(max_bytes=DEFAULT_CACHE_BYTES)
    assert "hit rate 0.0%" in str(storage.cache_stats())


def test_a_negative_cache_bound_is_refused(files: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match="0 bytes or more"):
        DatasetStorage.open(files["parquet"], cache_bytes=-1)
