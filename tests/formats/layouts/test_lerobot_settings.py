"""A LeRobot folder a trainer can use: quantiles, fps, task, robot type, next observations.

That the quantiles equal LeRobot's own computation and that its QUANTILES normaliser runs
is checked in LeRobot's environment (``tests/lerobot_env``); here, what holds without it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from expcli.cli import app
from expcli.errors import ConfigError
from expcli.formats import Dataset
from expcli.formats.layouts import write_layout
from expcli.formats.layouts.lerobot import layout
from expcli.formats.layouts.lerobot._stats import QUANTILES, sampled_frames
from expcli.formats.layouts.lerobot.settings import LeRobotSettings
from expcli.formats.registry import open_lazy, read_dataset, source_format, write_dataset
from expcli.spec import CircularState

QS = list(QUANTILES)


def _stats(root: Path) -> dict[str, Any]:
    return dict(json.loads((root / "meta/stats.json").read_text()))


def _info(root: Path) -> dict[str, Any]:
    return dict(json.loads((root / "meta/info.json").read_text()))


def _long(metadata: dict[str, Any] | None = None) -> Dataset:
    """Two env columns, episodes of 120 and fewer frames, numbers with NaN and inf, images."""
    rng = np.random.default_rng(3)
    T, N = 160, 2
    state = rng.normal(size=(T, N, 3)).astype(np.float32)
    state[5, 0, 1], state[9, 1, 2] = np.nan, np.inf
    terminated = np.zeros((T, N, 1), bool)
    terminated[119, 0] = True
    terminated[[40, 100], 1] = True
    tensors = {
        "observations/state": state,
        "observations/pixels": rng.integers(0, 256, (T, N, 4, 3, 3), dtype=np.uint8),
        "actions": rng.integers(-2, 3, (T, N, 1)).astype(np.int64),
        "rewards": rng.normal(size=(T, N, 1)).astype(np.float32),
        "terminated": terminated,
        "truncated": np.zeros((T, N, 1), bool),
    }
    return Dataset(tensors, CircularState(0, 0, True), metadata or {"env_id": "Toy-v0"})


def test_quantiles_are_the_same_whatever_the_slices_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Episodes longer than a slice have their range read first: the histograms, so the
    quantiles, are those of the whole episode (min, max exact, NaN left out; mean to
    rounding)."""
    dataset = _long()
    write_layout(dataset, tmp_path / "whole", "lerobot", overwrite=False)
    monkeypatch.setattr(layout, "SLICE_BYTES", 4000)  # about 30 frames a slice
    write_layout(dataset, tmp_path / "sliced", "lerobot", overwrite=False)
    whole, sliced = _stats(tmp_path / "whole"), _stats(tmp_path / "sliced")
    assert (
        whole.keys()
        == sliced.keys()
        == {
            "observation.state",
            "observation.images.pixels",
            "action",
            "next.reward",
            "next.terminated",
            "next.truncated",
        }
    )
    for name, entry in whole.items():
        assert set(entry) == {"min", "max", "mean", "std", "count", *QS}, name
        for key in (*QS, "min", "max", "count"):
            assert entry[key] == sliced[name][key], (name, key)
        assert np.allclose(entry["mean"], sliced[name]["mean"], rtol=1e-12)


def test_quantiles_follow_the_data_and_leave_out_what_is_not_finite(tmp_path: Path) -> None:
    dataset = _long()
    write_layout(dataset, tmp_path / "lr", "lerobot", overwrite=False)
    stats = _stats(tmp_path / "lr")
    state = dataset.tensors["observations/state"].reshape(-1, 3)
    for k, q in enumerate(QUANTILES.values()):
        got = np.array(stats["observation.state"][QS[k]])
        want = np.nanquantile(np.where(np.isfinite(state), state, np.nan), q, axis=0)
        assert np.all(np.abs(got - want) < 0.15), (q, got, want)  # a histogram's, per episode
        assert np.all(np.isfinite(got))
    order = [stats["action"][q][0] for q in QS]
    assert order == sorted(order) and -2 - 1e-9 <= order[0] and order[-1] <= 2 + 1e-9  # ± 1e-10
    pixels = np.array([stats["observation.images.pixels"][q] for q in QS])
    assert pixels.shape == (5, 3, 1, 1) and 0 <= pixels.min() and pixels.max() <= 1


