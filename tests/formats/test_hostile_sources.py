"""Sources that are not files, metadata nested too deep, and reading that writes beside the
source: refused in one line, or kept off the source's folder (issue 13)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

from expcli import load
from expcli.errors import ConfigError, FormatError
from expcli.formats import Dataset, open_lazy, write_dataset
from expcli.formats.layouts import write_layout
from expcli.formats.lazy import RowSpill
from expcli.spec import CircularState
from tests.format_catalogue import SUFFIXES
from tests.memory_probe import run_child

# Writing lossy datasets in foreign layouts on purpose: their one-line warning of what the
# layout does not keep is tested in tests/formats/layouts/test_layout_losses.py.
pytestmark = pytest.mark.filterwarnings("ignore:.*layout does not keep:UserWarning")


def dataset(metadata: dict[str, object] | None = None) -> Dataset:
    rng = np.random.default_rng(0)
    return Dataset(
        {
            "observations": rng.normal(size=(6, 2, 3)).astype(np.float32),
            "actions": rng.integers(0, 2, size=(6, 2, 1)),
            "rewards": np.ones((6, 2, 1), np.float32),
            "terminated": np.zeros((6, 2, 1), bool),
        },
        CircularState(0, 0, True),
        metadata or {},
    )


def nested(depth: int) -> object:
    value: object = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_metadata_nested_900_deep_is_refused_by_every_reader(tmp_path: Path, suffix: str) -> None:
    path = write_dataset(dataset({"x": nested(900)}), tmp_path / f"deep{suffix}")
    with pytest.raises(FormatError, match="nested more than 64 levels") as info:
        load(path)
    assert info.value.path is not None


def test_deep_metadata_is_one_line_from_inspect_json(tmp_path: Path) -> None:
    path = write_dataset(dataset({"x": nested(900)}), tmp_path / "deep.npz")
    run = run_child(["-m", "expcli", "inspect", str(path), "--json"])
    assert run.returncode == 1 and len(run.lines) == 1, run.stderr[-800:]
    assert "nested more than 64 levels" in run.stderr


def test_minari_metadata_nested_100000_deep_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "minari-v0"
    write_layout(dataset(), folder, "minari", overwrite=False)
    (folder / "data" / "metadata.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FormatError, match="nested too deep"):
        load(folder)
    meta = json.loads(json.dumps({"data_format": "hdf5", "x": nested(100)}))
    (folder / "data" / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(FormatError, match="nested more than 64 levels"):
        load(folder)


@pytest.mark.parametrize("command", ["load", "inspect", "convert"])
def test_a_named_pipe_is_refused_at_once(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "data.npz"
    os.mkfifo(fifo)
    if command == "load":
        args = ["-c", f"import expcli; expcli.load({str(fifo)!r})"]
    elif command == "inspect":
        args = ["-m", "expcli", "inspect", str(fifo)]
    else:
        args = ["-m", "expcli", "convert", str(fifo), str(tmp_path / "out.h5")]
    run = run_child(args, timeout=60)
    assert not run.timed_out, "reading a named pipe blocked"
    assert run.returncode == 1
    assert "is a named pipe, not a regular file or folder" in run.stderr
    if command != "load":
        assert len(run.lines) == 1, run.stderr


def test_a_named_pipe_inside_a_minari_folder_is_not_opened(tmp_path: Path) -> None:
    folder = tmp_path / "minari-v0"
    write_layout(dataset(), folder, "minari", overwrite=False)
    (folder / "data" / "metadata.json").unlink()
    os.mkfifo(folder / "data" / "metadata.json")
    run = run_child(["-m", "expcli", "inspect", str(folder), "--check"], timeout=60)
    assert not run.timed_out and run.returncode == 1 and len(run.lines) == 1, run.stderr


def _open_files() -> list[str]:
    """Where this process's open file descriptors point (unlinked files end '(deleted)')."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("sidecar", [True, False])
def test_reading_a_csv_keeps_its_scratch_file_in_tmpdir(
    tmp_path: Path, sidecar: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, scratch = tmp_path / "src", tmp_path / "scratch"
    source.mkdir()
    scratch.mkdir()
    path = write_dataset(dataset(), source / "s.csv")
    if not sidecar:
        (source / "s.csv.meta.json").unlink()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # forget the folder chosen before
    opened, close = open_lazy(path)
    try:
        files = _open_files()  # the scratch file is open while the dataset is
        assert not [f for f in files if f.startswith(str(source) + "/")], files
        assert [f for f in files if f.startswith(str(scratch) + "/")], files
        actions = np.asarray(opened.tensors["actions"]).reshape(-1)
        np.testing.assert_array_equal(actions, dataset().tensors["actions"].reshape(-1))
    finally:
        close()
    assert not [f for f in _open_files() if f.startswith(str(scratch) + "/")]
    assert sorted(p.name for p in source.iterdir()) == ["s.csv"] + ["s.csv.meta.json"] * sidecar
    assert list(scratch.iterdir()) == []


def test_a_scratch_folder_that_cannot_be_written_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot write the scratch file"):
        RowSpill([2], tmp_path / "missing")
