"""D4RL HDF5 files: flat per-transition datasets at the root.

D4RL's layout (``d4rl.offline_env.OfflineEnv.get_dataset``): ``observations`` ``(T, *obs)``,
``actions`` ``(T, *act)``, ``rewards`` ``(T,)``, ``terminals`` ``(T,)`` (the env terminated)
and ``timeouts`` ``(T,)`` (the episode was cut by a time limit), optionally
``next_observations``, per-step ``infos/*`` and file-level ``metadata/*``. Episodes are
contiguous runs of rows ending at a terminal or a timeout.

Read as ``(T, N=1)`` (or ``N=num_envs`` equal blocks of rows, env by env, which is how
``write`` lays out several env columns). Without ``next_observations``, a row's next
observation is the observation of the row after it in the same episode; the last row of an
episode has none, so its own observation is repeated (as tianshou does for buffers without
``obs_next``) and the metadata lists ``next_observations`` under ``d4rl.derived``. A file
with neither ``terminals`` nor ``timeouts`` is read as one episode, and the metadata lists
the missing keys under ``d4rl.missing``.

Read lazily (``lazy``, as ``open_lazy`` does), every dataset stays in the file and is read
a slice of rows at a time, whatever the number of env columns; only ``terminals`` and
``timeouts`` are read whole (a byte a row), to check that they are flags and to find the
episode ends that deriving ``next_observations`` needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import ConfigError, FormatError, SchemaError
from expcli.files.atomic import atomic_path
from expcli.formats._guarded_file import Hdf5Output
from expcli.formats._guards import load_json
from expcli.formats._hdf5_heap import read_scalar
from expcli.formats.dataset import Dataset
from expcli.formats.header import encode_header
from expcli.formats.layouts._episodes import (
    column_rows,
    done_flags,
    foreign_rows,
    load_array,
    next_in_episode,
    user_metadata,
)
from expcli.formats.layouts._lazy_columns import column_of, following_rows, lazy_native
from expcli.formats.layouts._row_streams import picked_rows
from expcli.formats.lazy import LazyRows
from expcli.spec import CircularState

__all__ = ["is_d4rl", "losses", "read", "write"]

_REQUIRED = ("observations", "actions", "rewards")
_FLAGS = {"terminals": "terminated", "timeouts": "truncated"}
_NAMES = {"terminated": "terminals", "truncated": "timeouts"}
_RESERVED = frozenset({"terminals", "timeouts", "metadata"})
_EXPCLI_KEY = "metadata/expcli"


def is_d4rl(h5: Any) -> bool:
    """Whether an open HDF5 file has D4RL's root datasets (terminals and timeouts optional)."""
    import h5py

    return all(isinstance(h5.get(key), h5py.Dataset) for key in _REQUIRED)


def read(h5: Any, path: Path, num_envs: int | None = None, *, lazy: bool = False) -> Dataset:
    """Read a D4RL file as ``(T / num_envs, num_envs)`` tensors (default one column).

    Raises:
        FormatError: A dataset cannot be read or holds non-numeric data.
        SchemaError: The arrays have different lengths, or a flag is not 0/1.
        ConfigError: ``num_envs`` does not divide the number of rows.
    """
    import h5py

    rows = _length(h5["observations"], path, "observations")
    arrays: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    skipped: list[str] = []

    def visit(name: str, obj: Any) -> None:
        if not isinstance(obj, h5py.Dataset):
            return
        if name.startswith("metadata/") or obj.shape == ():
            _metadata_entry(name, obj, path, metadata, extra)
            return
        if _length(obj, path, name) != rows:
            raise SchemaError(
                f"has {_length(obj, path, name)} rows; expected {rows} as 'observations' has",
                path=path,
                key=name,
            )
        try:
            whole = not lazy or name in _FLAGS  # flags: a byte a row, checked as read
            arrays[name] = load_array(obj, path, name) if whole else lazy_native(obj, path, name)
        except (FormatError, SchemaError):
            if not name.startswith("infos/"):
                raise
            skipped.append(name)  # infos of strings, say: not data expcli can keep

    h5.visititems(visit)
    columns = num_envs or 1
    if rows % columns:
        raise ConfigError(
            f"{path}: {rows} rows cannot be split into num_envs={columns} equal env columns"
        )
    flags = {flag: arrays.pop(flag, None) for flag in _FLAGS}
    missing = [flag for flag, array in flags.items() if array is None]
    tensors = {name: _columns(array, columns) for name, array in arrays.items()}
    ends = np.zeros(rows, dtype=bool)
    for flag, array in flags.items():
        values = np.zeros(rows, dtype=bool) if array is None else _as_flags(array, path, flag)
        ends |= values
        tensors[_FLAGS[flag]] = _columns(values, columns)
    derived = []
    if "next_observations" not in tensors:
        observations = tensors["observations"]
        if isinstance(observations, LazyRows):
            tensors["next_observations"] = following_rows(arrays["observations"], ends, columns)
        else:
            ends = _columns(ends, columns)[:, :, 0]
            following = np.empty_like(observations)
            for j in range(columns):
                following[:, j] = next_in_episode(observations[:, j], ends[:, j])
            tensors["next_observations"] = following
        derived.append("next_observations")
    d4rl: dict[str, Any] = {}
    if extra:
        d4rl["metadata"] = extra
    if missing:
        d4rl["missing"] = missing
    if derived:
        d4rl["derived"] = derived
    if skipped:
        d4rl["skipped"] = skipped
    metadata.update({"layout": "d4rl", "d4rl": d4rl})
    dataset = Dataset(tensors, CircularState(0, 0, filled=True), metadata)
    dataset.validate(path)
    return dataset


