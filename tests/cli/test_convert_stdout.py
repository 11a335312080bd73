"""``expcli convert SRC -`` streams npz, pt and csv to stdout, refuses the rest in one line,
and never writes a file named ``-``."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from expcli.conversion import load, save
from expcli.formats.dataset import Dataset
from expcli.spec import CircularState
from tests.format_catalogue import WHOLE_STREAMS
from tests.small_fs import expcli_process, one_error_line


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Dataset]:
    rng = np.random.default_rng(3)
    original = Dataset(
        {
            "observations": rng.normal(size=(300, 2, 5)).astype(np.float32),
            "actions": rng.integers(0, 9, (300, 2, 1)),
            "terminated": rng.random((300, 2, 1)) < 0.1,
        },
        CircularState(100, 0, True),
        {"env_id": "Toy-v0"},
    )
    return save(original, tmp_path_factory.mktemp("src") / "a.h5"), original


def streamed(source: Path, fmt: str, cwd: Path) -> bytes:
    done = subprocess.run(
        [sys.executable, "-m", "expcli", "convert", str(source), "-", "--to", fmt],
        cwd=cwd,
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b"" and not (cwd / "-").exists()
    return done.stdout


@pytest.mark.parametrize("fmt", WHOLE_STREAMS)
def test_binary_formats_stream_whole(
    tmp_path: Path, source: tuple[Path, Dataset], fmt: str
) -> None:
    path, original = source
    (tmp_path / f"got.{fmt}").write_bytes(streamed(path, fmt, tmp_path))
    again = load(tmp_path / f"got.{fmt}")
    assert again.state == original.state and again.metadata["env_id"] == "Toy-v0"
    for name, array in original.tensors.items():
        assert again.tensors[name].dtype == array.dtype
        assert np.array_equal(again.tensors[name], array)
    if fmt == "npz":  # numpy itself reads the streamed archive
        with np.load(tmp_path / "got.npz") as npz:
            assert np.array_equal(npz["observations"], original.tensors["observations"])


def test_csv_streams_its_rows(tmp_path: Path, source: tuple[Path, Dataset]) -> None:
    """Every row of every env, without the sidecar: read back as a CSV without one is."""
    path, original = source
    (tmp_path / "got.csv").write_bytes(streamed(path, "csv", tmp_path))
    assert not (tmp_path / "got.csv.meta.json").exists()
    again = load(tmp_path / "got.csv", num_envs=2)
    assert sorted(again.tensors) == sorted(original.tensors)
    for name, array in original.tensors.items():
        got = np.asarray(again.tensors[name]).astype(array.dtype)  # dtypes are inferred
        assert np.array_equal(got, array), name


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--to", "hdf5"], "hdf5 cannot be written to a stream"),
        ([], "name the format with --to"),
        (["--to", "npz", "--verify"], "--verify needs a file"),
        (["--to", "csv", "--layout", "skrl"], "--layout needs a file"),
    ],
)
def test_refusals(
    tmp_path: Path, source: tuple[Path, Dataset], args: list[str], message: str
) -> None:
    done = expcli_process("convert", str(source[0]), "-", *args, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert message in one_error_line(done.stderr)
    assert os.listdir(tmp_path) == []


def test_binary_to_a_terminal_is_refused(tmp_path: Path, source: tuple[Path, Dataset]) -> None:
    main, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "expcli", "convert", str(source[0]), "-", "--to", "npz"],
            cwd=tmp_path,
            stdout=terminal,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "400"},
            timeout=300,
        )
    finally:
        os.close(terminal)
        os.close(main)
    assert done.returncode == 2
    assert "refusing to write binary npz to a terminal" in one_error_line(done.stderr)
    assert os.listdir(tmp_path) == []
