"""A collect job makes one write plan from its settings, checked before any env is built.

The plan (format, compression as the format object takes it, shard format, frames,
overwrite) is what each output kind writes: a file, a folder's shards, a spooled file (its
spool's shards uncompressed, the file as asked).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import expcli
from expcli.collect.job import CollectJob
from expcli.collect.settings import CollectSettings
from expcli.errors import ConfigError
from expcli.formats.rows import Layout, WritePlan
from expcli.spec import FramesForm


def _settings(output: Path, **options: Any) -> CollectSettings:
    return CollectSettings("CartPole-v1", envs=2, steps=120, seed=1, mode="dummy", output=output,
                           **options)  # fmt: skip


def collect(settings: CollectSettings) -> CollectJob:
    """Run a collect job to the end (start, run, close, save), as the command does."""
    job = CollectJob(settings)
    job.start()
    try:
        job.run()
    finally:
        job.close()
        job.save()
    return job


def test_the_plan_holds_the_format_and_the_checked_options(tmp_path: Path) -> None:
    job = CollectJob(_settings(tmp_path / "run.H5", compression="gzip", overwrite=True))
    assert job.plan == WritePlan(
        tmp_path / "run.H5", "hdf5", Layout.EXPCLI, "gzip", None, FramesForm.ONCE, True
    )
    folder = CollectJob(_settings(tmp_path / "run", shard_format="parquet", frames="full"))
    assert (folder.plan.format, folder.plan.shard_format) == ("folder", "parquet")
    assert (folder.plan.compression, folder.plan.frames) == (None, FramesForm.FULL)
    npz = CollectJob(_settings(tmp_path / "run.npz", compression="none"))
    assert npz.plan.compression is None  # npz does not compress: none is no compression


@pytest.mark.parametrize(
    ("output", "options", "message"),
    [
        ("run.npz", {"compression": "gzip"}, r"--compression applies to \.h5/\.hdf5/\.parquet "),
        ("run", {"compression": "gzip"}, r"applies to .* output, not .*run$"),  # npz shards
        ("run.h5", {"compression": "zstd"}, r"does not apply to HDF5 output .* takes none, gz"),
        ("run.foo", {}, r"cannot tell the output format from 'run\.foo'; name a suffix \(\.pt"),
        ("run.foo", {"compression": "gzip"}, r"--compression applies to \.h5"),
    ],
)
def test_a_plan_that_does_not_fit_is_refused_before_any_env(
    tmp_path: Path, output: str, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        CollectJob(_settings(tmp_path / output, **options))
    assert list(tmp_path.iterdir()) == []


def test_a_spooled_file_is_compressed_as_asked_and_its_spool_is_not(tmp_path: Path) -> None:
    out = tmp_path / "run.h5"
    collect(_settings(out, spool=True, compression="gzip", shard_size="20"))
    assert [p.name for p in tmp_path.iterdir()] == ["run.h5"]  # the spool merged and gone
    with h5py.File(out) as f:
        assert f["observations"].compression == "gzip"
    kept = collect(_settings(tmp_path / "memory.h5", spool=False))
    assert kept.spool is None
    got, want = expcli.load(out), expcli.load(tmp_path / "memory.h5")
    for name, array in want.tensors.items():
        assert np.array_equal(np.asarray(got.tensors[name]), np.asarray(array)), name


def test_a_folder_writes_its_shards_as_the_plan_says(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    collect(_settings(folder, shard_format="parquet", compression="snappy", shard_size="25"))
    shards = sorted(folder.glob("shard-*.parquet"))
    assert len(shards) == 3  # 60 rows of 2 envs, 25 a shard
    import pyarrow.parquet as pq

    column = pq.ParquetFile(shards[0]).metadata.row_group(0).column(0)
    assert column.compression == "SNAPPY"
    assert len(expcli.load(folder)) == 120
