"""Readers stream: drawing a batch from an HDF5 file (plain and gzip) or a mapped
``.npz``, and converting a skrl-layout ``.npz`` or a gzip ``.h5``, take about the same peak
memory for 24 MB and for 96 MB of data (measured in a child process: its peak RSS minus
its RSS before the call)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from expcli import save
from expcli.formats.dataset import Dataset
from expcli.spec import CircularState

SMALL_MB, LARGE_MB = 24, 96
FLAT_MB = 30  # the large file's peak may exceed the small one's by this much (eager: 72)

MEASURE = """
import sys

def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])

what, source = sys.argv[1], sys.argv[2]
if what == "sample":
    import torch  # imports are not the data
    from expcli.replay import RandomSampler, ReplayBuffer
    import expcli.formats.hdf5_format, h5py
    before = kib("VmRSS:")
    buffer = ReplayBuffer(source, sampler=RandomSampler(), seed=0)
    batch = buffer.sample(256)
    assert batch["frames"].shape == (256, 4096)
else:
    from expcli.conversion import convert
    import expcli.formats.npz_format, expcli.formats.hdf5_format, h5py
    before = kib("VmRSS:")
    layout = sys.argv[4] if len(sys.argv) > 4 else "expcli"
    num_envs = int(sys.argv[5]) if len(sys.argv) > 5 else None
    convert(source, sys.argv[3], overwrite=True, layout=layout, num_envs=num_envs)
print((kib("VmHWM:") - before) // 1024)
"""


def growth_mib(tmp_path: Path, *args: object) -> int:
    """Run ``MEASURE`` in a fresh interpreter: how many MiB its peak RSS grew in the call."""
    script = tmp_path / "measure.py"
    script.write_text(textwrap.dedent(MEASURE))
    out = subprocess.run(
        [sys.executable, str(script), *map(str, args)], check=True, capture_output=True, text=True
    )
    return int(out.stdout.strip().splitlines()[-1])


def frames_data(megabytes: int, compressible: bool) -> dict[str, np.ndarray]:
    """``frames`` of 4 envs x 4096 bytes (``megabytes`` in all) and a few small tensors."""
    rows = megabytes * 2**20 // (4 * 4096)
    rng = np.random.default_rng(megabytes)
    if compressible:  # mostly zeros, as frames with a plain background: gzip shrinks them
        frames = np.zeros((rows, 4, 4096), np.uint8)
        frames[:, :, ::64] = rng.integers(0, 255, (rows, 4, 64), dtype=np.uint8)
    else:
        frames = rng.integers(0, 255, (rows, 4, 4096), dtype=np.uint8)
    return {
        "frames": frames,
        "rewards": rng.random((rows, 4, 1), dtype=np.float32),
        "terminated": rng.random((rows, 4, 1)) < 0.02,
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("suffix", "compression"), [(".h5", None), (".h5", "gzip"), (".npz", None)]
)
def test_sampling_a_file_holds_only_the_batch(tmp_path, suffix, compression) -> None:
    """HDF5 is read by chunks; a stored .npz member is mapped, and the pages a batch
    touched are let go (the kernel maps whole folios, megabytes, per row touched)."""

    def peak(megabytes: int) -> int:
        data = Dataset(frames_data(megabytes, compression is not None), CircularState(0, 0, True))
        source = save(data, tmp_path / f"{megabytes}{suffix}", compression=compression)
        return growth_mib(tmp_path, "sample", source)

    small, large = peak(SMALL_MB), peak(LARGE_MB)
    assert large - small < FLAT_MB, (small, large)
    assert large < LARGE_MB / 2, (small, large)


@pytest.mark.slow
def test_converting_a_skrl_npz_streams(tmp_path) -> None:
    def peak(megabytes: int) -> int:
        source = tmp_path / f"skrl-{megabytes}.npz"
        arrays = frames_data(megabytes, compressible=False)
        np.savez(source, **arrays)  # skrl's Memory.save: the tensors, no metadata
        return growth_mib(tmp_path, "convert", source, tmp_path / f"{megabytes}.h5")

    small, large = peak(SMALL_MB), peak(LARGE_MB)
    assert large - small < FLAT_MB, (small, large)


@pytest.mark.slow
def test_converting_a_gzip_hdf5_file_streams(tmp_path) -> None:
    def peak(megabytes: int) -> int:
        data = Dataset(frames_data(megabytes, compressible=True), CircularState(0, 0, True))
        source = save(data, tmp_path / f"{megabytes}.h5", compression="gzip")
        return growth_mib(tmp_path, "convert", source, tmp_path / f"{megabytes}.npz")

    small, large = peak(SMALL_MB), peak(LARGE_MB)
    assert large - small < FLAT_MB, (small, large)