def test_lerobot_samples_images_as_its_sample_indices_do() -> None:
    """``sample_indices``: every frame up to 100, then about length ** 0.75 (at least 100)."""
    assert sampled_frames(7).tolist() == list(range(7))
    assert len(sampled_frames(100)) == 100 and len(sampled_frames(150)) == 100
    assert len(sampled_frames(10_000)) == 1000 and sampled_frames(10_000)[-1] == 9999


def test_fps_comes_from_the_settings_or_render_fps_else_one_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_layout(
        _long({"env_id": "ale_py:ALE/Pong-v5", "render_fps": 30}),
        tmp_path / "a",
        "lerobot",
        overwrite=False,
    )
    info = _info(tmp_path / "a")
    assert info["fps"] == 30 and info["robot_type"] is None
    table = pq.read_table(tmp_path / "a/data", columns=["timestamp", "frame_index"])
    frames = np.asarray(table.column("frame_index"))
    assert np.array_equal(np.asarray(table.column("timestamp")), (frames / 30).astype(np.float32))
    tasks = pq.read_table(tmp_path / "a/meta/tasks.parquet").column("task").to_pylist()
    assert tasks == ["ALE/Pong-v5"]
    assert not [r for r in caplog.records if "no fps" in r.getMessage()]
    given = LeRobotSettings(fps=15, task="push the cube", robot_type="so100")
    metadata = given.applied({"env_id": "ale_py:ALE/Pong-v5", "render_fps": 30})
    write_layout(_long(metadata), tmp_path / "b", "lerobot", overwrite=False)
    info = _info(tmp_path / "b")
    assert info["fps"] == 15 and info["robot_type"] == "so100"
    assert pq.read_table(tmp_path / "b/meta/tasks.parquet").column("task").to_pylist() == [
        "push the cube"
    ]
    with caplog.at_level(logging.WARNING):
        write_layout(_long(), tmp_path / "c", "lerobot", overwrite=False)
    [line] = [r.getMessage() for r in caplog.records if "no fps" in r.getMessage()]
    assert line.startswith("warning: ") and "\n" not in line and "--fps" in line
    assert _info(tmp_path / "c")["fps"] == 1


def test_settings_refuse_what_lerobot_cannot_take() -> None:
    with pytest.raises(ConfigError, match="--fps"):
        LeRobotSettings(fps=0)
    with pytest.raises(ConfigError, match="--task"):
        LeRobotSettings(task=" ")


def _frames_once(tmp_path: Path) -> tuple[Dataset, Path]:
    """Image observations whose next observations differ from the next row at episode ends."""
    rng = np.random.default_rng(5)
    T, N = 24, 2
    observations = rng.integers(0, 256, (T + 1, N, 6, 5, 3), dtype=np.uint8)
    following = observations[1:].copy()
    terminated = np.zeros((T, N, 1), bool)
    for t, n in ((6, 0), (15, 1), (20, 0)):
        terminated[t, n] = True
        following[t, n] = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)  # a final frame
    tensors = {
        "observations": observations[:-1],
        "next_observations": following,
        "actions": rng.normal(size=(T, N, 2)).astype(np.float32),
        "rewards": rng.normal(size=(T, N, 1)).astype(np.float32),
        "terminated": terminated,
        "truncated": np.zeros((T, N, 1), bool),
    }
    dataset = Dataset(tensors, CircularState(0, 0, True), {"env_id": "Pix-v0", "render_fps": 9})
    write_dataset(dataset, tmp_path / "once.npz")  # frames once, the default
    return dataset, tmp_path / "once.npz"


def _same(back: Dataset, dataset: Dataset) -> None:
    assert back.tensors.keys() == dataset.tensors.keys()
    for name, array in dataset.tensors.items():
        assert np.array_equal(np.asarray(back.tensors[name][:]), array), name


