"""The columns of a table expcli did not write: which Arrow types can be a tensor, and decoding.

A column is a tensor when it holds numbers or booleans: a scalar per row, or lists of them,
nested to any depth. A fixed-size list says its length; a variable-size list (what polars
and duckdb write for an array, HF ``datasets`` for a ``Sequence``) takes the length of its
first row, and every row must have it: ragged rows cannot be one tensor and are refused,
naming the column and the first row that differs. Nulls are refused too, except where a
column may hold them (a next observation stored once): there they are given back as a mask.

What the table's metadata declares (``_table_features``) is read too: an HF ``Image``
column decoded to uint8 pixels (``_table_images``), an HF ``ArrayND`` read with its shape
checked, an Arrow ``fixed_shape_tensor`` reshaped to its shape, and bytes of a declared
shape and dtype (each row that many bytes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError
from expcli.formats import _table_images
from expcli.formats._arrow_schema import FIXED_SHAPE_TENSOR, READ_EXTENSIONS
from expcli.formats._arrow_values import values_as
from expcli.formats._table_features import Declared, tensor_declared
from expcli.spec import TensorSpec

__all__ = ["ColumnKind", "arrow_numbers", "decode", "first_shape", "kind_of"]

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
_ARROW_NAMES = {"float16": "halffloat", "float32": "float", "float64": "double"}
"""numpy's names that Arrow spells otherwise."""


@dataclass(frozen=True, slots=True)
class ColumnKind:
    """What a column holds: its values' dtype and each list level's length (None: variable).

    ``levels`` is empty for a scalar column. ``binary``: each row is the bytes of a
    feature of shape ``levels`` in C order (how expcli stores frames), whose dtype and
    shape only expcli's footer or the table's metadata says. ``declared``: what the
    metadata says of it (an image, a tensor's shape), if anything.
    """

    dtype: str
    levels: tuple[int | None, ...]
    binary: bool = False
    declared: Declared | None = None

    @property
    def image(self) -> bool:
        """Whether the column holds images (HF ``Image``), decoded to uint8 pixels."""
        return self.declared is not None and self.declared.kind == "image"


def kind_of(
    field: Any, path: Path, spec: TensorSpec | None = None, declared: Declared | None = None
) -> ColumnKind:
    """The ``ColumnKind`` of an Arrow field, or a refusal naming the column and its type.

    ``spec``: the tensor that expcli's footer (kept, but disagreeing with the rows) says the
    column holds; a column of bytes of its size is read as it. ``declared``: what the
    table's metadata says the column holds.

    Raises:
        FormatError: Not numbers, booleans or (nested) lists of them, nor what ``declared``
            says (images, bytes of a shape and dtype).
    """
    import pyarrow as pa

    kind = field.type
    if isinstance(kind, pa.BaseExtensionType) and kind.extension_name in READ_EXTENSIONS:
        if kind.extension_name == FIXED_SHAPE_TENSOR:  # an IPC file's, which pyarrow built
            declared = tensor_declared(kind, path, field.name)
        kind = kind.storage_type  # HF's ArrayND: nested lists, the features say their shape
    if spec is not None and (pa.types.is_fixed_size_binary(kind)):
        if kind.byte_width == math.prod(spec.shape) * np.dtype(spec.dtype).itemsize:
            return ColumnKind(spec.dtype, tuple(spec.shape), binary=True)
    if declared is not None and declared.kind == "image":
        return _image_kind(field, declared, path)
    if declared is not None and declared.kind in ("array", "bytes") and _is_bytes(kind):
        if declared.dtype is None or None in declared.shape:
            raise FormatError(
                f"column is {kind}, and {declared.said} gives no whole shape and dtype for "
                "its bytes",
                path=path,
                key=field.name,
            )
        widened = _DTYPES[_ARROW_NAMES.get(declared.dtype, declared.dtype)]
        return ColumnKind(widened, declared.shape, binary=True, declared=declared)
    if declared is not None and declared.kind == "bytes":
        declared = None  # a shape and dtype say nothing of a column that is not bytes
    levels = list[int | None]()
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
    wanted = 1 if declared is not None and declared.kind == "tensor" else None
    if declared is not None and wanted is None and len(declared.shape) not in (0, len(levels)):
        wanted = len(declared.shape)
    if wanted is not None and len(levels) != wanted:
        raise FormatError(
            f"column is {field.type}, and {declared.said if declared else ''} declares shape "
            f"{list(declared.shape) if declared else []}; expected lists nested {wanted} deep",
            path=path,
            key=field.name,
        )
    return ColumnKind(dtype, tuple(levels), declared=declared)


def _is_bytes(kind: Any) -> bool:
    import pyarrow as pa

    return bool(
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_fixed_size_binary(kind)
    )


def _image_kind(field: Any, declared: Declared, path: Path) -> ColumnKind:
    import pyarrow as pa

    kind = field.type
    names = [kind.field(i).name for i in range(kind.num_fields)] if pa.types.is_struct(kind) else []
    if "bytes" not in names or "path" not in names or not _is_bytes(kind.field("bytes").type):
        raise FormatError(
            f"column is {kind}, and {declared.said} says it holds images; expected "
            "struct<bytes: binary, path: string>",
            path=path,
            key=field.name,
        )
    return ColumnKind("uint8", (), declared=declared)


