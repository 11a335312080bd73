"""The rows of a skrl export that skrl never wrote, told from their contents.

skrl creates every tensor of a memory with zeros and then fills the float ones with NaN,
and ``Memory.save`` writes the tensors whole, with no record of how far they were filled.
So a memory saved before it filled ends with transitions (in skrl's flat order: row by row,
env by env) whose float tensors are NaN throughout and whose other tensors are zero: those
were never written. ``written_transitions`` finds where that tail starts, reading from the
end a chunk at a time, so that a reader reports only the written rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from expcli.formats.lazy import SLICE_BYTES

__all__ = ["written_transitions"]


def written_transitions(tensors: Mapping[str, Any], memory_size: int, num_envs: int) -> int:
    """How many transitions, in skrl's flat order, precede a tail that was never written.

    A transition belongs to the tail when every float tensor holds NaN in it and every other
    tensor zero (False). Returns ``T * N`` when there is no such tail, or no float tensor to
    tell it by (zeros alone are data).
    """
    capacity = memory_size * num_envs
    if not any(np.dtype(a.dtype).kind == "f" for a in tensors.values()) or capacity == 0:
        return capacity
    row_bytes = sum(math.prod(a.shape[1:]) * np.dtype(a.dtype).itemsize for a in tensors.values())
    step = max(1, SLICE_BYTES // max(1, int(row_bytes)))
    for stop in range(memory_size, 0, -step):
        start = max(0, stop - step)
        blank = np.ones((stop - start, num_envs), dtype=bool)
        for array in tensors.values():
            rows = np.asarray(array[start:stop]).reshape(stop - start, num_envs, -1)
            unset = np.isnan(rows) if rows.dtype.kind == "f" else rows == 0
            blank &= unset.all(axis=2)
        flat = blank.reshape(-1)
        if not flat.all():
            return start * num_envs + int(np.flatnonzero(~flat)[-1]) + 1
    return 0
