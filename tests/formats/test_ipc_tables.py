"""Arrow IPC (Feather v2) files and streams written by the real libraries, read from their columns.

expcli's own Parquet copied to IPC by pyarrow (file and stream), Feather (compressed) and
polars reads back every tensor; an HF ``datasets`` cache file (an IPC stream) reads back its
values; ragged lists, damaged files and a write of IPC are refused in one line. About 4 s on
two cores.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.errors import ConfigError, FormatError
from expcli.formats import detect_format, read_dataset, write_dataset
from expcli.formats._ipc_table import open_ipc
from tests.formats.test_foreign_tables import (
    collected,
    flat,
    one_line_exit_1,
    one_warning,
    read_warned,
)


def write_ipc(table: pa.Table, path: Path, writer: str) -> None:
    """``table`` as ``writer`` writes IPC, in batches of 7 rows where it takes a size."""
    if writer == "pyarrow-file":
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
            out.write_table(table, max_chunksize=7)
    elif writer == "pyarrow-stream":
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as out:
            out.write_table(table, max_chunksize=7)
    elif writer == "feather":  # Feather v2, lz4-compressed by default
        feather.write_feather(table, str(path), chunksize=7)
    else:
        pl.from_arrow(table).write_ipc(path)


WRITERS = ("pyarrow-file", "pyarrow-stream", "feather", "polars")


@pytest.mark.parametrize("writer", WRITERS)
def test_an_ipc_copy_of_expcli_parquet_reads_back_every_tensor(tmp_path: Path, writer: str) -> None:
    source = write_dataset(collected(), tmp_path / "own.parquet")
    copy = tmp_path / f"copy{'.feather' if writer == 'feather' else '.arrow'}"
    write_ipc(pq.read_table(source), copy, writer)
    assert detect_format(copy) == "ipc"
    table = open_ipc(copy)
    batches = table.metadata.num_row_groups
    table.close()
    assert batches == (1 if writer == "polars" else 18)  # 120 rows, 7 a batch
    dataset, said = read_warned(copy)
    form = "stream" if writer == "pyarrow-stream" else "file"
    assert said == [f"{copy}: an Arrow IPC {form}: read from its columns as expcli's columns"]
    original = collected()
    assert sorted(dataset.tensors) == sorted(original.tensors)
    for name, tensor in original.tensors.items():
        assert np.array_equal(dataset.tensors[name], tensor), name
    assert dataset.metadata["table"]["read"] == f"an Arrow IPC {form}"


def test_an_hf_datasets_cache_file_is_an_ipc_stream_read_from_its_columns(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rng = np.random.default_rng(3)
    observations = rng.normal(size=(10, 3)).astype(np.float32)
    terminations = np.arange(10) % 5 == 4
    datasets.Dataset.from_dict(
        {
            "observations": observations.tolist(),
            "actions": rng.integers(0, 3, 10).tolist(),
            "rewards": rng.normal(size=10).tolist(),
            "terminations": terminations.tolist(),
            "truncations": [False] * 10,
        }
    ).save_to_disk(tmp_path / "hf")
    [cache] = (tmp_path / "hf").glob("*.arrow")
    assert cache.read_bytes()[:4] == b"\xff\xff\xff\xff"  # a stream: no ARROW1 magic
    assert detect_format(cache) == "ipc"  # by its suffix
    dataset, said = read_warned(cache)
    assert len(said) == 1 and said[0].startswith(f"{cache}: an Arrow IPC stream: read from")
    assert "Minari's columns" in said[0] and "no next observations" in said[0]
    got = flat(dataset)
    assert np.array_equal(got["observations"], observations)
    assert np.array_equal(got["terminated"][:, 0], terminations)
    assert np.array_equal(got["next_observations"][:4], observations[1:5])


def test_ragged_lists_in_an_ipc_file_are_refused_naming_the_column_and_row(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ragged.arrow"
    table = pa.table({"obs": [[1.0, 2.0], [3.0, 4.0], [5.0], [6.0, 7.0]], "reward": [0.0] * 4})
    write_ipc(table, path, "pyarrow-file")
    with pytest.raises(FormatError, match="row 2 holds lists of 1 values where row 0 holds 2"):
        read_warned(path)
    line = one_line_exit_1(path)
    assert "obs" in line and "ragged" in line


@pytest.mark.parametrize("cut", [12, 200])
def test_a_damaged_ipc_file_is_one_line(tmp_path: Path, cut: int) -> None:
    whole = tmp_path / "whole.arrow"
    write_ipc(pa.table({"obs": np.arange(64, dtype=np.float32)}), whole, "pyarrow-file")
    path = tmp_path / "damaged.arrow"
    path.write_bytes(whole.read_bytes()[:cut])
    with pytest.raises(FormatError, match="Arrow IPC"):
        read_warned(path)
    assert "Arrow IPC" in one_line_exit_1(path)


def bomb(tmp_path: Path, stream: bool, codec: str) -> Path:
    """A compressed IPC table whose one buffer of 8 MB says it inflates to 2^40 bytes."""
    rows = 1_000_000
    table = pa.table({"obs": np.zeros(rows, dtype=np.float64), "reward": np.zeros(rows)})
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=codec)
    opened = pa.ipc.new_stream if stream else pa.ipc.new_file
    with opened(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    data = bytearray(sink.getvalue().to_pybytes())
    declared = (rows * 8).to_bytes(8, "little")
    assert data.count(declared) == 2  # the prefix of each column's values
    at = data.index(declared)
    data[at : at + 8] = (1 << 40).to_bytes(8, "little")
    path = tmp_path / f"bomb-{codec}.arrow"
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_a_compressed_ipc_bomb_is_refused_before_pyarrow_inflates_it(
    tmp_path: Path, stream: bool, codec: str
) -> None:
    path = bomb(tmp_path, stream, codec)
    with pytest.raises(
        FormatError, match=r"inflates [0-9,]+ compressed bytes into 1,099,519,627,776 "
    ) as e:
        open_ipc(path)
    assert e.value.key == "record batch 0"
    assert "decompression bomb" in one_line_exit_1(path)


def _ipc_bytes(stream: bool, codec: str | None) -> bytes:
    table = pa.table(
        {
            "obs": [[float(i), 1.0] for i in range(300)],
            "done": [False] * 300,
            "task": pa.array(["a", "b", "c"] * 100).dictionary_encode(),
        }
    )
    sink = pa.BufferOutputStream()
    opened = pa.ipc.new_stream if stream else pa.ipc.new_file
    with opened(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=codec)) as w:
        w.write_table(table, max_chunksize=100)
    return bytes(sink.getvalue().to_pybytes())


_WHOLE = {(s, c): _ipc_bytes(s, c) for s in (False, True) for c in (None, "zstd")}


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(sorted(_WHOLE, key=str)),
    flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=6),
)
def test_damaged_ipc_bytes_are_a_format_error_or_read(
    tmp_path_factory: pytest.TempPathFactory,
    kind: tuple[bool, str | None],
    flips: list[tuple[int, int]],
) -> None:
    """Any bytes changed in an IPC file or stream (compressed, with a dictionary): read, or
    one FormatError; never a crash (pyarrow reads a message as the type it is asked for, and
    trusts a batch's offsets, so both are checked first)."""
    data = bytearray(_WHOLE[kind])
    for at, value in flips:
        data[at % len(data)] = value
    path = tmp_path_factory.mktemp("ipc") / "t.arrow"
    path.write_bytes(bytes(data))
    try:
        read_warned(path)
    except FormatError:
        pass


def test_an_ipc_file_is_opened_without_decoding_a_batch(tmp_path: Path) -> None:
    """Rows are counted from the batches' metadata: a damaged body is found when read only."""
    path = tmp_path / "t.arrow"
    table = pa.table({"obs": np.arange(4_000, dtype=np.float32)})
    with pa.ipc.new_file(path, table.schema) as writer:
        writer.write_table(table, max_chunksize=1_000)
    opened = open_ipc(path)
    try:
        assert opened.metadata.num_rows == 4_000 and opened.metadata.num_row_groups == 4
        assert opened.read_row_group(3, ["obs"]).column(0).to_pylist()[-1] == 3_999
    finally:
        opened.close()


def test_expcli_does_not_write_ipc(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expcli does not write Arrow IPC; use parquet"):
        write_dataset(collected(), tmp_path / "out.arrow")
    source = write_dataset(collected(), tmp_path / "own.parquet")
    for target in ("out.feather", "out.ipc"):
        out = subprocess.run(
            [sys.executable, "-m", "expcli", "convert", str(source), str(tmp_path / target)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip().splitlines() == [
            f"error: {tmp_path / target}: expcli does not write Arrow IPC; use parquet"
        ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["own.parquet"]
    run = subprocess.run(
        [sys.executable, "-m", "expcli", "collect", "CartPole-v1", "--steps", "64"]
        + ["--mode", "dummy", "-o", str(tmp_path / "run.arrow")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert "expcli does not write Arrow IPC; use parquet" in run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["own.parquet"]


@pytest.mark.parametrize("command", ["inspect", "convert"])
def test_the_cli_reads_an_ipc_file_with_one_warning_line(tmp_path: Path, command: str) -> None:
    source = write_dataset(collected(), tmp_path / "own.parquet")
    copy = tmp_path / "copy.feather"
    write_ipc(pq.read_table(source), copy, "feather")
    target = tmp_path / "out.npz"
    stdout, line = one_warning(command, copy, target)
    assert line.startswith(f"warning: {copy}: an Arrow IPC file")
    if command == "convert":
        converted = read_dataset(target)
        for name, tensor in collected().tensors.items():
            assert np.array_equal(converted.tensors[name], tensor), name
    else:
        assert "ipc, table layout" in stdout and "120 valid transitions" in stdout
        assert "25 complete (16 terminated, 9 truncated)" in stdout
