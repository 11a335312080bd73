"""Observations and actions as Minari stores them: leaves of Dict/Tuple spaces, and spaces.

Minari (``minari.dataset._storages.hdf5_storage``) stores a sample of a Dict space as a
group per episode with one dataset per key, and a Tuple's parts under ``_index_<i>``;
``serialize_space`` writes Dict and Tuple with ``subspaces``, Box bounds as full lists
(``Infinity`` for inf) and Discrete with ``dtype``. expcli stores each leaf as a tensor
``observations/<key>`` (Tuple parts ``observations/<i>``); this module maps one onto the
other, and writes a space description the way ``minari.deserialize_space`` reads it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError, SchemaError
from expcli.formats._error_summary import error_summary
from expcli.formats.dataset import Dataset
from expcli.formats.layouts._episodes import column_rows, foreign_rows, load_array
from expcli.formats.layouts._row_streams import rows_of
from expcli.space_json import (
    SEPARATOR,
    children,
    decode_text,
    encode_text,
    is_composite,
    leaf_tensors,
    read_bounds,
    space_for,
)

__all__ = [
    "StoredLeaf",
    "expcli_leaf",
    "minari_space",
    "read_leaf",
    "step_data",
    "step_rows",
    "stored_leaves",
    "text_leaves",
]

_TUPLE_PART = re.compile(r"_index_(\d+)")


@dataclass(frozen=True)
class StoredLeaf:
    """One tensor of observations or actions and where Minari keeps it.

    Attributes:
        name: expcli's tensor name (``observations/pos``, ``observations/0``).
        key: The dataset's path inside an episode group (``observations/_index_0``).
        space: The leaf's space description, when the metadata gives one.
    """

    name: str
    key: str
    space: dict[str, Any] | None

    @property
    def text(self) -> bool:
        """Whether the leaf is a ``Text`` space (stored by expcli as code points)."""
        return self.space is not None and self.space.get("type") == "Text"

    def rows(self, array: np.ndarray) -> np.ndarray:
        """Rows ``(T, *feature)`` of expcli as Minari stores this leaf's samples."""
        if self.text:
            return decode_text(array)
        if self.space is not None and self.space.get("type") in ("Discrete", "Box"):
            if self.space.get("type") == "Discrete" or not self.space.get("shape"):
                return array.reshape(array.shape[0]) if array.shape[1:] == (1,) else array
            return array
        return foreign_rows(self.name.split(SEPARATOR)[0], array)


def stored_leaves(dataset: Dataset, prefix: str) -> list[StoredLeaf]:
    """The tensors of ``observations`` or ``actions``.

    Itself, or one per leaf of a Dict or Tuple space (from the metadata's space, else from the names
    ``prefix/...``).

    Raises:
        SchemaError: Nothing is stored under ``prefix``, or a leaf of its space is missing.
    """
    tensors = dataset.tensors
    description = space_for(dataset.metadata, prefix)
    if prefix in tensors:
        return [StoredLeaf(prefix, prefix, None if is_composite(description) else description)]
    if is_composite(description):
        pairs = leaf_tensors(description, prefix)
    else:
        pairs = [(name, None) for name in sorted(tensors) if name.startswith(prefix + SEPARATOR)]
        description = None
    if not pairs:
        raise SchemaError("missing; the minari layout needs it", key=prefix)
    for name, _ in pairs:
        if name not in tensors:
            raise SchemaError("is a leaf of the space in the metadata but is missing", key=name)
    return [StoredLeaf(name, _minari_key(description, prefix, name), leaf) for name, leaf in pairs]


def _minari_key(description: Any, prefix: str, name: str) -> str:
    """``observations/a/1`` as Minari names it: Tuple parts are ``_index_<i>``."""
    node = description
    out = [prefix]
    for key in name[len(prefix) + 1 :].split(SEPARATOR):
        parts = dict(children(node) or [])
        is_tuple = isinstance(node, dict) and node.get("type") == "Tuple"
        out.append(f"_index_{key}" if is_tuple else key)
        node = parts.get(key)
    return SEPARATOR.join(out)


