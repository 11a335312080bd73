"""Atomic writes of a whole folder (a Minari dataset), in the manner of ``files.atomic``.

The folder is built as ``.NAME.expcli-PID-HOST-RANDOM.tmp`` beside the target, its files
are fsynced, and it is renamed onto the target. An existing target (allowed by
``overwrite`` and accepted by the caller as safe to replace) is first renamed aside (the
temporary name plus ``.old``) and deleted only once the new folder is in place. A write
that fails or is interrupted leaves the target as it was and removes its temporary folder;
what a killed writer left is cleaned up (the old folder put back if need be) by the next
write to the same target, as ``files.atomic`` does for files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from expcli.errors import ConfigError, OutputExistsError
from expcli.files.atomic import (
    check_writable,
    create_temp,
    fsync_dir,
    fsync_tree,
    output_errors,
)
from expcli.files.free_space import recount_free

__all__ = ["atomic_folder"]


@contextlib.contextmanager
def atomic_folder(
    target: Path, *, overwrite: bool, replaceable: Callable[[Path], bool]
) -> Iterator[Path]:
    """Give a temporary folder whose content replaces ``target`` when the block ends.

    Args:
        target: Folder to write.
        overwrite: Whether an existing ``target`` may be replaced.
        replaceable: Whether an existing non-empty folder is of the kind being written (so
            that replacing it loses nothing else); other folders and files are refused.

    Raises:
        OutputExistsError: ``target`` exists and ``overwrite`` is false.
        ConfigError: ``target`` is a file, or a folder of another kind.
    """
    check_writable(target, overwrite=overwrite)
    _check_replaceable(target, replaceable)
    parent = target.parent
    made: list[Path] = []
    try:
        tmp = create_temp(target, folder=True, made=made)
        with output_errors(target):
            yield tmp
        with output_errors(target, every=True):
            fsync_tree(tmp)
            _swap(tmp, target, overwrite, replaceable)
    except BaseException as e:
        for tmp in made:
            shutil.rmtree(tmp, ignore_errors=True)
        fresh = recount_free(e, target)
        if fresh is e:
            raise
        raise fresh from e.__cause__
    fsync_dir(parent)


def _check_replaceable(target: Path, replaceable: Callable[[Path], bool]) -> None:
    if not os.path.lexists(target):
        return
    if target.is_symlink() or not target.is_dir():
        raise ConfigError(f"{target}: is a file; expected a folder to write the dataset into")
    if any(target.iterdir()) and not replaceable(target):
        raise ConfigError(
            f"{target}: is a folder that is not a dataset of this layout; refusing to replace it"
        )


def _swap(tmp: Path, target: Path, overwrite: bool, replaceable: Callable[[Path], bool]) -> None:
    if not os.path.lexists(target):
        try:
            os.rename(tmp, target)
        except OSError as e:
            if os.path.lexists(target):
                raise OutputExistsError(target) from e
            raise
        return
    if not overwrite:
        raise OutputExistsError(target)
    _check_replaceable(target, replaceable)
    aside = tmp.with_name(tmp.name + ".old")
    os.rename(target, aside)
    try:
        os.rename(tmp, target)
    except BaseException:
        os.rename(aside, target)
        raise
    shutil.rmtree(aside, ignore_errors=True)
