"""Converting from and to the foreign layouts streams: a tianshou file, a Minari folder
and a D4RL file read as several env columns, converted to expcli's ``.h5``, and an expcli
``.h5`` written with ``--layout d4rl``, ``tianshou`` or ``skrl`` (``.pt`` and ``.npz``),
and a Minari parquet or arrow folder converted to a folder of npz shards, take about the
same peak memory for a small and a five times larger file (``tests.memory_probe``)."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from expcli import save
from expcli.formats import Dataset
from expcli.formats.layouts import write_layout
from expcli.spec import CircularState
from tests.memory_probe import (
    CONVERT_IMPORTS,
    MIB,
    Run,
    assert_flat,
    convert_run,
    frames_data,
    run_child,
)


def frames(mib: float) -> Dataset:
    """``frames_data`` as a layout needs it: frames as observations, and actions."""
    tensors = frames_data(mib, False)
    tensors["observations"] = tensors.pop("frames")
    tensors["actions"] = np.zeros(tensors["rewards"].shape, np.int64)
    return Dataset(tensors, CircularState(0, 0, True))


def convert_from(
    folder: Path, layout: str, mib: float, num_envs: int = 0, storage: str | None = None
) -> Run:
    """Write ``frames(mib)`` in ``layout``, convert it to expcli's ``.h5``, remove it."""
    source = folder / f"{layout}-{mib:.0f}{'-v0' if layout == 'minari' else '.h5'}"
    with warnings.catch_warnings():  # minari: the env columns it does not keep
        warnings.simplefilter("ignore", UserWarning)
        write_layout(frames(mib), source, layout, overwrite=True, format=storage)
    run = convert_run(source, folder / "out.h5", num_envs=num_envs)
    shutil.rmtree(source) if source.is_dir() else source.unlink()
    return run


@pytest.mark.slow
@pytest.mark.parametrize(
    ("layout", "target"),
    [("d4rl", "d4rl.h5"), ("tianshou", "tianshou.h5"), ("skrl", "skrl.pt"), ("skrl", "skrl.npz")],
)
def test_writing_a_foreign_layout_streams(tmp_path: Path, layout: str, target: str) -> None:
    imports = ("torch",) if target.endswith(".pt") else ()

    def convert(mib: float) -> Run:
        source = save(frames(mib), tmp_path / f"{mib:.0f}.h5")
        run = convert_run(source, tmp_path / target, layout, imports=imports)
        source.unlink()
        return run

    assert_flat(convert)


@pytest.mark.slow
def test_converting_a_tianshou_file_streams(tmp_path: Path) -> None:
    assert_flat(lambda mib: convert_from(tmp_path, "tianshou", mib))


@pytest.mark.slow
def test_converting_a_d4rl_file_of_several_env_columns_streams(tmp_path: Path) -> None:
    assert_flat(lambda mib: convert_from(tmp_path, "d4rl", mib, num_envs=4))  # 4 env columns


@pytest.mark.slow
def test_converting_a_minari_folder_streams(tmp_path: Path) -> None:
    # a slice, the one read ahead, the episodes' rows and the writer's fill ~100 MB: the
    # small folder must go beyond it for a flat peak to show (96 MiB: 107 MiB above the
    # baseline, 480: 95); 288 keeps the bound at 48 MiB
    assert_flat(lambda mib: convert_from(tmp_path, "minari", mib), 96, 288)


_TO_MINARI = """
import sys, warnings
from expcli.conversion import convert
warnings.simplefilter("ignore", UserWarning)  # the env columns it does not keep
convert(sys.argv[1], sys.argv[2], layout="minari", to=sys.argv[3])
"""


@pytest.mark.slow
def test_writing_minari_parquet_streams(tmp_path: Path) -> None:
    """Parquet: its writer holds more than arrow's (both write an episode at a time)."""
    storage = "parquet"

    def convert(mib: float) -> Run:
        source = save(frames(mib), tmp_path / f"{mib:.0f}.h5")
        target = tmp_path / "minari-v0"
        argv = [str(source), str(target), storage]
        run = run_child(["-c", _TO_MINARI, *argv], 600, imports=(*CONVERT_IMPORTS, "pyarrow"))
        assert run.returncode == 0, run.stderr
        source.unlink()
        return run

    assert_flat(convert)


