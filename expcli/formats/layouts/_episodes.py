"""Helpers shared by the foreign layouts: columns, episodes, dtypes and shapes (numpy only).

expcli keeps tensors shaped ``(T, N, *feature)``; the foreign layouts keep one row per
transition, shaped ``(T, *feature)``, usually with scalars (rewards, flags) as ``(T,)``. A
scalar per transition becomes the feature shape ``(1,)`` in expcli, as skrl stores it, and
goes back to ``(T,)`` on writing (see ``foreign_rows``).

Episodes are never stored by expcli: per env column, an episode ends at a row where
``terminated | truncated``. Where a foreign layout puts two episodes one after the other
without an end flag between them (an episode cut short by the end of its sub-buffer or of
its env column), the readers and writers mark the seam ``truncated`` so that episodes are not
glued together, and the readers list the rows they marked in the metadata.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from expcli.errors import FormatError, SchemaError
from expcli.formats._error_summary import error_summary
from expcli.formats.dataset import Dataset
from expcli.formats.layout_keys import SEAMS_KEY
from expcli.spec import SUPPORTED_DTYPES, CircularState, chronological_rows, done_flags

__all__ = [
    "SEAMS_KEY",
    "column_rows",
    "done_flags",
    "episode_bounds",
    "foreign_rows",
    "load_array",
    "native",
    "next_in_episode",
    "one_column",
    "user_metadata",
    "valid_counts",
]


# Lossless widening of unsigned integers that the schema lacks.
_WIDER = {"uint16": np.int32, "uint32": np.int64}
_KEEP_SHAPE = frozenset({"observations", "next_observations", "actions"})

PathLike = str | os.PathLike[str]


def load_array(dataset: Any, path: PathLike, key: str) -> np.ndarray:
    """Read an h5py dataset into memory, as a native-endian array of a supported dtype.

    Raises:
        FormatError: The data cannot be read (corrupt or truncated file), or is not numeric.
        SchemaError: The dtype has no lossless counterpart in the schema.
    """
    try:
        kind = dataset.dtype
    except (OSError, ValueError, TypeError, KeyError, RuntimeError) as e:  # no numpy match
        raise FormatError(
            f"has a type expcli cannot read ({error_summary(e)})", path=path, key=key
        ) from e
    native(np.empty(0, kind), path, key)  # refuse strings and objects before reading them
    try:
        array = np.asarray(dataset[()])
    except (OSError, ValueError, TypeError, KeyError, RuntimeError) as e:
        raise FormatError(f"cannot read the data ({error_summary(e)})", path=path, key=key) from e
    return native(array, path, key)


def native(array: np.ndarray, path: PathLike, key: str) -> np.ndarray:
    """The array in native byte order with a schema dtype (unsigned ints widened losslessly).

    Raises:
        FormatError: The array holds strings, objects or variable-length data.
        SchemaError: The dtype is numeric but has no lossless counterpart in the schema.
    """
    if array.dtype.kind in "OSUVa" or array.dtype.hasobject:
        raise FormatError(
            f"holds {array.dtype} data (strings, objects or variable-length bytes such as "
            f"encoded images); expected numbers or booleans",
            path=path,
            key=key,
        )
    array = array.astype(array.dtype.newbyteorder("="), copy=False)
    name = array.dtype.name
    if name in SUPPORTED_DTYPES:
        return array
    if name in _WIDER:
        return array.astype(_WIDER[name])
    if name == "uint64" and (array.size == 0 or int(array.max()) <= np.iinfo(np.int64).max):
        return array.astype(np.int64)
    raise SchemaError(
        f"dtype {name} is not supported; expected one of {', '.join(sorted(SUPPORTED_DTYPES))}",
        path=path,
        key=key,
    )


def one_column(array: np.ndarray) -> np.ndarray:
    """Rows ``(T, *feature)`` as one env column ``(T, 1, *feature)``; scalars get ``(1,)``."""
    if array.ndim == 1:
        return array.reshape(-1, 1, 1)
    return array.reshape(array.shape[0], 1, *array.shape[1:])


def foreign_rows(name: str, rows: np.ndarray) -> np.ndarray:
    """Rows ``(T, *feature)`` of expcli as a foreign layout wants them.

    A feature shape ``(1,)`` becomes a scalar per row, except for float observations and
    actions (a ``Box`` of shape ``(1,)`` stays ``(T, 1)``); integer observations and actions
    of shape ``(1,)`` are taken for ``Discrete`` ones and become ``(T,)``.
    """
    if rows.shape[1:] != (1,):
        return rows
    if name in _KEEP_SHAPE and rows.dtype.kind == "f":
        return rows
    return rows.reshape(rows.shape[0])


def user_metadata(metadata: Mapping[str, Any], layout: str) -> dict[str, Any]:
    """Metadata to carry into a file of ``layout``.

    Without what a reader of that layout added (``layout``, its own section, the rows it marked),
    which would go stale.
    """
    own = {"layout", layout, SEAMS_KEY}
    return {k: v for k, v in metadata.items() if k not in own}


def valid_counts(state: CircularState, memory_size: int, num_envs: int) -> list[int]:
    """Valid rows of every env column under a circular state."""
    if state.filled:
        return [memory_size] * num_envs
    return [state.memory_index + (1 if j < state.env_index else 0) for j in range(num_envs)]


def column_rows(dataset: Dataset) -> list[np.ndarray]:
    """Row indices of the valid rows of every env column, oldest first."""
    size, num_envs = dataset.memory_size, dataset.num_envs
    order = chronological_rows(dataset.state, size, num_envs)
    counts = valid_counts(dataset.state, size, num_envs)
    return [order[j, : counts[j]] for j in range(num_envs)]


def episode_bounds(ends: np.ndarray) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of each episode in rows whose end flags are ``ends`` (1-D bool).

    The last episode runs to the last row whether or not it ends there.
    """
    stops = np.flatnonzero(ends) + 1
    start = 0
    for stop in stops.tolist():
        yield start, stop
        start = stop
    if start < len(ends):
        yield start, len(ends)


def next_in_episode(observations: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Each row's next observation taken from the row after it within the episode.

    The last row of an episode (a row in ``ends``, and the last row) has no later row: its
    own observation is repeated, as tianshou does for buffers without ``obs_next``.
    """
    following = np.arange(1, len(ends) + 1)
    stay = ends.copy()
    if len(stay):
        stay[-1] = True
    following = np.where(stay, np.arange(len(ends)), following)
    return observations[following]