def first_shape(
    array: Any, kind: ColumnKind, path: Path, name: str, row: int = -1
) -> tuple[int, ...]:
    """The feature shape of a column, from its first row (``array``: at least one, not null).

    ``row``: that row's number in the file (for messages; -1: not known).

    Raises:
        FormatError: An image that cannot be (``_table_images``), or a first row of another
            shape than the table's metadata declares.
    """
    array = _storage(array)
    if kind.image:
        return _table_images.first_image(array, (path, name, row))[0]
    shape = []
    level = array.slice(0, 1)
    for length in kind.levels:
        if length is None:
            length = int(level.value_lengths()[0].as_py())
        shape.append(length)
        level = _inner(level, length)
    declared = kind.declared
    if declared is None or kind.binary or not declared.shape:
        return tuple(shape)
    if declared.kind == "tensor":
        wanted = math.prod(d or 0 for d in declared.shape)
        if shape[0] != wanted:
            raise FormatError(
                f"row 0 holds {shape[0]:,} values; {declared.said} declares shape "
                f"{list(declared.shape)} ({wanted:,} values)",
                path=path,
                key=name,
            )
        stored = tuple(int(d or 0) for d in declared.shape)
        order = declared.permutation or range(len(stored))
        return tuple(stored[i] for i in order)  # as pyarrow's to_numpy_ndarray shows it
    if any(d is not None and d != s for d, s in zip(declared.shape, shape, strict=True)):
        raise FormatError(
            f"row 0 holds lists of shape {shape}; {declared.said} declares {list(declared.shape)}",
            path=path,
            key=name,
        )
    return tuple(shape)


def _storage(array: Any) -> Any:
    """An extension array's storage (a ``fixed_shape_tensor`` from an IPC file); else itself."""
    import pyarrow as pa

    return array.storage if isinstance(array, pa.ExtensionArray) else array


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
    array = _storage(array)
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
    if kind.image:
        return _table_images.image_rows(array, shape, where)
    if kind.binary:  # bytes of ``shape`` in C order
        return _bytes_rows(array, kind, shape, where)
    if kind.declared is not None and kind.declared.kind == "tensor":
        values = _dense(array, ColumnKind(kind.dtype, kind.levels), (math.prod(shape),), where)
        stored = values.reshape(count, *(int(d or 0) for d in kind.declared.shape))
        order = kind.declared.permutation  # the stored dimension of each dimension shown
        if order is None:
            return stored
        return np.ascontiguousarray(stored.transpose(0, *(1 + i for i in order)))
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


def _bytes_rows(
    array: Any, kind: ColumnKind, shape: tuple[int, ...], where: tuple[Path, str, int]
) -> np.ndarray:
    """Rows of bytes, each a feature of ``shape`` in C order (every row that many bytes)."""
    import pyarrow as pa

    path, name, first = where
    stored = np.dtype(kind.declared.dtype if kind.declared and kind.declared.dtype else kind.dtype)
    count, width = len(array), math.prod(shape) * stored.itemsize
    if pa.types.is_fixed_size_binary(array.type):
        starts = np.arange(count + 1, dtype=np.int64) * array.type.byte_width
        offset = array.offset * array.type.byte_width
    else:
        wide = pa.types.is_large_binary(array.type)
        starts = np.frombuffer(
            array.buffers()[1], np.int64 if wide else np.int32, count + 1, array.offset
        ).astype(np.int64)
        offset = 0
    wrong = np.flatnonzero(np.diff(starts) != width)
    if len(wrong):
        at = int(wrong[0])
        row = f"row {first + at:,}" if first >= 0 else "a row"
        said = kind.declared.said if kind.declared else "its metadata"
        raise FormatError(
            f"{row} holds {int(starts[at + 1] - starts[at]):,} bytes where {said} declares "
            f"{stored} {list(shape)} ({width:,} bytes)",
            path=path,
            key=name,
        )
    data = array.buffers()[-1]
    flat = np.frombuffer(data, np.uint8, count * width, offset + int(starts[0]))
    return flat.view(stored).astype(kind.dtype, copy=False).reshape(count, *shape)


def arrow_numbers(array: Any) -> np.ndarray:
    """An Arrow array of numbers or bools without nulls, as numpy: a view where it can be.

    Read from its buffers: pyarrow's ``to_numpy`` imports pandas (0.6 s) on first use.
    """
    import pyarrow as pa

    kind = array.type
    if pa.types.is_boolean(kind):
        return values_as(array, np.dtype(bool))
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        return np.asarray(array.to_numpy(zero_copy_only=False))
    code = "f" if pa.types.is_floating(kind) else "i" if pa.types.is_signed_integer(kind) else "u"
    dtype = np.dtype(f"<{code}{kind.bit_width // 8}")
    return values_as(array, dtype)


def _inner(level: Any, length: int) -> Any:
    """A list array's values, one level down, for its rows alone (slices respected)."""
    import pyarrow as pa

    if pa.types.is_fixed_size_list(level.type):
        return level.values.slice(level.offset * length, len(level) * length)
    return level.flatten()
