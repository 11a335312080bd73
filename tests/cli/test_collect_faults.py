"""``expcli collect`` when its output cannot be written: one line saying why and where the
collected data went instead (the system's temporary folder), nothing left in the target
folder, and the data itself intact; a folder that is clearly unwritable is refused before
collecting."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli.cli import app
from expcli.collect.job import CollectJob
from expcli.collect.settings import CollectSettings
from expcli.conversion import load
from expcli.errors import OutputError
from expcli.formats.dataset import Dataset
from tests.collect.registered_envs import CRASHING
from tests.small_fs import PAGE, expcli_process, leave_free, one_error_line, read_only, small_fs

CRASHING_ID = f"tests.collect.registered_envs:{CRASHING}"
RUN = ["CartPole-v1", "--steps", "2000", "--mode", "dummy", "--seed", "0"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    """The same run, written where there is room."""
    out = tmp_path_factory.mktemp("reference") / "r.npz"
    result = CliRunner().invoke(app, ["collect", *RUN, "-q", "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    return load(out)


def same_data(a: Dataset, b: Dataset) -> None:
    assert len(a) == len(b) == 2000 and sorted(a.tensors) == sorted(b.tensors)
    for name, array in a.tensors.items():
        assert np.array_equal(np.asarray(array), np.asarray(b.tensors[name])), name


@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("c.pt", []),
        ("c.npz", []),
        ("c.csv", []),
        ("c.h5", []),
        ("c.hdf5", ["--compression", "gzip"]),  # no size up front: the disk fills mid-write
        ("c.parquet", []),  # compressed: no size up front either
    ],
)
def test_collect_to_a_full_disk(
    tmp_path: Path, reference: Dataset, name: str, extra: list[str]
) -> None:
    rescue, cwd = tmp_path / "tmp", tmp_path / "cwd"
    rescue.mkdir()
    cwd.mkdir()
    with small_fs(tmp_path / "fs", 8 * PAGE) as fs:
        done = expcli_process(
            "collect",
            *RUN,
            "-q",
            "-o",
            str(fs / name),
            *extra,
            cwd=cwd,
            env={"TMPDIR": str(rescue)},
        )
        assert done.returncode == 1, done.stderr
        line = one_error_line(done.stderr)
        assert os.listdir(fs) == []
    kept = rescue / name.replace("c.", "c-rescued.")
    assert line.startswith(f"error: {fs}: no space left on device")
    assert line.endswith(f"; the 2,000 transitions collected were saved to {kept} instead")
    assert done.stdout == ""
    same_data(load(kept), reference)


def test_collect_when_the_folder_turns_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: Dataset
) -> None:
    rescue = tmp_path / "tmp"
    rescue.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(rescue))  # what TMPDIR sets for a process
    monkeypatch.chdir(tmp_path)
    with small_fs(tmp_path / "fs", 64 * PAGE) as fs:
        settings = CollectSettings(
            env_id="CartPole-v1", steps=2000, mode="dummy", seed=0, output=fs / "c.h5"
        )
        job = CollectJob(settings)
        job.start()
        try:
            job.run()
        finally:
            job.close()
        read_only(fs)
        with pytest.raises(OutputError) as info:
            job.save()
        assert info.value.path == str(fs) and info.value.saved_to == str(rescue / "c-rescued.h5")
        assert "read-only file system" in str(info.value)
        assert os.listdir(fs) == [".c.h5.expcli.lock"]  # unremovable now, but held by none
    same_data(load(rescue / "c-rescued.h5"), reference)


def test_collect_with_nowhere_to_keep_its_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with small_fs(tmp_path / "fs", 64 * PAGE) as fs:
        for folder in ("out", "tmp", "cwd"):
            (fs / folder).mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(fs / "tmp"))
        monkeypatch.chdir(fs / "cwd")
        job = CollectJob(
            CollectSettings(
                env_id="CartPole-v1", steps=64, mode="dummy", output=fs / "out" / "c.npz"
            )
        )
        job.start()
        job.run()
        job.close()
        read_only(fs)
        with pytest.raises(OutputError) as info:
            job.save()
    assert info.value.saved_to is None
    assert str(info.value).endswith(
        f"; saving what was collected to {fs / 'tmp'} or {fs / 'cwd'} failed too"
    )


@pytest.mark.parametrize("where", ["read-only", "folder"])
def test_collect_refuses_an_unwritable_output_before_collecting(tmp_path: Path, where: str) -> None:
    with small_fs(tmp_path / "fs", 16 * PAGE) as fs:
        (fs / "c.npz").mkdir()
        target = fs / ("sub/c.npz" if where == "read-only" else "c.npz")
        if where == "read-only":
            read_only(fs)
        result = CliRunner().invoke(app, ["collect", *RUN, "-q", "--overwrite", "-o", str(target)])
        assert result.exit_code == 1
        expected = {
            "read-only": f"error: {fs / 'sub'}: read-only file system; cannot write c.npz",
            "folder": f"error: {target}: is a folder; name a file to write",
        }
        assert result.stderr.strip() == expected[where]
        assert os.listdir(fs) == ["c.npz"] and os.listdir(fs / "c.npz") == []


def test_collect_refuses_stdout(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["collect", *RUN, "-o", "-"])
    assert result.exit_code == 2
    assert "cannot write to stdout" in result.stderr
    assert not Path("-").exists()


def test_an_env_failure_then_a_full_disk_reports_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rescue = tmp_path / "tmp"
    rescue.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(rescue))
    with small_fs(tmp_path / "fs", 4 * PAGE) as fs:
        leave_free(fs, 0)
        args = [CRASHING_ID, "--steps", "400", "--mode", "dummy", "-q", "-o", str(fs / "c.npz")]
        result = CliRunner().invoke(app, ["collect", *args])
        assert sorted(os.listdir(fs)) == ["ballast"]
    assert result.exit_code == 1
    env_line, save_line = result.stderr.strip().splitlines()
    assert env_line.startswith("error: env 0:") and "Traceback" not in result.stderr
    assert save_line.startswith(f"error: {fs}: no space left on device")
    assert save_line.endswith(f"were saved to {rescue / 'c-rescued.npz'} instead")
    assert len(load(rescue / "c-rescued.npz")) > 0
