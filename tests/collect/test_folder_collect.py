"""Collecting to a sharded folder: a kill -9 at any moment leaves a folder that opens and
holds the first rows of the uninterrupted run, --resume finishes it, Ctrl-C flushes the
staging area, and the peak memory does not grow with the run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import expcli
from tests.memory_probe import MIB, Run, assert_flat, cli_run

EXPCLI = [sys.executable, "-m", "expcli"]
RUN = ["collect", "CartPole-v1", "--envs", "2", "--seed", "7", "--mode", "dummy"]
STEPS = 20_000
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def expcli_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*EXPCLI, *args], capture_output=True, text=True, env=ENV)
    if check:
        assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> expcli.Dataset:
    """The uninterrupted run, written as one file."""
    path = tmp_path_factory.mktemp("ref") / "ref.npz"
    expcli_cli(*RUN, "--steps", str(STEPS), "-o", str(path), "-q")
    return expcli.load(path)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seed", "shard_format"), [(1, "npz"), (2, "npz"), (3, "npz"), (4, "parquet")]
)
def test_kill_9_leaves_the_first_rows_and_resume_finishes(
    tmp_path: Path, reference: expcli.Dataset, seed: int, shard_format: str
) -> None:
    folder = tmp_path / "run"
    shards = ["--shard-size", "250", "--shard-format", shard_format]
    child = subprocess.Popen(
        [*EXPCLI, *RUN, "--steps", str(STEPS), "-o", str(folder), *shards, "-q"],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (folder / "manifest.json").exists() and time.monotonic() < deadline:
        time.sleep(0.02)  # the run has begun: its envs are built, its folder created
    time.sleep(random.Random(seed).uniform(0.0, 1.0))
    child.send_signal(signal.SIGKILL)
    child.wait()
    expcli_cli("inspect", "--check", str(folder))
    expcli_cli("convert", str(folder), str(tmp_path / "copy.npz"))
    killed = expcli.load(folder)
    rows = killed.memory_size
    for name, want in reference.tensors.items():
        assert np.array_equal(killed.tensors[name], want[:rows]), name
    if shard_format == "parquet" and rows:
        assert_readers_see(folder, rows * 2, complete=False)

    if rows * 2 < STEPS:
        expcli_cli("collect", "--resume", str(folder), "-q")
        whole = expcli.load(folder)
        assert len(whole) == STEPS
        if shard_format == "parquet":
            assert {p.suffix for p in folder.glob("shard-*")} == {".parquet"}
            assert_readers_see(folder, STEPS, complete=True)
        collector = whole.metadata["collector"]
        assert collector["steps"] == STEPS and len(collector["segments"]) == 2
        kept = {k: v for k, v in reference.tensors.items() if k != "truncated"}
        for name, want in kept.items():
            assert np.array_equal(whole.tensors[name][:rows], want[:rows]), name
        if rows:  # a kill before the first shard (a loaded machine) leaves no stored row
            cut = whole.tensors["truncated"][rows - 1, :, 0]
            ended = reference.tensors["terminated"][rows - 1, :, 0]
            assert (cut | ended).all()  # every episode the kill cut ends in the last stored row


def assert_readers_see(folder: Path, transitions: int, *, complete: bool) -> None:
    """pyarrow, polars, duckdb and HF ``datasets`` read the Parquet shards' transitions.

    A kill between a shard's rename and the manifest's update leaves one shard more than the
    manifest lists (``--resume`` removes it): those rows are real, and in order. HF's cache
    is the folder's (kept between calls): a folder read again after ``--resume`` is read anew.
    """
    import duckdb
    import polars as pl
    import pyarrow.parquet as pq

    pattern = str(folder / "shard-*.parquet")
    index = pq.read_table(sorted(folder.glob("shard-*.parquet")))["index"].to_numpy()
    # each transition once (rows go episode by episode within a shard, shards in time order)
    assert np.array_equal(np.sort(index), np.arange(len(index)))
    assert len(index) == transitions or not complete and len(index) > transitions
    assert pl.scan_parquet(pattern).select(pl.len()).collect().item() == len(index)
    count = duckdb.connect().execute("SELECT count(*) FROM read_parquet(?)", [pattern])
    assert count.fetchall() == [(len(index),)]
    script = "import datasets, sys; print(datasets.load_dataset(sys.argv[1])['train'].num_rows)"
    env = {**ENV, "HF_HOME": str(folder.parent / "hf"), "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(folder)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0 and int(done.stdout) == len(index), done.stderr


def test_ctrl_c_flushes_the_staging_area(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    child = subprocess.Popen(
        [*EXPCLI, *RUN, "--steps", "10000000", "-o", str(folder), "-q"],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not (folder / "manifest.json").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(1.0)
    child.send_signal(signal.SIGINT)
    assert child.wait(timeout=60) == 130
    dataset = expcli.load(folder)
    collector = dataset.metadata["collector"]
    assert len(dataset) > 0 and collector["steps"] == len(dataset)  # nothing collected lost
    assert collector["interrupted"] is True


# ConstantFrame's 64x64x4 frames: a transition stores two, 32 KiB
FRAMES = ["collect", "benchmarks.frame_env:ConstantFrame-v0", "--mode", "dummy"]
FRAMES += ["--env-kwargs", json.dumps({"shape": [64, 64, 4]}), "--shard-size", "2MB", "-q"]
TRANSITION_BYTES = 2 * 64 * 64 * 4 + 14


def collect_run(target: Path, mib: float, *args: str) -> Run:
    """``expcli collect`` of ``mib`` MiB of frames to ``target`` in a child, checked."""
    steps = int(mib * MIB) // TRANSITION_BYTES
    run = cli_run(*FRAMES, *args, "--steps", str(steps), "-o", str(target))
    if run.returncode == 0:
        assert expcli.load(target).memory_size == steps
    return run


@pytest.mark.slow
def test_peak_memory_of_a_folder_collect_does_not_grow_with_the_run(tmp_path: Path) -> None:
    # in memory the larger run would hold 192 MiB more; here, two shards
    assert_flat(lambda mib: collect_run(tmp_path / f"{mib:.0f}", mib))
