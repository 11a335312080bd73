"""Atomic file writes: a temporary file in the target's folder, renamed over the target.

A write that fails or is interrupted (including by Ctrl-C) never leaves a half file under
the target's name, and never leaves its temporary file behind.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal, overload

from expcli.errors import OutputExistsError

__all__ = ["atomic_path", "atomic_write", "check_writable"]


def check_writable(path: str | os.PathLike[str], *, overwrite: bool) -> None:
    """Fail early, before any data is produced, when ``path`` exists and may not be replaced.

    Raises:
        OutputExistsError: ``path`` exists and ``overwrite`` is false.
    """
    if not overwrite and os.path.lexists(path):
        raise OutputExistsError(path)


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

    The file is named ``.NAME.XXXX.tmp`` in the target's own folder (so that the final rename
    never crosses file systems). When the ``with`` block ends normally it is flushed, fsynced,
    renamed over ``path`` and the folder is fsynced; when the block raises anything, the
    temporary file is deleted and the exception propagates. Text mode writes UTF-8 with
    newlines untranslated, as the csv module wants.

    Args:
        path: Target file.
        mode: ``"wb"`` for a binary file, ``"w"`` for a text file.
        overwrite: Whether an existing ``path`` may be replaced. When false, the rename is
            a no-clobber link where the file system supports it.

    Raises:
        OutputExistsError: ``path`` exists and ``overwrite`` is false.
    """
    return _atomic(Path(path), mode, overwrite)


@contextlib.contextmanager
def _atomic(target: Path, mode: str, overwrite: bool) -> Iterator[IO[Any]]:
    with (
        _atomic_path(target, overwrite) as tmp,
        open(tmp, "w", encoding="utf-8", newline="") if mode == "w" else open(tmp, "wb") as file,
    ):
        yield file


def atomic_path(
    path: str | os.PathLike[str], *, overwrite: bool = True
) -> contextlib.AbstractContextManager[Path]:
    """The path of a temporary file to write ``path`` atomically, for writers that want a name.

    For libraries that open files themselves (h5py). The same as ``atomic_write`` except
    that the temporary file (created empty, with the final permissions) is not opened: the
    caller writes it by name and must have closed it when the ``with`` block ends. Then it
    is fsynced and renamed over ``path``; when the block raises anything, it is deleted and
    the exception propagates.

    Raises:
        OutputExistsError: ``path`` exists and ``overwrite`` is false.
    """
    return _atomic_path(Path(path), overwrite)


@contextlib.contextmanager
def _atomic_path(target: Path, overwrite: bool) -> Iterator[Path]:
    check_writable(target, overwrite=overwrite)
    folder = target.parent
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    tmp = Path(tmp_name)
    try:
        os.close(fd)
        os.chmod(tmp, _final_mode(target))
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        _commit(tmp, target, overwrite)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    fsync_dir(folder)


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
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
