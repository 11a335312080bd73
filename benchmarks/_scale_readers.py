"""The readers' half of ``benchmarks/scale.py``: GB-sized files, and convert/sample runs.

For each size: a skrl-layout ``.npz`` (``np.savez`` members, no metadata), a gzip ``.h5``
(frames with a plain background, as Atari's), a plain ``.h5`` and the same data as an
expcli ``.npz``. ``reader_cases`` then runs, each in a fresh interpreter, ``convert`` skrl
``.npz`` -> ``.h5`` and gzip ``.h5`` -> ``.npz``, and ``sample`` one batch of 256
(``ReplayBuffer(path).sample``) from the plain ``.h5``, the gzip ``.h5`` and the ``.npz``
(memory-mapped), each giving seconds and peak RSS above the interpreter's RSS before the
call.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np

ENVS, FRAME = 8, 84 * 84  # one env's frame: a row of 8 envs is 56 KB

CHILD = """
import sys, time

def kib(field):
    return int(next(x for x in open("/proc/self/status") if x.startswith(field)).split()[1])

what, source = sys.argv[1], sys.argv[2]
import h5py, numpy, expcli.formats.hdf5_format, expcli.formats.npz_format
if what == "sample":
    import torch
    from expcli.replay import ReplayBuffer
    before, start = kib("VmRSS:"), time.perf_counter()
    ReplayBuffer(source, seed=0).sample(256)
else:
    from expcli.conversion import convert
    before, start = kib("VmRSS:"), time.perf_counter()
    convert(source, sys.argv[3], overwrite=True)
print(time.perf_counter() - start, (kib("VmHWM:") - before) / 1024)
"""


def rows_for(gigabytes: float) -> int:
    return int(gigabytes * 2**30 // (ENVS * FRAME))


def frames_block(rows: int, offset: int, plain_background: bool) -> np.ndarray:
    """Rows of ``(ENVS, FRAME)`` uint8 frames; random noise, or a few dots on zeros."""
    rng = np.random.default_rng(offset)
    if plain_background:
        block = np.zeros((rows, ENVS, FRAME), np.uint8)
        block[:, :, ::97] = rng.integers(0, 255, (rows, ENVS, FRAME // 97 + 1), np.uint8)
        return block
    return rng.integers(0, 255, (rows, ENVS, FRAME), np.uint8)


def small_tensors(rows: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(rows)
    return {
        "actions": rng.integers(0, 6, (rows, ENVS, 1)),
        "rewards": rng.random((rows, ENVS, 1), dtype=np.float32),
        "terminated": rng.random((rows, ENVS, 1)) < 0.001,
    }


def write_skrl_npz(path: Path, rows: int) -> None:
    """What ``np.savez`` writes, member by member, without holding the frames."""
    step = 2048
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in small_tensors(rows).items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array)
        header = {"descr": "|u1", "fortran_order": False, "shape": (rows, ENVS, FRAME)}
        with archive.open("states.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_2_0(member, header)
            for start in range(0, rows, step):
                member.write(frames_block(min(step, rows - start), start, False).tobytes())


def write_h5(path: Path, rows: int, compression: str | None) -> None:
    from expcli.formats.dataset import Dataset
    from expcli.formats.hdf5_format import Hdf5Writer
    from expcli.spec import CircularState

    small = small_tensors(rows)
    header_data = {**small, "observations": np.zeros((0, ENVS, FRAME), np.uint8)}
    header = Dataset(header_data, CircularState(0, 0, True)).header()
    header["memory_size"] = rows
    with Hdf5Writer(path, overwrite=True, compression=compression) as writer:
        writer.create(header)
        for name, array in small.items():
            writer.write_rows(name, 0, array)
        step = writer.slab_rows("observations")
        for start in range(0, rows, step):
            block = frames_block(min(step, rows - start), start, compression is not None)
            writer.write_rows("observations", start, block)


def measure(folder: Path, repeats: int, *args: object) -> tuple[float, float]:
    """Median seconds and median peak MiB above baseline of ``CHILD`` run ``repeats`` times."""
    script = folder / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    times, peaks = [], []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, str(script), *map(str, args)],
            check=True,
            capture_output=True,
            text=True,
        )
        seconds, peak = map(float, out.stdout.split())
        times.append(seconds)
        peaks.append(peak)
    return statistics.median(times), statistics.median(peaks)


def reader_cases(folder: Path, gigabytes: float, repeats: int) -> dict[str, tuple[float, float]]:
    """Median seconds and peak MiB above baseline of each reader case on files of
    ``gigabytes``, written under ``folder`` and removed afterwards."""
    here = folder / f"readers-{gigabytes:g}GB"
    here.mkdir(parents=True, exist_ok=True)
    try:
        rows = rows_for(gigabytes)
        write_skrl_npz(here / "skrl.npz", rows)
        write_h5(here / "gzip.h5", rows, "gzip")
        write_h5(here / "plain.h5", rows, None)
        measure(here, 1, "convert", here / "plain.h5", here / "expcli.npz")
        cases = {
            "convert skrl .npz -> .h5": ("convert", here / "skrl.npz", here / "out.h5"),
            "convert gzip .h5 -> .npz": ("convert", here / "gzip.h5", here / "out.npz"),
            "sample 256 from .h5": ("sample", here / "plain.h5"),
            "sample 256 from gzip .h5": ("sample", here / "gzip.h5"),
            "sample 256 from .npz (mapped)": ("sample", here / "expcli.npz"),
        }
        results = {}
        for label, args in cases.items():
            results[label] = measure(here, repeats, *args)
            for leftover in (here / "out.h5", here / "out.npz"):
                leftover.unlink(missing_ok=True)
        return results
    finally:
        shutil.rmtree(here, ignore_errors=True)
