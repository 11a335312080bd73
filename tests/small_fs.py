"""Small file systems the fault tests mount themselves: a tmpfs of a few pages, made full,
nearly full or read-only on purpose. Mounting needs root (or CAP_SYS_ADMIN); elsewhere the
tests that use them are skipped, saying why."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PAGE = 4096
"""tmpfs counts its space in pages."""


@contextlib.contextmanager
def small_fs(where: Path, size: int) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` bytes (a multiple of ``PAGE``) at ``where`` for the block."""
    mount = shutil.which("mount")
    if not sys.platform.startswith("linux") or mount is None:
        pytest.skip("needs Linux and mount(8) to make a small file system")
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def read_only(where: Path) -> None:
    """Remount the tmpfs at ``where`` read-only (root ignores mode bits, not this)."""
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)


def leave_free(where: Path, free: int) -> None:
    """Fill the file system at ``where`` with a file ``ballast`` until ``free`` bytes (a
    multiple of ``PAGE``) are left."""
    stats = os.statvfs(where)
    extra = stats.f_bavail * stats.f_frsize - free
    assert extra >= 0 and free % PAGE == 0, (extra, free)
    with open(where / "ballast", "wb") as f:
        f.write(b"\0" * extra)
    stats = os.statvfs(where)
    assert stats.f_bavail * stats.f_frsize == free


def one_error_line(stderr: str) -> str:
    """The one line a failing command must print: ``error: ...``, no traceback, nothing else."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def expcli_process(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m expcli ARGS`` as a user would, in a process of its own (a crash in a
    library shows as a signal, not as a dead test run); wide lines, no colours."""
    environment = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "expcli", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
