"""tianshou's ``ReplayBuffer.save_hdf5`` files (ReplayBuffer and VectorReplayBuffer).

``save_hdf5`` writes the buffer's ``__dict__`` (``tianshou.data.utils.converter.to_hdf5``):
integers and floats as root attributes (``maxsize``, ``_insertion_idx`` (``_index`` before
tianshou 1.0), ``_size``), arrays as datasets tagged ``__data_type__ = "ndarray"``, and the
data as the group ``_meta`` (a ``Batch``: ``obs``, ``act``, ``rew``, ``terminated``,
``truncated``, ``done``, ``obs_next``, ``info/*``, ``policy/*``), one row per slot of the
circular buffer. Anything else is pickled (the random state, a VectorReplayBuffer's
``buffers``, object arrays): expcli never unpickles. Pickled parts that are not data are
ignored; pickled ``info``/``policy`` entries are skipped and listed in the metadata under
``tianshou.skipped``; pickled standard data is refused.

A ReplayBuffer maps onto ``(T=maxsize, N=1)`` with its circular state
(``memory_index = _insertion_idx``, ``filled = _size == maxsize``). A VectorReplayBuffer
maps onto one env column per sub-buffer: in place when one circular state describes every
sub-buffer, else with each column's rows rotated oldest first, and, when sub-buffers differ
in size or fill so that no circular state fits them, concatenated into one column, with the
seams between sub-buffers marked ``truncated``. Without ``obs_next`` (``ignore_obs_next``),
next observations are derived as tianshou does: the next row of the episode, or the same row
at an episode's end or at the newest row.

``write`` writes a plain ReplayBuffer (no pickles) that ``ReplayBuffer.load_hdf5`` loads:
one env column keeps its circular state; several columns are laid out env by env over their
valid rows, oldest first, seams marked ``truncated``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError, SchemaError
from expcli.files.atomic import atomic_path
from expcli.formats._guarded_file import Hdf5Output
from expcli.formats._guards import brief
from expcli.formats._hdf5_heap import read_attribute
from expcli.formats.dataset import Dataset
from expcli.formats.layouts._episodes import (
    SEAMS_KEY,
    column_rows,
    done_flags,
    foreign_rows,
    load_array,
    next_in_episode,
    user_metadata,
)
from expcli.formats.layouts._lazy_columns import lazy_native
from expcli.formats.layouts._row_streams import gathered, picked_rows, rows_of
from expcli.spec import CircularState

__all__ = ["is_tianshou", "losses", "read", "write"]

_TO_EXPCLI = {
    "obs": "observations",
    "obs_next": "next_observations",
    "act": "actions",
    "rew": "rewards",
    "terminated": "terminated",
    "truncated": "truncated",
    "info": "infos",
    "policy": "policy",
}
_TO_TIANSHOU = {v: k for k, v in _TO_EXPCLI.items()}
_STANDARD = frozenset({"obs", "obs_next", "act", "rew", "terminated", "truncated", "done"})
_ARRAY_TYPES = frozenset({"ndarray", "Tensor"})
_FLAGS = frozenset({"terminated", "truncated", "done"})


def is_tianshou(h5: Any) -> bool:
    """Whether an open HDF5 file is what a tianshou buffer's ``save_hdf5`` writes."""
    import h5py

    return isinstance(h5.get("_meta"), h5py.Group) and "maxsize" in h5.attrs


