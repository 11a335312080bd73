"""The LeRobot v3.0 layout: expcli -> LeRobot -> expcli bit for bit, and folders LeRobot wrote.

``tests/data/lerobot_made`` was written by LeRobot 0.4.4's own ``LeRobotDataset.create``,
``add_frame`` and ``save_episode`` (``tests/lerobot_env/lerobot_side.py create``); the
frames it was given are in ``tests/data/lerobot_made.npz``. That LeRobot loads what expcli
writes is checked in LeRobot's own environment (``tests/lerobot_env``).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from expcli.cli import app
from expcli.errors import FormatError, SchemaError
from expcli.formats import Dataset
from expcli.formats.layouts import SEAMS_KEY, write_layout
from expcli.formats.layouts._episodes import column_rows
from expcli.formats.registry import open_lazy, read_dataset, source_format
from expcli.spec import CircularState
from tests.formats.layouts.sample import EPISODES, make_dataset

DATA = Path(__file__).parents[2] / "data"
MADE = DATA / "lerobot_made"


def _same(a: Any, b: Any) -> bool:
    """Equal dtype, shape and bytes (NaN payloads and -0.0 included)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _round_trip(dataset: Dataset, tmp_path: Path) -> Dataset:
    target = tmp_path / "lr"
    write_layout(dataset, target, "lerobot", overwrite=True)
    return read_dataset(target)


def test_a_wrapped_dataset_comes_back_bit_for_bit(dataset: Dataset, tmp_path: Path) -> None:
    back = _round_trip(dataset, tmp_path)
    assert back.tensors.keys() == dataset.tensors.keys()
    for name, array in dataset.tensors.items():
        assert _same(back.tensors[name], array), name
    assert back.state == dataset.state
    assert back.metadata["layout"] == "lerobot"
    assert {k: back.metadata[k] for k in ("env_id", "seed")} == {"env_id": "Toy-v0", "seed": 3}


