"""One writer per output: an exclusive OS lock on a file beside the target.

Every writer of a dataset holds ``OutputLock(target)`` while it writes: a collect run to a
folder or a file (fresh, ``--overwrite``, ``--resume``, spooled and merged), ``convert``
and ``save`` into it. A second writer is refused at once (``OutputLockedError``, naming
the holder's pid, host, start time and command) before it touches anything.

The lock is ``flock`` on ``.NAME.expcli.lock`` beside ``NAME``, in the same folder:

* beside, not inside: ``--overwrite`` deletes the folder and ``convert`` renames a complete
  one into its place; a lock file inside would go with the old folder while its holder
  still writes. Beside, it outlives both, files are locked the same way, and readers never
  see it;
* an OS lock dies with its process: after a kill -9 the file stays but nobody holds it,
  and the next writer takes it at once (and removes it when done; a clean run leaves
  nothing behind);
* the holder removes the file before letting go, so a writer that opened the old file
  meanwhile finds, once it holds that lock, that the name is another file now, and starts
  again on the new one.

The lock belongs to the process (taken again by the same process, it is counted, not
refused: a collect run's own merge or save writes the target it holds) and is not handed
to forked children (env workers). ``flock`` on a network file system is only as good as
the server's locking; elsewhere than POSIX there is no lock.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import shlex
import socket
import stat
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from expcli.errors import OutputError, OutputLockedError, printable
from expcli.files.atomic import output_error, output_errors

try:
    import fcntl
except ImportError:  # not POSIX: no lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["OutputLock", "lock_path"]

_SUFFIX = ".expcli.lock"
_HOLDER_BYTES = 4096
_FIELD_CHARS = 200
_held: dict[str, list[int]] = {}  # lock file -> [descriptor, times taken] (this process)
_guard = threading.Lock()


def lock_path(target: str | os.PathLike[str]) -> Path:
    """The lock file of ``target``: ``.NAME.expcli.lock`` beside its real location."""
    real = Path(os.path.abspath(target))
    with contextlib.suppress(OSError):
        real = real.parent.resolve() / real.name
    return real.with_name(f".{real.name}{_SUFFIX}")


class OutputLock:
    """The exclusive lock of one output path; ``acquire``/``release``, or ``with``.

    Args:
        target: The file or folder to be written (it need not exist).
    """

    def __init__(self, target: str | os.PathLike[str]) -> None:
        self.target = Path(target)
        self.path = lock_path(target)
        self._holding = False

    def acquire(self) -> None:
        """Take the lock (the folder holding the target is created if missing).

        Raises:
            OutputLockedError: Another process holds it; nothing was changed.
            OutputError: The lock file cannot be created there.
        """
        if self._holding or fcntl is None:
            return
        key = str(self.path)
        with _guard:
            held = _held.get(key)
            if held is not None:
                held[1] += 1
            else:
                _held[key] = [self._take(), 1]
        self._holding = True

    def release(self) -> None:
        """Let go of the lock (idempotent); the last holder in this process removes the file."""
        if not self._holding:
            return
        self._holding = False
        key = str(self.path)
        with _guard:
            held = _held.get(key)
            if held is None:
                return
            held[1] -= 1
            if held[1] > 0:
                return
            del _held[key]
            with contextlib.suppress(OSError):  # removed while held: see the module's notes
                os.unlink(self.path)
            os.close(held[0])

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()

    def _take(self) -> int:
        """Open, lock and sign the lock file; the descriptor, held."""
        assert fcntl is not None
        with output_errors(self.target, every=True):
            self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = _open_lock_file(self.path, self.target)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise OutputLockedError(self.target, holder) from None
            except BaseException:
                os.close(fd)
                raise
            if _same_file(fd, self.path):
                _sign(fd, self.path)
                return fd
            os.close(fd)  # its holder let go and removed it meanwhile: lock the new one


_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | os.O_CLOEXEC


def _open_lock_file(path: Path, target: Path) -> int:
    """Open (creating) the lock file: a regular file, never through a link, a FIFO or a device.

    ``O_NOFOLLOW`` refuses a symlink planted in its place (it would aim the signature at
    another file) and ``O_NONBLOCK`` a FIFO that would block the open forever; anything but
    a regular file found there is refused, and nothing is written to it.

    Raises:
        OutputError: Something other than a regular file stands where the lock file goes.
    """
    # read-only: an open writable file would keep its file system from being remounted
    # read-only; flock needs no write access
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | _NO_FOLLOW, 0o666)
    except OSError as e:
        try:
            found = os.lstat(path).st_mode
        except OSError:
            found = stat.S_IFREG
        _refuse_other_kinds(found, path)
        raise output_error(e, target) from e
    try:
        _refuse_other_kinds(os.fstat(fd).st_mode, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_other_kinds(mode: int, path: Path) -> None:
    kind = stat.S_IFMT(mode)
    if kind != stat.S_IFREG:
        what = _KINDS.get(kind, "of another kind")
        raise OutputError(
            f"expcli's lock file is {what}, not a regular file; nothing was written. Remove "
            "it if no expcli process writes there",
            path=path,
        )


_KINDS = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def _same_file(fd: int, path: Path) -> bool:
    try:
        named = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def _sign(fd: int, path: Path) -> None:
    """Write who holds the lock into it (best effort: a full disk must not stop the run).

    The file is opened for writing again without following a link and only written when it
    is the very file locked through ``fd``.
    """
    since = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": since}
    holder |= {"command": _command()}
    try:
        out = os.open(path, os.O_WRONLY | _NO_FOLLOW)
    except OSError:
        return
    try:
        if _same_inode(out, fd):
            os.ftruncate(out, 0)
            os.pwrite(out, json.dumps(holder).encode(), 0)
    except OSError:
        pass
    finally:
        os.close(out)


def _same_inode(a: int, b: int) -> bool:
    first, second = os.fstat(a), os.fstat(b)
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _command() -> str:
    argv = list(sys.argv) or ["python"]
    program = Path(argv[0]).name
    argv[0] = "expcli" if program in ("__main__.py", "expcli") else program
    return shlex.join(argv)


def _holder(fd: int) -> dict[str, str]:
    """What the holder wrote, as short printable strings (it may still be writing it)."""
    for _ in range(20):
        try:
            data = json.loads(os.pread(fd, _HOLDER_BYTES, 0))
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict):
            return {k: _clean(data[k]) for k in ("pid", "host", "since", "command") if k in data}
        time.sleep(0.01)
    return {}


def _clean(value: Any) -> str:
    text = re.sub(r"[\x00-\x1f\x7f]+", " ", printable(str(value)))
    return text if len(text) <= _FIELD_CHARS else text[: _FIELD_CHARS - 3] + "..."


def _forget_in_child() -> None:
    """A forked child closes its copies of the held descriptors: the lock stays the parent's."""
    global _guard
    _guard = threading.Lock()
    for fd, _ in _held.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _held.clear()


if fcntl is not None:
    os.register_at_fork(after_in_child=_forget_in_child)
