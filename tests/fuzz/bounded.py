"""Run code that may hang or blow up in a child process, with a time limit, and measure it.

The hostile-file tests read files that made expcli hang or allocate gigabytes; they run
the read in a child so that a regression fails the test (by its time limit, or by the peak
memory measured here) instead of taking the test run down with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Run:
    """How a child ended: its exit code (None: killed at the time limit), its output, the
    largest resident memory it reached, and how long it took."""

    returncode: int | None
    stdout: str
    stderr: str
    peak_mb: float
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def lines(self) -> list[str]:
        """The non-empty lines of stderr."""
        return [line for line in self.stderr.splitlines() if line.strip()]


def run_bounded(args: list[str], timeout: float = 60.0, env: dict[str, str] | None = None) -> Run:
    """Run ``python ARGS`` (``-c CODE`` or ``-m expcli ...``) with this checkout first on the
    path; kill it after ``timeout`` seconds. Its output is read as UTF-8, strictly."""
    environ = dict(os.environ if env is None else env)
    paths = (str(ROOT), environ.get("PYTHONPATH"))
    environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    environ.setdefault("COLUMNS", "120")
    environ.setdefault("PYTHONIOENCODING", "utf-8:strict")  # a strict terminal
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r") as peak,
    ):
        started = time.monotonic()
        command = [sys.executable, "-c", _BOOT, peak.name, *args]
        child = subprocess.Popen(command, stdout=out, stderr=err, env=environ)
        try:
            returncode = child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            returncode = None
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
        peak_kb = int(peak.read() or 0)
    return Run(returncode, stdout, stderr, peak_kb / 1024, seconds)


# The child measures itself: the peak of its own memory once it runs this code (a fork's
# rusage would count the parent's pages), written at exit to the file named first.
_BOOT = """
import atexit, runpy, sys
peak_file, mode, target, *rest = sys.argv[1:]
def _peak():
    with open("/proc/self/status") as status:
        kb = next((l.split()[1] for l in status if l.startswith("VmHWM:")), "0")
    with open(peak_file, "w") as out:
        out.write(kb)
atexit.register(_peak)
if mode == "-m":
    sys.argv = [target, *rest]
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    sys.argv = ["-c", *rest]
    exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})
"""