def read(h5: Any, path: Path, *, lazy: bool = False) -> Dataset:
    """Read a saved ReplayBuffer or VectorReplayBuffer.

    ``lazy``: its data rows left in the open file as ``LazyRows``, reordered a slice at a time; the
    flags are read whole.

    Raises:
        FormatError: Standard data is stored pickled, or a dataset cannot be read.
        SchemaError: The data rows disagree with ``maxsize`` or the sub-buffer edges.
    """
    maxsize = _int_attr(h5, "maxsize", path)
    leaves, skipped = _leaves(h5["_meta"], path, maxsize, lazy)
    vector = "_extend_offset" in h5
    edges, columns = _columns(h5, path, maxsize, vector)
    tianshou: dict[str, Any] = {
        "buffer": "VectorReplayBuffer" if vector else "ReplayBuffer",
        "maxsize": maxsize,
    }
    if vector:
        tianshou["buffer_num"] = len(columns)
    if skipped:
        tianshou["skipped"] = skipped
    metadata: dict[str, Any] = {"layout": "tianshou", "tianshou": tianshou}
    if not leaves:
        return Dataset({}, CircularState(), metadata)
    done = leaves.pop("done", None)
    if "terminated" not in leaves and "truncated" not in leaves and done is not None:
        leaves["terminated"] = done  # tianshou before 0.5 kept only ``done``
    tensors, state, seams, index = _arrange(leaves, edges, columns)
    if "next_observations" not in tensors and "observations" in tensors:
        following = index[_next_rows(tensors, state), np.arange(index.shape[1])]
        tensors["next_observations"] = gathered(leaves["observations"], following)
        tianshou["derived"] = ["next_observations"]
    if seams:
        metadata[SEAMS_KEY] = seams
    dataset = Dataset(tensors, state, metadata)
    dataset.validate(path)
    return dataset


def write(dataset: Dataset, path: Path, *, overwrite: bool) -> None:
    """Write a ReplayBuffer that ``tianshou.data.ReplayBuffer.load_hdf5`` loads.

    ``infos/x`` becomes ``info/x``, ``policy/x`` stays, any other non-standard tensor goes
    under ``policy/``. Without ``next_observations`` the buffer is saved with
    ``ignore_obs_next``.

    Raises:
        SchemaError: ``observations``, ``actions`` or ``rewards`` is missing.
    """
    for name in ("observations", "actions", "rewards"):
        if name not in dataset.tensors:
            raise SchemaError("missing; the tianshou layout needs it", path=path, key=name)
    size, num_envs = dataset.memory_size, dataset.num_envs
    done = done_flags(dataset.tensors, size, num_envs)
    if num_envs == 1:
        rows, envs = np.arange(size), np.zeros(size, dtype=np.int64)
        maxsize, valid, insertion = size, len(dataset), dataset.state.memory_index
        order = column_rows(dataset)[0]
        seams: list[int] = []
    else:
        columns = column_rows(dataset)
        rows = np.concatenate(columns)
        envs = np.concatenate([np.full(len(c), j, dtype=np.int64) for j, c in enumerate(columns)])
        maxsize = valid = len(rows)
        insertion = 0
        order = np.arange(maxsize)
        flat_done = done[rows, envs]
        ends = np.cumsum([len(c) for c in columns])[:-1] - 1
        seams = [int(e) for e in ends if e >= 0 and not flat_done[e]]
    names: dict[str, str] = {}
    for name in sorted(dataset.tensors):
        key = _tianshou_name(name)
        if key in names.values():
            raise SchemaError(
                f"would be stored as {key!r} like another tensor", path=path, key=name
            )
        names[name] = key
    data: dict[str, np.ndarray] = {}  # the flags, a byte a row; other tensors by slices
    for flag in ("terminated", "truncated"):
        if flag in dataset.tensors:
            picked = np.asarray(dataset.tensors[flag])[rows, envs]
            data[flag] = foreign_rows(flag, picked).astype(bool)
        else:
            data[flag] = np.zeros(maxsize, dtype=bool)
    if seams:
        data["truncated"][seams] = True
    data["done"] = data["terminated"] | data["truncated"]

    def rewards(where: np.ndarray) -> np.ndarray:
        picked = rows_of(dataset.tensors["rewards"], rows[where])[
            np.arange(len(where)), envs[where]
        ]
        return foreign_rows("rewards", picked).astype(np.float64, copy=False)

    ep_start, ep_len, ep_return = _unfinished(order[:valid], data["done"], rewards, maxsize)
    save_obs_next = "obs_next" in names.values()
    with atomic_path(path, overwrite=overwrite) as tmp, Hdf5Output(tmp) as h5:
        attrs = {
            "maxsize": maxsize,
            "stack_num": 1,
            "_save_obs_next": save_obs_next,
            "_save_only_last_obs": False,
            "_sample_avail": False,
            "_insertion_idx": insertion,
            "_size": valid,
            "_ep_return": ep_return,
            "_ep_len": ep_len,
            "_ep_start_idx": ep_start,
        }
        h5.attrs.update(attrs)
        _array(h5, "_indices", np.arange(maxsize))
        last = order[valid - 1] if valid else 0
        _array(h5, "last_index", np.array([last], dtype=np.int64))
        options = h5.create_group("options")
        options.attrs.update(
            {
                "stack_num": 1,
                "ignore_obs_next": not save_obs_next,
                "save_only_last_obs": False,
                "sample_avail": False,
            }
        )
        meta = h5.create_group("_meta")
        meta.attrs["__data_type__"] = "Batch"
        for key in sorted({*data, *names.values()}):
            if key in data:
                _array(meta, key, data[key])
        for name, key in names.items():
            if key not in data:
                _rows_array(meta, key, name, dataset.tensors[name], rows, envs)


