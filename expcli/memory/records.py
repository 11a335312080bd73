"""Records: small tensors laid side by side, one aligned record per transition.

Drawing 256 CartPole transitions from six tensors is six gathers, each a cache miss per
row; from one record per transition (numpy's structured dtype) it is one gather whose
fields are views. A CPU ``Memory`` keeps its small tensors in such records, and a replay
buffer packs a read-only dataset's small tensors the same way (``replay.packed_rows``):
both lay the records out here. numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

__all__ = ["ROW_BYTES", "RecordField", "packs", "record_dtype", "row_bytes"]

ROW_BYTES = 256
"""Tensors whose transitions are at most this big are packed."""

RecordField = tuple[npt.DTypeLike, tuple[int, ...]]
"""A field of a record: its dtype and the feature shape of one transition."""


def row_bytes(dtype: npt.DTypeLike, feature: tuple[int, ...]) -> int:
    """Bytes of one transition of a tensor of ``dtype`` and ``feature`` shape."""
    return math.prod(feature) * np.dtype(dtype).itemsize


def packs(dtype: npt.DTypeLike, feature: tuple[int, ...]) -> bool:
    """Whether a tensor's transitions are small enough to pack: 1 to ``ROW_BYTES`` bytes."""
    return 0 < row_bytes(dtype, feature) <= ROW_BYTES


def record_dtype(fields: Mapping[str, RecordField]) -> np.dtype[np.void]:
    """The structured dtype of one record holding ``fields`` (name to dtype and feature).

    Fields go widest item first (then by name), each at a multiple of its itemsize, so
    that a field's column is an aligned strided view; the record is padded to a multiple
    of the widest itemsize, so that every record's fields are aligned too.
    """
    order = sorted(fields, key=lambda n: (-np.dtype(fields[n][0]).itemsize, n))
    offsets, at = [], 0
    for name in order:
        dtype, feature = fields[name]
        size = np.dtype(dtype).itemsize
        at = -(-at // size) * size
        offsets.append(at)
        at += row_bytes(dtype, feature)
    align = max((np.dtype(fields[n][0]).itemsize for n in order), default=1)
    return np.dtype(
        {
            "names": order,
            "formats": [(np.dtype(fields[n][0]), fields[n][1]) for n in order],
            "offsets": offsets,
            "itemsize": -(-at // align) * align,
        }
    )
