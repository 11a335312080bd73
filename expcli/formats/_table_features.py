"""What a foreign table's metadata declares about its columns: HF features, Arrow tensors.

HF ``datasets`` keeps its features as JSON under the schema's ``huggingface`` key
(``{"info": {"features": {NAME: {"_type": ...}}}}``): an ``Image`` is a struct of PNG or JPEG
bytes and a path, an ``Array2D`` to ``Array5D`` nested lists of a shape and dtype (an
extension type, read as its storage lists). A column of bytes whose feature gives a shape
and a dtype holds each row's values in C order. Arrow's ``arrow.fixed_shape_tensor`` is a
list of a tensor's values, its shape (and the order of its dimensions in memory) in the
type's metadata, which ``_arrow_schema`` reads from the stored schema that
``_parquet_open`` hides from pyarrow (``HIDDEN_SCHEMA_KEY``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from expcli.errors import FormatError
from expcli.formats._arrow_schema import FIXED_SHAPE_TENSOR, extensions
from expcli.formats._guards import MAX_METADATA_BYTES, brief, load_json
from expcli.formats._parquet_open import HIDDEN_SCHEMA_KEY

__all__ = ["Declared", "declared_types", "tensor_declared"]

_HF_KEY = b"huggingface"
_ARRAYS = ("Array2D", "Array3D", "Array4D", "Array5D")


@dataclass(frozen=True, slots=True)
class Declared:
    """What metadata says a column holds.

    Attributes:
        kind: ``image`` (HF ``Image``), ``array`` (HF ``ArrayND``: nested lists, or
            bytes), ``bytes`` (another feature with a shape and a dtype: said of a column of
            bytes only), or ``tensor`` (``fixed_shape_tensor``: a flat list of the values).
        shape: The feature's shape (HF may leave the first dimension None: any length).
        dtype: The values' numpy dtype, where declared.
        permutation: ``tensor``: the stored dimension of each dimension read (None: as
            stored); ``shape`` is the stored (C order) shape, as Arrow's spec has it.
        said: Where it is declared, for messages ("its HF feature Array2D", ...).
    """

    kind: str
    shape: tuple[int | None, ...] = ()
    dtype: str | None = None
    permutation: tuple[int, ...] | None = None
    said: str = ""


def declared_types(schema: Any, path: Path) -> dict[str, Declared]:
    """Column -> what the table's metadata declares of it (columns it says nothing of absent).

    Raises:
        FormatError: Metadata that is not JSON, too large, or declares a shape or dtype that
            cannot be (negative, not integers, an unknown dtype).
    """
    kv = schema.metadata or {}
    found: dict[str, Declared] = {}
    features = _hf_features(kv, path)
    for name, feature in features.items():
        declared = _from_feature(feature, path, name)
        if declared is not None:
            found[name] = declared
    stored = kv.get(HIDDEN_SCHEMA_KEY)
    if stored is not None:
        for name, extension in extensions(stored, path).items():
            if extension.name == FIXED_SHAPE_TENSOR:
                found[name] = _tensor(load_json(extension.metadata, path, name), path, name)
            elif name not in found:  # HF's ArrayND, whose features say its shape
                found[name] = Declared("array", said=f"its type {extension.name}")
    return found


def tensor_declared(kind: Any, path: Path, name: str) -> Declared:
    """What a ``fixed_shape_tensor`` type that pyarrow built (from an IPC file) declares."""
    permutation = kind.permutation
    return _tensor(
        {
            "shape": list(kind.shape),
            "permutation": None if permutation is None else list(permutation),
        },
        path,
        name,
    )


def _hf_features(kv: dict[bytes, bytes], path: Path) -> dict[str, Any]:
    text = kv.get(_HF_KEY)
    if text is None:
        return {}
    if len(text) > MAX_METADATA_BYTES:
        raise FormatError("metadata too large", path=path, key=_HF_KEY.decode())
    info = load_json(text, path, _HF_KEY.decode())
    inner = info.get("info") if isinstance(info, dict) else None
    features = inner.get("features") if isinstance(inner, dict) else None
    if not isinstance(features, dict):
        return {}
    return features


def _from_feature(feature: Any, path: Path, name: str) -> Declared | None:
    if not isinstance(feature, dict):
        return None
    kind = feature.get("_type")
    if kind == "Image":
        return Declared("image", said="its HF feature Image")
    if kind not in _ARRAYS and not ("shape" in feature and "dtype" in feature):
        return None
    arrays = kind in _ARRAYS
    said = f"its HF feature {kind}" if arrays else "its HF feature's shape and dtype"
    shape = _dimensions(feature.get("shape"), path, name, said, first_free=arrays)
    dtype = feature.get("dtype")
    if not isinstance(dtype, str) or dtype not in _NUMPY_DTYPES:
        raise FormatError(
            f"{said} declares dtype {brief(dtype)}; expected one of {', '.join(_NUMPY_DTYPES)}",
            path=path,
            key=name,
        )
    return Declared("array" if arrays else "bytes", shape, dtype, said=said)


_NUMPY_DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "float16", "float32", "float64",
)  # fmt: skip


def _dimensions(
    value: Any, path: Path, name: str, said: str, first_free: bool = False
) -> tuple[int | None, ...]:
    """A declared shape: integers of 0 or more (``first_free``: the first may be None)."""
    good = (
        isinstance(value, list)
        and 0 < len(value) <= 32
        and all(
            (type(d) is int and 0 <= d < 1 << 62) or (d is None and i == 0 and first_free)
            for i, d in enumerate(value)
        )
    )
    if not good:
        raise FormatError(
            f"{said} declares shape {brief(value)}; expected a list of sizes of 0 or more",
            path=path,
            key=name,
        )
    return tuple(value)


def _tensor(value: Any, path: Path, name: str) -> Declared:
    said = f"its type {FIXED_SHAPE_TENSOR}"
    if not isinstance(value, dict):
        raise FormatError(
            f"{said} has metadata {brief(value)}; expected an object", path=path, key=name
        )
    shape = _dimensions(value.get("shape"), path, name, said)
    permutation = value.get("permutation")
    if permutation is not None:
        if (
            not isinstance(permutation, list)
            or len(permutation) != len(shape)
            or sorted(p for p in permutation if type(p) is int) != list(range(len(shape)))
        ):
            raise FormatError(
                f"{said} declares permutation {brief(permutation)}; expected an order of "
                f"0..{len(shape) - 1}",
                path=path,
                key=name,
            )
        permutation = tuple(permutation)
    return Declared("tensor", shape, None, permutation, said=said)
