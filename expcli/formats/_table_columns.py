"""The columns of a table expcli did not write: which Arrow types can be a tensor, and decoding.

A column is a tensor when it holds numbers or booleans: a scalar per row, or lists of them,
nested to any depth. A fixed-size list says its length; a variable-size list (what polars
and duckdb write for an array, HF ``datasets`` for a ``Sequence``) takes the length of its
first row, and every row must have it: ragged rows cannot be one tensor and are refused,
naming the column and the first row that differs. Nulls are refused too, except where a
column may hold them (a next observation stored once): there they are given back as a mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError
from expcli.spec import TensorSpec

__all__ = ["ColumnKind", "decode", "first_shape", "kind_of", "arrow_numbers"]

_DTYPES = {
    "bool": "bool",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "int32",  # widened losslessly: the schema has no uint16
    "uint32": "int64",
    "halffloat": "float16",
    "float": "float32",
    "double": "float64",
}
"""Arrow's name of each scalar type a tensor may hold -> the tensor's dtype."""


@dataclass(frozen=True, slots=True)
class ColumnKind:
    """What a column holds: its values' dtype and each list level's length (None: variable).

    ``levels`` is empty for a scalar column. ``binary``: each row is the bytes of a
    feature of shape ``levels`` in C order (how expcli stores frames), whose dtype and
    shape only expcli's footer says.
    """

    dtype: str
    levels: tuple[int | None, ...]
    binary: bool = False


def kind_of(field: Any, path: Path, spec: TensorSpec | None = None) -> ColumnKind:
    """The ``ColumnKind`` of an Arrow field, or a refusal naming the column and its type.

    ``spec``: the tensor that expcli's footer (kept, but disagreeing with the rows) says the
    column holds; a column of bytes of its size is read as it.

    Raises:
        FormatError: Not numbers, booleans or (nested) lists of them.
    """
    import pyarrow as pa

    if spec is not None and (pa.types.is_fixed_size_binary(field.type)):
        if field.type.byte_width == math.prod(spec.shape) * np.dtype(spec.dtype).itemsize:
            return ColumnKind(spec.dtype, tuple(spec.shape), binary=True)
    kind, levels = field.type, list[int | None]()
    while True:
        if pa.types.is_fixed_size_list(kind):
            levels.append(int(kind.list_size))
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
            levels.append(None)
        else:
            break
        kind = kind.value_type
    dtype = _DTYPES.get(str(kind))
    if dtype is None:
        raise FormatError(
            f"column is {field.type}; expected numbers or booleans, or lists of them",
            path=path,
            key=field.name,
        )
    return ColumnKind(dtype, tuple(levels))


def first_shape(array: Any, kind: ColumnKind, path: Path, name: str) -> tuple[int, ...]:
    """The feature shape of a column, from its first row (``array``: at least one, not null)."""
    shape = []
    level = array.slice(0, 1)
    for length in kind.levels:
        if length is None:
            length = int(level.value_lengths()[0].as_py())
        shape.append(length)
        level = _inner(level, length)
    return tuple(shape)


def decode(
    array: Any,
    kind: ColumnKind,
    shape: tuple[int, ...],
    where: tuple[Path, str, int],
    nullable: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Rows of a column as ``(n, *shape)`` of its dtype, and where nullable, the valid rows.

    ``where``: the file, the column and the file row of the array's first row (for messages).
    Null rows of a nullable column read as zeros, False in the mask (None: no null).

    Raises:
        FormatError: A null where none may be, or ragged lists.
    """
    path, name, first = where
    count = len(array)
    if not array.null_count:
        return _dense(array, kind, shape, where), None
    valid = arrow_numbers(array.is_valid())
    if not nullable:
        row = first + int(np.argmin(valid))
        raise FormatError(f"row {row:,} is null; expected a value", path=path, key=name)
    out = np.zeros((count, *shape), kind.dtype)
    out[valid] = _dense(array.filter(array.is_valid()), kind, shape, (path, name, -1))
    return out, valid


def _dense(
    array: Any, kind: ColumnKind, shape: tuple[int, ...], where: tuple[Path, str, int]
) -> np.ndarray:
    """``decode`` of an array without top-level nulls (``where[2]`` -1: rows not numbered)."""
    path, name, first = where
    count, level, inner = len(array), array, 1
    if kind.binary:  # fixed-size bytes of ``shape`` in C order
        width = math.prod(shape) * np.dtype(kind.dtype).itemsize
        data = np.frombuffer(array.buffers()[1], np.uint8, count * width, array.offset * width)
        return data.view(kind.dtype).reshape(count, *shape)
    for length, declared in zip(shape, kind.levels, strict=True):
        if declared is None:
            lengths = arrow_numbers(level.value_lengths())
            wrong = np.flatnonzero(lengths != length)
            if len(wrong):
                at = int(wrong[0]) // inner
                row = f"row {first + at:,}" if first >= 0 else "a row"
                raise FormatError(
                    f"{row} holds lists of {int(lengths[wrong[0]])} values where row 0 holds "
                    f"{length}: ragged lists cannot be one tensor",
                    path=path,
                    key=name,
                )
        level = _inner(level, length)
        inner *= length
        if level.null_count:
            raise FormatError(
                f"holds {level.null_count:,} null values inside its lists; expected none",
                path=path,
                key=name,
            )
    values = arrow_numbers(level)
    return values.astype(kind.dtype, copy=False).reshape(count, *shape)


def arrow_numbers(array: Any) -> np.ndarray:
    """An Arrow array of numbers or bools without nulls, as numpy: a view where it can be.

    Read from its buffers: pyarrow's ``to_numpy`` imports pandas (0.6 s) on first use.
    """
    import pyarrow as pa

    kind = array.type
    if pa.types.is_boolean(kind):
        bits = np.frombuffer(array.buffers()[1] or b"", np.uint8)
        whole = np.unpackbits(bits, count=array.offset + len(array), bitorder="little")
        return whole[array.offset :].view(bool)
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        return np.asarray(array.to_numpy(zero_copy_only=False))
    code = "f" if pa.types.is_floating(kind) else "i" if pa.types.is_signed_integer(kind) else "u"
    dtype = np.dtype(f"<{code}{kind.bit_width // 8}")
    if not len(array):
        return np.empty(0, dtype)
    return np.frombuffer(array.buffers()[1], dtype, len(array), array.offset * dtype.itemsize)


def _inner(level: Any, length: int) -> Any:
    """A list array's values, one level down, for its rows alone (slices respected)."""
    import pyarrow as pa

    if pa.types.is_fixed_size_list(level.type):
        return level.values.slice(level.offset * length, len(level) * length)
    return level.flatten()