def losses(dataset: Dataset) -> list[str]:
    """What a tianshou ReplayBuffer file does not keep of ``dataset``."""
    lost = []
    if dataset.num_envs > 1:
        lost.append(
            f"the {dataset.num_envs} env columns and circular state (laid out env by env, "
            "oldest first, seams marked truncated: read back as one env column)"
        )
    rewards = dataset.tensors.get("rewards")
    if rewards is not None and rewards.dtype != np.float64:
        lost.append(f"the rewards' dtype {rewards.dtype} (tianshou keeps float64)")
    renamed = {
        name: _tianshou_name(name)
        for name in sorted(dataset.tensors)
        if _tianshou_name(name).startswith("policy/") and not name.startswith("policy/")
    }
    if renamed:
        shown = ", ".join(f"{name} (as {key})" for name, key in renamed.items())
        lost.append(f"the names of {shown}")
    if user_metadata(dataset.metadata, "tianshou"):
        lost.append("the metadata (env, spaces, seed, collector)")
    return lost


def _tianshou_name(name: str) -> str:
    head, _, rest = name.partition("/")
    if head in _TO_TIANSHOU:
        return f"{_TO_TIANSHOU[head]}/{rest}" if rest else _TO_TIANSHOU[head]
    return f"policy/{name}"


def _array(group: Any, key: str, array: np.ndarray) -> None:
    group.create_dataset(key, data=array)
    group[key].attrs["__data_type__"] = "ndarray"


def _rows_array(
    group: Any, key: str, name: str, array: Any, rows: np.ndarray, envs: np.ndarray
) -> None:
    """``_array`` of ``array[rows, envs]``, read and written a slice at a time."""
    empty = foreign_rows(name, np.empty((0, *array.shape[2:]), array.dtype))
    dtype = np.float64 if key == "rew" else empty.dtype
    target = group.create_dataset(key, shape=(len(rows), *empty.shape[1:]), dtype=dtype)
    target.attrs["__data_type__"] = "ndarray"
    for start, part in picked_rows(array, rows, envs):
        target[start : start + len(part)] = foreign_rows(name, part)


def _unfinished(
    order: np.ndarray, done: np.ndarray, rewards: Callable[[np.ndarray], np.ndarray], maxsize: int
) -> tuple[int, int, float]:
    """Start row, length and return of the episode still running at the newest row.

    ``rewards(rows)`` gives the rewards of some output rows.
    """
    if not len(order) or done[order[-1]]:
        return (int(order[-1]) + 1) % maxsize if len(order) else 0, 0, 0.0
    ends = np.flatnonzero(done[order])
    first = int(ends[-1]) + 1 if len(ends) else 0
    running = order[first:]
    return int(running[0]), len(running), float(rewards(running).sum())


def _int_attr(h5: Any, key: str, path: Path) -> int:
    value = read_attribute(h5, key, path, key)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FormatError(
            f"root attribute is {brief(value)}; expected a non-negative integer",
            path=path,
            key=key,
        )
    return value


