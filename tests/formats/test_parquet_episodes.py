"""Parquet rows episode by episode: contiguous episodes for pyarrow, bit for bit for expcli.

Files and folders of shards (``expcli-parquet/2``, ``"order": "episodes"``) hold each
episode's transitions one after another, ``frame_index`` 0, 1, 2... (in a shard, going on
from the shard before), ``timestamp`` ``frame_index / fps``; the rows never written last.
expcli reads them back with the circular state intact. A source read lazily waits in a
window of the latest transitions where its episodes end, else in a spool that spills to
temporaries beside the target (removed however the write ends); either writes the file
a source in memory writes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import expcli
from expcli.formats import Dataset, read_dataset, sharded, write_dataset
from expcli.formats.rows import WritePlan
from expcli.spec import CircularState
from tests.formats.test_roundtrip import assert_same_dataset
from tests.signals import sigterm_once

pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow cannot be installed on this Python")

from expcli.formats import _parquet_spool, parquet_format  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def assert_episodes_contiguous(tables: list[Any], fps: float | None = None) -> None:
    """Each file: every episode one run, in the order they start, frames one up a row.

    ``tables``: a folder's shards in order (one file: one table); an episode's frames go
    on from the shard before where it began there. Rows never written (-1) come last.
    ``fps``: what ``timestamp`` counts in (None: what the footer says).
    """
    going: dict[int, int] = {}  # an episode's next frame, across shards
    for table in tables:
        cols = table.to_pydict()
        episodes, frames = cols["episode_index"], cols["frame_index"]
        written = [e for e in episodes if e >= 0]
        assert episodes[: len(written)] == written, "rows never written come last"
        runs = [e for k, e in enumerate(written) if k == 0 or e != written[k - 1]]
        assert runs == sorted(set(runs)), "an episode in two places, or out of start order"
        for k, episode in enumerate(written):
            assert frames[k] == going.get(episode, 0), (k, episode)
            going[episode] = frames[k] + 1
        assert all(f == -1 for f in frames[len(written) :])
        said = json.loads(table.schema.metadata[b"expcli.parquet"])["fps"]
        assert fps is None or said == fps
        expected = np.where(np.array(frames) >= 0, np.array(frames) / said, -1.0)
        assert np.array_equal(np.array(cols["timestamp"], np.float32), expected.astype(np.float32))


@st.composite
def runs(draw: st.DrawFn) -> Dataset:
    """Any flags, a wrapped or partly written memory, frames and their next observations."""
    size, envs = draw(st.integers(0, 9)), draw(st.integers(0, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    chance = draw(st.sampled_from([0.0, 0.2, 0.6, 1.0]))
    frames = rng.integers(0, 255, (size, envs, 2, 48, 48), dtype=np.uint8)  # binary column
    following = np.roll(frames, -1, axis=0)
    following[rng.random((size, envs)) < 0.2] = 7  # differs where an episode ends
    tensors = {
        "observations": rng.standard_normal((size, envs, 3)).astype(np.float32),
        "frames": frames,
        "actions": rng.integers(0, 4, (size, envs)),
        "terminated": rng.random((size, envs, 1)) < chance,
        "truncated": rng.random((size, envs, 1)) < chance / 2,
    }
    if draw(st.booleans()):
        tensors["observations"], tensors["next_observations"] = frames, following
        del tensors["frames"]
    state = CircularState(
        draw(st.integers(0, max(size - 1, 0))), draw(st.integers(0, max(envs - 1, 0))),
        draw(st.booleans()),
    )  # fmt: skip
    if not state.filled and size * envs and draw(st.booleans()):  # never written: zeros, left out
        flat = size * envs
        for array in tensors.values():
            array.reshape(flat, -1)[state.valid_length(size, envs) :] = 0
    return Dataset(tensors, state, {"env_id": "X-v0", "render_fps": draw(st.sampled_from([30, 1]))})


@settings(max_examples=25, deadline=None)
@given(dataset=runs(), frames=st.sampled_from(["full", "once"]), shard_bytes=st.integers(1, 9000))
def test_files_and_folders_round_trip_bit_for_bit_episode_by_episode(
    dataset: Dataset, frames: str, shard_bytes: int
) -> None:
    fps = float(dataset.metadata["render_fps"])
    with tempfile.TemporaryDirectory() as tmp:
        path = write_dataset(dataset, Path(tmp) / "run.parquet", frames=frames)
        assert_episodes_contiguous([pq.read_table(path)], fps)
        back = read_dataset(path)
        assert_same_dataset(dataset, back)
        assert back.state == dataset.state
        folder = Path(tmp) / "d"
        sharded.write(
            dataset, folder, overwrite=False, shard_bytes=shard_bytes, shard_format="parquet"
        )
        shards = sorted(folder.glob("shard-*.parquet"))
        assert_episodes_contiguous([pq.read_table(s) for s in shards], fps)
        assert_same_dataset(dataset, read_dataset(folder))
        assert set(os.listdir(tmp)) == {"run.parquet", "d"}


def _footer(table: Any) -> dict[bytes, Any]:
    """The file's footer, but for the time it was written."""
    footer = dict(table.schema.metadata)
    header = json.loads(footer.pop(b"expcli"))
    header.pop("created")
    return {**footer, b"expcli": header}


