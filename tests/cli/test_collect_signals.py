"""Ctrl-C or SIGTERM while collecting, in a real process: the data so far is saved, exit 130.

The process is started in a session of its own, so that a signal can go to its whole
group, as a terminal's Ctrl-C or a service manager's SIGTERM does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from expcli import load
from tests.envs.misbehaving_ids import MISBEHAVING_ID

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _time_sharing() -> None:
    """Run each test, and so the collect it starts, under the normal scheduling policy.

    Seen here: the xdist worker running this file had been made SCHED_FIFO 99 by SVT-AV1,
    which does that to a root thread opening an encoder, in an earlier file's video write
    (``lerobot._video`` now puts the policy back); the hanging env's workers inherited it,
    and their busy loops held both cores for good, the test's own signal included.
    """
    normal = (os.SCHED_OTHER, os.SCHED_BATCH, os.SCHED_IDLE)
    if hasattr(os, "sched_getscheduler") and os.sched_getscheduler(0) not in normal:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def _start(
    out: Path, mode: str, *env: str
) -> tuple[subprocess.Popen[str], list[str], threading.Event, threading.Thread]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "expcli",
            "collect",
            *(env or ["CartPole-v1"]),
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
        start_new_session=True,
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
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
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


@pytest.mark.parametrize(
    ("mode", "signum", "to_group"),
    [
        ("dummy", signal.SIGINT, False),
        ("subproc", signal.SIGINT, False),
        ("dummy", signal.SIGTERM, True),
        ("subproc", signal.SIGTERM, True),
    ],
)
def test_a_signal_saves_what_was_collected(
    tmp_path: Path, mode: str, signum: signal.Signals, to_group: bool
) -> None:
    """SIGTERM is Ctrl-C; workers ignore the group's signals and the parent stops them."""
    out = tmp_path / "partial.npz"
    proc, lines, collecting, reader = _start(out, mode)
    try:
        assert collecting.wait(60), "".join(lines)
        time.sleep(1.0)
        workers = _children(proc.pid)
        (os.killpg if to_group else os.kill)(proc.pid, signum)
        stdout = _finish(proc, reader)
    finally:
        _cleanup(proc, reader)
    stderr = "".join(lines)
    assert proc.returncode == 130, stderr
    assert f"{signum.name}: stopping" in stderr and "error" not in stderr
    saved = _saved(stderr)
    dataset = load(out)
    assert len(dataset) == saved > 0
    assert dataset.metadata["collector"]["interrupted"] is True
    assert f"{saved:,}" in stdout  # the summary table was printed too
    _assert_gone(workers)


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


def _saved(stderr: str) -> int:
    return int(stderr.split("interrupted: saved ")[1].split(" transitions")[0].replace(",", ""))


def _assert_gone(pids: list[int]) -> None:
    time.sleep(0.5)
    assert not [
        pid
        for pid in pids
        if Path(f"/proc/{pid}").exists()
        and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
    ]


@pytest.mark.parametrize("mode", ["dummy", "subproc"])
def test_ctrl_c_while_an_env_hangs_saves_and_exits_130(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "hung.npz"
    env = [MISBEHAVING_ID, "--env-kwargs", '{"how": "loop", "at": 20}', "--step-timeout", "0"]
    proc, lines, collecting, reader = _start(out, mode, *env)
    try:
        assert collecting.wait(60), "".join(lines)
        time.sleep(1.5)  # the envs hang at their 20th step
        workers = _children(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail("Ctrl-C did not stop collect while an env hung:\n" + "".join(lines))
        _finish(proc, reader)
    finally:
        _cleanup(proc, reader)
    stderr = "".join(lines)
    assert proc.returncode == 130, stderr
    dataset = load(out)
    assert len(dataset) == _saved(stderr) == 19 * 4
    _assert_gone(workers)


FRAMES = ["benchmarks.frame_env:ConstantFrame-v0", "--env-kwargs", '{"shape": [64, 64, 4]}']


@pytest.mark.parametrize(
    "signals", [[signal.SIGTERM], [signal.SIGINT, signal.SIGTERM]], ids=["once", "twice"]
)
def test_a_signal_during_a_merge_finishes_or_keeps_the_rows(
    tmp_path: Path, signals: list[signal.Signals]
) -> None:
    """Once: the file is finished; twice: the rows are kept in a folder, and a line says
    which. Closing the envs puts SIGTERM back to its default first, as Ray's shutdown does:
    the merge must not be left to it."""
    out = tmp_path / "run.npz"
    wrapper = "tests.envs.toy_envs:ResetsSignalsOnClose"
    args = [*FRAMES, "--wrapper", wrapper, "--steps", "12000", "--spool", "--mode", "dummy"]
    proc = _collect_quietly(args, out)
    try:
        deadline = time.monotonic() + 60
        while not [p for p in tmp_path.glob(".run.npz.expcli-*") if p.is_file()]:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.005)  # the file being merged into has appeared
        for signum in signals:
            proc.send_signal(signum)
            time.sleep(0.1)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    assert proc.returncode == 130, stderr
    lines = stderr.strip().splitlines()
    first = signals[0].name
    kept = tmp_path / "run-rescued"
    if len(signals) == 1:
        assert lines == [
            f"{first}: finishing the file (again to stop at once, keeping the rows in a "
            "folder beside the file)",
            f"interrupted: saved 12,000 transitions to {out}",
        ]
        assert stdout.strip() == str(out) and len(load(out)) == 12_000
        assert [p.name for p in tmp_path.iterdir()] == [out.name]
    else:
        assert lines[1:] == [
            f"interrupted: the 12,000 transitions collected are kept in the sharded folder "
            f"{kept} (`expcli convert {kept} run.npz` writes the file)"
        ], stderr
        assert len(load(kept)) == 12_000
        assert [p.name for p in tmp_path.iterdir()] == [kept.name]


@pytest.mark.parametrize("name", ["run", "run.npz"], ids=["folder", "spooled"])
def test_a_second_signal_while_collecting_keeps_the_shards_written(
    tmp_path: Path, name: str
) -> None:
    """The env hangs at its 40th step, so the first signal's stop takes a second: the
    second comes while collecting. The shards written stay, and a line says where."""
    out = tmp_path / name
    env = [MISBEHAVING_ID, "--env-kwargs", '{"how": "loop", "at": 40}', "--step-timeout", "0"]
    args = [*env, "--steps", "1000", "--mode", "dummy", "--shard-size", "10", "--spool"]
    proc = _collect_quietly(args, out)
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob("**/shard-000002.npz")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        time.sleep(0.5)  # the env hangs in its 40th step
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    assert proc.returncode == 130 and stdout == "", stderr
    kept = out if name == "run" else tmp_path / "run-rescued"
    assert len(load(kept)) == 30  # three shards of 10; the 9 rows staged are dropped
    if name == "run":
        where = f"{kept} holds the 30 transitions of its complete shards"
    else:
        where = f"the 30 transitions collected are kept in the sharded folder {kept}"
    assert stderr.strip().splitlines()[-1].startswith(f"interrupted: {where}"), stderr
    assert [p.name for p in tmp_path.iterdir()] == [kept.name]


def _collect_quietly(args: list[str], out: Path) -> subprocess.Popen[str]:
    """``expcli collect ARGS -q -o OUT`` in a child, its output piped, colours off."""
    return subprocess.Popen(
        [sys.executable, "-m", "expcli", "collect", *args, "-q", "-o", str(out)],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "400", "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