def write(dataset: Dataset, path: Path, *, overwrite: bool) -> None:
    """Write the valid rows of every env column, oldest first, env column after env column.

    ``terminated`` becomes ``terminals`` and ``truncated`` ``timeouts``; where one env
    column ends in the middle of an episode and the next column follows, the last row is
    marked a timeout so that the two episodes stay apart. Other tensors are written under
    their own names (``infos/...`` lands in D4RL's ``infos`` group), and the user metadata
    as a JSON string at ``metadata/expcli``.

    Raises:
        SchemaError: ``observations``, ``actions`` or ``rewards`` is missing, or a tensor
            has a name D4RL reserves.
    """
    for name in _REQUIRED:
        if name not in dataset.tensors:
            raise SchemaError("missing; the d4rl layout needs it", path=path, key=name)
    for name in dataset.tensors:
        if name in _RESERVED or name.split("/", 1)[0] == "metadata":
            raise SchemaError("this name is reserved by the d4rl layout", path=path, key=name)
    text = encode_header(user_metadata(dataset.metadata, "d4rl"), path)
    columns = column_rows(dataset)
    total = sum(len(rows) for rows in columns)
    done = done_flags(dataset.tensors, dataset.memory_size, dataset.num_envs)
    with atomic_path(path, overwrite=overwrite) as tmp, Hdf5Output(tmp) as h5:
        for name in sorted(dataset.tensors):
            array = dataset.tensors[name]
            empty = foreign_rows(name, np.empty((0, *array.shape[2:]), array.dtype))
            target = h5.create_dataset(
                _NAMES.get(name, name), shape=(total, *empty.shape[1:]), dtype=empty.dtype
            )
            offset = 0
            for j, rows in enumerate(columns):  # a slice at a time: the source may be lazy
                for start, part in picked_rows(array, rows, j):
                    target[offset + start : offset + start + len(part)] = foreign_rows(name, part)
                offset += len(rows)
        for flag, name in _NAMES.items():
            if flag not in dataset.tensors:
                h5.create_dataset(name, data=np.zeros(total, dtype=bool))
        seams = _seams(columns, done)
        if seams.size:
            timeouts = h5["timeouts"]
            timeouts[seams] = True
        h5.create_dataset(_EXPCLI_KEY, data=text)


def losses(dataset: Dataset) -> list[str]:
    """What a D4RL file does not keep of ``dataset``: its env columns and circular state."""
    rows = column_rows(dataset)
    if dataset.num_envs == 1 and np.array_equal(rows[0], np.arange(dataset.memory_size)):
        return []
    if dataset.num_envs == 1:
        return ["the circular state (the valid rows are written oldest first)"]
    return [
        f"the {dataset.num_envs} env columns and circular state (laid out env by env, oldest "
        f"first: read back as one env column unless --num-envs {dataset.num_envs})"
    ]


def _seams(columns: list[np.ndarray], done: np.ndarray) -> np.ndarray:
    """Positions in the output of the last row of each column (but the last) not ending."""
    seams = []
    offset = 0
    for j, rows in enumerate(columns):
        offset += len(rows)
        if j < len(columns) - 1 and len(rows) and not done[rows[-1], j]:
            seams.append(offset - 1)
    return np.asarray(seams, dtype=np.int64)


def _length(obj: Any, path: Path, key: str) -> int:
    if not obj.shape:
        raise SchemaError("is a scalar; expected one row per transition", path=path, key=key)
    return int(obj.shape[0])


def _columns(array: Any, columns: int) -> Any:
    """``(T, *f)`` in env-by-env blocks as ``(T / columns, columns, *f)``.

    Scalars get ``(1,)``; ``LazyRows`` stay lazy.
    """
    if isinstance(array, LazyRows):
        return column_of(array, columns)
    if array.ndim == 1:
        array = array[:, None]
    length = array.shape[0] // columns
    blocks = array.reshape(columns, length, *array.shape[1:])
    return np.ascontiguousarray(np.swapaxes(blocks, 0, 1))


def _as_flags(array: np.ndarray, path: Path, key: str) -> np.ndarray:
    flat = array.reshape(array.shape[0], -1)
    if flat.shape[1] != 1:
        raise SchemaError(f"has shape {array.shape}; expected one flag per row", path=path, key=key)
    if array.dtype != np.bool_ and not np.isin(flat, (0, 1)).all():
        raise SchemaError("holds values other than 0 and 1; expected flags", path=path, key=key)
    return flat[:, 0].astype(bool)


def _metadata_entry(
    name: str, obj: Any, path: Path, metadata: dict[str, Any], extra: dict[str, Any]
) -> None:
    """File-level ``metadata/*`` and scalars.

    Strings and numbers are kept, arrays (policy weights) are not.
    """
    if obj.shape != ():
        return
    value = read_scalar(obj, path, name)
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if name == _EXPCLI_KEY and isinstance(value, str):
        saved = load_json(value, path, name)
        if isinstance(saved, dict):
            metadata.update(saved)
        return
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, str | int | float | bool):
        extra[name.removeprefix("metadata/")] = value