def _lazy(dataset: Dataset) -> Dataset:
    """The dataset with every tensor read a slice of rows at a time, as a file is."""
    from expcli.formats.lazy import LazyRows

    tensors = {
        name: LazyRows(array.shape, array.dtype, lambda a, b, array=array: array[a:b])
        for name, array in dataset.tensors.items()
    }
    return Dataset(tensors, dataset.state, dataset.metadata)  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(dataset=runs(), group_bytes=st.integers(1, 40_000), spool=st.booleans())
def test_a_lazy_source_writes_the_file_a_source_in_memory_writes(
    dataset: Dataset, group_bytes: int, spool: bool
) -> None:
    """Through the window (wrapping, small groups) or the spool (all of it in files)."""
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        patch.setattr(parquet_format, "GROUP_BYTES", group_bytes)
        if spool:  # no window fits: every spool segment a file
            patch.setattr(_parquet_spool, "RAM_BYTES", 0)
        expected = Path(tmp) / "memory.parquet"
        parquet_format.write(dataset, WritePlan(expected, "parquet"))
        got = Path(tmp) / "lazy.parquet"
        parquet_format.write(_lazy(dataset), WritePlan(got, "parquet"))
        lazy, memory = pq.read_table(got), pq.read_table(expected)
        assert _footer(lazy) == _footer(memory)
        for name in memory.column_names:
            assert lazy[name].equals(memory[name]), name
        assert sorted(os.listdir(tmp)) == ["lazy.parquet", "memory.parquet"]


def test_episodes_that_end_wait_in_a_window_not_in_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[Path]
) -> None:
    """Eight times the memory budget, short episodes: no spool file; one long one: files."""
    rng = np.random.default_rng(3)
    size, envs = 2000, 4
    done = rng.random((size, envs, 1)) < 0.1
    dataset = Dataset(
        {
            "observations": rng.standard_normal((size, envs, 256)).astype(np.float32),
            "terminated": done,
        },
        CircularState(size // 2, 2, True),
        {"env_id": "X-v0"},
    )
    monkeypatch.setattr(parquet_format, "GROUP_BYTES", 64 << 10)
    for name, flags in (("ending", done), ("long", np.zeros_like(done))):
        source = Dataset({**dataset.tensors, "terminated": flags}, dataset.state, dataset.metadata)
        out = tmp_path / f"{name}.parquet"
        parquet_format.write(_lazy(source), WritePlan(out, "parquet"))
        assert_episodes_contiguous([pq.read_table(out)])
        assert_same_dataset(source, read_dataset(out))
        assert (len(made) > 0) == (name == "long"), made


def _long_run(size: int = 600, envs: int = 4) -> Dataset:
    """Episodes of every length: env 0's one long episode holds back the others'."""
    rng = np.random.default_rng(5)
    done = rng.random((size, envs, 1)) < 0.05
    done[:, 0] = False
    return Dataset(
        {
            "observations": rng.standard_normal((size, envs, 64)).astype(np.float32),
            "frames": rng.integers(0, 255, (size, envs, 60, 60), dtype=np.uint8),
            "terminated": done,
            "truncated": np.zeros((size, envs, 1), bool),
        },
        CircularState(size // 3, 1, True),
        {"env_id": "X-v0"},
    )


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The spool's temporary files, as they are made (a spool of 1 MiB in memory)."""
    monkeypatch.setattr(_parquet_spool, "RAM_BYTES", 1 << 20)
    monkeypatch.setattr(_parquet_spool, "SEGMENT_BYTES", 256 << 10)
    files: list[Path] = []
    real = _parquet_spool.create_temp

    def counting(target: Path, **kwargs: Any) -> Path:
        files.append(real(target, **kwargs))
        return files[-1]

    monkeypatch.setattr(_parquet_spool, "create_temp", counting)
    return files


def test_a_lazy_source_spills_its_episodes_under_way_and_leaves_no_temporaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[Path]
) -> None:
    dataset = _long_run()
    source = write_dataset(dataset, tmp_path / "run.npz")
    monkeypatch.setattr(parquet_format, "GROUP_BYTES", 512 << 10)  # groups handed on as due
    out = tmp_path / "out" / "run.parquet"
    out.parent.mkdir()
    expcli.convert(source, out)
    assert len(made) > 3 and all(p.parent == out.parent for p in made)  # spilled beside it
    assert os.listdir(out.parent) == ["run.parquet"]
    assert_episodes_contiguous([pq.read_table(out)])
    assert_same_dataset(dataset, read_dataset(out))
    table = pq.read_table(out, columns=["episode_index"])
    assert table.num_rows == 2400 and pq.ParquetFile(out).metadata.num_row_groups > 4


def test_a_failing_source_leaves_no_spool_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, made: list[Path]
) -> None:
    from expcli.formats import lazy

    dataset = _long_run()
    monkeypatch.setattr(parquet_format, "GROUP_BYTES", 256 << 10)
    reads = {"left": 6}  # the flags are read first, then these a chunk at a time

    def failing(first: int, stop: int) -> np.ndarray:
        reads["left"] -= 1
        if reads["left"] < 0:
            raise OSError("the source went away")
        return dataset.tensors["frames"][first:stop]

    frames = lazy.LazyRows(dataset.tensors["frames"].shape, np.dtype(np.uint8), failing)
    broken = Dataset({**dataset.tensors, "frames": frames}, dataset.state, dataset.metadata)  # type: ignore[dict-item]
    with pytest.raises(OSError, match="went away"):
        parquet_format.write(broken, WritePlan(tmp_path / "run.parquet", "parquet"))
    assert made and os.listdir(tmp_path) == []


