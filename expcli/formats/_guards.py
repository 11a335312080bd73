"""Guards that keep every reader bounded before it trusts what a file declares.

* ``check_source``: a source must be a regular file or a folder. A named pipe, a device or a
  socket would block a reader (or never end), so it is refused before anything opens it.
* ``open_inside`` / ``regular_size``: a file a folder lists (a shard, a manifest) is read only
  when it is a regular file in that folder: a symbolic link (which may point anywhere, at
  ``/dev/zero`` say), a named pipe or a device is refused without following or opening it.
* ``load_json`` / ``check_depth``: metadata JSON nested deeper than ``MAX_JSON_DEPTH`` is
  refused, so that no recursive step afterwards (rendering, copying, dumping) overflows.
* ``check_memory``: an array that must be held whole (a Fortran-order npz member that even a
  lazy open reads, say) must fit in the memory the machine has available.
* ``check_read_whole``: what a format's ``read`` (``load``) would hold in memory, counted
  before it reads any of it, must fit; else one line names the lazy ways to read it.
* ``check_inflation``: compressed data (deflated npz members, filtered HDF5 datasets) that
  would inflate past ``BOMB_BYTES`` at more than ``BOMB_RATIO``:1 is a decompression bomb,
  refused before anything is inflated (Apache POI's ``ZipSecureFile`` draws its line at the
  same ratio): real experience data does not compress a hundredfold, and a file that
  would make a reader produce gigabytes from a few megabytes is an attack on its time, its
  memory and the disk a conversion writes to.
* ``brief``: a value from a file, cut short and ``printable`` (``expcli.errors``), for a
  one-line message.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from typing import Any, BinaryIO

from expcli.errors import FormatError, printable
from expcli.host_memory import available_bytes, check_fits

__all__ = [
    "INTEGERS",
    "MAX_JSON_DEPTH",
    "MAX_METADATA_BYTES",
    "BOMB_BYTES",
    "BOMB_RATIO",
    "LAZY_READS",
    "brief",
    "check_depth",
    "check_inflation",
    "check_memory",
    "check_read_whole",
    "check_source",
    "load_json",
    "open_inside",
    "regular_size",
]

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in metadata JSON."""

MAX_METADATA_BYTES = 64 << 20
"""Largest metadata (a JSON text, an attribute, a scalar) a reader accepts."""

BOMB_RATIO = 100
"""Inflation ratio beyond which large compressed data is a decompression bomb."""

BOMB_BYTES = 1 << 30
"""Inflated size up to which any ratio is accepted (small all-zero tensors compress well)."""

LAZY_READS = (
    "read it by slices with expcli.formats.open_lazy(path), or draw batches from it with "
    "expcli.ReplayBuffer(path)"
)
"""How to read a dataset that memory cannot hold whole (the advice of ``check_read_whole``)."""

_KINDS = {
    stat.S_IFIFO: "named pipe",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFSOCK: "socket",
}


def check_source(path: str | os.PathLike[str]) -> None:
    """Refuse a source that exists but is neither a regular file nor a folder.

    A missing path passes (opening it raises ``FileNotFoundError``, as documented).

    Raises:
        FormatError: The path is a named pipe, a device or a socket.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = _KINDS.get(stat.S_IFMT(mode), "special file")
    raise FormatError(
        f"is a {kind}, not a regular file or folder; expected a dataset file", path=path
    )


def _not_regular(path: str | os.PathLike[str], mode: int) -> FormatError:
    if stat.S_ISLNK(mode):
        kind = "symbolic link"
    elif stat.S_ISDIR(mode):
        kind = "folder"
    else:
        kind = _KINDS.get(stat.S_IFMT(mode), "special file")
    return FormatError(
        f"is a {kind}, not a regular file; only regular files inside the dataset folder are read",
        path=path,
    )


def regular_size(path: str | os.PathLike[str]) -> int:
    """The size of ``path``, a regular file itself (not a link to one).

    Raises:
        FileNotFoundError: There is no such file.
        FormatError: It is a symbolic link, a named pipe, a device, a folder, or cannot be
            looked at (a name too long, say).
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise FormatError(f"cannot be read ({e.strerror})", path=path) from None
    if not stat.S_ISREG(info.st_mode):
        raise _not_regular(path, info.st_mode)
    return info.st_size


