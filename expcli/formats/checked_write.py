"""Writing a dataset where a failure leaves nothing behind, optionally verified.

The data goes to a temporary file beside the target; with checksums it is read back and
compared tensor by tensor before it is renamed into place; a target that cannot fit in
its folder is refused before anything is written. ``expcli.save`` and ``expcli.convert``
call these after checking their options.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError, OutputError
from expcli.files.atomic import (
    check_before_commit,
    check_can_write,
    check_writable,
    output_errors,
)
from expcli.files.free_space import (
    DISK_FULL,
    check_space,
    disk_full_error,
    free_bytes,
    recount_free,
)
from expcli.files.output_lock import OutputLock
from expcli.files.temp_names import leftover_temps, remove, remove_stale, temp_name
from expcli.formats.dataset import Dataset
from expcli.formats.lazy import row_chunks
from expcli.formats.registry import open_lazy, output_files, write_planned
from expcli.formats.rows import Layout, WritePlan
from expcli.formats.table import format_named, layout_named

__all__ = [
    "check_can_write",
    "check_target",
    "checksums",
    "free_bytes",
    "leftover_temps",
    "remove",
    "remove_stale",
    "temp_name",
    "write_checked",
]


def check_target(plan: WritePlan) -> None:
    """Refuse, before reading anything, a target that may not be written.

    Its lock is taken for a moment: a writer at work is named (not the output it makes),
    and a lock file that is not one refused, before any output of a command of several
    outputs is written.
    """
    target, fmt, layout = plan.target, plan.format, plan.layout
    layout_named(layout).refuse_target(plan)  # Minari: a folder named as its id
    row = format_named(fmt)
    if row is not None and layout is Layout.EXPCLI:
        row.refuse_write(target)
    with OutputLock(target):
        pass
    for path in output_files(target, fmt) if layout is Layout.EXPCLI else (target,):
        check_writable(path, overwrite=plan.overwrite)
    kept = layout is not Layout.EXPCLI and fmt in layout_named(layout).storages  # Minari parquet
    check_can_write(target, folder=row is None or row.folder or kept)  # None: a folder layout


def write_checked(dataset: Dataset, plan: WritePlan, checksums: dict[str, str] | None) -> None:
    """Write beside the target under a temporary name, check, then rename into place.

    Refuse at once what cannot fit in the target's folder, or what another process writes
    (``OutputLockedError``: the target's lock is held while writing). ``checksums``: read
    the written file back and compare every tensor before it is renamed into place.
    """
    try:
        with OutputLock(plan.target):
            _write_checked(dataset, plan, checksums)
    except OutputError as e:
        fresh = recount_free(e, plan.target)  # the lock file let go of its bytes too
        if fresh is e:
            raise
        raise fresh from e.__cause__


def _write_checked(dataset: Dataset, plan: WritePlan, checksums: dict[str, str] | None) -> None:
    target = plan.target
    with output_errors(target, every=True):
        target.parent.mkdir(parents=True, exist_ok=True)
    row = format_named(plan.shard_format or plan.format)  # Parquet shards: sized as Parquet
    needed = None
    if plan.layout is Layout.EXPCLI and row is not None:  # a foreign layout's size is not told
        needed = row.estimated_size(dataset.tensors, plan.compression)
    check_space(target, needed)
    try:
        verifying: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if checksums is not None and plan.layout is Layout.EXPCLI:
            fmt = plan.format
            verifying = check_before_commit(lambda tmp: _verify(tmp, fmt, checksums, target))
        with verifying:
            write_planned(dataset, plan)  # a foreign layout: by slices
    except OutputError as e:
        if e.errno not in DISK_FULL or e.needed is not None or needed is None:
            raise
        raise disk_full_error(target, needed, e.errno or errno.ENOSPC, free=e.free) from e


def _verify(written: Path, fmt: str, checksums: dict[str, str], target: Path) -> None:
    """Read the complete temporary file ``written`` back and compare every tensor."""
    again, close = open_lazy(written, fmt)
    try:
        for name, digest in checksums.items():
            if name not in again.tensors or _digest(again.tensors[name]) != digest:
                raise FormatError(
                    "verification failed: the written tensor differs from the source",
                    path=target,
                    key=name,
                )
    finally:
        close()


def checksums(dataset: Dataset) -> dict[str, str]:
    """A checksum of every tensor, for ``write_checked`` to compare the written file with."""
    return {name: _digest(array) for name, array in dataset.tensors.items()}


def _digest(array: Any) -> str:
    """A checksum of dtype, shape and bytes, computed slice by slice."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{np.dtype(array.dtype).newbyteorder('=').str}{tuple(array.shape)}".encode())
    if array.ndim == 0 or array.size == 0:
        h.update(np.ascontiguousarray(array).tobytes())
        return h.hexdigest()
    chunks = row_chunks(array)
    for start in chunks:
        rows = np.asarray(array[start : start + chunks.step])
        h.update(np.ascontiguousarray(rows, dtype=rows.dtype.newbyteorder("=")).tobytes())
    return h.hexdigest()
