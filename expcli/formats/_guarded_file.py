"""Output through libraries that a full disk (or any failed write) can crash: HDF5, torch.

HDF5 does not survive a failed write (h5py issue 914, still so with HDF5 2.0): the error
surfaces in whichever call flushed the chunk cache, closing the file then fails half-way,
and releasing the half-closed dataset later reads freed memory: a segfault in
``H5D_close``, at the latest when the interpreter exits. So HDF5 never sees a failed write.
It writes through ``GuardedFile`` (h5py's file-object driver), which records the first
``OSError``, reports success, and drops every later write; HDF5 then closes the file as if
nothing happened, and ``Hdf5Output`` raises the recorded error, which the atomic write turns
into one ``OutputError`` while deleting the temporary file. ``torch.save`` is written through
one too (``guarded_file``): its zip writer meets a failed write, then fails again on closing
and raises that second, unrelated error in place of the first.

A Ctrl-C or SIGTERM is a failed write too when its ``KeyboardInterrupt`` is raised inside one
of these callbacks (HDF5 then crashes, as above). While such a file is open, a signal that
arrives inside a callback is handed on a few milliseconds later, once the library has
returned to Python code of its caller (``callbacks_spared``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from expcli.files.atomic import open_own

__all__ = ["GuardedFile", "Hdf5Output", "callbacks_spared", "guarded_file"]


class GuardedFile:
    """A seekable binary file whose failed writes are recorded instead of raised.

    After the first failure (``error``), writes and truncations are dropped; reads still
    read the file (zeros past its end, as HDF5's own driver gives).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.error: OSError | None = None
        self._fd = open_own(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        self._position = 0

    def __repr__(self) -> str:
        return str(self.path)  # h5py names the file by it in its messages

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_SET:
            self._position = offset
        elif whence == os.SEEK_CUR:
            self._position += offset
        else:
            self._position = os.fstat(self._fd).st_size + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view):
            count = os.preadv(self._fd, [view[done:]], self._position + done)
            if count == 0:
                break
            done += count
        view[done:] = bytes(len(view) - done)
        self._position += len(view)
        return len(view)

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            size = max(0, os.fstat(self._fd).st_size - self._position)
        buffer = bytearray(size)
        self.readinto(buffer)
        return bytes(buffer)

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        if self.error is None:
            try:
                done = 0
                while done < len(view):
                    done += os.pwrite(self._fd, view[done:], self._position + done)
            except OSError as e:
                self.error = e
        self._position += len(view)
        return len(view)

    def truncate(self, size: int | None = None) -> int:
        size = self._position if size is None else size
        if self.error is None:
            try:
                os.ftruncate(self._fd, size)
            except OSError as e:
                self.error = e
        return size

    def flush(self) -> None:
        """Nothing is buffered here; the atomic write fsyncs the finished file."""

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


_CALLBACKS = frozenset(
    vars(GuardedFile)[name].__code__
    for name in ("seek", "tell", "readinto", "read", "write", "truncate", "flush", "close")
)
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_RETRY_SECONDS = 0.005


@contextlib.contextmanager
def callbacks_spared() -> Iterator[None]:
    """Keep signal handlers from raising inside ``GuardedFile``'s methods for the block.

    The handlers in place (Python's Ctrl-C, the CLI's, collect's) are wrapped: a signal that
    finds the main thread in a callback is sent again shortly, until it finds it elsewhere,
    where the handler runs as it would have. Off the main thread, nothing changes (signals
    are handled on the main thread, which then runs no callback of this file).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    main = threading.main_thread().ident

    def handle(signum: int, frame: FrameType | None) -> None:
        if _in_callback(frame):
            assert main is not None
            later = threading.Timer(_RETRY_SECONDS, signal.pthread_kill, (main, signum))
            later.daemon = True
            later.start()
            return
        original = previous[signal.Signals(signum)]
        if callable(original):
            original(signum, frame)
        elif original is not signal.SIG_IGN:  # the default: end the process as it would have
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    for sig in _SIGNALS:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig, old in previous.items():
            if signal.getsignal(sig) is handle:  # not replaced meanwhile
                signal.signal(sig, signal.SIG_DFL if old is None else old)


def _in_callback(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs inside a ``GuardedFile`` method (called by the library's C code)."""
    while frame is not None:
        if frame.f_code in _CALLBACKS:
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def guarded_file(path: str | os.PathLike[str]) -> Iterator[GuardedFile]:
    """A ``GuardedFile`` over ``path`` (created or emptied).

    Its first failed write is raised when the block ends, in place of what the writer raised after
    it.

    Raises:
        OSError: As the write failed (``ENOSPC`` for a full disk).
    """
    file = GuardedFile(path)
    try:
        with callbacks_spared():
            yield file
    except Exception:
        if file.error is None:
            raise
        raise file.error from None
    finally:
        file.close()
    if file.error is not None:
        raise file.error


class Hdf5Output:
    """An ``h5py.File`` newly written at ``path`` through a ``GuardedFile``.

    ``path`` is a temporary file: it is created or emptied.

    Example::

        with atomic_path(target) as tmp, Hdf5Output(tmp) as h5:
            h5["x"] = array

    ``check()`` raises the recorded write error, for writers that want to stop early; the
    ``with`` block raises it at the end in any case, in place of errors HDF5 met reading
    back what was dropped.
    """

    def __init__(self, path: str | os.PathLike[str], **options: Any) -> None:
        self.path = Path(path)
        self._options = options
        self._raw: GuardedFile | None = None
        self._file: Any = None
        self._spared = contextlib.ExitStack()

    def __enter__(self) -> Any:
        import h5py

        self._raw = GuardedFile(self.path)
        self._spared.enter_context(callbacks_spared())
        try:
            self._file = h5py.File(self._raw, "w", **self._options)
        except BaseException:
            self._raw.close()
            self._spared.close()
            self.check()
            raise
        return self._file

    def check(self) -> None:
        """Raise the first failed write, if any.

        Raises:
            OSError: As the write failed (``ENOSPC`` for a full disk).
        """
        if self._raw is not None and self._raw.error is not None:
            raise self._raw.error

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._raw is not None
        try:
            self._file.close()
        finally:
            self._raw.close()
            self._spared.close()
        if error is None or isinstance(error, Exception):
            self.check()
