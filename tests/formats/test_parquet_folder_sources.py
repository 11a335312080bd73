"""A folder or a glob of Parquet files through every reader, the CLI, and hostile folders.

Every reader (``load``, ``open_lazy``, ``summarize`` with checks, ``convert``, ``merge``,
``split``, ``filter_episodes``, ``ReplayBuffer``, ``ReplayDataset``) takes a folder and a
glob; the CLI reads them with one warning line. A folder too full, of files without rows
or that are not Parquet, a link to a file or folder outside, files whose columns differ,
a hive value that is no integer and a glob matching nothing: one line each, nothing
followed, no footer read past the bound.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from expcli.errors import ConfigError, FormatError
from expcli.formats import read_dataset, source_format
from expcli.formats.parquet_sources import FILES_VARIABLE
from tests.formats.test_foreign_tables import flat, one_line_exit_1
from tests.formats.test_parquet_folders import arrow, steps

LENGTHS = [4, 6, 3, 5, 7, 5]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """An HF-style folder: ``data/train-0000N-of-00003.parquet`` (row groups of 4) and a
    README."""
    rows = steps(LENGTHS)
    root = tmp_path / "hub"
    (root / "data").mkdir(parents=True)
    for part, (first, stop) in enumerate([(0, 10), (10, 20), (20, 30)]):
        name = f"train-{part:05d}-of-00003.parquet"
        pq.write_table(arrow(rows, first, stop), root / "data" / name, row_group_size=4)
    (root / "README.md").write_text("# a dataset\n")
    return root


def quiet(read: Callable[[], Any]) -> Any:
    """``read()``, the warning that the table was read from its columns left unsaid."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return read()


def _load(source: Path, out: Path) -> np.ndarray:
    from expcli import load

    return np.asarray(load(source).tensors["actions"])


def _open_lazy(source: Path, out: Path) -> np.ndarray:
    from expcli.formats import open_lazy

    dataset, close = open_lazy(source)
    try:
        return np.asarray(dataset.tensors["actions"])
    finally:
        close()


def _summarize(source: Path, out: Path) -> np.ndarray:
    from expcli import summarize

    summary = summarize(source, check=True)
    assert summary.transitions == 30 and not summary.failed
    return np.asarray(steps(LENGTHS)["actions"])


def _convert(source: Path, out: Path) -> np.ndarray:
    from expcli import convert

    convert(source, out / "out.npz")
    return np.asarray(read_dataset(out / "out.npz").tensors["actions"])


def _merge(source: Path, out: Path) -> np.ndarray:
    from expcli import merge

    merge([source, source], out / "merged.npz")
    return np.asarray(read_dataset(out / "merged.npz").tensors["actions"])[:30]


def _split(source: Path, out: Path) -> np.ndarray:
    from expcli import split

    split(source, [out / "a.npz", out / "b.npz"], fractions=[0.5, 0.5])
    parts = [read_dataset(out / f"{name}.npz").tensors["actions"] for name in "ab"]
    return np.sort(np.concatenate(parts).reshape(-1))  # episodes dealt at random


def _filter(source: Path, out: Path) -> np.ndarray:
    from expcli import filter_episodes

    filter_episodes(source, out / "kept.npz", episodes="0:6")
    return np.asarray(read_dataset(out / "kept.npz").tensors["actions"])


def _replay_buffer(source: Path, out: Path) -> np.ndarray:
    from expcli import ReplayBuffer

    buffer = ReplayBuffer(source, seed=0)
    assert len(buffer) == 30 and buffer.sample(8)["actions"].shape == (8, 1)
    return np.asarray(steps(LENGTHS)["actions"])


def _replay_dataset(source: Path, out: Path) -> np.ndarray:
    from expcli import ReplayDataset

    batch, _ = ReplayDataset(source, batch_size=30)[np.arange(30)]
    return np.asarray(batch["actions"].numpy())


READERS = {
    "load": _load,
    "open_lazy": _open_lazy,
    "summarize": _summarize,
    "convert": _convert,
    "merge": _merge,
    "split": _split,
    "filter": _filter,
    "ReplayBuffer": _replay_buffer,
    "ReplayDataset": _replay_dataset,
}


