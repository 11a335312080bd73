"""Converting between npz and HDF5 streams: peak memory stays far below the file size."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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

def peak_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

def current_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

before = current_kib()
convert(sys.argv[1], sys.argv[2], overwrite=True, verify=True)
print((peak_kib() - before) // 1024)
"""


@pytest.mark.slow
def test_npz_and_hdf5_convert_in_bounded_memory(tmp_path: Path) -> None:
    rows = 300_000  # 16 envs x (32 + 8 + 1) bytes: about 200 MB of tensors
    source = tmp_path / "big.npz"
    subprocess.run([sys.executable, "-c", MAKE.format(rows=rows, path=source)], check=True)
    assert source.stat().st_size > 190e6
    script = tmp_path / "measure.py"
    script.write_text(textwrap.dedent(MEASURE))
    for src, dst in [(source, tmp_path / "big.h5"), (tmp_path / "big.h5", tmp_path / "again.npz")]:
        out = subprocess.run(
            [sys.executable, str(script), str(src), str(dst)],
            check=True,
            capture_output=True,
            text=True,
        )
        grew_mib = int(out.stdout.strip().splitlines()[-1])
        print(f"{src.suffix} -> {dst.suffix}: peak RSS grew {grew_mib} MiB")
        assert grew_mib < 100, f"{src.suffix} -> {dst.suffix} grew {grew_mib} MiB"
    from expcli import load

    first, last = load(source), load(tmp_path / "again.npz")
    assert first.state == last.state
    for name, array in first.tensors.items():
        assert last.tensors[name].dtype == array.dtype
        assert last.tensors[name].tobytes() == array.tobytes(), name
