"""Atomic file writes: a temporary file in the target's folder, renamed over the target.

A write that fails or is interrupted (including by Ctrl-C) never leaves a half file under
the target's name, and never leaves its temporary file behind. A process killed outright
(SIGKILL, a crash) cannot clean up, so temporary files carry the writer's host and pid:
``.NAME.expcli-PID-HOST-RANDOM.tmp``; the next write to the same target removes those whose
process is gone (on this host; never another live writer's).

Failures of the output itself (no space, a read-only or missing folder, no permission, a
folder where the file should go) become one ``OutputError`` naming the folder or file.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno as errnos
import io
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Literal, overload

from expcli.errors import ExpcliError, OutputError, OutputExistsError
from expcli.files.free_space import DISK_FULL, disk_full_error, recount_free
from expcli.files.temp_names import BACKUP, remove, remove_stale, temp_name

__all__ = [
    "OUTPUT_ERRNOS",
    "open_own",
    "atomic_path",
    "atomic_write",
    "check_before_commit",
    "check_can_write",
    "commit_check_deferred",
    "check_writable",
    "create_temp",
    "fsync_dir",
    "fsync_tree",
    "output_error",
    "output_errors",
    "remove_stale",
]

OUTPUT_ERRNOS = DISK_FULL | {errnos.EROFS, errnos.EFBIG}
"""Errors that, met while a writer runs, are the output's fault; others (a source that
cannot be read) pass through unchanged."""

_before_commit: contextvars.ContextVar[Callable[[Path], None] | None] = contextvars.ContextVar(
    "_before_commit", default=None
)


_OWN = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def open_own(path: str | os.PathLike[str], flags: int, mode: int = 0o666) -> int:
    """``os.open`` of a file expcli made beside an output: never through a link, never blocking.

    A temporary or companion swapped for a symlink or a FIFO meanwhile fails (``ELOOP``,
    ``ENXIO``) instead of aiming the write elsewhere or hanging; usable as ``open``'s
    ``opener``.
    """
    return os.open(path, flags | _OWN, mode)


def check_writable(path: str | os.PathLike[str], *, overwrite: bool) -> None:
    """Fail early, before any data is produced, when ``path`` exists and may not be replaced.

    What dead writers left beside it is cleaned up first (``remove_stale``).

    Raises:
        OutputExistsError: ``path`` exists and ``overwrite`` is false.
    """
    remove_stale(Path(path))
    if not overwrite and os.path.lexists(path):
        raise OutputExistsError(path)


def check_can_write(path: str | os.PathLike[str], *, folder: bool = False) -> None:
    """Fail early, before any data is produced, when ``path`` clearly cannot be written.

    A folder stands where the file should go, or the folder that would hold it (its nearest existing
    ancestor) is read-only or not writable. A full disk is found only by writing.

    Raises:
        OutputError: As above.
    """
    target = Path(path)
    if not folder and target.is_dir():
        raise OutputError("is a folder; name a file to write", path=target, errno=errnos.EISDIR)
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not os.access(parent, os.W_OK | os.X_OK):
        code = errnos.EROFS if _read_only(parent) else errnos.EACCES
        raise output_error(OSError(code, os.strerror(code)), target.parent / target.name)


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


@contextlib.contextmanager
def check_before_commit(check: Callable[[Path], None]) -> Iterator[None]:
    """Run ``check(temporary_path)`` on every atomic write of the block before it commits.

    Each write calls it once its file is complete and before renaming it into place (``convert
    --verify`` reads it back there); an exception from ``check`` cancels the write.
    """
    token = _before_commit.set(check)
    try:
        yield
    finally:
        _before_commit.reset(token)


@contextlib.contextmanager
def commit_check_deferred() -> Iterator[Callable[[Path], None] | None]:
    """For a writer of a folder: the block's own files skip ``check_before_commit``'s check.

    Yields the check (None: there is none), for the writer to run once on its complete
    temporary folder before renaming it into place.
    """
    check = _before_commit.get()
    token = _before_commit.set(None)
    try:
        yield check
    finally:
        _before_commit.reset(token)


@overload
def atomic_write(
    path: str | os.PathLike[str],
    mode: Literal["wb"] = ...,
    *,
    overwrite: bool = ...,
) -> contextlib.AbstractContextManager[IO[bytes]]: ...


@overload
def atomic_write(
    path: str | os.PathLike[str],
    mode: Literal["w"],
    *,
    overwrite: bool = ...,
) -> contextlib.AbstractContextManager[IO[str]]: ...


def atomic_write(
    path: str | os.PathLike[str],
    mode: Literal["wb", "w"] = "wb",
    *,
    overwrite: bool = True,
) -> contextlib.AbstractContextManager[IO[bytes]] | contextlib.AbstractContextManager[IO[str]]:
    """Open a temporary file to write ``path`` atomically.

    The file is named ``.NAME.expcli-PID-HOST-RANDOM.tmp`` in the target's own folder (so
    that the final rename never crosses file systems). When the ``with`` block ends normally
    it is flushed, fsynced, renamed over ``path`` and the folder is fsynced; when the block
    raises anything, the temporary file is deleted and the exception propagates. Text mode
    writes UTF-8 with newlines untranslated, as the csv module wants.

    Args:
        path: Target file.
        mode: ``"wb"`` for a binary file, ``"w"`` for a text file.
        overwrite: Whether an existing ``path`` may be replaced. When false, the rename is
            a no-clobber link where the file system supports it.

    Raises:
        OutputExistsError: ``path`` exists and ``overwrite`` is false.
        OutputError: The output cannot be written (see the module docstring).
    """
    return _atomic(Path(path), mode, overwrite)


@contextlib.contextmanager
def _atomic(target: Path, mode: str, overwrite: bool) -> Iterator[IO[Any]]:
    with (
        _atomic_path(target, overwrite, ()) as tmp,
        open(tmp, "w", encoding="utf-8", newline="", opener=open_own)
        if mode == "w"
        else _WritebackFile(io.FileIO(tmp, "wb", opener=open_own)) as file,
    ):
        yield file


_WRITEBACK_BYTES = 8 << 20


class _WritebackFile(io.BufferedWriter):
    """A binary file that hands each 8 MiB it wrote to the disk at once.

    ``posix_fadvise(DONTNEED)`` on the range just written makes Linux start writing its
    dirty pages back without waiting: the disk works while the writer goes on, as it does
    for one long ``dd``, instead of idling until the final fsync pushes everything at
    once (about 2x faster for a stream of fsynced files here). Where there is no such
    call (macOS) or the file cannot take it, nothing changes.
    """

    def __init__(self, raw: io.FileIO) -> None:
        super().__init__(raw, buffer_size=1 << 20)
        self._fd = raw.fileno()
        self._handed = 0

    def write(self, data: Any) -> int:
        """See ``io.BufferedWriter.write``; then start writing back what reached the file."""
        written = super().write(data)
        end = self.raw.tell()
        if end - self._handed >= _WRITEBACK_BYTES and hasattr(os, "posix_fadvise"):
            with contextlib.suppress(OSError):
                os.posix_fadvise(self._fd, self._handed, end - self._handed, os.POSIX_FADV_DONTNEED)
            self._handed = end
        return written


def atomic_path(
    path: str | os.PathLike[str], *, overwrite: bool = True, companions: Sequence[str] = ()
) -> contextlib.AbstractContextManager[Path]:
    """The path of a temporary file to write ``path`` atomically, for writers that want a name.

    For libraries that open files themselves (h5py), and for files that go in pairs. The
    same as ``atomic_write`` except that the temporary file (created empty, with the final
    permissions) is not opened: the caller writes it by name and must have closed it when
    the ``with`` block ends. Then it is fsynced and renamed over ``path``; when the block
    raises anything, it is deleted and the exception propagates.

    Args:
        path: Target file.
        overwrite: Whether existing files may be replaced.
        companions: Suffixes of files that go with ``path`` (``".meta.json"``: the target
            ``PATH.meta.json``, written by the caller as the temporary path plus the
            suffix). They are renamed into place just before ``path``, and put back as they
            were if renaming ``path`` fails.

    Raises:
        OutputExistsError: ``path`` or a companion exists and ``overwrite`` is false.
        OutputError: The output cannot be written (see the module docstring).
    """
    return _atomic_path(Path(path), overwrite, tuple(companions))


@contextlib.contextmanager
def _atomic_path(target: Path, overwrite: bool, companions: tuple[str, ...]) -> Iterator[Path]:
    finals = [target] + [target.with_name(target.name + s) for s in companions]
    for final in finals:
        check_writable(final, overwrite=overwrite)
    check_can_write(target)
    temps: list[Path] = []
    try:  # from the temporary's creation on: an interrupt there must remove it too
        tmp = create_temp(target, made=temps)
        temps += [tmp.with_name(tmp.name + s) for s in companions]
        with output_errors(target, every=True):
            for temp, final in zip(temps[1:], finals[1:], strict=True):
                _create(temp, final)
        with output_errors(target):
            yield tmp
        with output_errors(target, every=True):
            for temp in temps:
                _fsync_file(temp)
        check = _before_commit.get()
        if check is not None:
            check(tmp)
        _commit_all(temps, finals, overwrite)
    except BaseException as e:
        for temp in temps:
            remove(temp)
        fresh = recount_free(e, target)
        if fresh is e:
            raise
        raise fresh from e.__cause__
    fsync_dir(target.parent)


def create_temp(target: Path, *, folder: bool = False, made: list[Path] | None = None) -> Path:
    """Create the temporary file (or folder) of ``target`` beside it, with its final permissions.

    Temporary files that dead writers left behind are removed first. The new one is added
    to ``made`` before this returns, so that a caller's clean-up finds it even when an
    interrupt lands between this call's return and the caller's next line.

    Raises:
        OutputError: The folder is missing, read-only, full or not writable.
    """
    remove_stale(target)
    while True:
        tmp = temp_name(target)
        try:
            if folder:
                os.mkdir(tmp, 0o700)
                os.chmod(tmp, 0o777 & ~_umask())
            else:
                _create(tmp, target)
            if made is not None:
                made.append(tmp)
        except FileExistsError:
            continue
        except OSError as e:
            raise output_error(e, target) from e
        except BaseException:  # Ctrl-C or SIGTERM between making it and handing it over
            remove(tmp)
            raise
        return tmp


@contextlib.contextmanager
def output_errors(target: Path, *, every: bool = False) -> Iterator[None]:
    """Turn an ``OSError`` raised in the block into the ``OutputError`` of ``target``.

    Every one, or (by default, around code that also reads a source) those of ``OUTPUT_ERRNOS``.
    """
    try:
        yield
    except ExpcliError:
        raise
    except OSError as e:
        if not every and e.errno not in OUTPUT_ERRNOS:
            raise
        raise output_error(e, target) from e


def _create(tmp: Path, final: Path) -> None:
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    try:
        os.chmod(tmp, _final_mode(final))
    except OSError:
        remove(tmp)
        raise


def output_error(error: OSError, target: Path) -> OutputError:
    """The one-line error for an ``OSError`` met while writing ``target``."""
    code, folder = error.errno, target.parent
    if code in DISK_FULL:
        return disk_full_error(target, None, code or errnos.ENOSPC)
    if code == errnos.EROFS:
        message, path = f"read-only file system; cannot write {target.name}", folder
    elif code in (errnos.EACCES, errnos.EPERM):
        message, path = f"permission denied; cannot write {target.name}", folder
    elif code in (errnos.ENOENT, errnos.ENOTDIR):
        message, path = f"no such folder; cannot write {target.name}", folder
    elif code == errnos.EISDIR:
        message, path = "is a folder; name a file to write", target
    elif code == errnos.EFBIG:
        message, path = "file too large for this file system", target
    else:
        message, path = f"cannot write: {error.strerror or error}", target
    return OutputError(message, path=path, errno=code)


def _commit_all(temps: list[Path], finals: list[Path], overwrite: bool) -> None:
    """Rename the companions, then the main file, into place.

    Undo the companions when a later rename fails. Each replaced companion is kept as a hard link
    until the end.
    """
    done: list[tuple[Path, Path | None]] = []  # (final, its old file kept aside, if any)
    try:
        with output_errors(finals[0], every=True):
            for temp, final in reversed(list(zip(temps, finals, strict=True))):
                backup = None
                if temp is not temps[0] and overwrite and os.path.lexists(final):
                    suffix = final.name[len(finals[0].name) :]
                    backup = _link_aside(final, temps[0].with_name(temps[0].name + BACKUP + suffix))
                _commit(temp, final, overwrite)
                done.append((final, backup))
    except BaseException:
        _undo(done)
        raise
    for _, backup in done:
        if backup is not None:
            remove(backup)


def _link_aside(final: Path, backup: Path) -> Path | None:
    """Keep ``final``'s file under ``backup`` too (None where hard links are not allowed)."""
    try:
        os.link(final, backup)
    except OSError:
        return None
    return backup


