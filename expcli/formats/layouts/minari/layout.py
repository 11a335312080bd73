"""Minari datasets (hdf5 storage): ``data/main_data.hdf5`` plus ``data/metadata.json``.

``main_data.hdf5`` holds one group ``episode_<id>`` per episode with ``observations``
(one row more than the steps: the reset observation, then each step's), ``actions``,
``rewards``, ``terminations``, ``truncations`` (one row per step) and optionally ``infos/*``
(one row per observation: the reset info first). ``metadata.json`` holds the dataset id,
the spaces (Minari's JSON serialisation), the env spec and the counts
(``minari.dataset.minari_storage.MinariStorage``).

Episodes are read in id order into one env column ``(T = total steps, N = 1)``: a step's
observation is the episode's row ``t`` and its next observation row ``t + 1``; a step's
infos are the episode's info row ``t + 1`` (the reset info is dropped). Where an episode that
is not the last one ends with neither flag, its last step is marked ``truncated`` and listed
under ``seams_marked_truncated``, so that episodes stay apart in expcli's view. Opened
lazily (``open_folder``, ``read`` with ``lazy``), the rows stay in the file and are read a
slice at a time across episodes (``minari._episodes``); only the flags are read at once.

``write`` makes a folder that ``minari.MinariDataset(folder / "data")`` loads (and
``minari.load_dataset`` when the folder sits in the datasets path under its id), and says
what it cannot keep (env columns, extras' names) in one warning and the metadata: one
episode per run of steps of each env column (valid rows, oldest first) up to a
``terminated | truncated`` row, the final observation of each taken from
``next_observations``. expcli does not keep reset infos, so each episode's first info row
repeats its first step's infos. Non-standard tensors other than ``infos/*`` are kept as
infos under their own names (read back as ``infos/<name>``). Images are stored raw
(``jpeg_encoding`` false), and expcli's metadata is kept under the key ``expcli``.

Dict and Tuple observations and actions are groups of one dataset per leaf both ways
(``observations/pos``; Tuple parts ``_index_<i>`` become ``observations/<i>``; Text
leaves are strings in Minari, code points in expcli): see ``minari._spaces``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError
from expcli.formats._folder_members import json_object, member, metadata_file
from expcli.formats._guarded_file import Hdf5Output
from expcli.formats._guards import check_read_whole
from expcli.formats.authorship import Authorship
from expcli.formats.dataset import Dataset
from expcli.formats.layout_keys import warn_losses
from expcli.formats.layouts._episodes import SEAMS_KEY
from expcli.formats.layouts._write import atomic_folder
from expcli.formats.layouts.minari._columns import mark_seams, scan_folder
from expcli.formats.layouts.minari._episodes import EpisodeScan
from expcli.formats.layouts.minari._meta import (
    dataset_id,
    expcli_metadata,
    jpeg_image_shape,
    minari_metadata,
)
from expcli.formats.layouts.minari._plan import FLAG_KEYS, write_plan
from expcli.formats.layouts.minari._spaces import step_data, step_rows, text_leaves
from expcli.formats.lazy import SLICE_BYTES
from expcli.spec import CircularState

__all__ = [
    "MAIN_FILE",
    "dataset_id",
    "folder_storage",
    "is_minari_file",
    "is_minari_folder",
    "mismatched_episodes",
    "open_folder",
    "read",
    "read_folder",
    "write",
]

MAIN_FILE = "main_data.hdf5"
METADATA_FILE = "metadata.json"
_EPISODE = re.compile(r"episode_(\d+)")
_CACHE_BYTES = 4 << 20


def is_minari_file(h5: Any, path: Path) -> bool:
    """Whether an open HDF5 file is a Minari ``main_data.hdf5``.

    Every root member is a group named ``episode_<id>``; a file without episodes counts
    when a ``metadata.json`` of the hdf5 storage sits beside it.
    """
    import h5py

    keys = list(h5.keys())
    if not keys:
        return _sibling_metadata(path).get("data_format") == "hdf5"
    return all(
        isinstance(key, str) and _EPISODE.fullmatch(key) and isinstance(h5.get(key), h5py.Group)
        for key in keys
    )


def is_minari_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a Minari dataset folder (or its ``data`` folder)."""
    return _data_folder(Path(path)) is not None


