"""The metadata codec of the ``expcli/1`` schema, shared by every format module.

A dataset file stores its tensors and one JSON metadata object (``Dataset.header()``):
the schema name, sizes, circular state and a spec per tensor, then user metadata. This
module turns that object into text and back, checks it against the stored arrays, and
builds a ``Dataset`` from arrays that come without one (skrl's exports).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from expcli.errors import FormatError, SchemaError
from expcli.formats._guards import INTEGERS, brief, load_json
from expcli.formats._skrl_tail import written_transitions
from expcli.formats.dataset import Dataset
from expcli.spec import SUPPORTED_DTYPES, CircularState, TensorSpec

__all__ = [
    "dataset_from_header",
    "encode_header",
    "foreign_dataset",
    "header_specs",
    "parse_header",
]


def encode_header(
    header: Mapping[str, Any], path: str | os.PathLike[str], *, indent: int | None = None
) -> str:
    """A metadata object (``Dataset.header()``, perhaps with more keys) as a JSON string.

    Raises:
        SchemaError: A metadata value is not JSON-serialisable (its key is named), or an
            integer lies beyond 64 bits (``INTEGERS``), which no reader would take back.
    """
    try:
        text = json.dumps(header, indent=indent)
    except (TypeError, ValueError) as e:
        key = next((k for k, v in header.items() if not _serialisable(v)), None)
        raise SchemaError(f"metadata is not JSON-serialisable: {e}", path=path, key=key) from e
    for key, value in header.items():
        large = _large_integer(value)
        if large is not None:
            raise SchemaError(
                f"metadata holds the integer {brief(str(large))}, beyond 64 bits; expected "
                "integers from -2**63 to 2**64 - 1 (a larger one is kept as a string)",
                path=path,
                key=key,
            )
    return text


def _large_integer(value: Any) -> int | None:
    """The first integer in ``value`` (walked without recursion) outside ``INTEGERS``."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, int) and not isinstance(item, bool) and item not in INTEGERS:
            return item
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return None


def parse_header(text: str | bytes, path: str | os.PathLike[str], key: str) -> dict[str, Any]:
    """Parse a stored metadata JSON object.

    Raises:
        FormatError: The text is not a JSON object, or is nested too deep.
    """
    header = load_json(text, path, key)
    if not isinstance(header, dict):
        raise FormatError(
            f"metadata is a JSON {type(header).__name__}; expected an object", path=path, key=key
        )
    return header


def header_specs(header: Mapping[str, Any], path: str | os.PathLike[str]) -> list[TensorSpec]:
    """The tensor specs listed under ``tensors`` in a metadata object, in name order.

    Raises:
        SchemaError: ``tensors`` is missing or malformed, or names an unsupported dtype.
    """
    tensors = header.get("tensors")
    if not isinstance(tensors, dict):
        raise SchemaError("metadata lacks a 'tensors' object", path=path, key="tensors")
    specs = []
    for name in sorted(tensors):
        entry = tensors[name]
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if (
            not isinstance(dtype, str)
            or dtype not in SUPPORTED_DTYPES
            or not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape))
        ):
            raise SchemaError(
                f"malformed tensor entry {brief(entry)} in metadata; expected "
                f'{{"dtype": one of {sorted(SUPPORTED_DTYPES)}, "shape": [sizes]}}',
                path=path,
                key=name,
            )
        specs.append(TensorSpec(name, str(dtype), tuple(shape)))
    return specs


def dataset_from_header(
    arrays: dict[str, np.ndarray], header: Mapping[str, Any], path: str | os.PathLike[str]
) -> Dataset:
    """Build a dataset from stored arrays and their metadata object, checking they agree.

    Raises:
        SchemaError: The metadata is not expcli's schema or disagrees with the arrays.
    """
    state, metadata = Dataset.split_header(header, path)
    specs = {spec.name: spec for spec in header_specs(header, path)}
    for name in sorted(specs.keys() | arrays.keys()):
        if name not in arrays:
            raise SchemaError("listed in the metadata but missing", path=path, key=name)
        if name not in specs:
            raise SchemaError("present but not listed in the metadata", path=path, key=name)
        actual = TensorSpec.of(name, arrays[name])
        if (actual.dtype, actual.shape) != (specs[name].dtype, specs[name].shape):
            raise SchemaError(
                f"stored as {actual.dtype} with feature shape {actual.shape}; the metadata "
                f"says {specs[name].dtype} with feature shape {specs[name].shape}",
                path=path,
                key=name,
            )
    dataset = Dataset(arrays, state, metadata)
    if arrays:
        for key, actual_size in (
            ("memory_size", dataset.memory_size),
            ("num_envs", dataset.num_envs),
        ):
            if header.get(key) != actual_size:
                raise SchemaError(
                    f"metadata says {header.get(key)!r}; the tensors have {actual_size}",
                    path=path,
                    key=key,
                )
    dataset.validate(path)
    return dataset


def foreign_dataset(arrays: dict[str, Any], path: str | os.PathLike[str]) -> Dataset:
    """A dataset from arrays without metadata: a skrl export (``Memory.save``).

    It counts as a full memory, unless it ends with transitions that skrl never wrote (NaN
    in every float tensor, zero in the others: see ``_skrl_tail``); then only the written
    ones are valid, and the metadata says how many were left out, under
    ``skrl.unwritten_transitions``.
    """
    dataset = Dataset(arrays, CircularState(0, 0, filled=True), {})
    dataset.validate(path)
    size, envs = dataset.memory_size, dataset.num_envs
    written = written_transitions(arrays, size, envs)
    if written < size * envs:
        state = CircularState(written // envs, written % envs, False)
        unwritten = {"unwritten_transitions": size * envs - written}
        dataset = Dataset(arrays, state, {"layout": "skrl", "skrl": unwritten})
    return dataset


def _serialisable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