def test_a_shard_carries_an_episode_on_into_the_next(tmp_path: Path) -> None:
    dataset = _long_run(size=90, envs=3)
    folder = tmp_path / "d"
    sharded.write(dataset, folder, overwrite=False, shard_bytes=150_000, shard_format="parquet")
    shards = sorted(folder.glob("shard-*.parquet"))
    tables = [pq.read_table(s) for s in shards]
    assert len(tables) > 2
    assert_episodes_contiguous(tables)
    second = tables[1].to_pydict()
    assert second["frame_index"][0] > 0  # env 0's episode goes on, first in the shard
    assert second["episode_index"][0] == tables[0].to_pydict()["episode_index"][0]
    layout = json.loads(pq.ParquetFile(shards[1]).metadata.metadata[b"expcli.parquet"])
    assert layout["order"] == "episodes" and layout["first_row"] > 0
    assert_same_dataset(dataset, read_dataset(folder))


def test_a_collect_to_a_file_and_to_a_folder_writes_episodes_whole(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    run = [sys.executable, "-m", "expcli", "collect", "CartPole-v1", "--mode", "dummy"]
    common = ["--envs", "3", "--steps", "300", "--seed", "1", "-q"]
    one = tmp_path / "run.parquet"
    done = subprocess.run([*run, *common, "-o", str(one)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert_episodes_contiguous([pq.read_table(one)])  # CartPole's 50 where recorded, else 1
    folder = tmp_path / "d"
    args = [*run, *common, "-o", str(folder), "--shard-format", "parquet", "--shard-size", "40"]
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    shards = sorted(folder.glob("shard-*.parquet"))
    assert len(shards) > 2
    assert_episodes_contiguous([pq.read_table(s) for s in shards])
    assert any(pq.read_table(s)["frame_index"][0].as_py() > 0 for s in shards[1:])
    whole, shards_read = read_dataset(one), read_dataset(folder)
    assert whole.state == shards_read.state and sorted(whole.tensors) == sorted(shards_read.tensors)
    for name, tensor in whole.tensors.items():
        assert np.asarray(tensor).tobytes() == np.asarray(shards_read.tensors[name]).tobytes()


def test_sigterm_while_spooling_removes_the_spool_and_the_temporary(tmp_path: Path) -> None:
    source = write_dataset(_long_run(size=3000, envs=4), tmp_path / "run.npz")
    out = tmp_path / "out"
    out.mkdir()
    script = (
        "import sys, runpy; from expcli.formats import _parquet_spool as s; "
        "s.RAM_BYTES = 1 << 20; s.SEGMENT_BYTES = 1 << 18; "
        "sys.argv = ['expcli', 'convert', sys.argv[1], sys.argv[2], '--compression', 'gzip']; "
        "runpy.run_module('expcli', run_name='__main__')"
    )
    argv = ["-c", script, str(source), str(out / "t.parquet")]
    returncode, stderr = sigterm_once(argv, out, lambda name: ".spool.expcli-" in name)
    assert "Traceback" not in stderr
    assert returncode in (130, 0, -signal.SIGTERM), stderr
    left = sorted(os.listdir(out))
    assert all(not name.startswith(".") for name in left), f"temporary left: {left}"


def test_row_and_env_columns_that_place_a_cell_twice_are_refused(tmp_path: Path) -> None:
    """The placement comes from the file's ``row`` and ``env``: a cell twice is a damaged file."""
    import pyarrow as pa

    dataset = _long_run(size=30, envs=2)
    path = write_dataset(dataset, tmp_path / "run.parquet")
    table = pq.read_table(path)
    rows = table["row"].to_numpy().copy()
    rows[5] = rows[6]  # two file rows at one cell, another cell at none
    table = table.set_column(table.schema.get_field_index("row"), "row", pa.array(rows))
    pq.write_table(table.replace_schema_metadata(table.schema.metadata), path)
    with pytest.raises(expcli.errors.FormatError, match="row and env columns do not hold"):
        read_dataset(path)
