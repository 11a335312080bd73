"""SIGTERM during a write is Ctrl-C: exit 130, no temporary file, no lock, no half output.

``timeout``, systemd and Slurm stop a job with SIGTERM. Sent to ``convert``, ``merge``,
``filter`` or ``split`` once the temporary output exists, it used to end the process at
once (exit 143), leaving the temporary file (the output's size) and the lock behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import expcli
from expcli.spec import CircularState
from tests.signals import sigterm_once

ROOT = Path(__file__).resolve().parents[2]
ROWS, ENVS, WIDTH = 40_000, 4, 64  # 41 MB of noise: seconds to gzip, enough to be caught


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("signals") / "noise.npz"
    rng = np.random.default_rng(0)
    done = np.zeros((ROWS, ENVS), bool)
    done[99::100] = True
    tensors = {
        "observations": rng.standard_normal((ROWS, ENVS, WIDTH), dtype=np.float32),
        "rewards": rng.standard_normal((ROWS, ENVS, 1), dtype=np.float32),
        "terminated": done[..., None],
        "truncated": np.zeros((ROWS, ENVS, 1), bool),
    }
    expcli.save(expcli.Dataset(tensors, CircularState(0, 0, True)), path)
    return path


def _command(verb: str, source: Path, out: Path, suffix: str) -> list[str]:
    slow = ["--compression", "gzip"]  # HDF5's and Parquet's slowest codec: time to signal
    target = str(out / f"t{suffix}")
    if verb == "convert":
        return ["convert", str(source), target, *slow]
    if verb == "merge":
        return ["merge", str(source), str(source), "-o", target, *slow]
    if verb == "filter":
        return ["filter", str(source), "--where", "return > -1e9", "-o", target, *slow]
    return ["split", str(source), "-o", target, "-o", str(out / f"u{suffix}"), *slow]


@pytest.mark.parametrize(
    ("verb", "suffix"),
    [
        ("convert", ".h5"),
        ("convert", ".parquet"),
        ("merge", ".h5"),
        ("filter", ".parquet"),
        ("split", ".h5"),
    ],
)
def test_sigterm_during_a_write_cleans_up_and_exits_130(
    tmp_path: Path, source: Path, verb: str, suffix: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    first = f".t{suffix}.expcli-"  # the first output's temporary file
    argv = ["-m", "expcli", *_command(verb, source, out, suffix)]
    returncode, stderr = sigterm_once(argv, out, lambda name: name.startswith(first))
    assert "Traceback" not in stderr
    assert returncode in (130, 0, -signal.SIGTERM), stderr  # 0, -15: it came too late
    left = sorted(os.listdir(out))
    assert all(not name.startswith(".") for name in left), f"temporary or lock left: {left}"
    for name in left:  # a signal after an output was renamed into place leaves it complete
        expcli.load(out / name)


def test_a_signal_inside_an_hdf5_callback_waits_until_hdf5_returns(tmp_path: Path) -> None:
    """A KeyboardInterrupt raised inside HDF5's file callbacks crashes HDF5 (a segfault).

    Here the handler is called from inside ``GuardedFile.write`` (as a signal landing there
    would be): it raises nothing there, and the interrupt arrives once HDF5 returned.
    """
    script = f"""
import os, signal, sys, time
import numpy as np
from expcli.formats import _guarded_file
from expcli.files.atomic import atomic_path
from expcli.formats._guarded_file import Hdf5Output

real_pwrite, calls = os.pwrite, []
def pwrite(fd, data, offset):  # called by GuardedFile.write: its frame is the caller's
    calls.append(offset)
    if len(calls) == 3:
        signal.getsignal(signal.SIGINT)(signal.SIGINT, sys._getframe(1))
    return real_pwrite(fd, data, offset)
_guarded_file.os.pwrite = pwrite
try:
    with atomic_path({str(tmp_path / "x.h5")!r}) as tmp, Hdf5Output(tmp) as h5:
        h5.create_dataset("a", data=np.zeros((400, 1000)), chunks=(10, 1000))
        h5.flush()
        time.sleep(5)
except KeyboardInterrupt:
    print("interrupted after", len(calls), "writes")
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("interrupted after"), (done.stdout, done.stderr)
    assert os.listdir(tmp_path) == []
