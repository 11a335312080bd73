"""Folders and globs of Parquet files that expcli did not write, read as one table.

Written by the real writers: HF ``datasets`` shards (``data/train-00000-of-00003.parquet``
beside a test split and a README), checked against ``datasets.load_dataset`` reading the
same folder; polars files named so that their natural order is not their name order, and
its hive folders; duckdb's ``PER_THREAD_OUTPUT`` and ``PARTITION_BY`` copies of some
episodes of expcli's own file. Values compared with the source rows; episodes spread over
files and row groups. The folders that expcli, LeRobot and Minari write are still theirs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.errors import ConfigError
from expcli.formats import SHARDED_FOLDER, Dataset, read_dataset, source_format, write_dataset
from tests.formats.test_foreign_tables import (
    STEPS,
    collected,
    flat,
    read_warned,
    rows_of_episodes,
)

COLUMNS = ("observations", "actions", "rewards", "terminated")


def steps(lengths: list[int], seed: int = 0) -> dict[str, np.ndarray]:
    """Rows of episodes of ``lengths``, each ended by ``terminated``, numbered by episode
    and frame."""
    rng = np.random.default_rng(seed)
    count = sum(lengths)
    frame = np.concatenate([np.arange(n) for n in lengths]).astype(np.int64)
    return {
        "observations": rng.normal(size=(count, 3)).astype(np.float32),
        "actions": rng.integers(0, 4, count),
        "rewards": rng.normal(size=count).astype(np.float32),
        "terminated": frame == np.repeat(np.asarray(lengths) - 1, lengths),
        "episode_index": np.repeat(np.arange(len(lengths)), lengths).astype(np.int64),
        "frame_index": frame,
    }


def arrow(rows: dict[str, np.ndarray], first: int = 0, stop: int | None = None) -> pa.Table:
    """Rows ``first:stop`` as an Arrow table (observations as fixed-size lists)."""
    part = {name: values[first:stop] for name, values in rows.items()}
    columns: dict[str, Any] = dict(part)
    columns["observations"] = pa.FixedSizeListArray.from_arrays(part["observations"].reshape(-1), 3)
    return pa.table(columns)


def assert_rows(dataset: Dataset, rows: dict[str, np.ndarray]) -> None:
    """The dataset's rows (one env column) are ``rows``, in order, next observations the
    next row's within an episode."""
    got = flat(dataset)
    for name in COLUMNS:
        assert np.array_equal(
            got[name].reshape(len(rows[name]), -1), rows[name].reshape(len(rows[name]), -1)
        ), name
    inside = ~rows["terminated"][:-1]
    following = got["next_observations"][:-1][inside]
    assert np.array_equal(following, rows["observations"][1:][inside])


def hf_folder(root: Path) -> dict[str, np.ndarray]:
    """An HF dataset folder: ``train`` in three shards of row groups of 4 rows, ``test`` in
    one, a README, ``.gitattributes`` and ``dataset_infos.json``. Returns train's rows."""
    datasets = pytest.importorskip("datasets")
    features = datasets.Features(
        {
            "observations": datasets.List(datasets.Value("float32"), length=3),
            "actions": datasets.Value("int64"),
            "rewards": datasets.Value("float32"),
            "terminated": datasets.Value("bool"),
            "episode_index": datasets.Value("int64"),
            "frame_index": datasets.Value("int64"),
        }
    )
    train, test = steps([7, 5, 9, 3, 6]), steps([4, 4], seed=1)
    (root / "data").mkdir(parents=True)
    whole = datasets.Dataset.from_dict(train, features=features)
    for shard in range(3):
        part = whole.shard(num_shards=3, index=shard, contiguous=True)
        part.to_parquet(root / "data" / f"train-{shard:05d}-of-00003.parquet", batch_size=4)
    test_set = datasets.Dataset.from_dict(test, features=features)
    test_set.to_parquet(root / "data" / "test-00000-of-00001.parquet")
    (root / "README.md").write_text("---\nlicense: mit\n---\n# An RL dataset\n")
    (root / ".gitattributes").write_text("*.parquet filter=lfs diff=lfs merge=lfs -text\n")
    (root / "dataset_infos.json").write_text("{}")
    return train


