"""LeRobot itself loads what expcli writes, and expcli reads what LeRobot's writer makes.

Runs ``lerobot_side.py`` in ``.venv-lerobot`` (``make lerobot-env``: LeRobot 0.4.4 needs
``datasets<5``, so it has its own environment); skipped, saying how to build it (or why
``make test`` could not), when that environment is not built.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

from expcli import load
from expcli.formats import Dataset
from expcli.formats.layouts import write_layout
from expcli.formats.layouts._episodes import column_rows
from expcli.formats.registry import read_dataset
from expcli.spec import CircularState

ROOT = Path(__file__).parents[2]
PYTHON = ROOT / ".venv-lerobot" / "bin" / "python"
SIDE = Path(__file__).with_name("lerobot_side.py")

BUILT = ROOT / ".venv-lerobot" / ".built"  # make lerobot-env's stamp, once every step passed
BUILD_LOG = ROOT / ".venv-lerobot.log"  # what `make test`'s attempt to build it printed


def _not_built() -> str:
    """Why the environment is missing: the last line its build printed, or how to build it."""
    lines = BUILD_LOG.read_text(errors="replace").split("\n") if BUILD_LOG.is_file() else []
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    reason = f"its build failed: {last[:300]}" if last else "run `make lerobot-env`"
    return f"LeRobot's environment is not built ({reason})"


pytestmark = pytest.mark.skipif(not BUILT.is_file(), reason=_not_built())


def _lerobot(*args: str | Path) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    done = subprocess.run(
        [str(PYTHON), str(SIDE), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def _dataset() -> Dataset:
    rng = np.random.default_rng(7)
    T, N = 9, 3
    tensors = {
        "observations/state": rng.normal(size=(T, N, 4)).astype(np.float32),
        "observations/pixels": rng.integers(0, 256, (T, N, 8, 6, 3), dtype=np.uint8),
        "next_observations/state": rng.normal(size=(T, N, 4)).astype(np.float32),
        "next_observations/pixels": rng.integers(0, 256, (T, N, 8, 6, 3), dtype=np.uint8),
        "actions": rng.normal(size=(T, N, 2)).astype(np.float32),
        "rewards": rng.normal(size=(T, N, 1)).astype(np.float32),
        "terminated": rng.random((T, N, 1)) < 0.2,
        "truncated": rng.random((T, N, 1)) < 0.1,
    }
    return Dataset(tensors, CircularState(4, 2, True), {"env_id": "Check-v0"})


def _long_dataset() -> Dataset:
    """An episode of 120 frames (LeRobot samples 100 of its images) and one of 10, images of
    310 rows (LeRobot halves them for statistics), an integer feature, a Pong-like env id and
    render_fps."""
    rng = np.random.default_rng(8)
    T = 130
    terminated = np.zeros((T, 1, 1), bool)
    terminated[119] = True
    tensors = {
        "observations/state": rng.normal(size=(T, 1, 4)).astype(np.float32),
        "observations/pixels": rng.integers(0, 256, (T, 1, 310, 20, 3), dtype=np.uint8),
        "actions": rng.normal(size=(T, 1, 2)).astype(np.float32),
        "infos/lives": rng.integers(0, 6, (T, 1)).astype(np.int64),
        "rewards": rng.normal(size=(T, 1, 1)).astype(np.float32),
        "terminated": terminated,
        "truncated": np.zeros((T, 1, 1), bool),
    }
    metadata = {"env_id": "ale_py:ALE/Pong-v5", "render_fps": 30}
    return Dataset(tensors, CircularState(0, 0, True), metadata)


def _expected(dataset: Dataset, named: dict[str, str]) -> dict[str, np.ndarray]:
    """Every frame's features in ``index`` order, as ``lerobot_side.py load`` takes them."""
    rows = column_rows(dataset)
    expected = {
        feature: np.concatenate([dataset.tensors[name][r, j] for j, r in enumerate(rows)])
        for feature, name in named.items()
    }
    expected["index"] = np.arange(sum(len(r) for r in rows))
    flags = dataset.tensors["terminated"] | dataset.tensors["truncated"]
    ends = np.concatenate([flags[r, j, 0] for j, r in enumerate(rows)])
    ends[np.cumsum([len(r) for r in rows]) - 1] = True  # a column's last episode ends there
    expected["episode_index"] = np.concatenate([[0], np.cumsum(ends)[:-1]])
    return expected


@pytest.mark.slow
def test_lerobot_loads_what_expcli_writes(tmp_path: Path) -> None:
    """Every frame equal; the stats' q01...q99 as LeRobot's own ``compute_episode_stats`` and
    ``aggregate_stats`` make them, and its QUANTILES normaliser runs on a batch; fps and task
    from the dataset's metadata."""
    dataset, long = _dataset(), _long_dataset()
    write_layout(dataset, tmp_path / "lr", "lerobot", overwrite=False)
    write_layout(long, tmp_path / "long", "lerobot", overwrite=False)
    named = {
        "observation.state": "observations/state",
        "observation.images.pixels": "observations/pixels",
        "next.observation.state": "next_observations/state",
        "next.observation.images.pixels": "next_observations/pixels",
        "action": "actions",
        "next.reward": "rewards",
        "next.terminated": "terminated",
        "next.truncated": "truncated",
    }
    np.savez(tmp_path / "expected.npz", **_expected(dataset, named))
    short = {k: v for k, v in named.items() if not k.startswith("next.observation")}
    short["infos.lives"] = "infos/lives"
    np.savez(tmp_path / "long.npz", **_expected(long, short))
    said = _lerobot(
        "load", tmp_path / "lr", tmp_path / "expected.npz",
        "load", tmp_path / "long", tmp_path / "long.npz",
    ).splitlines()  # fmt: skip
    assert len(said) == 2 and all("features equal" in line for line in said), said
    assert "fps 1, task 'Check-v0', robot None" in said[0]
    assert "fps 30, task 'ALE/Pong-v5', robot None" in said[1]
    assert all("QUANTILES normalised (8, 2) actions" in line for line in said), said


