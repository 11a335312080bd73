"""The values of a flat Arrow array as numpy, on Arrow's buffer: no copy, no pandas.

pyarrow's ``to_numpy`` imports pandas (0.6 s) on its first use; expcli's Parquet readers
(its own, LeRobot's, the foreign-table reader's) read numbers from an array's values buffer
instead, bools unpacked from their bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["values_as"]


def values_as(values: Any, dtype: np.dtype[Any]) -> np.ndarray:
    """A flat array of numbers or bools (nulls' slots as stored) as ``dtype``.

    A view of Arrow's buffer, but for bools (bit-packed, least significant bit first),
    which are unpacked.
    """
    size = len(values)
    if not size:
        return np.empty(0, dtype)
    data = values.buffers()[1]
    if dtype == np.bool_:
        bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
        return bits[values.offset : values.offset + size].astype(bool)
    return np.frombuffer(data, dtype, size, values.offset * dtype.itemsize)