@pytest.mark.parametrize("glob", [False, True], ids=["folder", "glob"])
@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_takes_a_folder_and_a_glob(
    folder: Path, tmp_path: Path, reader: str, glob: bool
) -> None:
    source = folder / "data" / "train-*.parquet" if glob else folder
    assert source_format(source) == "parquet"
    actions = quiet(lambda: READERS[reader](source, tmp_path)).reshape(-1)
    expected = steps(LENGTHS)["actions"]
    assert np.array_equal(actions, np.sort(expected) if reader == "split" else expected)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "expcli", *args], capture_output=True, text=True, timeout=60
    )


def test_the_cli_converts_a_glob_and_inspects_a_folder_with_one_warning(
    folder: Path, tmp_path: Path
) -> None:
    pattern = f"{folder}/data/train-*.parquet"
    converted = run("convert", pattern, str(tmp_path / "out.npz"))
    assert converted.returncode == 0, converted.stderr
    [line] = [x for x in converted.stderr.splitlines() if x.strip()]
    assert line.startswith(f"warning: {pattern}: 3 Parquet files read as one table")
    got = flat(read_dataset(tmp_path / "out.npz"))
    assert np.array_equal(got["observations"], steps(LENGTHS)["observations"])
    shown = run("inspect", str(folder))
    assert shown.returncode == 0, shown.stderr
    assert [x for x in shown.stderr.splitlines() if x.strip()][0].startswith(
        f"warning: {folder}: 3 Parquet files read as one table"
    )
    assert "30 valid transitions" in shown.stdout and "6 complete" in shown.stdout


def test_a_glob_that_matches_nothing_is_one_line_exit_2(folder: Path) -> None:
    pattern = f"{folder}/data/test-*.parquet"
    with pytest.raises(ConfigError, match="matches no Parquet file"):
        source_format(pattern)
    out = run("inspect", pattern)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        f"error: {pattern}: matches no Parquet file (*.parquet); quote the glob so that the "
        "shell does not expand it"
    ]


