"""LeRobot video features: decoded with PyAV when read, written with ``--to video``.

The folders here are ``tests/data/lerobot_made`` (written by LeRobot itself) with a video
feature added as LeRobot lays one out: the episodes one after another in an MP4 file (the
last one in a second file), ``meta/episodes`` saying where each starts. Their MP4s are
encoded losslessly (``libx264rgb``, ``qp`` 0), so every decoded frame must equal the frame
encoded. ``tests/data/lerobot_video`` was written by LeRobot 0.4.4's own writer
(``use_videos=True``, AV1); its frames are compared with those PyAV decodes from its file
directly. That LeRobot loads expcli's video folders is checked in ``tests/lerobot_env``.
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import shutil
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from expcli import load
from expcli.cli import app
from expcli.errors import FormatError
from expcli.formats import Dataset
from expcli.formats.layouts import write_layout
from expcli.formats.layouts.lerobot import _video as videos
from expcli.formats.registry import open_lazy, read_dataset
from expcli.spec import CircularState

DATA = Path(__file__).parents[2] / "data"
MADE = DATA / "lerobot_made"  # 3 episodes of 4, 3 and 5 frames at 10 fps
LEROBOT_VIDEO = DATA / "lerobot_video"
KEY = "observation.images.cam"
LENGTHS = (4, 3, 5)
H, W = 10, 14


def _encode(path: Path, frames: np.ndarray, fps: int = 10) -> None:
    """Frames ``(n, H, W, 3)`` as a lossless MP4 (``libx264rgb``, ``qp`` 0, key frame each 3)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264rgb", rate=fps, options={"qp": "0", "g": "3"})
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "rgb24"
        stream.time_base = Fraction(1, fps)
        for number, frame in enumerate(frames):
            picture = av.VideoFrame.from_ndarray(frame, format="rgb24")
            picture.pts = number
            out.mux(stream.encode(picture))
        out.mux(stream.encode(None))


def _video_folder(tmp_path: Path, key: str = KEY) -> tuple[Path, np.ndarray]:
    """LeRobot's folder with a video feature: episodes 0 and 1 in file 0, episode 2 in file 1."""
    root = tmp_path / "video"
    shutil.copytree(MADE, root)
    frames = np.random.default_rng(5).integers(0, 256, (sum(LENGTHS), H, W, 3), dtype=np.uint8)
    template = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    _encode(root / template.format(video_key=key, chunk_index=0, file_index=0), frames[:7])
    _encode(root / template.format(video_key=key, chunk_index=0, file_index=1), frames[7:])
    info = json.loads((root / "meta/info.json").read_text())
    info["video_path"] = template
    info["features"][key] = {
        "dtype": "video",
        "shape": [H, W, 3],
        "names": ["height", "width", "channels"],
    }
    (root / "meta/info.json").write_text(json.dumps(info))
    path = root / "meta/episodes/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    columns = {
        "chunk_index": pa.array([0, 0, 0], pa.int64()),
        "file_index": pa.array([0, 0, 1], pa.int64()),
        "from_timestamp": pa.array([0.0, 0.4, 0.0]),
        "to_timestamp": pa.array([0.4, 0.7, 0.5]),
    }
    for name, column in columns.items():
        table = table.append_column(f"videos/{key}/{name}", column)
    pq.write_table(table, path)
    return root, frames


def _decoded(path: Path) -> np.ndarray:
    """Every frame of an MP4 as PyAV decodes it to RGB, in order (the reference)."""
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


def test_a_video_feature_reads_as_the_frames_encoded(tmp_path: Path) -> None:
    root, frames = _video_folder(tmp_path)
    dataset = load(root)
    got = dataset.tensors["observations/images.cam"]
    assert got.dtype == np.uint8 and got.shape == (12, 1, H, W, 3)
    assert np.array_equal(got[:, 0], frames)
    following = dataset.tensors["next_observations/images.cam"][:, 0]
    ends = np.cumsum(LENGTHS) - 1
    assert np.array_equal(following[ends], frames[ends])  # an episode's last: its own
    inner = np.setdiff1d(np.arange(12), ends)
    assert np.array_equal(following[inner], frames[inner + 1])
    unknown = dataset.metadata["lerobot"]["unknown"]
    assert any(KEY in line and "lossy" in line for line in unknown)


