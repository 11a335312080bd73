"""The files of a dataset folder (LeRobot, Minari), reached through no link and no pipe.

A sharded folder names its files in its manifest and reads each with ``open_inside``. A
LeRobot or Minari folder is found by walking it (``data/*/*.parquet``, ``data/0/...``), so
the same rule is kept along the walk: every folder and file on the way from the dataset's
root is looked at without being followed (``lstat``), and a symbolic link, a named pipe, a
device or a socket where a folder or a data file belongs is refused, naming the layout. So
nothing outside the folder is read (a ``data/chunk-000`` linked to another dataset), and
nothing blocks (a FIFO in place of ``meta/info.json``). The root itself may be a link: it
is the path the user named.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from expcli.errors import FormatError
from expcli.formats._guards import MAX_METADATA_BYTES, load_json, open_inside, regular_size

__all__ = ["folder_member", "json_object", "member", "members", "metadata_file"]


def member(root: Path, path: Path, layout: str) -> Path:
    """``path``, a regular file below ``root`` that no link on the way leads to.

    Raises:
        FileNotFoundError: It, or a folder on the way, does not exist.
        FormatError: A link, or another kind than a folder (a file) on the way, or a file
            that is not a regular one.
    """
    here = root
    for part in path.relative_to(root).parts[:-1]:
        here = here / part
        _folder(here, layout)
    try:
        regular_size(path)
    except FormatError as e:
        raise _refused(path, layout, e.message) from None
    return path


def folder_member(root: Path, path: Path, layout: str) -> Path:
    """``path``, a folder below ``root`` that no link on the way leads to.

    Raises:
        FileNotFoundError, FormatError: As ``member``.
    """
    here = root
    for part in path.relative_to(root).parts:
        here = here / part
        _folder(here, layout)
    return path


def members(root: Path, folder: str, suffix: str, layout: str) -> list[Path]:
    """The files ``root/folder/*/*SUFFIX``, sorted, each a regular file reached through no link.

    Names that do not match are passed over; a match that is a link, or a chunk folder that
    is one, is refused.

    Raises:
        FormatError: As ``member``; ``root/folder`` missing is no error (no files).
    """
    top = root
    for part in Path(folder).parts:
        top = top / part
        if not os.path.lexists(top):
            return []
        _folder(top, layout)
    found = []
    for chunk in _entries(top, layout):
        if chunk.is_symlink():
            raise _refused(Path(chunk.path), layout, "is a symbolic link")
        if not chunk.is_dir(follow_symlinks=False):
            continue
        for entry in _entries(Path(chunk.path), layout):
            if entry.name.endswith(suffix):
                found.append(member(root, Path(entry.path), layout))
    return sorted(found)


def _folder(path: Path, layout: str) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        raise
    except OSError as e:
        raise _refused(path, layout, f"cannot be looked at ({e.strerror})") from None
    if stat.S_ISLNK(mode):
        raise _refused(path, layout, "is a symbolic link")
    if not stat.S_ISDIR(mode):
        raise _refused(path, layout, "is not a folder")


def _entries(folder: Path, layout: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda e: e.name)
    except OSError as e:
        raise _refused(folder, layout, f"cannot be listed ({e.strerror})") from None


def _refused(path: Path, layout: str, what: str) -> FormatError:
    what = what.split(";")[0]
    return FormatError(
        f"{what}; a {layout} folder is read only from the regular files inside it (no link "
        "is followed, no pipe or device opened)",
        path=path,
    )


def json_object(path: Path) -> dict[str, Any]:
    """A JSON object from a regular file, or ``{}`` when there is none (or it is not one)."""
    try:
        return metadata_file(path)
    except (OSError, FormatError):
        return {}


def metadata_file(path: Path) -> dict[str, Any]:
    """A dataset's ``metadata.json``.

    Raises:
        FormatError: The file is not a regular file (a link to one neither), larger than
            metadata can be, or not a JSON object (nested too deep included).
        OSError: The file cannot be read.
    """
    with open_inside(path) as f:  # no link followed, no pipe waited on
        text = f.read(MAX_METADATA_BYTES + 1)
    if len(text) > MAX_METADATA_BYTES:
        raise FormatError(
            f"is larger than {MAX_METADATA_BYTES:,} bytes; expected metadata", path=path
        )
    obj = load_json(text, path, None)
    if not isinstance(obj, dict):
        raise FormatError("is not a JSON object", path=path)
    return obj
