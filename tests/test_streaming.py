"""Converting between npz, HDF5, .pt and CSV streams: the peak memory of a conversion does
not grow with the data (``tests.memory_probe``: a small and a five times larger file, each
converted in a fresh child), and the converted tensors equal the source's."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from expcli.spec import CircularState
from tests.memory_probe import LARGE_MIB, MIB, Run, assert_flat, convert_run

MAKE = """
import numpy as np
from expcli import save
from expcli.formats.dataset import Dataset
from expcli.spec import CircularState
T, N = {rows}, 16
rng = np.random.default_rng(0)
save(Dataset({{"observations": rng.random((T, N, 8), dtype=np.float32),
               "actions": rng.integers(0, 9, (T, N, 1)),
               "terminated": rng.random((T, N, 1)) < 0.01}}, CircularState(5, 0, True)),
     "{path}")
"""
ROW_BYTES = 16 * (32 + 8 + 1)

MAKE_CSV = """
import numpy as np
from expcli import save
from expcli.formats.dataset import Dataset
from expcli.spec import CircularState
T, N = {rows}, 16
rng = np.random.default_rng(0)
save(Dataset({{"actions": rng.integers(0, 10, (T, N, 4)),
               "observations": rng.random((T, N, 1), dtype=np.float32),
               "terminated": rng.random((T, N, 1)) < 0.01}}, CircularState(7, 3, False)),
     "{path}")
"""
CSV_ROW_BYTES = 16 * (32 + 4 + 1)  # an int64 cell is 2 bytes of text, 8 in memory

PARQUET_IMPORTS = ("pyarrow", "pyarrow.parquet", "expcli.formats.parquet_format")


def sources(folder: Path, make: str, row_bytes: int, suffix: str) -> Callable[[float], Path]:
    """The file of ``mib`` MiB of tensors, made by ``make`` in a child on first use."""

    def source(mib: float) -> Path:
        path = folder / f"{mib:.0f}{suffix}"
        if not path.exists():
            code = make.format(rows=int(mib * MIB) // row_bytes, path=path)
            subprocess.run([sys.executable, "-c", code], check=True)
        return path

    return source


def assert_same_tensors(first_path: Path, second_path: Path) -> None:
    from expcli import load

    first, second = load(first_path), load(second_path)
    assert first.state == second.state
    for name, array in first.tensors.items():
        assert second.tensors[name].dtype == array.dtype
        assert second.tensors[name].tobytes() == array.tobytes(), name


@pytest.mark.slow
def test_npz_and_hdf5_convert_in_bounded_memory(tmp_path: Path) -> None:
    npz = sources(tmp_path, MAKE, ROW_BYTES, ".npz")

    def to_h5(mib: float) -> Run:
        return convert_run(npz(mib), tmp_path / f"{mib:.0f}.h5", verify=True)

    def back_to_npz(mib: float) -> Run:
        return convert_run(tmp_path / f"{mib:.0f}.h5", tmp_path / "again.npz", verify=True)

    assert_flat(to_h5)
    assert_flat(back_to_npz)
    assert_same_tensors(npz(240), tmp_path / "again.npz")


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".npz", ".h5"])
def test_pt_output_is_written_in_bounded_memory(tmp_path: Path, suffix: str) -> None:
    """Without verify: reading the .pt back maps it, and imports torch."""
    source = sources(tmp_path, MAKE, ROW_BYTES, suffix)

    def to_pt(mib: float) -> Run:
        return convert_run(source(mib), tmp_path / f"{mib:.0f}.pt", imports=("torch",))

    assert_flat(to_pt, 96, 336)  # the first 80 MiB fill the reading and writing buffers
    assert_same_tensors(source(336), tmp_path / "336.pt")


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".npz", ".h5"])
def test_csv_converts_in_bounded_memory(tmp_path: Path, suffix: str) -> None:
    """CSV rows are parsed a chunk at a time."""
    csv = sources(tmp_path, MAKE_CSV, CSV_ROW_BYTES, ".csv")

    def convert(mib: float) -> Run:
        return convert_run(csv(mib), tmp_path / f"{mib:.0f}{suffix}")

    assert_flat(convert, 96, 240)  # the first 50 MiB fill the parser's chunks
    from expcli import load

    assert load(tmp_path / f"240{suffix}").state == CircularState(7, 3, False)
    assert_same_tensors(csv(240), tmp_path / f"240{suffix}")


@pytest.mark.slow
def test_parquet_converts_both_ways_in_bounded_memory(tmp_path: Path) -> None:
    """A row group (about 32 MB of rows) at a time, the bookkeeping columns (episode and
    frame numbers: as large as the data when rows are small) included."""
    pytest.importorskip("pyarrow")
    npz = sources(tmp_path, MAKE, ROW_BYTES, ".npz")
    parquet = sources(tmp_path, MAKE, ROW_BYTES, ".parquet")

    def to_parquet(mib: float) -> Run:
        target = tmp_path / f"{mib:.0f}-out.parquet"
        return convert_run(npz(mib), target, imports=PARQUET_IMPORTS)

    def to_npz(mib: float) -> Run:
        return convert_run(parquet(mib), tmp_path / "out.npz", imports=PARQUET_IMPORTS)

    assert_flat(to_parquet)
    assert_same_tensors(npz(LARGE_MIB), tmp_path / f"{LARGE_MIB}-out.parquet")
    # Arrow's allocator keeps what it freed, up to a bound that a few groups reach: above it
    assert_flat(to_npz, 96, 480)
    assert_same_tensors(parquet(480), tmp_path / "out.npz")


@pytest.mark.slow
def test_parquet_folders_convert_both_ways_in_bounded_memory(tmp_path: Path) -> None:
    """A folder's shards (128 MB of rows each by default) are written a row group at a time
    as their rows are read, never a whole shard in memory, and read back so. Sizes as for
    a file: 96 MiB is one shard, 480 four, past what Arrow's allocator keeps."""
    pytest.importorskip("pyarrow")
    npz = sources(tmp_path, MAKE, ROW_BYTES, ".npz")

    def to_folder(mib: float) -> Run:
        target = tmp_path / f"{mib:.0f}-folder"
        return convert_run(npz(mib), target, imports=PARQUET_IMPORTS, shard_format="parquet")

    def to_npz(mib: float) -> Run:
        source = tmp_path / f"{mib:.0f}-folder"
        return convert_run(source, tmp_path / "back.npz", imports=PARQUET_IMPORTS)

    assert_flat(to_folder, 96, 480)
    assert len(list((tmp_path / "480-folder").glob("shard-*.parquet"))) == 4
    # Read back, the shards' rows go episode by episode. With glibc as Arrow's pool the
    # peak grew with the shards read (+114 MiB at 480, +190 at 960); jemalloc, expcli's
    # pool since, holds it flat.
    assert_flat(to_npz, 96, 480)
    assert_same_tensors(npz(480), tmp_path / "back.npz")


