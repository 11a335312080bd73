"""Names of temporary files, and the clean-up of those whose writer died.

A temporary file (or folder) of ``NAME`` is ``.NAME.expcli-PID-HOST-RANDOM.tmp`` beside it:
hidden, recognisable, and saying which process of which host (a hash of its name) writes
it. Files that go with it add a suffix (``….tmp.meta.json``); a file or folder it replaces
and keeps until done adds ``.old`` (``….tmp.old``, ``….tmp.old.meta.json``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import socket
from pathlib import Path

__all__ = ["BACKUP", "leftover_temps", "remove", "remove_stale", "temp_name"]

BACKUP = ".old"
"""A temporary name plus this: the replaced file or folder, kept until the write is done."""

_MARK = ".expcli-"
_HOST = hashlib.blake2b(socket.gethostname().encode(), digest_size=3).hexdigest()


def temp_name(target: Path) -> Path:
    """A new temporary name for ``target``, in its folder, owned by this process."""
    return target.with_name(
        f".{target.name}{_MARK}{os.getpid()}-{_HOST}-{secrets.token_hex(4)}.tmp"
    )


def remove_stale(target: Path) -> None:
    """Remove what writers of ``target`` that died (on this host) left beside it.

    Their temporary files and folders. A file or folder they had set aside to replace it is put back
    when their write had not completed (its temporary file is still there), else removed. Best
    effort: a folder that cannot be listed or cleaned is left as it is.
    """
    if os.name != "posix":  # no safe test of "is this process alive" elsewhere
        return
    prefix = f".{target.name}{_MARK}"
    stale: dict[str, list[str]] = {}
    with contextlib.suppress(OSError):
        with os.scandir(target.parent) as entries:
            for entry in entries:
                if entry.name.startswith(prefix):
                    token, _, rest = entry.name[len(prefix) :].partition(".tmp")
                    if _is_dead_writer(token):
                        stale.setdefault(token, []).append(rest)
    for token, rests in stale.items():
        tmp = target.with_name(f"{prefix}{token}.tmp")
        unfinished = "" in rests
        for rest in sorted(rests, key=lambda r: r.startswith(BACKUP)):
            path = tmp.with_name(tmp.name + rest)
            original = target.with_name(target.name + rest[len(BACKUP) :])
            with contextlib.suppress(OSError):
                if rest.startswith(BACKUP) and (unfinished or not os.path.lexists(original)):
                    os.replace(path, original)
                else:
                    remove(path)


def _is_dead_writer(token: str) -> bool:
    """Whether ``PID-HOST-RANDOM`` names a process of this host that no longer runs."""
    pid, host, rest = (token.split("-") + ["", ""])[:3]
    if host != _HOST or not pid.isdigit() or not rest or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


def remove(path: Path) -> None:
    """Delete a file or folder, quietly: cleaning up must never hide the error that led here."""
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def leftover_temps(folder: Path) -> list[str]:
    """Names of the temporary files in ``folder`` (a write that was killed left them).

    A live writer's are counted too; best effort: a folder that cannot be listed has none.
    """
    try:
        with os.scandir(folder) as entries:
            return sorted(e.name for e in entries if e.name.startswith(".") and _MARK in e.name)
    except OSError:
        return []
