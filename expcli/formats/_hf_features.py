"""The ``huggingface`` schema metadata of expcli's Parquet files: each column's HF feature.

HF ``datasets`` takes a Parquet file's features from the JSON under the schema's
``huggingface`` key (``{"info": {"features": ...}}``, as ``Dataset.to_parquet`` writes it)
and otherwise infers them from the Arrow types. expcli writes the features HF would infer,
but for its PNG frame columns, which it names ``Image``: HF then decodes them to images
and, with ``with_format("numpy")``, to ``uint8 (H, W, C)`` arrays (``(H, W)`` grey).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

__all__ = ["HF_KEY", "hf_metadata"]

HF_KEY = b"huggingface"


def hf_metadata(schema: Any, images: Collection[str]) -> bytes:
    """The ``huggingface`` value for ``schema`` (a pyarrow schema); ``images``: PNG columns."""
    features = {
        field.name: {"_type": "Image"} if field.name in images else _feature(field.type)
        for field in schema
    }
    return json.dumps({"info": {"features": features}}).encode()


def _feature(kind: Any) -> dict[str, Any]:
    """The HF feature of an Arrow type of expcli's columns (plain values, fixed lists)."""
    import pyarrow as pa

    if pa.types.is_fixed_size_list(kind):
        return {"feature": _feature(kind.value_type), "length": kind.list_size, "_type": "List"}
    if pa.types.is_fixed_size_binary(kind):
        return {"dtype": f"fixed_size_binary[{kind.byte_width}]", "_type": "Value"}
    if pa.types.is_boolean(kind):
        return {"dtype": "bool", "_type": "Value"}
    return {"dtype": kind.to_pandas_dtype().__name__, "_type": "Value"}