def expcli_leaf(key: str) -> str:
    """The expcli tensor name of a Minari dataset path under an episode.

    ``observations/_index_0/x`` becomes ``observations/0/x``.
    """
    return SEPARATOR.join(
        m.group(1) if (m := _TUPLE_PART.fullmatch(part)) else part for part in key.split(SEPARATOR)
    )


def minari_space(dataset: Dataset, prefix: str) -> str:
    """Minari's JSON for the space of ``observations`` or ``actions``.

    The metadata's, where it fits the data, else one made from the data.
    """
    leaves = {leaf.name: leaf for leaf in stored_leaves(dataset, prefix)}
    description = space_for(dataset.metadata, prefix)
    if prefix in leaves or not is_composite(description):
        if prefix in leaves:
            return json.dumps(_leaf_space(leaves[prefix], dataset))
        parts = {leaf.key.split(SEPARATOR, 1)[1]: leaf for leaf in leaves.values()}
        return json.dumps(_dict_from_names(parts, dataset))

    def convert(node: Any, name: str) -> dict[str, Any]:
        parts = children(node)
        if parts is None:
            return _leaf_space(leaves[name], dataset)
        subspaces = [(key, convert(sub, f"{name}{SEPARATOR}{key}")) for key, sub in parts]
        if node["type"] == "Tuple":
            return {"type": "Tuple", "subspaces": [sub for _, sub in subspaces]}
        return {"type": "Dict", "subspaces": dict(subspaces)}

    return json.dumps(convert(description, prefix))


def _dict_from_names(parts: dict[str, StoredLeaf], dataset: Dataset) -> dict[str, Any]:
    """A Dict space nested as the names ``a/b`` are, each leaf made from its data."""
    tree: dict[str, Any] = {}
    for path, leaf in parts.items():
        node = tree
        *keys, last = path.split(SEPARATOR)
        for key in keys:
            node = node.setdefault(key, {"type": "Dict", "subspaces": {}})["subspaces"]
        node[last] = _leaf_space(leaf, dataset)
    return {"type": "Dict", "subspaces": tree}


def _leaf_space(leaf: StoredLeaf, dataset: Dataset) -> dict[str, Any]:
    rows = _valid_rows(dataset, leaf, 1)  # a row tells the shape and dtype
    space = leaf.space
    if space is not None and _fits(space, rows):
        return _minari_spelling(space)
    if rows.dtype.kind in "iu" and rows.shape[1:] == ():  # a Discrete: its bounds
        rows = _valid_rows(dataset, leaf)  # integers, one per row
    return _from_data(rows)


def _valid_rows(dataset: Dataset, leaf: StoredLeaf, limit: int | None = None) -> np.ndarray:
    """A leaf's valid rows of every env column (the first ``limit`` of each), as stored.

    Only those rows are read.
    """
    array = dataset.tensors[leaf.name]
    rows = [rows_of(array, r[:limit])[:, j] for j, r in enumerate(column_rows(dataset))]
    return leaf.rows(np.concatenate(rows) if rows else np.empty((0, *array.shape[2:]), array.dtype))


def _minari_spelling(space: dict[str, Any]) -> dict[str, Any]:
    """A leaf's description as ``minari.serialize_space`` writes it."""
    kind = space["type"]
    if kind == "Box":
        shape = tuple(int(d) for d in space["shape"])
        dtype = np.dtype(space.get("dtype", "float32"))
        return {
            "type": "Box",
            "dtype": dtype.name,
            "shape": list(shape),
            "low": read_bounds(space["low"], shape).astype(dtype).tolist(),
            "high": read_bounds(space["high"], shape).astype(dtype).tolist(),
        }
    if kind == "Discrete":
        return {
            "type": "Discrete",
            "dtype": "int64",
            "start": int(space.get("start", 0)),
            "n": int(space["n"]),
        }
    if kind == "MultiDiscrete":
        nvec = list(space["nvec"])
        return {
            "type": "MultiDiscrete",
            "dtype": space.get("dtype", "int64"),
            "nvec": nvec,
            "start": space.get("start", [0] * len(nvec)),
        }
    if kind == "Text":
        return {
            "type": "Text",
            "max_length": int(space["max_length"]),
            "min_length": int(space.get("min_length", 1)),
            "charset": space.get("charset", space.get("characters", "")),
        }
    return dict(space)