def folder_storage(path: Path) -> str | None:
    """The ``data_format`` of a Minari folder (hdf5, parquet, arrow), or None: no such folder."""
    data = _data_folder(path)
    if data is None or _outside(path, data / METADATA_FILE):
        return None
    storage = json_object(data / METADATA_FILE).get("data_format")
    return storage if isinstance(storage, str) else None


def _outside(root: Path, path: Path) -> bool:
    """Whether ``path`` is missing or reached through a link (or no regular file)."""
    try:
        member(root, path, "Minari")
    except (OSError, FormatError):
        return True
    return False


def mismatched_episodes(path: Path) -> list[int] | None:
    """Ids of the episodes whose observations are not one row longer than their actions.

    ``path`` is a Minari folder or its ``main_data.hdf5``; only the datasets' shapes are
    read, so this finds what makes ``read`` refuse a file, all of it at once. Returns None
    when ``path`` is neither (a root member that is not an ``episode_<id>``).

    Raises:
        FormatError: The episodes cannot be read: the file is damaged.
    """
    import h5py

    if path.is_dir():
        data = _data_folder(path)
        if data is None or _outside(path, data / MAIN_FILE):
            return None  # none, or not a file inside: reading the folder refuses it
        target = data / MAIN_FILE
    elif not path.is_file():  # a named pipe would block the open
        return None
    else:
        target = path
    try:
        h5 = h5py.File(target, "r", locking=False)
    except (OSError, ValueError):
        return None
    bad: list[int] = []
    try:
        with h5:
            names = list(h5)
            episodes = [k for k in names if isinstance(k, str) and _EPISODE.fullmatch(k)]
            if not episodes or len(episodes) != len(names):
                return None
            for key in sorted(episodes, key=lambda k: int(k[8:])):
                group = h5[key]
                if not isinstance(group, h5py.Group):
                    bad.append(int(key[8:]))
                    continue
                observations = _lengths(group.get("observations"), h5py)
                actions = _lengths(group.get("actions"), h5py)
                steps = actions[0] if actions else None
                if steps is None or any(n != steps + 1 for n in observations):
                    bad.append(int(key[8:]))
    except Exception as e:  # h5py raises KeyError, RuntimeError, ... for damaged groups
        raise FormatError(
            f"cannot read the episodes ({type(e).__name__}): the file is corrupt", path=target
        ) from e
    return bad


def read_folder(path: Path) -> Dataset:
    """Read a Minari dataset folder (or its ``data`` folder) into memory.

    Raises:
        FormatError: Not a Minari folder, a storage other than hdf5, or a corrupt file.
        SchemaError: An episode's arrays disagree in length or shape.
        ConfigError: The memory available cannot hold the data (said before reading any).
    """
    from expcli.formats._hdf5_checks import as_format_errors

    dataset, close = open_folder(path)
    try:
        check_read_whole(sum(a.nbytes for a in dataset.tensors.values()), path)
        with as_format_errors(_main_file(path), "its episodes"):
            tensors = _read_whole(dataset.tensors)
    finally:
        close()
    return Dataset(tensors, dataset.state, dataset.metadata)