def test_open_lazy_reads_any_rows_in_any_order_with_a_few_files_open(tmp_path: Path) -> None:
    root, frames = _video_folder(tmp_path)
    dataset, close = open_lazy(root)
    try:
        tensor = dataset.tensors["observations/images.cam"]
        rng = np.random.default_rng(0)
        for start in [*rng.integers(0, 12, 20), 11, 0, 6, 7, 6]:
            stop = int(start) + int(rng.integers(1, 4))
            assert np.array_equal(tensor[start:stop][:, 0], frames[start:stop]), start
        for start in range(12):  # in order, one row at a time: read forward, never sought
            assert np.array_equal(tensor[start : start + 1][:, 0], frames[start : start + 1])
    finally:
        close()


def test_reading_in_order_decodes_each_frame_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, frames = _video_folder(tmp_path)
    seeks: list[float] = []
    original = videos._Cursor.seek

    def counted(cursor: Any, time: float) -> None:
        seeks.append(time)
        original(cursor, time)

    monkeypatch.setattr(videos._Cursor, "seek", counted)
    monkeypatch.setattr(videos, "_CACHE_BYTES", 0)  # nothing kept: only the decoders' place
    dataset, close = open_lazy(root)
    try:
        tensor = dataset.tensors["observations/images.cam"]
        got = np.concatenate([tensor[start : start + 2] for start in range(0, 12, 2)])
    finally:
        close()
    assert np.array_equal(got[:, 0], frames) and seeks == []


def test_lerobots_own_video_folder_reads_as_pyav_decodes_its_file() -> None:
    dataset = read_dataset(LEROBOT_VIDEO)
    info = json.loads((LEROBOT_VIDEO / "meta/info.json").read_text())
    assert info["features"]["observation.images.cam"]["info"]["video.codec"] == "av1"
    reference = _decoded(LEROBOT_VIDEO / "videos/observation.images.cam/chunk-000/file-000.mp4")
    assert np.array_equal(dataset.tensors["observations/images.cam"][:, 0], reference)
    made = np.load(DATA / "lerobot_video.npz")
    assert np.array_equal(dataset.tensors["observations/state"][:, 0], made["observation.state"])
    error = np.abs(reference.astype(int) - made["observation.images.cam"]).mean()
    assert 0 < error < 10  # lossy AV1 of smooth frames: near, not equal