def _from_data(rows: np.ndarray) -> dict[str, Any]:
    """A space that holds the data.

    Box of infinite (or the dtype's) bounds, Discrete for integer scalars, MultiBinary for booleans.
    """
    feature = rows.shape[1:]
    if rows.dtype.kind == "f":
        bounds = np.full(feature, np.inf)
        return {
            "type": "Box",
            "dtype": rows.dtype.name,
            "shape": list(feature),
            "low": (-bounds).tolist(),
            "high": bounds.tolist(),
        }
    if rows.dtype.kind == "b":
        return {"type": "MultiBinary", "n": list(feature) if feature else 1}
    if not feature:
        low = int(rows.min()) if rows.size else 0
        high = int(rows.max()) if rows.size else 0
        return {"type": "Discrete", "dtype": "int64", "start": low, "n": high - low + 1}
    info = np.iinfo(rows.dtype)
    return {
        "type": "Box",
        "dtype": rows.dtype.name,
        "shape": list(feature),
        "low": np.full(feature, info.min).tolist(),
        "high": np.full(feature, info.max).tolist(),
    }


def _fits(space: dict[str, Any], rows: np.ndarray) -> bool:
    feature = rows.shape[1:]
    kind = space.get("type")
    try:
        if kind == "Box":
            return tuple(space.get("shape", ())) == feature
        if kind == "Discrete":
            return feature == () and rows.dtype.kind in "iu"
        if kind == "MultiDiscrete":
            return feature == (len(space.get("nvec", ())),)
        if kind == "MultiBinary":
            n = space.get("n")
            return feature == (tuple(n) if isinstance(n, list) else (n,))
        if kind == "Text":
            return feature == () and rows.dtype.kind == "U"
    except TypeError:
        return False
    return False


def text_leaves(description: Any, prefix: str) -> dict[str, int]:
    """Minari dataset paths (under an episode) of a space's ``Text`` leaves, with ``max_length``.

    Minari stores their samples as strings, expcli as code points.
    """
    out = {}
    for name, leaf in leaf_tensors(description, prefix):
        if isinstance(leaf, dict) and leaf.get("type") == "Text":
            key = _minari_key(description, prefix, name) if name != prefix else prefix
            out[key] = int(leaf.get("max_length", 0))
    return out


def read_leaf(
    dataset: Any, path: Path, key: str, text_length: int | None, rows: slice | None = None
) -> np.ndarray:
    """A dataset's array (of ``rows`` only, when given).

    A Text leaf's strings come as int32 code points ``(T, text_length)``.
    """
    if text_length is None:
        return load_array(dataset, path, key)
    try:
        strings = dataset.asstr()[() if rows is None else rows]
        return encode_text(np.asarray(strings, dtype=str), text_length)
    except (OSError, ValueError, TypeError, UnicodeDecodeError) as e:
        raise FormatError(
            f"cannot read the strings of a Text leaf of at most {text_length} characters "
            f"({error_summary(e)})",
            path=path,
            key=key,
        ) from e


def step_data(group: Any, key: str, array: np.ndarray) -> None:
    """A dataset as Minari makes them.

    Chunked and growable along the steps (strings, for a Text leaf, as UTF-8 strings).
    """
    step_rows(group, key, len(array), [(0, array)])


def step_rows(group: Any, key: str, length: int, parts: Iterable[tuple[int, np.ndarray]]) -> None:
    """``step_data`` of ``length`` rows given a slice at a time, ``(offset, rows)``."""
    import h5py

    target = None
    for offset, rows in parts:
        text = rows.dtype.kind == "U"
        if target is None:
            dtype = h5py.string_dtype("utf-8") if text else rows.dtype
            feature = rows.shape[1:]
            target = group.create_dataset(
                key, shape=(length, *feature), dtype=dtype, chunks=True, maxshape=(None, *feature)
            )
        target[offset : offset + len(rows)] = rows.astype(object) if text else rows
