"""Readers stream: drawing a batch from an HDF5 file (plain and gzip) or a mapped
``.npz``, and converting a skrl-layout ``.npz`` or a gzip ``.h5``, take about the same peak
memory for a small and a five times larger file (``tests.memory_probe``: each in a fresh
child, its peak above its resident memory after the imports, the difference bounded by a
quarter of the extra data). A Parquet table expcli did not write, and an Arrow IPC file,
convert holding a few row groups (record batches), far less than the table."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from expcli import save
from expcli.formats.dataset import Dataset
from expcli.formats.sharded import write as write_folder
from expcli.spec import CircularState
from tests.memory_probe import MIB, Run, assert_flat, convert_run, frames_data, sample_run


def frames_file(folder: Path, mib: float, suffix: str, compression: str | None = None) -> Path:
    """``frames_data`` saved by expcli (compressible where ``compression`` is given)."""
    data = Dataset(frames_data(mib, compression is not None), CircularState(0, 0, True))
    return save(data, folder / f"{mib:.0f}{suffix}", compression=compression)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("suffix", "compression"), [(".h5", None), (".h5", "gzip"), (".npz", None)]
)
def test_sampling_a_file_holds_only_the_batch(
    tmp_path: Path, suffix: str, compression: str | None
) -> None:
    """HDF5 is read by chunks (those decoded kept in a block cache of 8 MiB); a stored .npz
    member is mapped, and the pages a batch touched are let go (the kernel maps whole
    folios, megabytes, per row touched)."""

    def sample(mib: float) -> Run:
        source = frames_file(tmp_path, mib, suffix, compression)
        run = sample_run(source, cache_bytes=8 * MIB)
        source.unlink()
        return run

    grew = assert_flat(sample, 24, 216)
    assert grew.large < grew.large_data / 4, grew


@pytest.mark.slow
def test_sampling_a_folder_holds_only_the_batch(tmp_path: Path) -> None:
    """Shards stay mapped while a sampler draws from them all, and the pages each batch
    touched are let go of, as for a single file."""

    def sample(mib: float) -> Run:
        data = Dataset(frames_data(mib, False), CircularState(0, 0, True))
        folder = tmp_path / f"{mib:.0f}"
        write_folder(data, folder, overwrite=True, shard_bytes=8 << 20)
        run = sample_run(folder)
        shutil.rmtree(folder)
        return run

    grew = assert_flat(sample, 24, 216)
    assert grew.large < grew.large_data / 4, grew


@pytest.mark.slow
@pytest.mark.parametrize(
    ("suffix", "compression", "own_mib"), [(".h5", "lzf", 0), (".parquet", "zstd", 250)]
)
def test_sampling_a_compressed_file_holds_the_cache_bound_and_a_batch(
    tmp_path: Path, suffix: str, compression: str, own_mib: float
) -> None:
    """Two batches fill a block cache of 32 MiB (a batch of 256 rows drawn at random
    touches most blocks: row groups of 8 MiB, chunks of 1 MiB); memory then holds it, a
    batch and the reader's own (pyarrow: its import and what its reads leave allocated,
    about 200 MiB with a cache or without), and no more for a file five times as large."""

    def sample(mib: float) -> Run:
        source = frames_file(tmp_path, mib, suffix, compression)
        run = sample_run(source, cache_bytes=32 * MIB, batches=2)
        source.unlink()
        return run

    grew = assert_flat(sample, 48, 240)
    assert grew.large < 32 + 48 + own_mib, grew  # a batch and a block or two decoding: 48


@pytest.mark.slow
def test_converting_a_skrl_npz_streams(tmp_path: Path) -> None:
    def convert(mib: float) -> Run:
        source = tmp_path / f"skrl-{mib:.0f}.npz"
        np.savez(source, **frames_data(mib, compressible=False))  # skrl's Memory.save
        run = convert_run(source, tmp_path / "out.h5")
        source.unlink()
        return run

    assert_flat(convert)


@pytest.mark.slow
def test_converting_a_gzip_hdf5_file_streams(tmp_path: Path) -> None:
    def convert(mib: float) -> Run:
        source = frames_file(tmp_path, mib, ".h5", "gzip")
        run = convert_run(source, tmp_path / "out.npz")
        source.unlink()
        return run

    assert_flat(convert)


def foreign_table(path: Path, mib: float) -> Path:
    """``mib`` MiB of frames as HF ``datasets`` writes them (lists of bytes; an episode
    column, episodes of 100 rows; row groups of 8 MiB, uncompressed), by pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, width = int(mib * MIB) // 4096, 4096
    rng = np.random.default_rng(0)
    kind = pa.list_(pa.uint8())
    schema = pa.schema([("episode_id", pa.int64()), ("obs", kind), ("action", pa.float32())])
    with pq.ParquetWriter(path, schema, compression="none") as writer:
        for first in range(0, rows, 2048):
            count = min(2048, rows - first)
            frames = np.frombuffer(rng.bytes(count * width), np.uint8)
            offsets = np.arange(count + 1, dtype=np.int32) * width
            column = pa.ListArray.from_arrays(pa.array(offsets), pa.array(frames))
            episode = (first + np.arange(count)) // 100
            actions = rng.random(count, dtype=np.float32)
            writer.write_table(pa.table([episode, column, actions], schema=schema))
    return path


@pytest.mark.slow
def test_converting_a_foreign_parquet_table_streams(tmp_path: Path) -> None:
    """A table expcli did not write, to ``.npz`` (its next observations derived), 48 and
    240 MiB: about 30 s on two cores. (32 and 128 MiB flaked: peaks vary by 30 MiB.)"""

    def convert(mib: float) -> Run:
        source = foreign_table(tmp_path / f"table-{mib:.0f}.parquet", mib)
        run = convert_run(source, tmp_path / "out.npz")
        assert run.lines and "no expcli metadata" in run.lines[0]
        source.unlink()
        return run

    assert_flat(convert)


@pytest.mark.slow
def test_converting_an_arrow_ipc_file_streams(tmp_path: Path) -> None:
    """The same table as an Arrow IPC file (record batches of 2,048 rows, 8 MiB), 48 and
    240 MiB: read a batch at a time, not mapped (mapped pages would count)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def convert(mib: float) -> Run:
        table = foreign_table(tmp_path / "table.parquet", mib)
        source = tmp_path / f"table-{mib:.0f}.arrow"
        parquet = pq.ParquetFile(table)
        with pa.ipc.new_file(str(source), parquet.schema_arrow) as writer:
            for batch in parquet.iter_batches(batch_size=2048):
                writer.write_batch(batch)
        table.unlink()
        run = convert_run(source, tmp_path / "out.npz")
        assert run.lines and "an Arrow IPC file" in run.lines[0]
        source.unlink()
        return run

    assert_flat(convert)