@pytest.mark.slow
def test_converting_a_minari_arrow_folder_streams(tmp_path: Path) -> None:
    """Arrow to one file: each tensor is read whole before the next."""
    assert_flat(lambda mib: convert_from(tmp_path, "minari", mib, storage="arrow"))


def images(mib: float) -> Dataset:
    """``frames(mib)`` with each 4096-byte frame a 64x64 image: PNG frames in LeRobot."""
    dataset = frames(mib)
    observations = dataset.tensors["observations"]
    dataset.tensors["observations"] = observations.reshape(*observations.shape[:2], 64, 64)
    return dataset


@pytest.mark.slow
def test_converting_a_lerobot_folder_of_images_streams(tmp_path: Path) -> None:
    """Its data files' row groups are decoded a few at a time, PNG frames included."""

    def convert(mib: float) -> Run:
        source = tmp_path / f"lerobot-{mib:.0f}"
        write_layout(images(mib), source, "lerobot", overwrite=True)
        run = convert_run(source, tmp_path / "out.h5")
        shutil.rmtree(source)
        return run

    assert_flat(convert)


@pytest.mark.slow
def test_writing_the_lerobot_layout_streams(tmp_path: Path) -> None:
    """Episodes are regrouped per env column and written one at a time."""

    def convert(mib: float) -> Run:
        source = save(frames(mib), tmp_path / f"{mib:.0f}.h5")
        run = convert_run(source, tmp_path / "lerobot", "lerobot")
        source.unlink()
        shutil.rmtree(tmp_path / "lerobot")
        return run

    assert_flat(convert)


def linked_minari(folder: Path, mib: float, storage: str) -> Path:
    """A Minari folder in ``storage`` of about ``mib`` MiB of float32 observations: one
    episode of 1000 steps written, its file hard-linked as every other episode's."""
    steps, feature = 1000, 1024
    rows = np.random.default_rng(0).random((steps + 1, 1, feature), dtype=np.float32)
    ends = np.zeros((steps, 1, 1), bool)
    ends[-1] = True
    tensors = {
        "observations": rows[:-1],
        "next_observations": rows[1:],
        "actions": np.zeros((steps, 1, 1), np.int64),
        "rewards": np.ones((steps, 1, 1), np.float32),
        "terminated": ends,
        "truncated": np.zeros_like(ends),
    }
    source = folder / f"minari-{storage}-{mib:.0f}-v0"
    dataset = Dataset(tensors, CircularState(0, 0, True))
    write_layout(dataset, source, "minari", overwrite=True, format=storage)
    data = source / "data"
    episodes = max(1, round(mib * MIB / rows[:-1].nbytes))
    for number in range(1, episodes):
        (data / str(number)).mkdir()
        for name in (f"part-0.{storage}", "metadata.json"):
            os.link(data / "0" / name, data / str(number) / name)
    meta = json.loads((data / "metadata.json").read_text())
    meta.update({"total_episodes": episodes, "total_steps": episodes * steps})
    (data / "metadata.json").write_text(json.dumps(meta))
    return source


@pytest.mark.slow
@pytest.mark.parametrize("storage", ["parquet", "arrow"])
def test_converting_a_minari_parquet_or_arrow_folder_to_a_folder_streams(
    tmp_path: Path, storage: str
) -> None:
    """To a folder of npz shards, each tensor of a shard written whole before the next:
    Parquet keeps the shard's decoded observations for its next observations (at most
    96 MiB: the small folder fills them), an Arrow IPC file is mapped."""

    def convert(mib: float) -> Run:
        source = linked_minari(tmp_path, mib, storage)
        run = convert_run(source, tmp_path / "out")
        shutil.rmtree(source)
        return run

    assert_flat(convert, 96, 480)
