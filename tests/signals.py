"""Send SIGTERM to an expcli child once a file of its appears: the helper of the signal tests.

``timeout``, systemd and Slurm stop a job with SIGTERM; the tests that send one mid-write
wait for the write's temporary (or spool) file to appear in its folder, then signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sigterm_once(argv: list[str], folder: Path, appeared: Callable[[str], bool]) -> tuple[int, str]:
    """Run ``python argv`` with expcli importable; SIGTERM it once a name in ``folder``
    passes ``appeared``. Returns its exit code and stderr.

    Fails the test where the child ends, or 60 s pass, before such a name appears.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    child = subprocess.Popen(
        [sys.executable, *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not any(appeared(name) for name in os.listdir(folder)):
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, f"no such file appeared in {folder}"
            time.sleep(0.005)
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
    return child.returncode, stderr
