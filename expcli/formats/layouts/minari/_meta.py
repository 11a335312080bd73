"""Minari's ``metadata.json``: read into expcli metadata, and made for a written dataset.

Minari serialises spaces as JSON strings (``minari.serialization.serialize_space``) and the
env spec as Gymnasium's ``EnvSpec.to_json()``. expcli keeps the spaces as JSON objects and
the env spec as its string; what else the file holds goes under ``minari``.

A dataset's id is its folder's path under Minari's datasets root (``MINARI_DATASETS_PATH``,
else ``~/.minari/datasets``), as ``minari.list_local_datasets`` finds it: it parses each
folder's path with ``parse_dataset_id`` before reading any ``metadata.json``, and a path
without ``-vN`` fails that parse (a ``TypeError``) for the whole root, whatever the file
says. So a folder not named ``[NAMESPACE/]NAME-vN`` is refused (``dataset_id``), in the
root and outside it, where the folder may be moved in later.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import ConfigError, FormatError
from expcli.formats._guards import load_json
from expcli.formats.authorship import Authorship
from expcli.formats.dataset import Dataset
from expcli.formats.layouts.minari._spaces import minari_space

__all__ = [
    "MINARI_VERSION",
    "dataset_id",
    "datasets_root",
    "expcli_metadata",
    "jpeg_image_shape",
    "minari_metadata",
]

MINARI_VERSION = "0.5.0"
"""The Minari dataset version written: the first with ``metadata.json`` and ``data_format``."""

_ID = re.compile(r"(?:[-_\w][-_\w/]*[-_\w]+/)?[-_\w]+?-v\d+")
"""Minari's ``DATASET_ID_RE`` (``minari.dataset.minari_dataset``), its version required."""
_NAME = re.compile(r"[-_\w]+?-v\d+")
"""A dataset id without namespace: a folder's name."""

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


def minari_metadata(
    dataset: Dataset, path: Path, saved: dict[str, Any], authorship: Authorship | None = None
) -> dict[str, Any]:
    """``metadata.json`` for a dataset written from expcli to the folder ``path``.

    The descriptive fields (author, algorithm, ...) are ``authorship``'s where it gives
    them, else those of the Minari dataset read (``minari`` in the metadata); the
    algorithm is the collecting policy's spec where neither names one.
    """
    previous = dataset.metadata.get("minari")
    previous = previous if isinstance(previous, dict) else {}
    meta: dict[str, Any] = {k: previous[k] for k in _DESCRIPTIVE if k in previous}
    policy = _policy_spec(dataset.metadata)
    if "algorithm_name" not in meta and policy is not None:
        meta["algorithm_name"] = policy
    if authorship is not None:
        meta.update(authorship.minari_fields())
    meta.update(
        {
            "data_format": "hdf5",
            "jpeg_encoding": False,
            "observation_space": minari_space(dataset, "observations"),
            "action_space": minari_space(dataset, "actions"),
            "dataset_id": dataset_id(path, previous.get("dataset_id")),
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


def datasets_root() -> Path:
    """Where Minari keeps its datasets: ``MINARI_DATASETS_PATH``, else ``~/.minari/datasets``.

    As ``minari.storage.get_dataset_path`` tells it (without making the folder).
    """
    root = os.environ.get("MINARI_DATASETS_PATH")
    return Path(root) if root is not None else Path.home() / ".minari" / "datasets"


def dataset_id(path: Path, previous: Any = None) -> str:
    """The Minari id of a dataset folder: its path under ``datasets_root()``, else its name.

    Outside the root, an id the dataset had (``previous``: a namespaced one) is kept where
    the folder's path ends with it (``.../toy/cartpole-v0``), so that the folder lists once
    it is moved in with its namespace.

    Raises:
        ConfigError: The folder's path under the root, or its name outside it, is no Minari
            id: ``[NAMESPACE/]NAME-vN``, made of letters, digits, ``_`` and ``-``.
    """
    target, root = Path(os.path.abspath(path)), Path(os.path.abspath(datasets_root()))
    under = _relative(target, root) or _relative(target.resolve(), root.resolve())
    if under is not None:
        if _ID.fullmatch(under) is None:
            suggested = _suggested(under)
            hint = f"; write to {root / suggested}" if suggested != under else ""
            raise ConfigError(
                f"{path}: Minari lists a dataset by its folder's path under its datasets root "
                f"({root}), which must read [NAMESPACE/]NAME-vVERSION (letters, digits, _ "
                f"and -; a namespace of two characters or more), not {under!r}{hint}"
            )
        return under
    if _NAME.fullmatch(target.name) is None:
        raise ConfigError(
            f"{path}: a Minari dataset folder is named as its id, NAME-vVERSION (letters, "
            f"digits, _ and -), or Minari cannot list its datasets root; name the folder "
            f"{_suggested(target.name)}"
        )
    if isinstance(previous, str) and _ID.fullmatch(previous):
        parts = tuple(previous.split("/"))
        if target.parts[-len(parts) :] == parts:
            return previous
    return target.name


def _relative(target: Path, root: Path) -> str | None:
    """``target``'s path under ``root`` (posix), or None: it is not under it (or is it)."""
    try:
        under = target.relative_to(root)
    except ValueError:
        return None
    return under.as_posix() if under.parts else None


def _suggested(under: str) -> str:
    """A path Minari takes, made from ``under``: ``ns.a/run.v2`` -> ``ns_a/run_v2-v0``."""
    *namespace, name = [re.sub(r"[^-_\w]", "_", part) or "dataset" for part in under.split("/")]
    return "/".join([*namespace, name if _NAME.fullmatch(name) else f"{name}-v0"])


def _policy_spec(metadata: dict[str, Any]) -> str | None:
    """The spec of the policy that collected the data (``collector.policy.spec``), if any.

    Older files record the spec itself as ``collector.policy``.
    """
    collector = metadata.get("collector")
    policy = collector.get("policy") if isinstance(collector, dict) else None
    spec = policy.get("spec") if isinstance(policy, dict) else policy
    return spec if isinstance(spec, str) and spec else None


def _json_text(text: Any) -> dict[str, Any] | None:
    """A JSON object held as a string (Minari's spaces and env spec), or None."""
    if not isinstance(text, str):
        return None
    try:
        obj = load_json(text, "", None)
    except FormatError:
        return None
    return obj if isinstance(obj, dict) else None