def test_without_pyav_a_video_feature_is_refused_saying_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = _video_folder(tmp_path)
    real = builtins.__import__

    def no_av(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "av" or name.startswith("av."):
            raise ImportError("No module named 'av'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_av)
    with pytest.raises(FormatError) as info:
        load(root)
    message = str(info.value)
    assert "\n" not in message and "features/observation.images.cam" in message
    assert "pip install 'expcli[video]'" in message


def _break_mp4(root: Path) -> None:
    path = root / "videos" / KEY / "chunk-000" / "file-000.mp4"
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(data[: len(data) // 3]))


def _drop_mp4(root: Path) -> None:
    (root / "videos" / KEY / "chunk-000" / "file-001.mp4").unlink()


def _shift_episode(root: Path) -> None:
    path = root / "meta/episodes/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    column = f"videos/{KEY}/from_timestamp"
    at = table.column_names.index(column)
    table = table.set_column(at, column, pa.array([0.0, 0.45, 0.0]))
    pq.write_table(table, path)


def _resize_feature(root: Path) -> None:
    info = json.loads((root / "meta/info.json").read_text())
    info["features"][KEY]["shape"] = [H, W + 2, 3]
    (root / "meta/info.json").write_text(json.dumps(info))


def _hostile_template(root: Path) -> None:
    info = json.loads((root / "meta/info.json").read_text())
    info["video_path"] = "../{video_key.__class__}.mp4"
    (root / "meta/info.json").write_text(json.dumps(info))


def _drop_column(root: Path) -> None:
    path = root / "meta/episodes/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    pq.write_table(table.drop_columns([f"videos/{KEY}/file_index"]), path)


def _timestamps(values: Any) -> Any:
    def damage(root: Path) -> None:
        path = root / "data/chunk-000/file-000.parquet"
        table = pq.read_table(path)
        at = table.column_names.index("timestamp")
        if values is None:
            table = table.remove_column(at)
        else:
            table = table.set_column(at, "timestamp", pa.array([values] * 12, pa.float32()))
        pq.write_table(table, path)

    return damage


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (_break_mp4, "cannot decode its frames"),
        (_drop_mp4, "is missing or no regular file"),
        (_shift_episode, "holds no frame within"),
        (_resize_feature, "the feature declares"),
        (_hostile_template, "video_path"),
        (_drop_column, "video columns"),
        (_timestamps(None), "cannot read its frames"),
        (_timestamps(float("nan")), "no time in a video"),
        (_timestamps(3e38), "no time in a video"),
        (_timestamps(-0.3), "holds no frame within"),
    ],
)
def test_a_damaged_video_folder_is_one_format_error_naming_the_file(
    tmp_path: Path, damage: Any, says: str
) -> None:
    root, _ = _video_folder(tmp_path)
    damage(root)
    with pytest.raises(FormatError) as info:
        dataset = load(root)
        np.asarray(dataset.tensors["observations/images.cam"])
    message = str(info.value)
    assert says in message and "\n" not in message, message
    assert str(root) in message


def _pixels(T: int = 6, N: int = 2) -> Dataset:
    rng = np.random.default_rng(1)
    # smooth frames: lossy video keeps them close, so a round trip is near the source
    ramp = np.linspace(0, 200, 16 * 12, dtype=np.float32).reshape(16, 12, 1)
    pixels = (ramp + rng.integers(0, 40, (T, N, 1, 1, 3))).astype(np.uint8)
    tensors = {
        "observations/pixels": pixels,
        "observations/state": rng.normal(size=(T, N, 3)).astype(np.float32),
        "next_observations/pixels": np.roll(pixels, -1, axis=0),
        "next_observations/state": rng.normal(size=(T, N, 3)).astype(np.float32),
        "actions": rng.normal(size=(T, N, 2)).astype(np.float32),
        "rewards": rng.normal(size=(T, N, 1)).astype(np.float32),
        "terminated": np.eye(T, dtype=bool)[2].reshape(T, 1, 1).repeat(N, 1),
        "truncated": np.zeros((T, N, 1), bool),
    }
    return Dataset(tensors, CircularState(2, N - 1, True), {"env_id": "Pixels-v0"})


def test_to_video_writes_images_as_video_features_and_says_they_are_lossy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dataset = _pixels()
    target = tmp_path / "lr"
    with pytest.warns(UserWarning, match="next_observations/pixels, observations/pixels"):
        write_layout(dataset, target, "lerobot", overwrite=False, format="video")
    info = json.loads((target / "meta/info.json").read_text())
    feature = info["features"]["observation.images.pixels"]
    assert feature["dtype"] == "video" and feature["shape"] == [16, 12, 3]
    assert feature["info"]["video.codec"] == "av1" and info["video_path"] == videos.VIDEO_PATH
    data = pq.ParquetFile(target / "data/chunk-000/file-000.parquet").schema_arrow.names
    assert "observation.images.pixels" not in data and "observation.state" in data
    sidecar = json.loads((target / "meta/expcli.json").read_text())
    assert any("lossy video" in line for line in sidecar["lost"])
    episodes = pq.read_table(target / "meta/episodes/chunk-000/file-000.parquet").to_pydict()
    starts = episodes["videos/observation.images.pixels/from_timestamp"]
    ends = episodes["videos/observation.images.pixels/to_timestamp"]
    assert starts[0] == 0.0 and starts[1:] == ends[:-1]  # one file, episodes one after another
    with caplog.at_level(logging.WARNING):
        back = read_dataset(target)
    assert "lossy" in caplog.text and "observation.images.pixels" in caplog.text
    for name, array in dataset.tensors.items():
        got = back.tensors[name]
        if name.endswith("pixels"):  # lossy: near the source, the rest exact
            assert got.shape == array.shape
            assert np.abs(got.astype(int) - array).mean() < 3, name
        else:
            assert got.tobytes() == array.tobytes(), name
    assert back.state == dataset.state
    assert "unknown" in back.metadata["lerobot"]


@pytest.mark.skipif(not hasattr(os, "sched_getscheduler"), reason="no POSIX scheduling")
def test_writing_video_leaves_the_writers_scheduling_policy_as_it_was(tmp_path: Path) -> None:
    """SVT-AV1, run by root, makes the thread opening an encoder SCHED_FIFO 99."""
    before = os.sched_getscheduler(0), os.sched_getparam(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        write_layout(_pixels(T=5, N=1), tmp_path / "lr", "lerobot", overwrite=False, format="video")
    assert (os.sched_getscheduler(0), os.sched_getparam(0)) == before


def test_to_video_frames_read_back_as_pyav_decodes_them(tmp_path: Path) -> None:
    """The frames read back are the decoded video: each one where its episode says."""
    dataset = _pixels(T=5, N=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        write_layout(dataset, tmp_path / "lr", "lerobot", overwrite=False, format="video")
    path = tmp_path / "lr" / "videos/observation.images.pixels/chunk-000/file-000.mp4"
    reference = _decoded(path)
    back = read_dataset(tmp_path / "lr")
    order = [2, 3, 4, 0, 1]  # the column's rows oldest first: the memory index is 2
    assert np.array_equal(back.tensors["observations/pixels"][order, 0], reference)


def test_images_video_cannot_hold_stay_png(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    tensors = {
        "observations": rng.integers(0, 256, (4, 1, 8, 8, 1), dtype=np.uint8),
        "actions": rng.normal(size=(4, 1, 2)).astype(np.float32),
    }
    dataset = Dataset(tensors, CircularState(0, 0, True))
    write_layout(dataset, tmp_path / "lr", "lerobot", overwrite=False, format="video")
    info = json.loads((tmp_path / "lr/meta/info.json").read_text())
    assert info["features"]["observation.image"]["dtype"] == "image"
    assert not (tmp_path / "lr/videos").exists()
    back = read_dataset(tmp_path / "lr")
    assert np.array_equal(back.tensors["observations"], tensors["observations"])


def test_the_commands_read_and_write_video(tmp_path: Path) -> None:
    root, frames = _video_folder(tmp_path)
    runner = CliRunner()
    done = runner.invoke(app, ["inspect", str(root)])
    assert done.exit_code == 0, done.output
    assert "observations/images.cam" in done.output
    done = runner.invoke(app, ["convert", str(root), str(tmp_path / "back.npz")])
    assert done.exit_code == 0, done.output
    assert np.array_equal(np.load(tmp_path / "back.npz")["observations/images.cam"][:, 0], frames)
    done = runner.invoke(app, ["sample", str(root), "--batch-size", "5", "--seed", "0", "--json"])
    assert done.exit_code == 0, done.output
    target = tmp_path / "again"
    done = runner.invoke(
        app, ["convert", str(tmp_path / "back.npz"), str(target), "--layout", "lerobot",
              "--to", "video"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "warning:" in done.output and "lossy video" in done.output
    assert (target / "videos/observation.images.cam/chunk-000/file-000.mp4").is_file()
