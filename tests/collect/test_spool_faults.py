"""A spooled collect whose disk fails at each stage of its end: the last shard, the merge
into the file, a folder turned read-only. The rows already on disk are never removed: the
error names the folder that keeps them, and that folder loads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import expcli
from expcli.collect.job import CollectJob
from expcli.collect.settings import CollectSettings
from expcli.errors import OutputError
from tests.small_fs import PAGE, expcli_process, leave_free, one_error_line, read_only, small_fs


@pytest.mark.parametrize(
    ("stage", "kept_rows"),
    [("last shard", 1000), ("merge", 1050), ("read-only", 1000)],
)
def test_a_disk_failing_at_the_end_of_a_spooled_run_keeps_its_rows(
    tmp_path: Path, stage: str, kept_rows: int
) -> None:
    with small_fs(tmp_path / "fs", 512 * PAGE) as fs:
        settings = CollectSettings(
            env_id="CartPole-v1",
            steps=1050,
            mode="dummy",
            seed=0,
            output=fs / "c.npz",
            spool=True,
            shard_size="100",  # 10 shards written while collecting, 50 rows staged
        )
        job = CollectJob(settings)
        job.start()
        try:
            job.run()
        finally:
            job.close()
        assert job.spool is not None
        assert job.sink.rows == 1000  # the shard being written in the background is done
        if stage == "read-only":
            read_only(fs)
        else:  # no room for the last shard, or room for it but not for the file
            leave_free(fs, 0 if stage == "last shard" else 4 * PAGE)
        with pytest.raises(OutputError) as caught:
            job.save()
        message = str(caught.value)
        kept = job.spool if stage == "read-only" else fs / "c-rescued"
        assert caught.value.saved_to == str(kept)
        assert message.startswith(f"{fs}: ")  # the disk, not a temporary name
        assert f"the {kept_rows:,} transitions collected are kept in the sharded folder {kept}" in (
            message
        )
        assert len(expcli.load(kept)) == kept_rows
        assert not (fs / "c.npz").exists()
        # a read-only disk keeps the (unheld) lock file too: it cannot be removed
        left = [".c.npz.expcli.lock"] if stage == "read-only" else ["ballast"]
        assert sorted(os.listdir(fs)) == sorted([kept.name, *left])


@pytest.mark.parametrize("name", ["run", "run.npz"], ids=["folder", "spooled"])
def test_a_disk_filling_while_collecting_keeps_the_shards_written(
    tmp_path: Path, name: str
) -> None:
    """The disk fills in the middle of a run (no --steps: nothing to refuse up front)."""
    with small_fs(tmp_path / "fs", 24 * PAGE) as fs:
        run = ["CartPole-v1", "--episodes", "3000", "--mode", "dummy", "--shard-size", "100"]
        spool = ["--spool"] if name.endswith(".npz") else []
        done = expcli_process("collect", *run, *spool, "-q", "-o", str(fs / name), cwd=tmp_path)
        assert done.returncode == 1 and done.stdout == ""
        line = one_error_line(done.stderr)
        assert line.startswith(f"error: {fs if spool else fs / name}: no space left on device")
        kept = fs / ("run-rescued" if spool else name)
        rows = len(expcli.load(kept))
        assert rows > 0 and rows % 100 == 0  # whole shards
        if spool:
            assert line.endswith(
                f"; the {rows:,} transitions collected are kept in the sharded folder {kept} "
                f"(`expcli convert {kept} run.npz` writes the file)"
            )
        else:
            assert line.endswith(
                f"; {kept} holds the {rows:,} transitions of its complete shards "
                f"(`expcli collect --resume {kept}` goes on once there is room)"
            )
        assert os.listdir(fs) == [kept.name]  # no temporary file left