def _read_whole(tensors: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every tensor read whole, by slices of rows of each in turn.

    So that the tensors sharing an episode's decoded rows (observations and next
    observations) read them one after the other, while they are kept.
    """
    out = {name: array for name, array in tensors.items() if isinstance(array, np.ndarray)}
    lazy = {name: array for name, array in tensors.items() if name not in out}
    rows = max((len(array) for array in lazy.values()), default=0)
    row_bytes = sum(array.nbytes // max(1, len(array)) for array in lazy.values())
    step = max(1, SLICE_BYTES // max(1, row_bytes))
    for name, array in lazy.items():
        out[name] = np.empty(array.shape, array.dtype)
    for start in range(0, rows, step):
        for name, array in lazy.items():
            out[name][start : start + step] = array[start : start + step]
    return {name: out[name] for name in tensors}


def open_folder(path: Path) -> tuple[Dataset, Callable[[], None]]:
    """Open a Minari dataset folder (or its ``data`` folder), its rows left in the file.

    As ``read`` with ``lazy``; call the closer once done.

    Raises:
        FormatError: Not a Minari folder, a storage other than hdf5, parquet and arrow, or
            a corrupt file.
        SchemaError: An episode's arrays disagree in length or shape.
    """
    from expcli.formats._hdf5_checks import as_format_errors, check_all_stored, open_file

    data = _data_folder(path)
    if data is None:
        for candidate in (path / "data" / METADATA_FILE, path / METADATA_FILE):
            if os.path.lexists(candidate):
                metadata_file(candidate)  # says what is wrong with it, if anything
        raise FormatError(
            f"not a Minari dataset folder: found no data/{METADATA_FILE} naming a data_format",
            path=path,
        )
    meta = metadata_file(member(path, data / METADATA_FILE, "Minari"))
    storage = meta.get("data_format")
    if storage in ("parquet", "arrow"):
        return scan_folder(data, meta)  # parquet or arrow storage: minari.arrow
    if storage != "hdf5":
        raise FormatError(
            f"Minari {storage} storage is not supported; expected hdf5, parquet or arrow",
            path=data / METADATA_FILE,
            key="data_format",
        )
    main = data / MAIN_FILE
    if not os.path.lexists(main):
        raise FormatError("missing from the Minari dataset folder", path=main)
    h5 = open_file(member(path, main, "Minari"), _CACHE_BYTES)
    try:
        with as_format_errors(main, "its episodes"):
            check_all_stored(h5, main)  # so that only what the file holds is read
            return read(h5, main, meta, lazy=True), h5.close
    except BaseException:
        h5.close()
        raise


def read(
    h5: Any,
    path: Path,
    meta: dict[str, Any] | None = None,
    *,
    lazy: bool = False,
) -> Dataset:
    """Read the episodes of an open ``main_data.hdf5`` into one env column.

    Args:
        h5: The open file.
        path: Its path, for messages (``metadata.json`` beside it is read when ``meta`` is
            not given).
        meta: The dataset's ``metadata.json`` object.
        lazy: Leave the rows in the file (``ConcatRows`` over the episodes, read a slice
            at a time; ``h5`` must then stay open while they are read); else read them.

    Raises:
        FormatError: An episode is not a group, lacks a key, or holds JPEG-encoded images.
        SchemaError: An episode's observations are not one row longer than its actions, or
            its arrays disagree in length, or episodes disagree in feature shapes.
    """
    if meta is None:
        meta = _sibling_metadata(path)
    episodes = sorted((int(m.group(1)), key) for key in h5.keys() if (m := _EPISODE.fullmatch(key)))
    metadata = expcli_metadata(meta)
    texts: dict[str, int] = {}
    for space_key, prefix in (("observation_space", "observations"), ("action_space", "actions")):
        texts.update(text_leaves(metadata.get(space_key), prefix))
    scan = EpisodeScan(h5, path, [key for _, key in episodes], jpeg_image_shape(meta), texts)
    seams = mark_seams(scan.lengths, scan.flags["terminated"], scan.flags["truncated"])
    tensors = scan.tensors()
    if not lazy:
        tensors = {name: np.asarray(array) for name, array in tensors.items()}
    if scan.skipped:
        metadata["minari"]["skipped"] = sorted(set(scan.skipped))
    if seams:
        metadata[SEAMS_KEY] = seams
    state = CircularState(0, 0, filled=True) if tensors else CircularState()
    dataset = Dataset(tensors, state, metadata)
    dataset.validate(path)
    return dataset


def write(
    dataset: Dataset, path: Path, *, overwrite: bool, authorship: Authorship | None = None
) -> None:
    """Write a Minari dataset folder (``path/data/main_data.hdf5`` and ``metadata.json``).

    Its id is the folder's path under Minari's datasets root (``dataset_id``);
    ``authorship`` gives its author, author email, algorithm name and code permalink.

    Raises:
        SchemaError: ``observations``, ``actions`` or ``rewards`` is missing, observations
            and next observations differ in shape, or the metadata is not JSON-serialisable.
        OutputExistsError: ``path`` exists and ``overwrite`` is false.
        ConfigError: ``path`` is a file or a folder that is not a Minari dataset, or its
            name is no dataset id (``NAME-vN``).
    """
    dataset_id(path)  # refused before anything is written
    plan = write_plan(dataset, path)
    losses = plan.record_losses()
    episode = steps = 0
    with atomic_folder(path, overwrite=overwrite, replaceable=is_minari_folder) as tmp:
        data = tmp / "data"
        data.mkdir()
        with Hdf5Output(data / MAIN_FILE, track_order=True) as h5:
            for j, picked in plan.episodes():
                group = h5.create_group(f"episode_{episode}")
                group.attrs["id"] = episode
                group.attrs["total_steps"] = len(picked)
                for leaf in plan.observations:
                    parts = plan.observation_parts(leaf, picked, j)
                    step_rows(group, leaf.key, len(picked) + 1, parts)
                for leaf in plan.actions:
                    step_rows(group, leaf.key, len(picked), plan.action_parts(leaf, picked, j))
                step_rows(group, "rewards", len(picked), plan.reward_parts(picked, j))
                for flag, key in FLAG_KEYS:
                    step_data(group, key, plan.flags[flag][picked, j])
                for name, info in zip(plan.extras, plan.infos, strict=True):
                    parts = plan.info_parts(name, picked, j)
                    step_rows(group, f"infos/{info}", len(picked) + 1, parts)
                episode += 1
                steps += len(picked)
        meta = minari_metadata(dataset, path, plan.saved, authorship)
        meta.update({"total_episodes": episode, "total_steps": steps})
        meta["dataset_size"] = round(os.path.getsize(data / MAIN_FILE) / 1e6, 1)
        with open(data / METADATA_FILE, "w", encoding="utf-8") as f:
            json.dump(meta, f)
    warn_losses(path, "minari", losses)


def _main_file(path: Path) -> Path:
    data = _data_folder(path)
    return (data if data is not None else path) / MAIN_FILE


def _data_folder(path: Path) -> Path | None:
    """The folder holding ``metadata.json`` (``path/data`` or ``path``), if any.

    A link or a pipe in its place claims the folder too: reading it then refuses it.
    """
    for candidate in (path / "data", path):
        try:
            member(path, candidate / METADATA_FILE, "Minari")
        except FileNotFoundError:
            continue
        except FormatError:
            return candidate
        if "data_format" in json_object(candidate / METADATA_FILE):
            return candidate
    return None


def _lengths(item: Any, h5py: Any) -> list[int]:
    """First-dimension lengths of a dataset, or of every dataset in a group."""
    if isinstance(item, h5py.Dataset):
        return [int(item.shape[0])] if item.shape else [0]
    found: list[int] = []
    if isinstance(item, h5py.Group):
        item.visititems(
            lambda _, obj: (
                found.append(int(obj.shape[0]) if obj.shape else 0)
                if isinstance(obj, h5py.Dataset)
                else None
            )
        )
    return found


def _sibling_metadata(path: Path) -> dict[str, Any]:
    return json_object(path.parent / METADATA_FILE)