def _leaves(meta: Any, path: Path, maxsize: int, lazy: bool) -> tuple[dict[str, Any], list[str]]:
    """Every array under ``_meta`` by expcli name (``info/x`` as ``infos/x``), and those skipped.

    With ``lazy``, arrays are left in the file, but for the flags.

    Raises:
        FormatError: Standard data is pickled, or an array cannot be read.
        SchemaError: An array does not have ``maxsize`` rows.
    """
    import h5py

    leaves: dict[str, Any] = {}
    skipped: list[str] = []

    def visit(name: str, obj: Any) -> None:
        if not isinstance(obj, h5py.Dataset):
            return
        head, _, rest = name.partition("/")
        whole = not lazy or head in _FLAGS
        kind = read_attribute(obj, "__data_type__", path, f"_meta/{name}")
        if isinstance(kind, bytes):
            kind = kind.decode(errors="replace")
        if not isinstance(kind, str) or kind not in _ARRAY_TYPES:
            if head in _STANDARD:
                raise FormatError(
                    f"is stored pickled ({brief(kind)}); expcli never unpickles, so this "
                    f"buffer cannot be read (its data is not numeric arrays)",
                    path=path,
                    key=f"_meta/{name}",
                )
            skipped.append(f"_meta/{name}")
            return
        if head not in _TO_EXPCLI and head != "done":
            skipped.append(f"_meta/{name}")
            return
        if obj.shape[:1] != (maxsize,):
            raise SchemaError(
                f"has shape {obj.shape}; expected {maxsize} rows (maxsize)",
                path=path,
                key=f"_meta/{name}",
            )
        expcli = _TO_EXPCLI.get(head, head)
        read = load_array if whole else lazy_native
        leaves[f"{expcli}/{rest}" if rest else expcli] = read(obj, path, f"_meta/{name}")

    meta.visititems(visit)
    return leaves, skipped


def _columns(
    h5: Any, path: Path, maxsize: int, vector: bool
) -> tuple[list[int], list[tuple[int, int]]]:
    """Sub-buffer edges and, per sub-buffer, ``(insertion index, size)``."""
    if not vector:
        key = "_insertion_idx" if "_insertion_idx" in h5.attrs else "_index"
        insertion, size = _int_attr(h5, key, path), _int_attr(h5, "_size", path)
        if size > maxsize or (maxsize and insertion >= maxsize):
            raise SchemaError(
                f"{key}={insertion} and _size={size} do not fit maxsize={maxsize}", path=path
            )
        return [0, maxsize], [(insertion, size)]
    edges = [int(e) for e in _vector(h5, "_extend_offset", path)]
    lengths = [int(n) for n in _vector(h5, "_lengths", path)]
    last = [int(i) for i in _vector(h5, "last_index", path)]
    count = len(edges) - 1
    if (
        count < 1
        or edges[0] != 0
        or edges[-1] != maxsize
        or any(b < a for a, b in zip(edges, edges[1:], strict=False))
        or len(lengths) != count
        or len(last) != count
    ):
        raise SchemaError(
            f"sub-buffer edges {edges}, lengths {lengths} and last indices {last} do not "
            f"describe {maxsize} rows",
            path=path,
            key="_extend_offset",
        )
    columns = []
    for i in range(count):
        start, stop = edges[i], edges[i + 1]
        if not (0 <= lengths[i] <= stop - start) or (lengths[i] and not start <= last[i] < stop):
            raise SchemaError(
                f"sub-buffer {i} has length {lengths[i]} and last index {last[i]} outside "
                f"rows {start}..{stop - 1}",
                path=path,
                key="_lengths",
            )
        insertion = (last[i] - start + 1) % (stop - start) if lengths[i] else 0
        columns.append((insertion, lengths[i]))
    return edges, columns


def _vector(h5: Any, key: str, path: Path) -> np.ndarray:
    obj = h5.get(key)
    if obj is None:
        raise SchemaError("missing from a VectorReplayBuffer file", path=path, key=key)
    array = load_array(obj, path, key)
    if array.ndim != 1 or array.dtype.kind not in "iu":
        raise SchemaError(
            f"has {array.dtype} shape {array.shape}; expected 1-D integers", path=path, key=key
        )
    return array