MAKE_FRAMES = """
import numpy as np
from expcli import save
from expcli.formats.dataset import Dataset
from expcli.spec import CircularState
T, N = {rows}, 4
rng = np.random.default_rng(0)
frames = np.frombuffer(rng.bytes((T + 1) * N * 4096), np.uint8).reshape(T + 1, N, 4096)
ends = rng.random((T, N, 1)) < 0.01
following = frames[1:].copy()
following[ends[..., 0]] = 0  # an episode's true last frame, not the next one's first
save(Dataset({{"observations": frames[:-1], "next_observations": following,
               "terminated": ends}}, CircularState(0, 0, True)), "{path}")
"""
FRAMES_ROW_BYTES = 4 * (2 * 4096 + 1)


@pytest.mark.slow
@pytest.mark.parametrize(("suffix", "target"), [(".npz", ".h5"), (".h5", ".npz")])
def test_next_observations_stored_once_convert_in_bounded_memory(
    tmp_path: Path, suffix: str, target: str
) -> None:
    """Derived next observations are read by slices of observation rows, never through a map
    whose pages stay (a gather of the kept cells through one grew with the file), and stored
    once again. The 96 MiB fill the buffers: two tensors read ahead, two compared."""
    once = sources(tmp_path, MAKE_FRAMES, FRAMES_ROW_BYTES, suffix)

    def convert(mib: float) -> Run:
        return convert_run(once(mib), tmp_path / f"{mib:.0f}-out{target}", verify=True)

    assert_flat(convert, 96, 480)
    assert_same_tensors(once(480), tmp_path / f"480-out{target}")