def test_the_folder_is_lerobots_v3_tree_one_row_group_per_episode(
    dataset: Dataset, tmp_path: Path
) -> None:
    target = tmp_path / "lr"
    write_layout(dataset, target, "lerobot", overwrite=False)
    info = json.loads((target / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["video_path"] is None
    assert info["total_frames"] == 12 and info["total_episodes"] == 6 and info["total_tasks"] == 1
    features = info["features"]
    assert features["observation.state"] == {"dtype": "float32", "shape": [3], "names": None}
    assert features["next.reward"]["shape"] == [1] and features["next.done"]["dtype"] == "bool"
    for name in ("next.observation.state", "next.terminated", "next.truncated", "infos.lives"):
        assert name in features
    data = pq.ParquetFile(target / "data/chunk-000/file-000.parquet")
    assert data.schema_arrow.names == list(features)  # every column declared, in order
    assert data.schema_arrow.field("observation.state").type == pa.list_(pa.float32(), 3)
    table = data.read()
    assert table.column("index").to_pylist() == list(range(12))
    episodes = pq.read_table(target / "meta/episodes/chunk-000/file-000.parquet").to_pydict()
    lengths = [len(e) for column in EPISODES for e in column]
    assert episodes["length"] == lengths and data.num_row_groups == len(lengths)
    assert [data.metadata.row_group(i).num_rows for i in range(len(lengths))] == lengths
    assert episodes["dataset_to_index"] == np.cumsum(lengths).tolist()
    assert episodes["expcli/first_row"] == [e[0] for column in EPISODES for e in column]
    assert episodes["tasks"] == [["Toy-v0"]] * len(lengths)
    frames = table.column("frame_index").to_pylist()
    assert frames == [k for n in lengths for k in range(n)]
    done = np.asarray(table.column("next.done"))
    ends = np.cumsum(lengths) - 1
    assert done[ends].tolist() == [True, True, False, True, True, False]  # open ends stay open
    stats = json.loads((target / "meta/stats.json").read_text())
    observations = np.concatenate(
        [dataset.tensors["observations"][r, j] for j, r in enumerate(column_rows(dataset))]
    )
    assert np.allclose(stats["observation.state"]["mean"], observations.mean(axis=0))
    assert stats["observation.state"]["count"] == [12]


def test_tasks_are_a_pandas_index_named_task(dataset: Dataset, tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    write_layout(dataset, tmp_path / "lr", "lerobot", overwrite=False)
    tasks = pd.read_parquet(tmp_path / "lr/meta/tasks.parquet")
    assert tasks.index.name == "task" and tasks.iloc[0].name == "Toy-v0"
    assert tasks["task_index"].tolist() == [0]


def test_images_are_png_and_structured_and_shaped_features_come_back(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    T, N = 5, 2
    tensors = {
        "observations/pixels": rng.integers(0, 256, (T, N, 6, 4, 3), dtype=np.uint8),
        "observations/gray": rng.integers(0, 256, (T, N, 5, 5), dtype=np.uint8),
        "observations/pos": rng.normal(size=(T, N, 2, 3)).astype(np.float16),
        "next_observations/pixels": rng.integers(0, 256, (T, N, 6, 4, 3), dtype=np.uint8),
        "actions": rng.integers(-3, 3, (T, N, 1)).astype(np.int8),
        "rewards": np.array([np.nan, -0.0, np.inf, 1e-45, -1], np.float32)[:, None, None].repeat(
            N, 1
        ),
        "terminated": np.eye(T, N, dtype=bool)[..., None],
    }
    dataset = Dataset(tensors, CircularState(3, 0, False), {"env_id": "Pix-v0"})
    target = tmp_path / "lr"
    write_layout(dataset, target, "lerobot", overwrite=False)
    features = json.loads((target / "meta/info.json").read_text())["features"]
    assert features["observation.images.pixels"]["dtype"] == "image"
    assert features["observation.images.gray"]["shape"] == [5, 5, 1]
    assert features["observation.pos"] == {"dtype": "float16", "shape": [6], "names": None}
    column = pq.read_table(target / "data", columns=["observation.images.pixels"]).column(0)
    assert column[0]["bytes"].as_py().startswith(b"\x89PNG")
    back = read_dataset(target)
    for name, array in tensors.items():  # rows never written are zeros in both
        valid = np.zeros((T, N), bool)
        valid[:3] = True
        assert _same(back.tensors[name][valid], array[valid]), name
    assert back.state == dataset.state


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    size=st.integers(1, 6),
    envs=st.integers(1, 3),
    start=st.integers(0, 20),
    filled=st.booleans(),
    dtype=st.sampled_from(["float32", "float64", "float16", "int64", "uint8", "bool"]),
    seed=st.integers(0, 2**16),
)
def test_any_circular_state_and_dtype_round_trips(
    size: int, envs: int, start: int, filled: bool, dtype: str, seed: int, tmp_path_factory: Any
) -> None:
    rng = np.random.default_rng(seed)
    state = CircularState(start % size, (start // size) % envs, filled)
    bits = rng.integers(0, 256, (size, envs, 3 * np.dtype(dtype).itemsize), dtype=np.uint8)
    values = bits.view(dtype) if dtype != "bool" else bits[..., :3] > 127
    flags = rng.random((size, envs, 1)) < 0.3
    tensors = {
        "observations": values,
        "terminated": flags,
        "truncated": ~flags & (bits[..., :1] > 200),
    }
    valid = np.zeros((size, envs), bool)
    for j, rows in enumerate(column_rows(Dataset(tensors, state, {}))):
        valid[rows, j] = True
    tensors = {
        k: np.where(valid.reshape(*valid.shape, *[1] * (v.ndim - 2)), v, 0).astype(v.dtype)
        for k, v in tensors.items()
    }
    dataset = Dataset(tensors, state, {})
    back = _round_trip(dataset, tmp_path_factory.mktemp("rt"))
    for name, array in tensors.items():
        assert _same(back.tensors[name], array), name
    assert back.state == state


def test_a_folder_lerobot_wrote_reads_as_one_env_column_with_what_is_unknown_stated(
    caplog: pytest.LogCaptureFixture,
) -> None:
    frames = np.load(DATA / "lerobot_made.npz")
    with caplog.at_level(logging.WARNING):
        dataset = read_dataset(MADE)
    assert source_format(MADE) == "lerobot"
    assert _same(dataset.tensors["observations/state"][:, 0], frames["observation.state"])
    assert _same(dataset.tensors["observations/image"][:, 0], frames["observation.image"])
    assert _same(dataset.tensors["actions"][:, 0], frames["action"])
    assert _same(dataset.tensors["rewards"][:, 0], frames["next.reward"])
    # episodes of 4, 3 and 5 frames; the second one's next.done is false: a seam
    ends = [3, 6, 11]
    assert np.flatnonzero(dataset.tensors["truncated"][:, 0, 0]).tolist() == ends
    assert not dataset.tensors["terminated"].any()
    assert dataset.metadata[SEAMS_KEY] == [6]
    nexts = dataset.tensors["next_observations/state"][:, 0]
    inside = np.setdiff1d(np.arange(12), ends)
    assert _same(nexts[inside], frames["observation.state"][inside + 1])
    assert _same(nexts[ends], frames["observation.state"][ends])  # unknown: repeated
    unknown = dataset.metadata["lerobot"]["unknown"]
    assert len(unknown) == 2 and "next observation" in unknown[0] and "next.done" in unknown[1]
    assert dataset.metadata["lerobot"]["fps"] == 10
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "\n" not in line and "next observation" in line and "termination" in line


def test_lerobot_to_expcli_to_lerobot_keeps_the_fps_and_values(tmp_path: Path) -> None:
    first = read_dataset(MADE)
    write_layout(first, tmp_path / "again", "lerobot", overwrite=False)
    info = json.loads((tmp_path / "again/meta/info.json").read_text())
    assert info["fps"] == 10 and info["total_frames"] == 12
    second = read_dataset(tmp_path / "again")
    for name, array in first.tensors.items():
        assert _same(second.tensors[name], array), name


def test_the_commands_read_and_write_the_layout(tmp_path: Path) -> None:
    source = tmp_path / "toy.npz"
    runner = CliRunner()
    from expcli.formats.registry import write_dataset

    write_dataset(make_dataset(), source)
    converted = runner.invoke(
        app, ["convert", str(source), str(tmp_path / "lr"), "--layout", "lerobot"]
    )
    assert converted.exit_code == 0, converted.output
    inspected = runner.invoke(app, ["inspect", str(tmp_path / "lr"), "--json"])
    assert inspected.exit_code == 0 and json.loads(inspected.stdout)["transitions"] == 12
    sampled = runner.invoke(app, ["sample", str(tmp_path / "lr"), "--batch-size", "3"])
    assert sampled.exit_code == 0, sampled.output
    back = runner.invoke(app, ["convert", str(tmp_path / "lr"), str(tmp_path / "back.npz")])
    assert back.exit_code == 0, back.output
    again = read_dataset(tmp_path / "back.npz")
    for name, array in make_dataset().tensors.items():
        assert _same(again.tensors[name], array), name


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "made"
    shutil.copytree(MADE, target)
    return target


def _edit_info(root: Path, change: Any) -> None:
    path = root / "meta/info.json"
    info = json.loads(path.read_text())
    change(info)
    path.write_text(json.dumps(info))


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda i: i.update(codebase_version="v2.1"), "codebase_version"),
        (
            lambda i: i["features"].update(
                {"observation.state": {"dtype": "video", "shape": [3, 4, 4]}}
            ),
            "video",
        ),
        (lambda i: i["features"]["action"].update(shape=[-1]), "malformed feature"),
        (lambda i: i["features"]["action"].update(dtype="float64"), "expected float64"),
        (
            lambda i: i["features"].update({"missing": {"dtype": "int64", "shape": [1]}}),
            "cannot read",
        ),
        (lambda i: i.update(features=[1, 2]), "features"),
    ],
)
def test_a_hostile_info_json_is_one_format_error(tmp_path: Path, change: Any, says: str) -> None:
    root = _copy(tmp_path)
    _edit_info(root, change)
    with pytest.raises(FormatError) as info:
        read_dataset(root)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_damaged_frames_and_images_are_format_errors(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    data = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(data)
    images = table.column("observation.image").combine_chunks()
    broken = pa.StructArray.from_arrays(
        [pa.array([b"not a png"] * len(table), pa.binary()), images.field("path")],
        ["bytes", "path"],
    )
    pq.write_table(table.set_column(1, "observation.image", broken), data)
    with pytest.raises(FormatError, match="not a readable image"):
        read_dataset(root)
    data.write_bytes(b"PAR1 and nothing else")
    with pytest.raises(FormatError, match="not a Parquet file"):
        read_dataset(root)
    data.unlink()
    with pytest.raises(FormatError, match="no data"):
        read_dataset(root)


def test_two_tensors_as_one_feature_are_refused(tmp_path: Path) -> None:
    tensors = dict(make_dataset().tensors)
    tensors["infos.lives"] = tensors["infos/lives"]
    dataset = Dataset(tensors, CircularState(2, 1, True), {})
    with pytest.raises(SchemaError, match="infos.lives"):
        write_layout(dataset, tmp_path / "lr", "lerobot", overwrite=False)
    assert not (tmp_path / "lr").exists()


def test_open_lazy_gives_the_same_dataset(dataset: Dataset, tmp_path: Path) -> None:
    write_layout(dataset, tmp_path / "lr", "lerobot", overwrite=False)
    opened, close = open_lazy(tmp_path / "lr")
    try:
        assert _same(opened.tensors["observations"], dataset.tensors["observations"])
    finally:
        close()


def test_string_features_are_left_out_and_said(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _edit_info(
        root, lambda i: i["features"].update({"language": {"dtype": "string", "shape": [1]}})
    )
    dataset = read_dataset(root)
    assert dataset.metadata["lerobot"]["skipped"] == ["language"]
    assert "language" not in dataset.tensors and "string features language" in str(
        dataset.metadata["lerobot"]["unknown"]
    )


@st.composite
def episode_runs(draw: st.DrawFn) -> tuple[int, int, list[tuple[int, int, int]]]:
    """A (T, N) grid and non-overlapping episodes in it: (env, first row, length) each,
    wrapping past row T - 1 as a circular memory's do."""
    size, envs = draw(st.integers(1, 12)), draw(st.integers(1, 4))
    runs = []
    for column in range(envs):
        row = draw(st.integers(0, size - 1))
        room = size
        while room and draw(st.booleans()):
            length = draw(st.integers(1, room))
            runs.append((column, row, length))
            row, room = (row + length + draw(st.integers(0, 2))) % size, room - length
            room = min(room, size - 1) if room else 0
    return size, envs, runs


@given(grid=episode_runs(), cuts=st.lists(st.integers(0, 12), min_size=2, max_size=2))
def test_the_cells_of_episode_runs_equal_the_grid_filled_frame_by_frame(
    grid: tuple[int, int, list[tuple[int, int, int]]], cuts: list[int]
) -> None:
    """What ``Cells`` works out a row range at a time is the dense grid of the episodes."""
    from expcli.formats.layouts.lerobot._read import Cells

    size, envs, runs = grid
    dense = np.full((size, envs), -1, np.int64)
    starts, frame = [], 0
    for column, row, length in runs:
        rows = (row + np.arange(length)) % size
        if (dense[rows, column] >= 0).any():
            return  # the drawn runs overlap: not a layout expcli writes
        dense[rows, column] = np.arange(frame, frame + length)
        starts.append(frame)
        frame += length
    columns = (
        [np.asarray(v, np.int64) for v in zip(*runs, strict=True)]
        if runs
        else [np.zeros(0, np.int64)] * 3
    )
    env, first, lengths = columns
    begin = np.asarray(starts, np.int64)
    cells = Cells.of_runs(Path("x"), size, envs, begin, begin + lengths, env, first)
    low, high = sorted(min(c, size) for c in cuts)
    assert cells.shape == (size, envs)
    assert np.array_equal(cells[low:high], dense[low:high])
    assert np.array_equal(cells[0:size], dense)


def test_episodes_sharing_a_cell_are_refused() -> None:
    from expcli.formats.layouts.lerobot._read import Cells

    starts, stops = np.array([0, 3]), np.array([3, 5])
    with pytest.raises(FormatError, match="two frames of the episodes fall in one"):
        Cells.of_runs(Path("x"), 6, 1, starts, stops, np.array([0, 0]), np.array([0, 2]))


def test_a_folder_of_many_data_files_reads_back_with_one_file_open_at_a_time(
    dataset: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Footers are parsed again for a file read again: only row counts stay held; a
    slice's frames are placed a few rows at a time."""
    from expcli.formats.layouts.lerobot import _read as _lerobot_read
    from expcli.formats.layouts.lerobot import layout as lerobot_layout

    monkeypatch.setattr(lerobot_layout, "DATA_FILE_MB", 0)  # a new data file per episode
    monkeypatch.setattr(_lerobot_read, "_FOOTER_BYTES", 0)  # one file open at a time
    monkeypatch.setattr(_lerobot_read, "_BOOK_CELLS", 5)  # a slice placed a few rows at a time
    target = tmp_path / "lr"
    write_layout(dataset, target, "lerobot", overwrite=True)
    files = sorted((target / "data").glob("*/*.parquet"))
    assert len(files) > 2
    lazy, close = open_lazy(target)
    try:
        for name, array in dataset.tensors.items():  # every row, files visited out of order
            rows = np.arange(len(array))[::-1]
            assert _same(lazy.tensors[name].take(rows), array[rows]), name
            assert _same(lazy.tensors[name][1:], array[1:]), name
    finally:
        close()
    lazy, close = open_lazy(target)  # no data file is open until a row is read
    try:
        longest = max(files, key=lambda f: pq.ParquetFile(f).metadata.num_rows)
        table = pq.read_table(longest)
        assert table.num_rows > 1
        pq.write_table(table, longest, row_group_size=1)
        rewards = lazy.tensors["rewards"]
        with pytest.raises(FormatError, match="row groups; it held 1 when the folder was opened"):
            rewards.take(np.arange(len(rewards)))
    finally:
        close()


def test_a_data_file_holds_at_most_file_episodes_row_groups(
    dataset: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader parses a file's footer whole: many short episodes go in several files, and
    each episode's row points at the file it is in."""
    from expcli.formats.layouts.lerobot import layout as lerobot_layout

    monkeypatch.setattr(lerobot_layout, "FILE_EPISODES", 2)
    target = tmp_path / "lr"
    write_layout(dataset, target, "lerobot", overwrite=True)
    files = sorted((target / "data").glob("*/*.parquet"))
    groups = [pq.ParquetFile(f).metadata.num_row_groups for f in files]
    episodes = pq.read_table(next((target / "meta" / "episodes").glob("*/*.parquet")))
    assert max(groups) == 2 and sum(groups) == episodes.num_rows > 4
    where = episodes.column("data/file_index").to_pylist()
    assert where == sorted(where) and [where.count(f) for f in sorted(set(where))] == groups
    back = read_dataset(target)
    for name, array in dataset.tensors.items():
        assert _same(back.tensors[name], array), name