def test_a_folder_too_full_is_refused_before_any_footer_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(10^5 empty files at the default bound of 10,000: refused in 0.9 s, measured.)"""
    monkeypatch.setenv(FILES_VARIABLE, "8")
    empty = pa.table({"observations": pa.array([], pa.float32())})
    for part in range(9):
        pq.write_table(empty, tmp_path / f"part-{part}.parquet")
    opened: list[Path] = []
    monkeypatch.setattr("expcli.formats._parquet_set.open_parquet", opened.append)
    for source in (tmp_path, tmp_path / "*.parquet"):
        with pytest.raises(FormatError, match="more than 8 Parquet files, the most read as one"):
            read_dataset(source)
    assert not opened


def test_files_without_rows_are_one_line(tmp_path: Path) -> None:
    empty = pa.table({"observations": pa.array([], pa.float32())})
    for part in range(3):
        pq.write_table(empty, tmp_path / f"part-{part}.parquet")
    assert "holds no rows; expected at least one" in one_line_exit_1(tmp_path)


@pytest.mark.parametrize("content", [b"", b"name,value\n1,2\n"], ids=["empty", "text"])
def test_a_file_that_is_not_parquet_among_them_is_named(folder: Path, content: bytes) -> None:
    odd = folder / "data" / "train-00001-of-00003.parquet"
    odd.write_bytes(content)
    line = one_line_exit_1(folder)
    assert line == (
        f"error: {odd}: not a Parquet file (no PAR1 at both ends); expected a Parquet file, "
        "complete"
    )


def test_links_to_files_or_folders_outside_are_refused(folder: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    pq.write_table(arrow(steps([3])), outside / "secret.parquet")
    (folder / "LICENSE").symlink_to(outside / "secret.parquet")  # no data: passed over
    assert source_format(folder) == "parquet"
    link = folder / "data" / "train-00003-of-00003.parquet"
    link.symlink_to(outside / "secret.parquet")
    said = f"{link}: is a symbolic link, not a regular file; a Parquet folder is read only"
    for source in (folder, folder / "data" / "train-*.parquet"):
        with pytest.raises(FormatError, match=said):
            read_dataset(source)
    link.unlink()
    chunk = folder / "data" / "chunk-001"
    chunk.symlink_to(outside)
    with pytest.raises(FormatError, match=f"{chunk}: is a symbolic link"):
        read_dataset(folder)
    with pytest.raises(FormatError, match=f"{chunk}: is a symbolic link"):
        read_dataset(folder / "data" / "*" / "*.parquet")
    elsewhere = tmp_path / "elsewhere"  # its only Parquet files behind a linked folder
    elsewhere.mkdir()
    (elsewhere / "data").symlink_to(outside)
    with pytest.raises(FormatError, match=f"{elsewhere / 'data'}: is a symbolic link"):
        read_dataset(elsewhere)


def test_a_named_pipe_among_them_is_refused_unopened(folder: Path) -> None:
    pipe = folder / "data" / "train-00004-of-00004.parquet"
    os.mkfifo(pipe)
    with pytest.raises(FormatError, match="is a named pipe"):
        read_dataset(folder)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda t: t.drop_columns(["rewards"]), "'rewards': is missing, where data/train-0000"),
        (
            lambda t: t.set_column(2, "rewards", t["rewards"].cast(pa.float64())),
            "'rewards': is double, where data/train-00000-of-00003.parquet holds float",
        ),
        (
            lambda t: t.append_column("extra", pa.array([1] * len(t))),
            "'extra': is a column that data/train-00000-of-00003.parquet does not hold",
        ),
    ],
    ids=["missing", "type", "extra"],
)
def test_files_whose_columns_differ_are_refused_naming_the_file_and_column(
    folder: Path, change: Callable[[pa.Table], pa.Table], said: str
) -> None:
    second = folder / "data" / "train-00001-of-00003.parquet"
    pq.write_table(change(pq.read_table(second)), second)
    with pytest.raises(FormatError, match=f"{second}: {said}"):
        read_dataset(folder)


def test_hive_folders_of_text_or_of_different_keys_are_refused(tmp_path: Path) -> None:
    rows = steps([3, 4])
    for split in ("train", "test"):
        (tmp_path / f"split={split}").mkdir()
        pq.write_table(arrow(rows), tmp_path / f"split={split}" / "0.parquet")
    with pytest.raises(FormatError, match="'split=test', whose value is not an integer"):
        read_dataset(tmp_path)
    dataset = quiet(lambda: read_dataset(tmp_path / "split=train" / "*.parquet"))
    assert np.array_equal(flat(dataset)["actions"][:, 0], rows["actions"])
    other = tmp_path / "other"
    for name in ("episode=1", "run=2"):
        (other / name).mkdir(parents=True)
        pq.write_table(arrow(rows), other / name / "0.parquet")
    with pytest.raises(FormatError, match="lies in other hive folders"):
        read_dataset(other)


def test_columns_and_done_means_apply_to_a_folder_and_a_glob(tmp_path: Path) -> None:
    from expcli import load

    rows = steps([4, 6, 5])
    for part, (first, stop) in enumerate([(0, 7), (7, 15)]):
        table = arrow(rows, first, stop).select(["observations", "actions", "terminated"])
        pq.write_table(table.rename_columns(["cam", "u", "over"]), tmp_path / f"p-{part}.parquet")
    mapping = "observations=cam,actions=u,done=over"
    for source in (tmp_path, tmp_path / "p-*.parquet"):
        dataset = quiet(lambda s=source: load(s, columns=mapping, done_means="truncated"))
        got = flat(dataset)
        assert np.array_equal(got["actions"][:, 0], rows["actions"])
        assert np.array_equal(got["truncated"][:, 0], rows["terminated"])
        assert not got["terminated"].any()
    out = run(
        "convert", str(tmp_path / "p-*.parquet"), str(tmp_path / "o.npz"), "--columns", mapping
    )
    assert out.returncode == 0, out.stderr
    assert np.array_equal(
        flat(read_dataset(tmp_path / "o.npz"))["observations"], rows["observations"]
    )
