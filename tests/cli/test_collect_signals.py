"""Ctrl-C while collecting, in a real process: the data so far is saved, exit 130."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from expcli import load

ROOT = Path(__file__).resolve().parents[2]


def _start(
    out: Path, mode: str
) -> tuple[subprocess.Popen[str], list[str], threading.Event, threading.Thread]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "expcli",
            "collect",
            "CartPole-v1",
            "--envs",
            "4",
            "--episodes",
            "100000000",
            "--mode",
            mode,
            "-o",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    collecting = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("collecting"):
                collecting.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return proc, lines, collecting, reader


def _finish(proc: subprocess.Popen[str], reader: threading.Thread) -> str:
    """Wait for the process; its stdout (stderr is in the reader's lines)."""
    proc.wait(timeout=60)
    reader.join(10)
    assert proc.stdout is not None
    return proc.stdout.read()


def _cleanup(proc: subprocess.Popen[str], reader: threading.Thread) -> None:
    proc.kill()
    proc.wait()
    reader.join(10)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


@pytest.mark.parametrize("mode", ["dummy", "subproc"])
def test_sigint_saves_what_was_collected(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "partial.npz"
    proc, lines, collecting, reader = _start(out, mode)
    try:
        assert collecting.wait(60), "".join(lines)
        time.sleep(1.0)
        workers = _children(proc.pid)
        proc.send_signal(signal.SIGINT)
        stdout = _finish(proc, reader)
    finally:
        _cleanup(proc, reader)
    stderr = "".join(lines)
    assert proc.returncode == 130, stderr
    assert "saved" in stderr and "interrupted" in stderr
    saved = int(stderr.split("interrupted: saved ")[1].split(" transitions")[0].replace(",", ""))
    dataset = load(out)
    assert len(dataset) == saved > 0
    assert dataset.metadata["collector"]["interrupted"] is True
    assert f"{saved:,}" in stdout  # the summary table was printed too
    time.sleep(0.5)
    assert not [
        pid
        for pid in workers
        if Path(f"/proc/{pid}").exists()
        and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
    ]


def test_second_sigint_stops_without_writing_a_half_file(tmp_path: Path) -> None:
    out = tmp_path / "twice.npz"
    proc, lines, collecting, reader = _start(out, "dummy")
    try:
        assert collecting.wait(60), "".join(lines)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGINT)
        _finish(proc, reader)
    finally:
        _cleanup(proc, reader)
    assert proc.returncode == 130
    leftovers = [p.name for p in tmp_path.iterdir() if p != out]
    assert leftovers == [], leftovers  # no temporary file left behind
    if out.exists():  # the first signal's save may have finished before the second came
        load(out)
