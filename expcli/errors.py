"""The one exception hierarchy of expcli (standard library only).

* ExpcliError                       exit 1   base class; never raised directly
  + FormatError                     exit 1   unknown, corrupt, truncated or unsafe file
  |  + SourceNotFoundError          exit 1   no such file or folder (also FileNotFoundError)
  + SchemaError                     exit 1   missing tensor, shape or dtype mismatch
  + EnvError                        exit 1   an env or worker failed (index, remote traceback)
  + ConfigError                     exit 2   bad options or config file (also ValueError)
  + InvalidValueError               exit 1   a value the library API cannot take (also ValueError)
  |  + IndexOutOfRangeError         exit 1   an index past what is held (also IndexError)
  + InvalidTypeError                exit 1   a type the library API cannot take (also TypeError)
  + MissingDependencyError          exit 1   an optional extra is not installed (also ImportError)
  + OutputError                     exit 1   the output cannot be written: no space, a read-only
  |                                          or missing folder, no permission (also OSError)
  |  + OutputExistsError            exit 1   refusing to overwrite (also FileExistsError)
  + OutputLockedError               exit 1   another writer holds the output's lock

``printable`` makes text from a file (a name, a path) safe to put in a message.

Errors carry their data as attributes (``path``, ``key``, ``index``) so that callers and
tests need not parse messages; the message itself names the file, the key and what was
expected. The CLI turns any of them into one red line and ``exit_code``.
"""

from __future__ import annotations

import errno as errnos
import os
from typing import ClassVar

__all__ = [
    "ConfigError",
    "EnvError",
    "ExpcliError",
    "FormatError",
    "IndexOutOfRangeError",
    "InvalidTypeError",
    "InvalidValueError",
    "MissingDependencyError",
    "OrderError",
    "OutputError",
    "OutputExistsError",
    "OutputLockedError",
    "SchemaError",
    "SourceNotFoundError",
]  # the error classes only; ``printable``, ``quoted`` and ``clipped`` are imported by name


def printable(text: str) -> str:
    """``text`` made printable: what is not valid UTF-8 written as escapes.

    Lone surrogates, as undecodable bytes become, would make printing fail (in a message, on a
    terminal); escaped, they never do.
    """
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


QUOTE_CHARS = 80
"""How much of a user's input a message quotes: the first this many characters."""


def clipped(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text``, or its first ``limit`` characters and its length when it is longer."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def quoted(text: str, limit: int = QUOTE_CHARS) -> str:
    """User input as a message quotes it: ``repr`` of it, or of its first ``limit`` characters.

    A 126 KB ``--where`` is then one short line, not the whole expression again.
    """
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text):,} characters)"


class ExpcliError(Exception):
    """Base class of every error expcli raises on purpose."""

    exit_code: ClassVar[int] = 1

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        key: str | None = None,
    ) -> None:
        self.path = os.fspath(path) if path is not None else None
        self.key = key
        self.message = message
        super().__init__(self._render())

    def located(self, path: str | os.PathLike[str], key: str | None = None) -> ExpcliError:
        """Name ``path`` (and ``key``) as where the error comes from, unless it names one."""
        if self.path is None:
            self.path, self.key = os.fspath(path), self.key if self.key is not None else key
            self.args = (self._render(), *self.args[1:])
        return self

    def _render(self) -> str:
        parts = []
        if self.path is not None:
            parts.append(f"{self.path}")
        if self.key is not None:
            parts.append(f"{self.key!r}")
        prefix = ": ".join(parts)
        return f"{prefix}: {self.message}" if prefix else self.message


class FormatError(ExpcliError):
    """A file is of an unknown format, corrupt, truncated or unsafe to read."""


