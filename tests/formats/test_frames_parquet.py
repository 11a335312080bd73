"""Frames once in Parquet: next observations null where derived, read back bit for bit.

The null bitmap is the index: a null cell is the observations of the same env column one
row on. expcli fills it (whole reads, slices, gathers, through a block cache, across Parquet
shards); polars and duckdb see the nulls, and a join on ``env`` and ``row + 1`` fills them
to the same bytes.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

from expcli import load
from expcli.errors import FormatError, SchemaError
from expcli.formats import open_lazy, sharded, write_dataset
from expcli.formats.block_cache import BlockCache
from expcli.spec import FRAMES_SCHEMA, SCHEMA, CircularState, FramesForm
from tests.formats.test_frames import check_lazy, frame_dataset, same_bytes
from tests.formats.test_frames_shards import folder_case, folder_cases

pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow cannot be installed on this Python")


def footer(path: Path) -> dict[str, object]:
    """The expcli header in a Parquet file's footer."""
    loaded: dict[str, object] = json.loads(pq.ParquetFile(path).metadata.metadata[b"expcli"])
    return loaded


@folder_cases
def test_parquet_once_reads_back_as_the_full_form(
    size: int, envs: int, changed: float, leaves: bool, shard_rows: int, wrapped: bool, seed: int
) -> None:
    dataset, rng, row_bytes = folder_case(size, envs, changed, leaves, wrapped, seed)
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "data.parquet"
        folder = Path(tmp) / "shards"
        write_dataset(dataset, file)
        sharded.write(
            dataset,
            folder,
            overwrite=False,
            shard_bytes=row_bytes * shard_rows,
            shard_format="parquet",
            frames=FramesForm.ONCE,
        )
        for path in (file, folder):
            back = load(path)
            assert back.state == dataset.state
            for name, expected in dataset.tensors.items():
                assert same_bytes(back.tensors[name], expected), (path.name, name)
            check_lazy(path, dataset, rng)
        check_lazy(file, dataset, rng, BlockCache(1 << 20))
        forms = footer(file).get("frames", {})
        assert isinstance(forms, dict)
        assert all(form["wrap"] is True for form in forms.values())
        for shard in folder.glob("shard-*.parquet"):
            shard_forms = footer(shard).get("frames", {})
            assert isinstance(shard_forms, dict)
            assert all(form["wrap"] is False for form in shard_forms.values())


def test_nulls_are_the_derived_cells_and_outside_readers_fill_them(tmp_path: Path) -> None:
    """polars sees nulls exactly where derived; a join on (env, row + 1) gives the bytes.

    Each row's observations are joined to the row before it (row 0's to the last: wrapped).
    """
    pl = pytest.importorskip("polars")
    dataset = frame_dataset(np.random.default_rng(0), 30, 3, 0.1, state=CircularState(7, 0, True))
    path = write_dataset(dataset, tmp_path / "once.parquet")
    header = footer(path)
    assert header["schema"] == FRAMES_SCHEMA
    table = pl.read_parquet(path)
    following = dataset.tensors["next_observations"]
    observations = dataset.tensors["observations"]
    rows, envs = table["row"].to_numpy(), table["env"].to_numpy()
    derived = table["next_observations"].is_null().to_numpy()
    same = (following[rows, envs] == observations[(rows + 1) % 30, envs]).all(axis=(1, 2))
    assert np.array_equal(derived, same)
    ahead = table.select(
        pl.col("env"), ((pl.col("row") + 29) % 30).alias("row"), pl.col("observations")
    )
    filled = table.join(ahead, on=["env", "row"], how="left", suffix="_ahead").select(
        pl.col("row"), pl.col("env"), pl.coalesce("next_observations", "observations_ahead")
    )
    filled = filled.sort("row", "env")  # a join keeps no order
    cells = np.array(filled["next_observations"].to_list(), np.uint8)  # 64 bytes: a list
    assert np.array_equal(cells, following.reshape(90, 8, 8))


