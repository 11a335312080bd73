"""A collect run to a single file that streams: spooled to shards beside the target, then
merged. The file equals an in-memory run's, nothing is left beside it, Ctrl-C saves what
was collected, a failed merge keeps the rows, and peak memory does not grow with the run."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import expcli
from expcli.collect.job import CollectJob
from expcli.collect.settings import CollectSettings
from tests.collect.test_folder_collect import ENV, EXPCLI, RUN, collect_run, expcli_cli
from tests.memory_probe import assert_flat


@pytest.mark.parametrize("suffix", ["h5", "pt"])
def test_a_spooled_file_equals_an_in_memory_one(tmp_path: Path, suffix: str) -> None:
    memory, spooled = tmp_path / f"m.{suffix}", tmp_path / f"s.{suffix}"
    expcli_cli(*RUN, "--steps", "3001", "-o", str(memory), "--no-spool", "-q")
    expcli_cli(*RUN, "--steps", "3001", "-o", str(spooled), "--spool", "--shard-size", "200", "-q")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([memory.name, spooled.name])
    want, got = expcli.load(memory), expcli.load(spooled)
    assert sorted(got.tensors) == sorted(want.tensors)
    for name, array in want.tensors.items():
        assert np.array_equal(got.tensors[name], array), name
    ours, theirs = got.metadata["collector"], want.metadata["collector"]
    for key in ("steps", "env_steps", "episodes", "transitions_in_file", "interrupted"):
        assert ours[key] == theirs[key], key


def test_a_large_run_spools_and_a_small_one_stays_in_memory(tmp_path: Path) -> None:
    big = {"shape": [256, 256, 4]}  # 512 KiB a transition: 1,000 steps exceed 256 MB
    for steps, spools in ((1000, True), (10, False)):
        settings = CollectSettings(
            env_id="benchmarks.frame_env:ConstantFrame-v0",
            mode="dummy",
            env_kwargs=big,
            steps=steps,
            output=tmp_path / "out.npz",
        )
        job = CollectJob(settings)
        try:
            job.start()
            assert (job.spool is not None) == spools
            if spools:
                assert job.spool is not None and job.spool.parent == tmp_path
                assert job.spool.name.startswith(".out.npz.expcli-")
        finally:
            job.close()
            assert job.save() is None  # nothing collected: nothing written, spool removed
        assert list(tmp_path.iterdir()) == []


def _spool_started(folder: Path, name: str) -> None:
    deadline = time.monotonic() + 60
    while not list(folder.glob(f".{name}.expcli-*/manifest.json")):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(1.0)


def test_ctrl_c_merges_what_was_collected(tmp_path: Path) -> None:
    out = tmp_path / "run.npz"
    args = [*EXPCLI, *RUN, "--steps", "10000000", "--spool", "-o", str(out), "-q"]
    child = subprocess.Popen(args, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _spool_started(tmp_path, out.name)
    child.send_signal(signal.SIGINT)
    assert child.wait(timeout=60) == 130
    dataset = expcli.load(out)
    collector = dataset.metadata["collector"]
    assert len(dataset) > 0 and collector["steps"] == len(dataset)
    assert collector["interrupted"] is True
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # the spool is gone


def test_a_failed_merge_keeps_the_rows_and_says_where(tmp_path: Path) -> None:
    out = tmp_path / "run.npz"
    args = [*EXPCLI, *RUN, "--steps", "10000000", "--spool", "-o", str(out), "-q"]
    child = subprocess.Popen(args, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _spool_started(tmp_path, out.name)
    out.mkdir()  # a folder in the way of the file's rename
    (out / "mine.txt").write_text("keep")
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode not in (0, 130)
    kept = tmp_path / "run-rescued"
    assert str(kept) in err.decode()
    dataset = expcli.load(kept)
    assert len(dataset) > 0 and dataset.metadata["collector"]["steps"] == len(dataset)
    assert (out / "mine.txt").read_text() == "keep"


@pytest.mark.slow
def test_peak_memory_of_a_spooled_collect_does_not_grow_with_the_run(tmp_path: Path) -> None:
    # Both runs are larger than the merge's fixed buffers (slices of 16 MB read ahead,
    # 32 MB of shards mapped), so any growth left would come from the data itself. In
    # memory the larger run would hold 384 MiB more; here, two shards while collecting,
    # slices of rows while merging.
    assert_flat(lambda mib: collect_run(tmp_path / f"{mib:.0f}.npz", mib, "--spool"), 96, 480)
