"""Space descriptions as the metadata keeps them: leaves, leaf tensors, bounds, text (numpy only).

A Dict or Tuple space is stored as one tensor per leaf: ``observations/<key>``, nested
``observations/<k1>/<k2>``, Tuple leaves ``observations/0``, ``observations/1``; the same
under ``next_observations/`` and ``actions/``. The description of the whole space stays in
the metadata (``observation_space``, ``action_space``), so the structure can be given back.

Two spellings are read: expcli's (``{"type": "Dict", "spaces": {...}}``, bounds as numbers
or the strings ``"inf"``/``"-inf"``, a single number when every element shares it) and
Minari's (``"subspaces"``, bounds as full lists where JSON's ``Infinity`` stands for inf).

A gymnasium ``Text`` leaf is stored as int32 Unicode code points, ``max_length`` of them,
padded with 0: ``decode_text`` gives the strings back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from expcli.errors import InvalidValueError, SchemaError

__all__ = [
    "SEPARATOR",
    "children",
    "decode_text",
    "encode_text",
    "is_composite",
    "leaf_tensors",
    "nest",
    "nest_names",
    "read_bounds",
    "space_for",
    "structured",
    "write_bounds",
]

SEPARATOR = "/"
"""Between a tensor's prefix and a leaf's keys: ``observations/pos``."""

SPACE_KEYS = {
    "observations": "observation_space",
    "next_observations": "observation_space",
    "actions": "action_space",
}
"""The metadata key holding the space of each structured tensor prefix."""


def space_for(metadata: Mapping[str, Any], prefix: str) -> dict[str, Any] | None:
    """The space description in ``metadata`` for a tensor prefix (``observations``...)."""
    key = SPACE_KEYS.get(prefix)
    description = metadata.get(key) if key else None
    return description if isinstance(description, dict) else None


def children(description: Any) -> list[tuple[str, Any]] | None:
    """The ``(key, description)`` parts of a Dict (keys) or Tuple (``"0"``, ``"1"``...).

    None for any other space, or for a description that is not understood.
    """
    if not isinstance(description, dict) or description.get("type") not in ("Dict", "Tuple"):
        return None
    parts = description.get("spaces", description.get("subspaces"))
    if description["type"] == "Dict" and isinstance(parts, dict):
        return [(str(key), sub) for key, sub in parts.items()]
    if description["type"] == "Tuple" and isinstance(parts, list):
        return [(str(i), sub) for i, sub in enumerate(parts)]
    return None


def is_composite(description: Any) -> bool:
    """Whether a description is a Dict or Tuple space (stored one tensor per leaf)."""
    return children(description) is not None


def leaf_tensors(description: Any, prefix: str) -> list[tuple[str, Any]]:
    """``(tensor name, leaf description)`` of every leaf, in the space's order.

    A space that is not a Dict or Tuple is its own single leaf, stored under ``prefix``.
    """
    return list(_walk(description, prefix))


def _walk(description: Any, name: str) -> Iterator[tuple[str, Any]]:
    parts = children(description)
    if parts is None:
        yield name, description
        return
    for key, sub in parts:
        yield from _walk(sub, f"{name}{SEPARATOR}{key}")


def nest(description: Any, prefix: str, leaf: Callable[[str, Any], Any]) -> Any:
    """The space's structure with ``leaf(tensor name, leaf description)`` at each leaf.

    Dict spaces become dicts (in the space's key order), Tuple spaces tuples.
    """
    parts = children(description)
    if parts is None:
        return leaf(prefix, description)
    values = {key: nest(sub, f"{prefix}{SEPARATOR}{key}", leaf) for key, sub in parts}
    if description["type"] == "Tuple":
        return tuple(values.values())
    return values


def nest_names(names: list[str], prefix: str) -> Any:
    """Nested dicts from tensor names alone (``prefix/a/b`` -> ``{"a": {"b": name}}``).

    For data without a space description; every key stays a string. ``prefix`` itself,
    when it is one of ``names``, is returned as is.
    """
    if prefix in names:
        return prefix
    tree: dict[str, Any] = {}
    start = prefix + SEPARATOR
    for name in names:
        if not name.startswith(start):
            continue
        node = tree
        *path, last = name[len(start) :].split(SEPARATOR)
        for key in path:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                break
        else:
            node.setdefault(last, name)
    return tree


# --------------------------------------------------------------------------- bounds


def write_bounds(values: np.ndarray) -> Any:
    """Box bounds for the JSON: one number when every element is the same, else nested lists.

    Infinities are written as the strings ``"inf"``/``"-inf"`` (JSON has no infinity).
    """
    array = np.asarray(values)
    if array.size and (array == array.reshape(-1)[0]).all():
        return _json_number(array.reshape(-1)[0].item())
    as_float = array.astype(np.float64)
    if np.isfinite(as_float).all():
        return array.tolist()
    out = np.empty(array.shape, dtype=object)
    for index, value in np.ndenumerate(array):
        out[index] = _json_number(value.item())
    return out.tolist()


def _json_number(value: Any) -> Any:
    if isinstance(value, float) and np.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def read_bounds(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Box bounds from the JSON as float64 shaped ``shape`` (a single number broadcast).

    Reads numbers, the strings ``"inf"``/``"-inf"`` and JSON's ``Infinity``.

    Raises:
        ValueError: The value is not numbers, or does not fit ``shape``.
        TypeError: The value is not numbers.
    """
    array = np.asarray(value, dtype=object)
    flat = [float(v) for v in array.reshape(-1)]  # float("inf") reads the strings
    numbers = np.asarray(flat, dtype=np.float64).reshape(array.shape)
    return np.array(np.broadcast_to(numbers, shape))


# ----------------------------------------------------------------------------- text


def encode_text(strings: Any, max_length: int) -> np.ndarray:
    """Strings as int32 code points ``(..., max_length)``, padded with 0.

    Raises:
        ValueError: A string is longer than ``max_length`` or holds the character NUL.
    """
    array = np.asarray(strings, dtype=str)
    width = int(np.char.str_len(array).max()) if array.size else 0
    if width > max_length:
        raise InvalidValueError(f"a string of {width} characters; the space allows {max_length}")
    if any("\0" in text for text in array.ravel().tolist()):
        raise InvalidValueError("a string holds the character NUL, which pads stored text")
    fixed = np.ascontiguousarray(array, dtype=f"<U{max(max_length, 1)}")
    codes = fixed.view(np.uint32).reshape(*array.shape, max(max_length, 1))
    return codes[..., :max_length].astype(np.int32)


def decode_text(codes: np.ndarray) -> np.ndarray:
    """Integer code points ``(..., max_length)`` back to a string array ``(...)``."""
    array = np.asarray(codes)
    length = array.shape[-1] if array.ndim else 0
    if length == 0:
        return np.zeros(array.shape[:-1], dtype="<U1")
    fixed = np.ascontiguousarray(array, dtype="<u4")
    return fixed.view(f"<U{length}").reshape(array.shape[:-1])


# ---------------------------------------------------------------------- structures


def structured(
    metadata: Mapping[str, Any], tensors: Mapping[str, Any], prefix: str, *, text: bool = True
) -> Any:
    """The tensors stored under ``prefix``, nested as its space is (see ``Dataset.structured``).

    Args:
        metadata: The dataset's metadata (its ``observation_space`` / ``action_space``).
        tensors: Name to array (or torch tensor).
        prefix: ``observations``, ``next_observations``, ``actions``, or any prefix such
            as ``infos`` (nested by the names alone).
        text: Give ``Text`` leaves back as strings (numpy arrays only).

    Raises:
        SchemaError: No tensor is stored under ``prefix``, or a leaf of its space is missing.
    """
    description = space_for(metadata, prefix)
    if is_composite(description):
        leaves = leaf_tensors(description, prefix)
        missing = [name for name, _ in leaves if name not in tensors]
        if missing and prefix in tensors:  # written flattened, before leaves were kept apart
            return tensors[prefix]
        if missing:
            raise SchemaError(
                f"the space in the metadata has the leaf {missing[0]!r}, which is not stored",
                key=prefix,
            )

        def leaf(name: str, sub: Any) -> Any:
            value = tensors[name]
            if text and isinstance(sub, dict) and sub.get("type") == "Text":
                return decode_text(value)
            return value

        return nest(description, prefix, leaf)
    if prefix in tensors:
        value = tensors[prefix]
        if text and isinstance(description, dict) and description.get("type") == "Text":
            return decode_text(value)
        return value
    tree = nest_names(list(tensors), prefix)
    if not tree:
        raise SchemaError(f"no tensor {prefix!r} nor {prefix + SEPARATOR}...", key=prefix)
    return _fill(tree, tensors)


def _fill(tree: Any, tensors: Mapping[str, Any]) -> Any:
    if isinstance(tree, str):
        return tensors[tree]
    return {key: _fill(sub, tensors) for key, sub in tree.items()}