def open_inside(path: str | os.PathLike[str]) -> BinaryIO:
    """Open ``path`` to read, refusing anything but a regular file (links are not followed).

    Opened without following a link and without blocking, so that a named pipe or a device
    put in place of the file is refused, not waited on.

    Raises:
        FileNotFoundError: There is no such file.
        FormatError: It is a symbolic link, a named pipe, a device, a folder, or cannot be
            opened.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _not_regular(path, stat.S_IFLNK) from None
        raise FormatError(f"cannot be read ({e.strerror})", path=path) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_depth(value: Any, path: str | os.PathLike[str], key: str | None) -> None:
    """Refuse JSON values nested deeper than ``MAX_JSON_DEPTH`` (walked without recursion).

    Raises:
        FormatError: The value is nested too deep.
    """
    level: list[Any] = [value]
    for _ in range(MAX_JSON_DEPTH + 1):
        inner: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                inner.extend(item.values())
            elif isinstance(item, list | tuple):
                inner.extend(item)
        if not inner:
            return
        level = inner
    raise FormatError(
        f"metadata is nested more than {MAX_JSON_DEPTH} levels deep; expected plain metadata",
        path=path,
        key=key,
    )


def load_json(text: str | bytes, path: str | os.PathLike[str], key: str | None) -> Any:
    """``json.loads`` with every failure, deep nesting included, a FormatError.

    Integers must fit in 64 bits (``INTEGERS``): a header number past that (``written`` of
    2**70) would overflow where numpy or a C library takes it.

    Raises:
        FormatError: The text is not JSON, is nested too deep, or holds a larger integer.
    """
    try:
        value = json.loads(text, parse_int=_int64)
    except _TooLarge as e:
        raise FormatError(
            f"metadata holds the integer {brief(str(e))}, beyond 64 bits; expected integers "
            "from -2**63 to 2**64 - 1",
            path=path,
            key=key,
        ) from None
    except (ValueError, RecursionError) as e:
        reason = "nested too deep" if isinstance(e, RecursionError) else str(e)
        raise FormatError(f"metadata is not valid JSON: {reason}", path=path, key=key) from e
    check_depth(value, path, key)
    return value


class _TooLarge(ValueError):
    """An integer of a JSON text past 64 bits."""


INTEGERS = range(-(2**63), 2**64)
"""The integers metadata may hold: those of int64 and uint64 (seeds go up to 2**64 - 1).
Each number a reader uses is range-checked where it is read besides."""


def _int64(text: str) -> int:
    """A JSON integer, refused past 64 bits: no header number overflows numpy or C later."""
    if len(text) > 21:  # 2**64 has 20 digits, -2**63 a sign and 19: longer is larger
        raise _TooLarge(text)
    value = int(text)
    if value not in INTEGERS:
        raise _TooLarge(text)
    return value


def check_memory(nbytes: int, path: str | os.PathLike[str], key: str | None) -> None:
    """Refuse to hold ``nbytes`` when the machine does not have them available.

    Raises:
        FormatError: ``nbytes`` exceeds the memory available.
    """
    available = available_bytes()
    if available is not None and nbytes > available:
        raise FormatError(
            f"holds {nbytes:,} bytes once decompressed, more than the {available:,} bytes of "
            f"memory available; convert it to an uncompressed format, which is read in slices",
            path=path,
            key=key,
        )


def check_read_whole(needed: int, path: str | os.PathLike[str], advice: str = LAZY_READS) -> None:
    """Refuse to read a dataset whole when the ``needed`` bytes exceed the memory available.

    ``needed`` counts what the read would hold, not what it maps (mapped pages cost no memory
    of their own); it is called before any of it is read.

    Raises:
        ConfigError: One line naming ``path``, the bytes, the memory available and ``advice``.
    """
    check_fits(needed, "reading it whole", advice, path=path)


def check_inflation(
    inflated: int, stored: int, path: str | os.PathLike[str], key: str | None
) -> None:
    """Refuse compressed data that inflates past ``BOMB_BYTES`` at above ``BOMB_RATIO``:1.

    ``stored`` is its compressed size, ``inflated`` what it holds once inflated.

    Raises:
        FormatError: The data is a decompression bomb.
    """
    if inflated > BOMB_BYTES and inflated > stored * BOMB_RATIO:
        ratio = inflated // max(1, stored)
        raise FormatError(
            f"inflates {stored:,} compressed bytes into {inflated:,} ({ratio:,}:1), a "
            f"decompression bomb; refusing to read it (real data compresses less than "
            f"{BOMB_RATIO}:1; store it uncompressed to read it anyway)",
            path=path,
            key=key,
        )


def brief(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages quoting a file's content."""
    text = repr(value) if not isinstance(value, list | dict) or _small(value) else None
    if text is None:
        text = f"<{type(value).__name__} of {len(value)} items>"
    return printable(text if len(text) <= limit else text[: limit - 3] + "...")


def _small(value: list[Any] | dict[Any, Any]) -> bool:
    """Whether a container is shallow and short enough to ``repr`` cheaply."""
    try:
        check_depth(value, "", None)
    except FormatError:
        return False
    return len(value) <= 64
