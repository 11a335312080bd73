"""Writing where the disk is full or read-only, or a folder is in the way, on small file
systems mounted for the test: one line naming the folder (and for a full disk the bytes
needed), exit 1, no traceback, no crash (HDF5 segfaulted), no partial or temporary file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from expcli.conversion import save
from expcli.formats.dataset import Dataset
from expcli.spec import CircularState
from tests.small_fs import PAGE, expcli_process, leave_free, one_error_line, read_only, small_fs

TARGETS = {  # output name -> extra options
    "out.pt": [],
    "out.npz": [],
    "out.csv": [],
    "out.h5": [],
    "out.hdf5": ["--compression", "gzip"],  # size unknown up front: found full while writing
}
NEEDS = re.compile(r"needs at least [^(]*\(([\d,]+) bytes\)")


def random_dataset(rows: int) -> Dataset:
    """Incompressible data (gzip saves nothing), 80 bytes a row."""
    rng = np.random.default_rng(0)
    return Dataset(
        {
            "observations": rng.random((rows, 2, 8)).astype(np.float32),
            "actions": rng.integers(0, 255, (rows, 2, 8), dtype=np.uint8),
        },
        CircularState(0, 0, True),
        {"env_id": "Toy-v0"},
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save(random_dataset(2000), tmp_path_factory.mktemp("src") / "source.npz")


@pytest.mark.parametrize("name", TARGETS)
def test_convert_to_a_full_disk(tmp_path: Path, source: Path, name: str) -> None:
    with small_fs(tmp_path / "fs", 16 * PAGE) as fs:
        done = expcli_process("convert", str(source), str(fs / name), *TARGETS[name], cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        line = one_error_line(done.stderr)
        assert line.startswith(f"error: {fs}: no space left on device")
        assert sorted(os.listdir(fs)) == []
    real = expcli_process(
        "convert", str(source), str(tmp_path / name), *TARGETS[name], cwd=tmp_path
    )
    assert real.returncode == 0, real.stderr
    size = sum(p.stat().st_size for p in tmp_path.glob(f"{name}*"))
    if TARGETS[name]:
        assert "needs more than the" in line
        return
    needed = int(NEEDS.search(line)[1].replace(",", ""))  # type: ignore[index]
    data = 2000 * 2 * 8 * (4 + 1)
    assert needed <= size  # a lower bound: never refuses what would have fitted
    assert needed >= (data if name != "out.csv" else 2000 * 2 * 8 * 2)


@pytest.mark.parametrize("name", ["out.pt", "out.npz", "out.csv", "out.h5", "out.hdf5"])
def test_disk_full_during_the_write(tmp_path: Path, name: str) -> None:
    """The estimate fits, the file does not: the disk fills while writing (where HDF5 used
    to segfault after its traceback)."""
    rows = 20 * PAGE - 100  # the data fits in the 20 free pages, with the file's overhead not
    tensors = {"observations": np.arange(rows, dtype=np.uint8).reshape(rows, 1, 1)}
    source = save(Dataset(tensors, CircularState(0, 0, True)), tmp_path / "source.npz")
    with small_fs(tmp_path / "fs", 64 * PAGE) as fs:
        leave_free(fs, (40 if name == "out.csv" else 20) * PAGE)
        done = expcli_process("convert", str(source), str(fs / name), cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        line = one_error_line(done.stderr)
        assert line.startswith(f"error: {fs}: no space left on device: {name} needs")
        assert os.listdir(fs) == ["ballast"]


def test_save_h5_to_a_full_disk_from_python(tmp_path: Path) -> None:
    """``expcli.save(..., "x.h5")`` raises ``OutputError`` and the process lives on."""
    script = textwrap.dedent(
        f"""
        import numpy as np, expcli
        from expcli.formats.dataset import Dataset
        rows = {20 * PAGE - 100}
        data = Dataset({{"observations": np.ones((rows, 1, 1), np.uint8)}})
        try:
            expcli.save(data, {str(tmp_path / "fs" / "x.h5")!r})
        except expcli.OutputError as e:
            print(type(e).__name__, e.errno, e.free)
        import gc; gc.collect()
        print("alive")
        """
    )
    with small_fs(tmp_path / "fs", 64 * PAGE) as fs:
        leave_free(fs, 20 * PAGE)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["OutputError", "28", str(20 * PAGE), "alive"]
        assert done.stderr == ""
        assert os.listdir(fs) == ["ballast"]


@pytest.mark.parametrize("name", ["out.pt", "out.npz", "out.csv", "out.h5"])
def test_convert_to_a_read_only_folder(tmp_path: Path, source: Path, name: str) -> None:
    with small_fs(tmp_path / "fs", 16 * PAGE) as fs:
        read_only(fs)
        for target in (fs / name, fs / "sub" / name):
            done = expcli_process("convert", str(source), str(target), cwd=tmp_path)
            assert done.returncode == 1, done.stderr
            line = one_error_line(done.stderr)
            assert line == f"error: {target.parent}: read-only file system; cannot write {name}"
        assert os.listdir(fs) == []


@pytest.mark.parametrize("name", ["out.pt", "out.csv", "out.h5"])
def test_output_that_is_a_folder(tmp_path: Path, source: Path, name: str) -> None:
    (tmp_path / name).mkdir()
    (tmp_path / name / "keep").write_text("mine")
    done = expcli_process("convert", str(source), name, "--overwrite", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert one_error_line(done.stderr) == f"error: {name}: is a folder; name a file to write"
    assert sorted(os.listdir(tmp_path)) == [name] and os.listdir(tmp_path / name) == ["keep"]
