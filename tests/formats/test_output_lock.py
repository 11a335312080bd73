"""The output lock: one process at a time, the holder named, nothing left by a clean
writer, nothing held by a killed one or by a forked child."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from expcli.errors import OutputLockedError
from expcli.files import output_lock
from expcli.files.output_lock import OutputLock, lock_path

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
HOLD = """
import os, sys, time
from expcli.files.output_lock import OutputLock
lock = OutputLock(sys.argv[1])
lock.acquire()
if sys.argv[2] == "fork":  # an env worker forked by the writer, outliving it
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
print("held", flush=True)
sys.stdin.readline()
lock.release()
print("released", flush=True)
sys.stdin.readline()
"""


def _hold(target: Path, how: str = "") -> subprocess.Popen[str]:
    """A process holding the lock of ``target``; a line on its stdin releases it."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(target), how],
        env=ENV,
        start_new_session=True,  # its forked child too is killed by ``_end``
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def _try(target: Path) -> str:
    """What another process gets: "took" the lock or "refused"."""
    script = (
        "import sys\n"
        "from expcli.errors import OutputLockedError\n"
        "from expcli.files.output_lock import OutputLock\n"
        "try:\n"
        "    OutputLock(sys.argv[1]).acquire()\n"
        "except OutputLockedError:\n"
        "    print('refused')\n"
        "else:\n"
        "    print('took')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(target)], env=ENV, capture_output=True, text=True
    )
    return done.stdout.strip()


def _end(child: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.communicate()


def test_a_second_process_is_refused_naming_the_holder(tmp_path: Path) -> None:
    target = tmp_path / "run"
    holder = _hold(target)
    try:
        before = lock_path(target).read_bytes()
        with pytest.raises(OutputLockedError) as info:
            OutputLock(target).acquire()
        assert info.value.holder["pid"] == str(holder.pid)
        assert info.value.holder["host"] == socket.gethostname()
        assert info.value.path == str(target)
        message = str(info.value)
        assert "\n" not in message and f"pid {holder.pid} on host" in message
        assert lock_path(target).read_bytes() == before  # the refused one changed nothing
        assert not target.exists()
    finally:
        _end(holder)
    with OutputLock(target):  # killed: its lock died with it
        pass
    assert os.listdir(tmp_path) == []


def test_the_same_process_may_take_it_again(tmp_path: Path) -> None:
    target = tmp_path / "out.npz"
    outer, inner = OutputLock(target), OutputLock(target)
    outer.acquire()
    inner.acquire()
    inner.release()
    inner.release()
    assert lock_path(target).exists()  # the outer holder still holds it
    outer.release()
    assert os.listdir(tmp_path) == []


def test_a_killed_writers_forked_child_does_not_keep_the_lock(tmp_path: Path) -> None:
    target = tmp_path / "run"
    holder = _hold(target, "fork")
    try:
        holder.kill()  # kill -9; its child sleeps on, holding a copy of the descriptor
        holder.wait()
        assert _try(target) == "took"
    finally:
        _end(holder)


def test_a_writer_that_opened_the_file_as_its_holder_let_go_locks_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder removes the file as it lets go; one who opened it meanwhile starts again."""
    target = tmp_path / "run"
    holder = _hold(target)
    opened = []
    real_open = os.open

    def open_then_let_go(path: str, flags: int, mode: int = 0o777) -> int:
        fd = real_open(path, flags, mode)
        if not flags & os.O_CREAT:  # signing the lock it holds
            return fd
        if not opened:  # the holder lets go between this open and the flock
            assert holder.stdin is not None and holder.stdout is not None
            holder.stdin.write("\n")
            holder.stdin.flush()
            assert holder.stdout.readline() == "released\n"
        opened.append(fd)
        return fd

    monkeypatch.setattr(output_lock.os, "open", open_then_let_go)
    lock = OutputLock(target)
    lock.acquire()
    monkeypatch.undo()
    try:
        assert len(opened) == 2  # the removed file, then the new one
        assert _try(target) == "refused"  # held: a third writer is refused
    finally:
        lock.release()
        _end(holder)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("writer", ["save", "convert", "Memory.save"])
def test_every_writer_of_a_held_output_is_refused(tmp_path: Path, writer: str) -> None:
    import numpy as np

    import expcli

    source = tmp_path / "source.npz"
    expcli.save(expcli.Dataset({"observations": np.zeros((4, 1, 2), np.float32)}), source)
    target = tmp_path / "out.npz"
    holder = _hold(target)
    try:
        with pytest.raises(OutputLockedError):
            if writer == "save":
                expcli.save(expcli.load(source), target)
            elif writer == "convert":
                expcli.convert(source, target)
            else:
                memory = expcli.RandomMemory(4, 1, "cpu")
                memory.create_tensor("observations", 2)
                memory.save(str(target))
        assert sorted(os.listdir(tmp_path)) == [".out.npz.expcli.lock", "source.npz"]
    finally:
        _end(holder)