def _undo(done: list[tuple[Path, Path | None]]) -> None:
    for final, backup in done:
        with contextlib.suppress(OSError):
            if backup is not None:
                os.replace(backup, final)
            else:
                final.unlink()


def _commit(tmp: Path, target: Path, overwrite: bool) -> None:
    """Move ``tmp`` onto ``target``; without ``overwrite``, never replace a file that appeared."""
    if overwrite:
        os.replace(tmp, target)
        return
    try:
        os.link(tmp, target)
    except FileExistsError as e:
        raise OutputExistsError(target) from e
    except OSError:
        check_writable(target, overwrite=False)
        os.replace(tmp, target)
    else:
        tmp.unlink()


def _fsync_file(path: Path, *, own: bool = True) -> None:
    fd = open_own(path, os.O_RDONLY) if own else os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _final_mode(target: Path) -> int:
    """Keep the permissions of a file being replaced; else the usual ``0o666 & ~umask``."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process umask; reading it means setting it, so it is restored at once."""
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def fsync_dir(folder: Path) -> None:
    """Make the rename durable where the platform and file system allow it (best effort)."""
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):  # some file systems refuse to fsync a folder
        _fsync_file(folder, own=False)  # the output's own folder may be reached by a link


def fsync_tree(folder: Path) -> None:
    """Flush every file and folder under ``folder`` to disk before it is renamed into place."""
    for root, _, files in os.walk(folder):
        for name in files:
            _fsync_file(Path(root, name))
        fsync_dir(Path(root))
