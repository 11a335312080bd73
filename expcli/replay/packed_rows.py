"""PackedRows: a read-only dataset's small tensors, one record per transition, in memory.

Drawing 256 CartPole transitions touches six tensors at 256 scattered rows each: six
gathers, each one page fault or cache miss per row. Packed into one record per transition
(numpy's structured dtype, each field aligned), the same draw is one gather of 256 records
whose fields are views: about the cost of the draw's random numbers (``memory.records``
lays the records out, as for a CPU ``Memory``). The records are read once, on first use,
and only for tensors whose rows are small (``memory.records.ROW_BYTES``) and while the
whole table stays within ``TABLE_BYTES`` and an eighth of the memory available; frames are
never packed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from expcli.formats.lazy import SLICE_BYTES
from expcli.host_memory import available_bytes
from expcli.memory.records import packs, record_dtype, row_bytes

__all__ = ["TABLE_BYTES", "PackedRows", "packable"]

TABLE_BYTES = 1 << 30
"""The most a packed table holds."""


def packable(arrays: Mapping[str, Any], capacity: int) -> list[str]:
    """The tensors to pack (``(T, N, *feature)`` shapes): small rows, a table that fits."""
    names = [name for name, a in arrays.items() if packs(a.dtype, tuple(a.shape[2:]))]
    record = sum(row_bytes(arrays[n].dtype, tuple(arrays[n].shape[2:])) for n in names) + 8
    room = available_bytes()
    limit = TABLE_BYTES if room is None else min(TABLE_BYTES, room // 8)
    return names if names and record * capacity <= limit else []


class PackedRows:
    """Records of ``names``' transitions: ``gather`` gives each tensor's rows as views.

    Args:
        arrays: ``(T, N, *feature)`` tensors (numpy arrays, memory maps, or tensors left on
            disk that read slices of rows); those named are read whole, a slice at a time.
        names: The tensors to pack.
    """

    def __init__(self, arrays: Mapping[str, Any], names: Sequence[str]) -> None:
        self.dtype = record_dtype({n: (arrays[n].dtype, tuple(arrays[n].shape[2:])) for n in names})
        order = list(self.dtype.names or ())
        self.names = frozenset(order)
        """The tensors packed."""
        rows, envs = (int(d) for d in arrays[order[0]].shape[:2])
        self.table = np.empty(rows * envs, self.dtype)
        step = max(1, SLICE_BYTES // max(1, envs * self.dtype.itemsize))
        for name in order:
            field = self.table[name].reshape(rows, envs, *arrays[name].shape[2:])
            for start in range(0, rows, step):
                field[start : start + step] = arrays[name][start : start + step]

    def gather(self, index: np.ndarray, names: Sequence[str]) -> dict[str, np.ndarray]:
        """``names``' transitions at flat ``index`` (any shape), as ``(*index.shape, *feature)``.

        One gather of records; each tensor is a view of them (strided: its rows lie a
        record apart). Indexes past the end raise IndexError; negative ones count from it.
        """
        records = self.records(index)
        return {name: records[name] for name in names}

    def records(self, index: np.ndarray) -> np.ndarray:
        """The records at flat ``index`` (any shape); IndexError past the end.

        A field of them is that tensor's rows, shaped ``(*index.shape, *feature)``.
        """
        return self.table.take(index)
