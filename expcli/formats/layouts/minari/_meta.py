"""Minari's ``metadata.json``: read into expcli metadata, and made for a written dataset.

Minari serialises spaces as JSON strings (``minari.serialization.serialize_space``) and the
env spec as Gymnasium's ``EnvSpec.to_json()``. expcli keeps the spaces as JSON objects and
the env spec as its string; what else the file holds goes under ``minari``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError
from expcli.formats._guards import load_json
from expcli.formats.dataset import Dataset
from expcli.formats.layouts.minari._spaces import minari_space

__all__ = [
    "MINARI_VERSION",
    "expcli_metadata",
    "jpeg_image_shape",
    "minari_metadata",
]

MINARI_VERSION = "0.5.0"
"""The Minari dataset version written: the first with ``metadata.json`` and ``data_format``."""

_OWN_METADATA = frozenset({"env_spec", "observation_space", "action_space", "expcli"})
_DESCRIPTIVE = (
    "algorithm_name",
    "author",
    "author_email",
    "code_permalink",
    "description",
    "requirements",
    "ref_min_score",
    "ref_max_score",
    "num_episodes_average_score",
)


def _parse_space(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        value = _json_text(value)
    return value if isinstance(value, dict) and isinstance(value.get("type"), str) else None


def jpeg_image_shape(meta: dict[str, Any]) -> tuple[int, ...] | None:
    """The observation shape when Minari stored images JPEG-encoded, else None."""
    space = _parse_space(meta.get("observation_space"))
    if not meta.get("jpeg_encoding", True) or space is None or space["type"] != "Box":
        return None
    shape = space.get("shape")
    if not (isinstance(shape, list) and len(shape) in (2, 3)):
        return None
    if not all(type(d) is int for d in shape) or min(shape[:2]) < 32:
        return None
    if space.get("dtype") != "uint8":
        return None
    try:  # bounds as Minari writes them: nested lists of the shape, or one number
        low, high = np.asarray(space.get("low"), float), np.asarray(space.get("high"), float)
    except (TypeError, ValueError, OverflowError):
        return None
    return tuple(shape) if bool(np.all(low == 0)) and bool(np.all(high == 255)) else None


def expcli_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """The expcli metadata of ``metadata.json``: env and spaces on top, the rest under minari."""
    saved = meta.get("expcli")
    metadata: dict[str, Any] = dict(saved) if isinstance(saved, dict) else {}
    metadata["layout"] = "minari"
    env_spec = meta.get("env_spec")
    if isinstance(env_spec, str):
        metadata["env_spec"] = env_spec
        env_id = (_json_text(env_spec) or {}).get("id")
        if isinstance(env_id, str):
            metadata["env_id"] = env_id
    for key in ("observation_space", "action_space"):
        space = _parse_space(meta.get(key))
        if space is not None:
            metadata[key] = space
    metadata["minari"] = {k: v for k, v in meta.items() if k not in _OWN_METADATA}
    return metadata


def minari_metadata(dataset: Dataset, path: Path, saved: dict[str, Any]) -> dict[str, Any]:
    """``metadata.json`` for a dataset written from expcli."""
    previous = dataset.metadata.get("minari")
    previous = previous if isinstance(previous, dict) else {}
    meta: dict[str, Any] = {k: previous[k] for k in _DESCRIPTIVE if k in previous}
    meta.update(
        {
            "data_format": "hdf5",
            "jpeg_encoding": False,
            "observation_space": minari_space(dataset, "observations"),
            "action_space": minari_space(dataset, "actions"),
            "dataset_id": _dataset_id(previous.get("dataset_id"), path),
            "minari_version": MINARI_VERSION,
        }
    )
    env_spec = dataset.metadata.get("env_spec")
    if isinstance(env_spec, dict):
        env_spec = json.dumps(env_spec)
    spec = _json_text(env_spec)
    if spec is not None and "id" in spec and "entry_point" in spec:
        meta["env_spec"] = env_spec
    meta["expcli"] = saved
    return meta


def _json_text(text: Any) -> dict[str, Any] | None:
    """A JSON object held as a string (Minari's spaces and env spec), or None."""
    if not isinstance(text, str):
        return None
    try:
        obj = load_json(text, "", None)
    except FormatError:
        return None
    return obj if isinstance(obj, dict) else None


def _dataset_id(previous: Any, path: Path) -> str:
    if isinstance(previous, str) and re.fullmatch(
        r"(?:[-_\w][-_\w/]*[-_\w]+/)?[-_\w]+?-v\d+", previous
    ):
        return previous
    name = re.sub(r"[^-_\w]", "_", path.name) or "dataset"
    return name if re.search(r"-v\d+$", name) else f"{name}-v0"