@pytest.mark.slow
def test_expcli_reads_what_lerobots_writer_makes(tmp_path: Path) -> None:
    _lerobot("create", tmp_path / "made", tmp_path / "frames.npz")
    frames = np.load(tmp_path / "frames.npz")
    dataset = read_dataset(tmp_path / "made")
    assert np.array_equal(dataset.tensors["observations/state"][:, 0], frames["observation.state"])
    assert np.array_equal(dataset.tensors["observations/image"][:, 0], frames["observation.image"])
    assert np.array_equal(dataset.tensors["actions"][:, 0], frames["action"])
    assert np.array_equal(dataset.tensors["rewards"][:, 0], frames["next.reward"])
    done = frames["next.done"].reshape(-1)
    assert np.array_equal(dataset.tensors["truncated"][:, 0, 0] & done, done)
    assert len(dataset.metadata["lerobot"]["unknown"]) == 2


@pytest.mark.slow
def test_lerobot_and_expcli_decode_the_same_video_frames(tmp_path: Path) -> None:
    """Both ways: LeRobot's frames of expcli's video folder, expcli's of LeRobot's own."""
    dataset = _dataset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the loss: lossy video
        write_layout(dataset, tmp_path / "lr", "lerobot", overwrite=False, format="video")
    _lerobot(
        "frames", tmp_path / "lr", tmp_path / "lr.npz",
        "create-video", tmp_path / "made", tmp_path / "given.npz",
        "frames", tmp_path / "made", tmp_path / "made.npz",
    )  # fmt: skip
    lerobot, back, rows = (
        np.load(tmp_path / "lr.npz"),
        read_dataset(tmp_path / "lr"),
        column_rows(dataset),
    )
    for feature, name in (
        ("observation.images.pixels", "observations/pixels"),
        ("next.observation.images.pixels", "next_observations/pixels"),
        ("observation.state", "observations/state"),
        ("action", "actions"),
    ):
        expcli = np.concatenate([back.tensors[name][r, j] for j, r in enumerate(rows)])
        assert np.array_equal(lerobot[feature].reshape(expcli.shape), expcli), feature
    source = np.concatenate([dataset.tensors["actions"][r, j] for j, r in enumerate(rows)])
    assert np.array_equal(lerobot["action"], source)
    made, given = np.load(tmp_path / "made.npz"), np.load(tmp_path / "given.npz")
    read = read_dataset(tmp_path / "made")
    assert np.array_equal(
        read.tensors["observations/images.cam"][:, 0], made["observation.images.cam"]
    )
    assert np.array_equal(read.tensors["observations/state"][:, 0], given["observation.state"])


@pytest.mark.slow
def test_a_data_file_lerobot_wrote_reads_alone_by_lerobots_column_names(tmp_path: Path) -> None:
    """One ``data/chunk-*/file-*.parquet`` taken out of its folder is a foreign table: its
    ``observation.*`` are Dict leaves, ``next.reward`` the rewards, ``next.done`` the done
    flags (terminated unless ``--done-means`` says), ``timestamp``/``task_index`` left out;
    with ``--done-means truncated`` every tensor equals the folder reader's."""
    _lerobot("create-states", tmp_path / "made", tmp_path / "frames.npz")
    frames = np.load(tmp_path / "frames.npz")
    [data] = sorted((tmp_path / "made" / "data").glob("chunk-*/file-*.parquet"))
    table = tmp_path / "alone.parquet"
    shutil.copy(data, table)
    with pytest.warns(UserWarning, match="LeRobot's columns") as caught:
        dataset = read_dataset(table)
    assert len(caught) == 1 and "'next.done' does not tell" in str(caught[0].message)
    assert "--done-means" in str(caught[0].message)
    assert set(dataset.tensors) == {
        f"{tensor}/{leaf}"
        for tensor in ("observations", "next_observations")
        for leaf in ("state", "environment_state")
    } | {"actions", "rewards", "terminated", "truncated"}
    tensors = {name: np.asarray(a)[:, 0] for name, a in dataset.tensors.items()}
    assert np.array_equal(tensors["observations/state"], frames["observation.state"])
    assert np.array_equal(
        tensors["observations/environment_state"], frames["observation.environment_state"]
    )
    assert np.array_equal(tensors["actions"], frames["action"])
    assert np.array_equal(tensors["rewards"], frames["next.reward"])
    done = frames["next.done"].reshape(-1)
    assert np.array_equal(tensors["terminated"][:, 0], done)
    ends = np.flatnonzero(np.diff(frames["episode_index"], append=-1))
    assert np.array_equal(np.flatnonzero(tensors["truncated"][:, 0]), ends[~done[ends]])
    read = dataset.metadata["table"]
    assert read["convention"] == "LeRobot's columns" and read["done_means"] == "terminated"
    assert read["columns"]["episode"] == "episode_index"
    assert read["columns"]["step"] == "frame_index"
    folder = read_dataset(tmp_path / "made")
    with pytest.warns(UserWarning, match="LeRobot's columns") as caught:
        chosen = load(table, done_means="truncated")
    assert "does not tell" not in str(caught[0].message)
    assert chosen.metadata["table"]["done_means"] == "truncated"
    assert set(chosen.tensors) == set(folder.tensors)
    for name, values in folder.tensors.items():
        assert np.array_equal(np.asarray(chosen.tensors[name]), np.asarray(values)), name