def test_duckdb_and_datasets_open_the_file(tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    dataset = frame_dataset(np.random.default_rng(1), 12, 2, 0.0)
    path = write_dataset(dataset, tmp_path / "once.parquet")
    query = f"select count(*), count(next_observations) from read_parquet('{path}')"
    assert duckdb.sql(query).fetchall()[0] == (24, 2)  # the newest row's two cells are kept
    datasets = pytest.importorskip("datasets")
    hf = datasets.Dataset.from_parquet(str(path), cache_dir=str(tmp_path / "hf"))
    column = hf["next_observations"]
    assert len(column) == 24 and sum(cell is None for cell in column) == 22


def test_the_full_form_has_no_nulls(tmp_path: Path) -> None:
    dataset = frame_dataset(np.random.default_rng(2), 10, 2, 0.1)
    path = tmp_path / "full.parquet"
    write_dataset(dataset, path, frames="full")
    assert footer(path)["schema"] == SCHEMA
    assert pq.read_table(path)["next_observations"].null_count == 0
    assert same_bytes(load(path).tensors["next_observations"], dataset.tensors["next_observations"])


def test_unwritten_rows_left_out_read_as_zeros(tmp_path: Path) -> None:
    """A memory not yet full: its zero rows are not stored, and read as zeros, not derived."""
    rng = np.random.default_rng(3)
    dataset = frame_dataset(rng, 10, 2, 0.1, state=CircularState(6, 0, filled=False))
    for tensor in dataset.tensors.values():
        tensor[6:] = 0
    dataset.tensors["next_observations"][5] = rng.integers(1, 255, (2, 8, 8), dtype=np.uint8)
    path = write_dataset(dataset, tmp_path / "part.parquet")
    assert pq.ParquetFile(path).metadata.num_rows == 12
    back = load(path)
    for name, expected in dataset.tensors.items():
        assert same_bytes(back.tensors[name], expected), name
    check_lazy(path, dataset, rng)


def test_a_null_in_the_last_row_without_wrap_is_refused(tmp_path: Path) -> None:
    dataset = frame_dataset(np.random.default_rng(4), 6, 2, 0.0)
    dataset.tensors["next_observations"][-1] = dataset.tensors["observations"][0]
    path = write_dataset(dataset, tmp_path / "x.parquet")
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    header = json.loads(meta[b"expcli"])
    assert header["frames"]["next_observations"]["kept"] == 0
    header["frames"]["next_observations"]["wrap"] = False
    meta[b"expcli"] = json.dumps(header).encode()
    pq.write_table(table.replace_schema_metadata(meta), path, use_dictionary=False)
    with pytest.raises(FormatError, match="last row"):
        load(path)
    lazy, close = open_lazy(path)
    try:
        assert same_bytes(
            lazy.tensors["next_observations"][:5], dataset.tensors["next_observations"][:5]
        )
        with pytest.raises(FormatError, match="last row"):
            lazy.tensors["next_observations"].take_cells(np.array([11]))
    finally:
        close()


@pytest.mark.parametrize("kept", [None, -1, 13, 2.0, True])
def test_a_kept_count_that_is_not_a_count_of_its_rows_is_refused(
    tmp_path: Path, kept: object
) -> None:
    """``inspect`` reports the header's ``kept``: it must count at most the file's 12 rows."""
    path = write_dataset(frame_dataset(np.random.default_rng(5), 6, 2, 0.2), tmp_path / "x.parquet")
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    header = json.loads(meta[b"expcli"])
    if kept is None:
        del header["frames"]["next_observations"]["kept"]
    else:
        header["frames"]["next_observations"]["kept"] = kept
    meta[b"expcli"] = json.dumps(header).encode()
    pq.write_table(table.replace_schema_metadata(meta), path, use_dictionary=False)
    with pytest.raises(SchemaError, match="at most its 12 rows") as caught:
        load(path)
    assert caught.value.key == "frames.next_observations" and str(path) in str(caught.value)