def test_an_hf_folder_reads_its_train_split_as_hf_datasets_does(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    train = hf_folder(root)
    assert pq.ParquetFile(root / "data" / "train-00001-of-00003.parquet").num_row_groups > 1
    dataset, said = read_warned(root)
    assert said[0].startswith(
        f"{root}: 3 Parquet files read as one table, split 'train' ('test': 1 file left out): "
        "read from its columns as expcli's columns"
    ), said[0][len(str(root)) :]
    assert_rows(dataset, train)
    assert dataset.metadata["table"]["columns"]["episode"] == "episode_index"
    # HF datasets reads the same folder as two splits, its train the rows expcli read
    script = (
        "import datasets, json, sys\n"
        "found = datasets.load_dataset(sys.argv[1])\n"
        "print(json.dumps({s: list(found[s]['actions']) for s in found}))"
    )
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(root)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    splits = json.loads(done.stdout.splitlines()[-1])
    assert sorted(splits) == ["test", "train"] and splits["train"] == train["actions"].tolist()


def test_a_glob_reads_the_files_it_matches(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    train = hf_folder(root)
    pattern = root / "data" / "train-*.parquet"
    dataset, said = read_warned(pattern)
    assert said[0].startswith(f"{pattern}: 3 Parquet files read as one table: read from")
    assert_rows(dataset, train)
    every = root / "data" / "*.parquet"  # a glob is the user's choice: both splits
    assert len(read_warned(every)[0]) == len(train["actions"]) + 8


def test_files_are_read_in_the_natural_order_of_their_numbers(tmp_path: Path) -> None:
    """No episode column: episodes end at the flags, in row order, so the files' order
    (part-2 before part-10) is the table's."""
    rows = steps([4, 6, 3, 8, 5, 7, 2, 9])
    del rows["episode_index"], rows["frame_index"]
    frame = pl.from_arrow(arrow(rows))
    assert isinstance(frame, pl.DataFrame)
    for part, at in enumerate(range(0, len(frame), 4)):
        frame.slice(at, 4).write_parquet(tmp_path / f"part-{part}.parquet")
    assert sorted(p.name for p in tmp_path.iterdir())[1] == "part-1.parquet"
    assert sorted(p.name for p in tmp_path.iterdir())[2] == "part-10.parquet"
    dataset, said = read_warned(tmp_path)
    assert said[0].startswith(f"{tmp_path}: 11 Parquet files read as one table")
    assert_rows(dataset, rows)


def test_polars_hive_folders_keep_their_key_column(tmp_path: Path) -> None:
    rows = steps([3, 5, 2, 4, 6, 3, 2, 5, 4, 3, 6, 2])  # episode_index=10/ after =2/
    frame = pl.from_arrow(arrow(rows))
    assert isinstance(frame, pl.DataFrame)
    frame.sample(fraction=1.0, shuffle=True, seed=3).write_parquet(
        tmp_path / "out", partition_by="episode_index"
    )
    assert (tmp_path / "out" / "episode_index=10").is_dir()
    dataset, said = read_warned(tmp_path / "out")
    assert "12 Parquet files read as one table" in said[0]
    assert_rows(dataset, rows)


@pytest.mark.parametrize(
    ("option", "rows", "kept"),
    [
        ("PER_THREAD_OUTPUT, FILE_SIZE_BYTES 1, ROW_GROUP_SIZE 1024", 3000, 1500),
        ("PARTITION_BY (episode_index)", 40, 6),
    ],
    ids=["per-thread", "partitioned"],
)
def test_duckdb_copies_of_some_episodes_read_back_expcli_rows_of_them(
    tmp_path: Path, option: str, rows: int, kept: int
) -> None:
    """Threads write their rows in no order (placed by episode and frame again);
    ``PARTITION_BY`` leaves the key out of the files: the hive folders give it back."""
    source = write_dataset(collected(rows=rows), tmp_path / "own.parquet")
    folder = tmp_path / "copy"
    con = duckdb.connect()
    con.execute("SET threads TO 4")
    con.execute(
        f"COPY (SELECT * FROM '{source}' WHERE episode_index < {kept}) TO '{folder}' "
        f"(FORMAT parquet, {option})"
    )
    files = sorted(folder.rglob("*.parquet"))
    assert len(files) > 1
    if option.startswith("PARTITION"):
        assert "episode_index" not in pq.read_schema(files[0]).names
    dataset, said = read_warned(folder)
    assert len(said) == 1 and f"{len(files)} Parquet files read as one table" in said[0]
    expected = rows_of_episodes(collected(rows=rows), source, kept)
    got = flat(dataset)
    for name in STEPS:
        assert np.array_equal(got[name], expected[name]), name


def test_the_folders_of_expcli_lerobot_and_minari_stay_theirs(tmp_path: Path) -> None:
    from expcli import save

    dataset = collected(rows=12, envs=1)
    shards = write_dataset(dataset, tmp_path / "shards", shard_format="parquet")
    assert source_format(shards) == SHARDED_FOLDER
    assert source_format(save(dataset, tmp_path / "lerobot", layout="lerobot")) == "lerobot"
    minari = save(dataset, tmp_path / "minari-v0", "parquet", layout="minari")
    assert source_format(minari) == "minari"
    for folder in (shards, minari):
        assert any(folder.rglob("*.parquet"))
    # a Minari mark, even broken, is Minari's to refuse: never read as Parquet files
    broken = tmp_path / "broken"
    (broken / "data").mkdir(parents=True)
    pq.write_table(arrow(steps([3])), broken / "data" / "x.parquet")
    (broken / "data" / "metadata.json").write_text("{}")
    assert source_format(broken) == "minari"
    # one file of expcli's own in a folder: read as that file, its footer kept, no warning
    alone = tmp_path / "alone"
    alone.mkdir()
    write_dataset(dataset, alone / "run.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = read_dataset(alone)
    assert again.metadata.get("env_id") == "Test-v0"
    for name, tensor in dataset.tensors.items():
        assert np.array_equal(again.tensors[name], tensor), name


def test_a_glob_of_expcli_shards_reads_their_frames_by_the_footer(tmp_path: Path) -> None:
    """expcli's own shards, named by a glob (no manifest): frames stored as PNG cells (HF
    ``Image``) are read as the tensors that the first file's footer names."""
    from expcli.formats import sharded

    base = collected(rows=60, envs=2)
    frames = np.random.default_rng(4).integers(0, 255, (60, 2, 40, 40, 3), dtype=np.uint8)
    dataset = Dataset({**base.tensors, "observations/img": frames}, base.state, base.metadata)
    folder = tmp_path / "run"
    sharded.write(dataset, folder, overwrite=False, shard_bytes=300_000, shard_format="parquet")
    assert len(list(folder.glob("shard-*.parquet"))) > 1
    assert pq.read_schema(folder / "shard-000000.parquet").field("observations/img").type == (
        pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    )
    got, said = read_warned(folder / "shard-*.parquet")
    assert "Parquet files read as one table" in said[0]
    for name, tensor in dataset.tensors.items():
        assert np.array_equal(np.asarray(got.tensors[name]), tensor), name


def test_a_folder_of_splits_without_train_asks_for_a_glob(tmp_path: Path) -> None:
    for split in ("validation", "test"):
        folder = tmp_path / "default" / split  # the HF Parquet converter's layout
        folder.mkdir(parents=True)
        pq.write_table(arrow(steps([3])), folder / "0000.parquet")
    with pytest.raises(ConfigError, match="the splits 'test', 'validation' and no 'train'") as e:
        read_dataset(tmp_path)
    pattern = f"{tmp_path}/default/test/**/*.parquet"
    assert e.value.message.endswith(f"e.g. '{pattern}'")
    assert len(read_warned(Path(pattern))[0]) == 3  # the glob named reads that split
    (tmp_path / "default" / "train").mkdir()
    pq.write_table(arrow(steps([5], seed=2)), tmp_path / "default" / "train" / "0000.parquet")
    dataset, said = read_warned(tmp_path)
    assert "split 'train' ('test', 'validation': 2 files left out)" in said[0]
    assert_rows(dataset, steps([5], seed=2))


def open_below(folder: Path) -> int:
    """This process's open file descriptors on files below ``folder``."""
    found = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            found += os.readlink(f"/proc/self/fd/{fd}").startswith(f"{folder}/")
        except OSError:
            continue  # closed meanwhile (the listing's own)
    return found


def test_open_files_stay_few_whatever_the_files(tmp_path: Path) -> None:
    from expcli.formats import open_lazy
    from expcli.formats._parquet_set import OPEN_FILES

    rows = steps([5] * 60)
    for part, at in enumerate(range(0, 300, 6)):
        pq.write_table(arrow(rows, at, at + 6), tmp_path / f"{part}.parquet", row_group_size=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset, close = open_lazy(tmp_path)
    try:
        most = 0
        for first in range(0, 300, 7):
            np.asarray(dataset.tensors["observations"][first : first + 7])
            most = max(most, open_below(tmp_path))
        assert 0 < most <= OPEN_FILES
        whole = {n: np.asarray(t) for n, t in dataset.tensors.items()}
        assert_rows(Dataset(whole, dataset.state, dataset.metadata), rows)
    finally:
        close()
    assert open_below(tmp_path) == 0


@settings(max_examples=20, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 9), min_size=2, max_size=12),
    parts=st.integers(1, 14),
    seed=st.integers(0, 2**16),
    group=st.integers(1, 8),
    episodes=st.booleans(),
)
def test_any_cut_into_files_and_row_groups_reads_back_the_rows(
    tmp_path_factory: pytest.TempPathFactory,
    lengths: list[int],
    parts: int,
    seed: int,
    group: int,
    episodes: bool,
) -> None:
    """Rows cut anywhere into files (named ``shard-N``, unpadded: ``shard-10`` after
    ``shard-9``) of row groups of any size, with an episode column or only the flags (then
    the files' order is the rows'), read back as they were."""
    folder = tmp_path_factory.mktemp("cut")
    rows = steps(lengths, seed=seed)
    if not episodes:
        del rows["episode_index"], rows["frame_index"]
    count = len(rows["actions"])
    inner = np.random.default_rng(seed).permutation(np.arange(1, count))[: parts - 1]
    edges = [0, *sorted(int(e) for e in inner), count]
    for part, (first, stop) in enumerate(zip(edges, edges[1:], strict=False)):
        pq.write_table(
            arrow(rows, first, stop), folder / f"shard-{part}.parquet", row_group_size=group
        )
    pattern = folder / "shard-*.parquet"
    dataset, _ = read_warned(pattern if len(edges) > 2 else folder)
    assert_rows(dataset, rows)
