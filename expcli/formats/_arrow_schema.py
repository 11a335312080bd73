"""The extension types a Parquet file's stored Arrow schema declares, read without pyarrow.

pyarrow builds the extension types of a file's stored schema (``ARROW:schema``: base64 of
an IPC schema message, a flatbuffer) as it opens the file, running the deserialiser of any
type registered in the process (by ray or HF ``datasets``, say). expcli builds none: it
walks the flatbuffer itself (``_flatbuffer``: every offset checked, the tables visited
bounded in number), to learn which top-level columns are of which extension type, and
``_parquet_open`` then hides the stored schema from pyarrow, which reads those columns as
their storage types. What the declarations say (a tensor's shape) is used by
``_table_features``; a type expcli does not read is refused there, unbuilt.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path

from expcli.errors import FormatError
from expcli.formats._flatbuffer import Damaged, Flatbuffer

__all__ = ["EXTENSION_NAME", "FIXED_SHAPE_TENSOR", "READ_EXTENSIONS", "Extension", "extensions"]

EXTENSION_NAME = b"ARROW:extension:name"
FIXED_SHAPE_TENSOR = "arrow.fixed_shape_tensor"
READ_EXTENSIONS = (
    FIXED_SHAPE_TENSOR,
    *(f"datasets.features.features.Array{n}DExtensionType" for n in range(2, 6)),
)
"""The extension types expcli reads (as their storage types, never built): Arrow's
canonical tensor, and HF ``datasets``' ``Array2D`` to ``Array5D`` (nested lists whose
shape and dtype its ``huggingface`` metadata gives)."""
_EXTENSION_METADATA = b"ARROW:extension:metadata"
_SCHEMA_HEADER = 1  # MessageHeader.Schema


@dataclass(frozen=True, slots=True)
class Extension:
    """An extension type a column declares: its name and its serialised metadata."""

    name: str
    metadata: bytes


def extensions(encoded: bytes, path: Path) -> dict[str, Extension]:
    """Top-level column -> the extension type it declares, from an ``ARROW:schema`` value.

    Raises:
        FormatError: The value is no Arrow schema, is damaged, or declares an extension
            type inside a nested column (expcli reads them at the top level only).
    """
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as e:
        raise _refused(path, "is not base64") from e
    if data[:4] == b"\xff\xff\xff\xff":  # the continuation marker, then the length
        data = data[8:]
    elif len(data) >= 4:
        data = data[4:]
    buffer = Flatbuffer(data)
    try:
        message = buffer.root()
        kind, header = buffer.field(message, 1), buffer.field(message, 2)
        if kind is None or header is None or buffer.unpack("<B", kind) != _SCHEMA_HEADER:
            raise Damaged
        schema = buffer.table(buffer.follow(header))
        listed = buffer.field(schema, 1)
        found: dict[str, Extension] = {}
        for at in buffer.tables(listed):
            field = buffer.table(at)
            name = buffer.field(field, 0)
            declared = _declared(buffer, field)
            if declared is not None:
                column = buffer.string(name).decode("utf-8", "replace") if name else ""
                found[column] = declared
            _refuse_nested(buffer, field, path)
    except (Damaged, RecursionError) as e:
        raise _refused(path, "is damaged") from e
    return found


def _declared(buffer: Flatbuffer, field: int) -> Extension | None:
    """The extension a field's custom metadata declares (None: a plain type)."""
    listed = buffer.field(field, 6)
    pairs: dict[bytes, bytes] = {}
    for at in buffer.tables(listed):
        pair = buffer.table(at)
        key, value = buffer.field(pair, 0), buffer.field(pair, 1)
        if key is not None:
            pairs[buffer.string(key)] = buffer.string(value) if value is not None else b""
    if EXTENSION_NAME not in pairs:
        return None
    name = pairs[EXTENSION_NAME].decode("utf-8", "replace")
    return Extension(name, pairs.get(_EXTENSION_METADATA, b""))


def _refuse_nested(buffer: Flatbuffer, field: int, path: Path) -> None:
    """Refuse an extension type anywhere inside a field (walked without recursion)."""
    level = [field]
    while level:
        inner: list[int] = []
        for at in level:
            children = buffer.field(at, 5)
            for child in buffer.tables(children):
                child = buffer.table(child)
                declared = _declared(buffer, child)
                if declared is not None:
                    raise FormatError(
                        f"its Arrow schema declares the extension type {declared.name!r} "
                        "inside a nested column; expcli reads extension types only as columns "
                        "of their own and never builds types named by a file",
                        path=path,
                    )
                inner.append(child)
        level = inner


def _refused(path: Path, why: str) -> FormatError:
    return FormatError(
        f"its stored Arrow schema (ARROW:schema) {why}; expected one written by Arrow",
        path=path,
    )