def _state_for(columns: list[tuple[int, int]], size: int) -> CircularState | None:
    """A circular state under which each column has its ``(insertion, length)``, if any."""
    count = len(columns)
    filled = all(length == size for _, length in columns)
    if filled:
        key = [ins for ins, _ in columns]
        index = key[-1]
        ahead = (index + 1) % size
    else:  # every column must start at row 0; the first ones may hold one row more
        if any((ins - length) % size for ins, length in columns):
            return None
        key = [length for _, length in columns]
        index = key[-1]
        ahead = index + 1
        if index >= size:
            return None
    env_index = 0
    while env_index < count - 1 and key[env_index] == ahead and ahead != index:
        env_index += 1
    if key != [ahead] * env_index + [index] * (count - env_index):
        return None
    return CircularState(index, env_index, filled)


def _arrange(
    leaves: dict[str, Any], edges: list[int], columns: list[tuple[int, int]]
) -> tuple[dict[str, Any], CircularState, list[int], np.ndarray]:
    """Rows of the flat buffer as ``(T, N, *f)`` tensors, their circular state, and rows.

    The last is the flat row of each ``(T, N)`` position.
    """
    index, state, parts = _positions(edges, columns)
    tensors = {k: gathered(v, index) for k, v in leaves.items()}
    if parts is None:
        return tensors, state, [], index
    rows = len(index)
    done = np.zeros(rows, dtype=bool)
    for flag in ("terminated", "truncated"):
        if flag in tensors:
            done |= tensors[flag].reshape(rows, -1).astype(bool).any(axis=1)
    seams = []
    position = 0
    for part in parts[:-1]:
        position += part
        if part and not done[position - 1]:
            seams.append(position - 1)
    if seams:
        truncated = tensors.get("truncated")
        if truncated is None:
            truncated = np.zeros((rows, 1, 1), dtype=bool)
        truncated = truncated.astype(bool)
        truncated[seams] = True
        tensors["truncated"] = truncated
    return tensors, state, seams, index


def _positions(
    edges: list[int], columns: list[tuple[int, int]]
) -> tuple[np.ndarray, CircularState, list[int] | None]:
    """The flat row of each ``(T, N)`` position.

    Each sub-buffer in place as an env column when one circular state describes them all, else
    rotated oldest first, else (with the sub-buffers' lengths) their valid rows one after the other
    in one column.
    """
    sizes = {b - a for a, b in zip(edges, edges[1:], strict=False)}
    size = sizes.pop() if len(sizes) == 1 else 0
    if size:
        count = len(columns)
        state = _state_for(columns, size)
        if state is not None:
            return np.arange(count * size).reshape(count, size).T, state, None
        rotated = [(length % size, length) for _, length in columns]
        state = _state_for(rotated, size)
        if state is not None:
            order = np.concatenate(
                [
                    start + _oldest_first(ins, length, size, size)
                    for start, (ins, length) in zip(edges, columns, strict=False)
                ]
            )
            return order.reshape(count, size).T, state, None
    parts = []
    for (start, stop), (ins, length) in zip(
        zip(edges, edges[1:], strict=False), columns, strict=True
    ):
        parts.append(start + _oldest_first(ins, length, stop - start, length))
    order = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return order[:, None], CircularState(0, 0, filled=True), [len(p) for p in parts]


def _oldest_first(insertion: int, length: int, size: int, count: int) -> np.ndarray:
    """The first ``count`` rows of a sub-buffer in write order, its ``length`` valid ones first."""
    oldest = (insertion - length) % size if size else 0
    return (oldest + np.arange(count)) % max(size, 1)


def _next_rows(tensors: dict[str, Any], state: CircularState) -> np.ndarray:
    """Tianshou's ``next(index)`` for every ``(T, N)`` position.

    That is the row of the next step in the episode, else the row itself (at an episode's
    end, the newest row, invalid rows).
    """
    size, count = tensors["observations"].shape[:2]
    dataset = Dataset({"observations": tensors["observations"]}, state)
    done = done_flags(tensors, size, count)
    following = np.repeat(np.arange(size)[:, None], count, axis=1)
    for j, rows in enumerate(column_rows(dataset)):
        following[rows, j] = rows[next_in_episode(np.arange(len(rows)), done[rows, j])]
    return following
