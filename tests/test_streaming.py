"""Converting between npz, HDF5 and CSV streams: peak memory stays far below the data size."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from expcli.spec import CircularState

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

MEASURE = """
import sys
from expcli.conversion import convert
import expcli.formats.npz_format, expcli.formats.hdf5_format, h5py  # imports are not the data
import expcli.formats.pt_format

def peak_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

def current_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

before = current_kib()
convert(sys.argv[1], sys.argv[2], overwrite=True, verify="--no-verify" not in sys.argv)
print((peak_kib() - before) // 1024)
"""


def convert_growth_mib(tmp_path: Path, src: Path, dst: Path, *flags: str) -> int:
    """Convert in a fresh interpreter; how many MiB its peak RSS grew during the call."""
    script = tmp_path / "measure.py"
    if not script.exists():
        script.write_text(textwrap.dedent(MEASURE))
    out = subprocess.run(
        [sys.executable, str(script), str(src), str(dst), *flags],
        check=True,
        capture_output=True,
        text=True,
    )
    grew_mib = int(out.stdout.strip().splitlines()[-1])
    print(f"{src.suffix} -> {dst.suffix}: peak RSS grew {grew_mib} MiB")
    return grew_mib


def assert_same_tensors(first_path: Path, second_path: Path) -> None:
    from expcli import load

    first, second = load(first_path), load(second_path)
    assert first.state == second.state
    for name, array in first.tensors.items():
        assert second.tensors[name].dtype == array.dtype
        assert second.tensors[name].tobytes() == array.tobytes(), name


@pytest.mark.slow
def test_npz_and_hdf5_convert_in_bounded_memory(tmp_path: Path) -> None:
    rows = 300_000  # 16 envs x (32 + 8 + 1) bytes: about 200 MB of tensors
    source = tmp_path / "big.npz"
    subprocess.run([sys.executable, "-c", MAKE.format(rows=rows, path=source)], check=True)
    assert source.stat().st_size > 190e6
    for src, dst in [(source, tmp_path / "big.h5"), (tmp_path / "big.h5", tmp_path / "again.npz")]:
        assert convert_growth_mib(tmp_path, src, dst) < 100
    assert_same_tensors(source, tmp_path / "again.npz")


@pytest.mark.slow
def test_pt_output_is_written_in_bounded_memory(tmp_path: Path) -> None:
    """Without --verify: reading the .pt back maps it, and imports torch."""
    source = tmp_path / "big.npz"
    subprocess.run([sys.executable, "-c", MAKE.format(rows=300_000, path=source)], check=True)
    convert_growth_mib(tmp_path, source, tmp_path / "big.h5")
    for src in (source, tmp_path / "big.h5"):
        dst = tmp_path / f"from-{src.suffix[1:]}.pt"
        assert convert_growth_mib(tmp_path, src, dst, "--no-verify") < 100
        assert_same_tensors(source, dst)


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


@pytest.mark.slow
def test_csv_converts_in_bounded_memory(tmp_path: Path) -> None:
    """CSV rows are parsed a chunk at a time: converting a CSV file whose tensors take about
    180 MB (an int64 cell is 2 bytes of text, 8 in memory) grows the RSS far less."""
    rows = 300_000  # 16 envs x (32 + 4 + 1) bytes
    source = tmp_path / "big.csv"
    subprocess.run([sys.executable, "-c", MAKE_CSV.format(rows=rows, path=source)], check=True)
    for dst in (tmp_path / "big.npz", tmp_path / "big.h5"):
        assert convert_growth_mib(tmp_path, source, dst) < 100
    from expcli import load

    assert load(tmp_path / "big.npz").state == CircularState(7, 3, False)
    assert sum(a.nbytes for a in load(tmp_path / "big.npz").tensors.values()) > 170e6
    assert_same_tensors(tmp_path / "big.npz", tmp_path / "big.h5")