def test_next_observations_frames_once_derives_are_left_out_and_come_back(tmp_path: Path) -> None:
    dataset, source = _frames_once(tmp_path)
    opened, close = open_lazy(source, source_format(source))
    try:
        write_layout(opened, tmp_path / "lr", "lerobot", overwrite=False)
    finally:
        close()
    features = _info(tmp_path / "lr")["features"]
    assert "observation.image" in features and "next.observation.image" not in features
    kept = pq.read_table(tmp_path / "lr/meta/expcli-next/next_observations.parquet")
    assert kept.num_rows < 24 * 2 // 4  # episode ends and the newest row, not every frame
    _same(read_dataset(tmp_path / "lr"), dataset)
    lazy, close = open_lazy(tmp_path / "lr", "lerobot")
    try:
        _same(lazy, dataset)
    finally:
        close()
    write_layout(dataset, tmp_path / "arrays", "lerobot", overwrite=False)  # not derived
    assert "next.observation.image" in _info(tmp_path / "arrays")["features"]


def test_next_observations_options_choose(tmp_path: Path) -> None:
    dataset, source = _frames_once(tmp_path)
    left_out = Dataset(
        dataset.tensors,
        dataset.state,
        LeRobotSettings(next_observations=False).applied(dataset.metadata),
    )
    write_layout(left_out, tmp_path / "no", "lerobot", overwrite=False)
    assert "next.observation.image" not in _info(tmp_path / "no")["features"]
    _same(read_dataset(tmp_path / "no"), dataset)
    runner = CliRunner()
    done = runner.invoke(
        app,
        ["convert", str(source), str(tmp_path / "yes"), "--layout", "lerobot"]
        + ["--next-observations", "--fps", "12", "--task", "stack", "--robot-type", "koch"],
    )
    assert done.exit_code == 0, done.output
    info = _info(tmp_path / "yes")
    assert "next.observation.image" in info["features"]
    assert (info["fps"], info["robot_type"]) == (12, "koch")
    _same(read_dataset(tmp_path / "yes"), dataset)
    refused = runner.invoke(app, ["convert", str(source), str(tmp_path / "x.npz"), "--fps", "3"])
    assert refused.exit_code == 2 and "--layout lerobot" in refused.output
    streamed = runner.invoke(app, ["convert", str(source), "-", "--to", "npz", "--task", "t"])
    assert streamed.exit_code == 2 and "--layout lerobot" in streamed.output


def test_convert_looks_up_the_envs_render_fps(tmp_path: Path) -> None:
    dataset = _long({"env_id": "CartPole-v1"})
    write_dataset(dataset, tmp_path / "cp.npz")
    done = CliRunner().invoke(
        app, ["convert", str(tmp_path / "cp.npz"), str(tmp_path / "lr"), "--layout", "lerobot"]
    )
    assert done.exit_code == 0, done.output
    assert _info(tmp_path / "lr")["fps"] == 50 and "no fps" not in done.output


def test_the_lookup_imports_no_module_an_env_id_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An env id read from a file is data: its ``module:`` part is imported only when it is
    the known package of such ids (``ale_py`` for ``ALE/``)."""
    from expcli.envs.render_rate import declared_fps

    marker = tmp_path / "ran"
    (tmp_path / "expcli_test_side_effect.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert declared_fps("expcli_test_side_effect:CartPole-v1") == 50
    assert not marker.exists()
    assert declared_fps("ale_py:ALE/Pong-v5") == 30


def test_wide_numeric_features_get_no_quantiles(tmp_path: Path) -> None:
    """A histogram of 5,000 bins a value: a flattened 4096-byte frame would take 330 MB."""
    rng = np.random.default_rng(2)
    tensors = {
        "observations": rng.integers(0, 256, (30, 1, 300), dtype=np.uint8),
        "actions": rng.normal(size=(30, 1, 2)).astype(np.float32),
    }
    dataset = Dataset(tensors, CircularState(0, 0, True), {"render_fps": 5})
    write_layout(dataset, tmp_path / "lr", "lerobot", overwrite=False)
    stats = _stats(tmp_path / "lr")
    assert "q01" not in stats["observation.state"] and len(stats["observation.state"]["max"]) == 300
    assert set(QS) <= set(stats["action"])
