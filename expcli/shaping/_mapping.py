"""Tensors whose bytes lie whole in their file, read through one read-only mapping.

A gather of scattered cells from a mapping copies just those cells; reading them through
``LazyRows`` would read whole rows (every env column). The pages a gather brings in are let
go of afterwards (``release``), so the process's memory does not grow with the file.
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["map_in_place"]


def map_in_place(
    path: Path, tensors: Mapping[str, Any]
) -> tuple[dict[str, Any], Callable[[], None] | None, Callable[[], None]]:
    """``tensors`` with those that lie whole in ``path`` (``file_offset``) mapped.

    Returns the tensors, what lets go of the pages read (None: nothing was mapped), and
    what closes the mapping.
    """
    placed = {n: a for n, a in tensors.items() if getattr(a, "file_offset", None) is not None}
    if not path.is_file() or not any(a.size for a in placed.values()):
        return dict(tensors), None, lambda: None
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    out = dict(tensors)
    for name, array in placed.items():
        if array.size:
            flat = np.frombuffer(mapped, array.dtype, array.size, array.file_offset)
            out[name] = flat.reshape(array.shape)

    def release() -> None:
        with contextlib.suppress(OSError, ValueError):  # closed, or no madvise here
            mapped.madvise(mmap.MADV_DONTNEED)

    def close() -> None:
        with contextlib.suppress(BufferError):  # arrays still viewing it: left to the GC
            mapped.close()

    return out, release, close
