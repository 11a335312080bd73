"""Guards that keep every reader bounded before it trusts what a file declares.

* ``check_source``: a source must be a regular file or a folder. A named pipe, a device or a
  socket would block a reader (or never end), so it is refused before anything opens it.
* ``load_json`` / ``check_depth``: metadata JSON nested deeper than ``MAX_JSON_DEPTH`` is
  refused, so that no recursive step afterwards (rendering, copying, dumping) overflows.
* ``check_memory``: an array that must be held whole (a compressed npz member that ``load``
  reads, say) must fit in the memory the machine has available.
* ``brief``: a value from a file, cut short and ``printable`` (``expcli.errors``), for a
  one-line message.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from expcli.errors import FormatError, printable
from expcli.host_memory import available_bytes

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_METADATA_BYTES",
    "brief",
    "check_depth",
    "check_memory",
    "check_source",
    "load_json",
]

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in metadata JSON."""

MAX_METADATA_BYTES = 64 << 20
"""Largest metadata (a JSON text, an attribute, a scalar) a reader accepts."""

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

    Raises:
        FormatError: The text is not JSON, or is nested too deep.
    """
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as e:
        reason = "nested too deep" if isinstance(e, RecursionError) else str(e)
        raise FormatError(f"metadata is not valid JSON: {reason}", path=path, key=key) from e
    check_depth(value, path, key)
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