class SourceNotFoundError(FormatError, FileNotFoundError):
    """The dataset to read does not exist: no such file or folder."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__("no such file or folder", path=path)
        self.errno = errnos.ENOENT  # no filename: OSError would then render the message


class SchemaError(ExpcliError):
    """A dataset lacks a tensor, or a tensor has the wrong shape or dtype."""


class EnvError(ExpcliError):
    """An environment or a worker hosting environments failed."""

    def __init__(
        self,
        message: str,
        *,
        index: int | None = None,
        remote_traceback: str | None = None,
    ) -> None:
        self.index = index
        self.detail = message
        self.remote_traceback = remote_traceback
        where = f"env {index}: " if index is not None else ""
        super().__init__(f"{where}{message}")
        if remote_traceback:
            self.add_note(remote_traceback)


class ConfigError(ExpcliError, ValueError):
    """An option, a combination of options or a config file is invalid."""

    exit_code: ClassVar[int] = 2


class InvalidValueError(ExpcliError, ValueError):
    """A library call got a value it cannot take (a size, an index, a row that does not fit).

    Also a ``ValueError``, which skrl's memory raises in the same places.
    """


class IndexOutOfRangeError(InvalidValueError, IndexError):
    """An index outside what a buffer or dataset holds (also an ``IndexError``).

    An ``IndexError``, as ``torch.utils.data`` and Python's sequences expect of ``data[i]``;
    still an ``InvalidValueError``, which out-of-range indexes were before. ``index`` is the
    first index at fault, when known. The message alone rebuilds it (as ``DataLoader`` does
    with a worker's error).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        index: int | None = None,
    ) -> None:
        self.index = index
        super().__init__(message, path=path)


class InvalidTypeError(ExpcliError, TypeError):
    """A library call got an argument of a type it cannot take (also a ``TypeError``)."""


class OrderError(ExpcliError, RuntimeError):
    """A library object was used out of order.

    A collect job run before ``start()``, a prioritized sampler asked to draw before it has seen its
    storage (also a ``RuntimeError``).
    """


class MissingDependencyError(ExpcliError, ImportError):
    """An optional dependency is needed but not installed."""

    def __init__(self, module: str, extra: str, purpose: str) -> None:
        self.module = module
        self.extra = extra
        super().__init__(
            f'{module} is required for {purpose}; install it with: pip install "expcli[{extra}]"'
        )


class OutputError(ExpcliError, OSError):
    """The output cannot be written.

    The disk is full, the folder is read-only, missing or not writable, or a folder stands where the
    file should go.

    ``path`` is the file or folder at fault (the folder, for a full disk); ``errno`` the
    system's error number when there was one. For a full disk, ``needed`` is an estimate
    of the bytes the output needs (a lower bound; None when unknown) and ``free`` the bytes
    free once the partial output was deleted.
    ``saved_to`` is where ``collect`` kept what it collected instead, if anywhere.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str],
        errno: int | None = None,
        needed: int | None = None,
        free: int | None = None,
        saved_to: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(message, path=path)
        self.errno = errno
        self.needed = needed
        self.free = free
        self.saved_to = os.fspath(saved_to) if saved_to is not None else None


class OutputExistsError(OutputError, FileExistsError):
    """The output file exists and overwriting was not asked for.

    The message names both ways to ask: the command line's ``--overwrite`` and the Python
    keyword ``overwrite=True`` (of ``save`` and ``convert``).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(
            "already exists; pass --overwrite (in Python, overwrite=True) to replace it",
            path=path,
        )


class OutputLockedError(ExpcliError):
    """Another writer (a process, on this host or another) holds the output's lock.

    ``holder`` is what that writer recorded in the lock file, as strings: ``pid``, ``host``,
    ``since`` (``YYYY-MM-DD HH:MM:SS UTC``) and ``command``, each possibly missing; the
    message names them.
    """

    def __init__(self, path: str | os.PathLike[str], holder: dict[str, str]) -> None:
        self.holder = holder
        who = " ".join(
            part
            for part in (
                f"pid {holder['pid']}" if "pid" in holder else "",
                f"on host {holder['host']}" if "host" in holder else "",
                f"since {holder['since']}" if "since" in holder else "",
                f"({holder['command']})" if "command" in holder else "",
            )
            if part
        )
        super().__init__(
            f"another writer holds it: {who or 'a process that has not said who it is yet'}; "
            "wait for it to end (or stop it), then run again",
            path=path,
        )
