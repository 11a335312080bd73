"""LeRobot v3.0 dataset folders, which ``LeRobotDataset(repo_id, root=DIR)`` loads offline.

The tree (``lerobot.datasets.utils``): ``meta/info.json`` (version ``v3.0``, fps, counts,
the features), ``meta/tasks.parquet`` (the task strings as a pandas index named ``task``),
``meta/episodes/chunk-000/file-000.parquet`` (one row per episode: its frames'
``[dataset_from_index, dataset_to_index)`` and data file), ``meta/stats.json`` and
``data/chunk-CCC/file-FFF.parquet`` (one row per frame, one row group per episode, a new
file past 100 MB or 250 episodes, a new chunk folder every 1000 files).

``write`` lays out each env column's valid rows (oldest first) as episodes ended by
``terminated | truncated``, a bounded slice of rows at a time. LeRobot keeps neither the
next observation nor the two end flags apart, so, to lose nothing, the frames also carry
``next.observation.*``, ``next.terminated`` and ``next.truncated`` besides ``next.done``
(which LeRobot's own code reads). Images (uint8 ``(H, W[, C])``) are PNG, or, with
storage ``"video"`` (``--storage video``), those of ``(H, W, 3)`` are video features, lossy
(``lerobot._video``); other features as ``lerobot._features`` says. ``meta/expcli.json``
holds expcli's header (``info.json`` drops unknown keys) and each tensor's feature; each
episode row also says its env column and first row (``expcli/env``, ``expcli/first_row``),
so that ``read`` puts every value back in its ``(t, n)`` cell. What a LeRobot folder cannot
hold: rows never written (read back as zeros) and the episodes' per-episode statistics (not
written; LeRobot does not need them).

``read`` of a folder LeRobot wrote (no ``meta/expcli.json``) gives one env column of the
frames in ``index`` order: ``observation.state`` (or the only ``observation.*``) is
``observations``, several are ``observations/<rest>``; ``action`` is ``actions``,
``next.reward`` ``rewards``; other features keep their names. What the folder does not say
is stated in the metadata under ``lerobot.unknown`` and in one warning line: without
``next.observation.*`` each episode's last next observation (its own observation repeated,
as LeRobot's RL buffer does), and without ``next.terminated``/``next.truncated`` whether an
episode ended by termination or truncation (marked ``truncated``). Video features are
decoded with PyAV (refused in one line without it), their frames stated as what the codec
stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError, SchemaError
from expcli.formats._folder_members import json_object, member, metadata_file
from expcli.formats.dataset import Dataset, read_whole
from expcli.formats.header import encode_header
from expcli.formats.layouts._episodes import (
    SEAMS_KEY,
    column_rows,
    done_flags,
    episode_bounds,
    user_metadata,
)
from expcli.formats.layouts._row_streams import rows_of
from expcli.formats.layouts._write import atomic_folder
from expcli.formats.layouts.lerobot._features import (
    AUTO_FEATURES,
    Feature,
    feature_column,
    feature_for,
)
from expcli.formats.layouts.lerobot._next import apart, kept_feature, mark, write_kept
from expcli.formats.layouts.lerobot._read import EXPCLI, INFO, Cells, Frames, read_frames
from expcli.formats.layouts.lerobot._stats import FeatureStats
from expcli.formats.layouts.lerobot._video import VIDEO_PATH, VideoWriter, can_encode
from expcli.formats.layouts.lerobot.settings import (
    NO_FPS,
    fps_of,
    robot_type_of,
    task_of,
)
from expcli.formats.lazy import SLICE_BYTES
from expcli.formats.parquet_format import pyarrow_parquet
from expcli.spec import CircularState, TensorSpec

__all__ = ["CODEBASE_VERSION", "is_lerobot_folder", "open_lerobot", "read_lerobot", "write"]

CODEBASE_VERSION = "v3.0"
TASKS = "meta/tasks.parquet"
STATS = "meta/stats.json"
EPISODES = "meta/episodes/chunk-000/file-000.parquet"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
CHUNKS_SIZE = 1000
DATA_FILE_MB = 100
FILE_EPISODES = 250
"""Episodes a data file holds at most. A reader parses a file's footer whole, about 10 KB
an episode (a row group) for a dozen features: reading 1.2 GB of 50-step episodes a slice
at a time peaked at 149 MiB with 1,000 episodes a file and 100 MiB with 250."""
_GROUPS = ("observations", "next_observations", "actions")
_log = logging.getLogger(__name__)


def is_lerobot_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder with a LeRobot ``meta/info.json`` (of any version).

    One that is no regular file (a link, a pipe) claims the folder too, so that reading it
    refuses it as LeRobot's, not as some other layout's.
    """
    root = Path(path)
    try:
        member(root, root / INFO, "LeRobot")
    except FileNotFoundError:
        return False
    except FormatError:
        return True
    return "codebase_version" in json_object(root / INFO)


def write(dataset: Dataset, path: Path, *, overwrite: bool, storage: str = "parquet") -> None:
    """Write a LeRobot v3.0 dataset folder.

    ``storage`` ``"video"`` stores uint8 ``(H, W, 3)`` tensors as video features (lossy,
    said in one warning and in ``meta/expcli.json``); ``"parquet"`` (the default) keeps every
    tensor in the data files, images as PNG.

    Raises:
        SchemaError: Two tensors would be the same feature, a tensor has an empty feature,
            or the metadata is not JSON-serialisable.
        OutputExistsError: ``path`` exists and ``overwrite`` is false.
        ConfigError: ``path`` is a file or a folder that is not a LeRobot dataset.
    """
    pq = pyarrow_parquet()  # first: it picks pyarrow's allocator before pyarrow is imported
    import pyarrow as pa

    features = _features(dataset, path, video=storage == "video")
    stored = apart(dataset, path)
    kept = [kept_feature(f) for f in features if f.spec.name in stored]
    features = [f for f in features if f.spec.name not in stored]
    videos = [f for f in features if f.video]
    tensors = dataset.tensors
    done = done_flags(tensors, dataset.memory_size, dataset.num_envs)
    saved = user_metadata(dataset.metadata, "lerobot")
    header = dataset.header()
    header.update(saved)
    mark(header, stored)
    fps = _fps(dataset.metadata, path)
    task = task_of(dataset.metadata)
    lost = ["rows never written (they read back as zeros)"]
    if videos:
        lost.append(_VIDEO_LOSS.format(", ".join(f.spec.name for f in videos)))
    sidecar = {"expcli": header, "features": {f.spec.name: f.name for f in features}, "lost": lost}
    encode_header(sidecar, path)
    stats = {f.name: FeatureStats(f) for f in features}
    done_feature = Feature("next.done", TensorSpec("next.done", "bool", ()), image=False)
    schema = pa.schema(
        [(f.name, f.arrow_type()) for f in features if not f.video]
        + [("next.done", pa.bool_())]
        + [(name, pa.from_numpy_dtype(np.dtype(f["dtype"]))) for name, f in AUTO_FEATURES.items()]
    )
    row_bytes = sum(math.prod(f.spec.shape) * np.dtype(f.spec.dtype).itemsize for f in features)
    step = max(1, SLICE_BYTES // max(1, row_bytes * dataset.num_envs))
    episodes: dict[str, list[Any]] = {key: [] for key in _EPISODE_COLUMNS}
    with (
        atomic_folder(path, overwrite=overwrite, replaceable=is_lerobot_folder) as tmp,
        VideoWriter(tmp, videos, fps, CHUNKS_SIZE)
        if videos
        else contextlib.nullcontext() as encoder,
    ):
        data = _DataFiles(tmp, schema, pq)
        index = 0
        for j, rows in enumerate(column_rows(dataset)):
            for start, stop in episode_bounds(done[rows, j]):
                picked = rows[start:stop]
                number = len(episodes["episode_index"])
                where = data.start_episode()
                if encoder is not None:
                    encoder.start_episode()
                _start_episode(stats, features, picked, step, tensors, j)
                for at in range(0, len(picked), step):
                    part = picked[at : at + step]
                    columns = []
                    for feature in features:
                        values = rows_of(tensors[feature.spec.name], part)[:, j]
                        values = values.reshape(len(part), *feature.spec.shape)
                        stats[feature.name].add(values)
                        if encoder is not None and feature.video:
                            encoder.write(feature, values)
                        else:
                            columns.append(feature_column(feature, values))
                    frames = np.arange(at, at + len(part), dtype=np.int64)
                    columns.append(feature_column(done_feature, done[part, j]))
                    columns += _bookkeeping(frames, number, index + at, fps)
                    data.write(pa.Table.from_arrays(columns, schema=schema))
                for feature_stats in stats.values():
                    feature_stats.end_episode()
                for key, value in zip(
                    _EPISODE_COLUMNS,
                    (number, [task], len(picked), *where, index, index + len(picked))
                    + (0, 0, j, int(picked[0])),
                    strict=True,
                ):
                    episodes[key].append(value)
                for key, value in (encoder.episode_columns() if encoder else {}).items():
                    episodes.setdefault(key, []).append(value)
                index += len(picked)
        if not data.files:  # no frame: an empty file says what the frames would be
            data.start_episode()
        data.close()
        for feature in kept:
            write_kept(tmp, feature, *stored[feature.spec.name], pq)
        meta = tmp / "meta"
        (meta / "episodes" / "chunk-000").mkdir(parents=True)
        kinds = {k: _episode_type(k, pa) for k in episodes}
        pq.write_table(pa.table(episodes, schema=pa.schema(kinds.items())), tmp / EPISODES)
        _write_tasks(tmp / TASKS, [task], pa, pq)
        entries = {name: s.to_json() for name, s in stats.items()}
        _write_json(tmp / STATS, {name: entry for name, entry in entries.items() if entry})
        info = _info(features, fps, len(episodes["episode_index"]), index)
        info["robot_type"] = robot_type_of(dataset.metadata)
        if encoder is not None:
            info["video_path"] = VIDEO_PATH
            for name, entry in encoder.infos().items():
                info["features"][name]["info"] = entry
        _write_json(tmp / INFO, info)
        (tmp / EXPCLI).write_text(encode_header(sidecar, path), encoding="utf-8")
    if videos:
        warnings.warn(
            f"{path}: the lerobot layout does not keep {lost[-1]}", UserWarning, stacklevel=2
        )


_EPISODE_COLUMNS = (
    "episode_index",
    "tasks",
    "length",
    "data/chunk_index",
    "data/file_index",
    "dataset_from_index",
    "dataset_to_index",
    "meta/episodes/chunk_index",
    "meta/episodes/file_index",
    "expcli/env",
    "expcli/first_row",
)


_VIDEO_LOSS = (
    "the exact frames of {} (stored as lossy video: read back, they are what the codec "
    "kept, not bit for bit)"
)


def _episode_type(column: str, pa: Any) -> Any:
    """The Arrow type of a ``meta/episodes`` column: the tasks, a time, else an index."""
    if column == "tasks":
        return pa.list_(pa.string())
    return pa.float64() if column.endswith("_timestamp") else pa.int64()


class _DataFiles:
    """The data files being written: a row group per episode, a new file when one is full."""

    def __init__(self, root: Path, schema: Any, pq: Any) -> None:
        self._root, self._schema, self._pq = root, schema, pq
        self._writer: Any = None
        self._path: Path | None = None
        self._episodes = 0  # in the file being written
        self.files = 0

    def start_episode(self) -> tuple[int, int]:
        """``(chunk, file)`` of the file the next episode goes in (a new one past the size)."""
        if self._path is not None and (
            self._path.stat().st_size >= DATA_FILE_MB << 20 or self._episodes >= FILE_EPISODES
        ):
            self._writer.close()
            self._writer = None
            self._episodes = 0
        if self._writer is None:
            chunk, number = divmod(self.files, CHUNKS_SIZE)
            self._path = self._root / DATA_PATH.format(chunk_index=chunk, file_index=number)
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = self._pq.ParquetWriter(
                self._path, self._schema, compression="snappy", use_dictionary=False
            )
            self.files += 1
        self._episodes += 1
        return divmod(self.files - 1, CHUNKS_SIZE)

    def write(self, table: Any) -> None:
        """One row group of frames."""
        self._writer.write_table(table, row_group_size=max(1, table.num_rows))

    def close(self) -> None:
        """Close the file being written."""
        if self._writer is not None:
            self._writer.close()


def _features(dataset: Dataset, path: Path, video: bool = False) -> list[Feature]:
    """The feature of every tensor, checked to be distinct from each other and LeRobot's own.

    ``video``: images that video can hold (``can_encode``) are video features.
    """
    names = list(dataset.tensors)
    counts = {g: sum(n == g or n.startswith(g + "/") for n in names) for g in _GROUPS}
    features: list[Feature] = []
    taken: dict[str, str] = dict.fromkeys((*AUTO_FEATURES, "next.done"), "LeRobot")
    for spec in dataset.specs():
        group = next((g for g in _GROUPS if spec.name == g or spec.name.startswith(g + "/")), "")
        try:
            feature = feature_for(spec, counts.get(group, 0) == 1)
        except SchemaError as e:
            raise SchemaError(e.message, path=path, key=e.key) from e
        if video and feature.image and can_encode(spec):
            feature = dataclasses.replace(feature, image=False, video=True)
        if feature.name in taken:
            raise SchemaError(
                f"would be the LeRobot feature {feature.name!r}, as {taken[feature.name]} is",
                path=path,
                key=spec.name,
            )
        taken[feature.name] = spec.name
        features.append(feature)
    return features


def _start_episode(
    stats: dict[str, FeatureStats],
    features: list[Feature],
    picked: np.ndarray,
    step: int,
    tensors: Mapping[str, Any],
    column: int,
) -> None:
    """Begin an episode's statistics; one longer than a slice has its range read first.

    LeRobot bins an episode's quantiles between its min and max, which must be known before
    the first slice is binned: the numeric features are read once more, a slice at a time.
    """
    for feature in features:
        stats[feature.name].start_episode(len(picked))
    if len(picked) <= step:
        return
    for at in range(0, len(picked), step):
        for feature in features:
            if stats[feature.name].ranged:
                part = picked[at : at + step]
                stats[feature.name].widen(rows_of(tensors[feature.spec.name], part)[:, column])


def _bookkeeping(frames: np.ndarray, episode: int, first: int, fps: int) -> list[Any]:
    """The columns LeRobot adds to every frame, in ``AUTO_FEATURES`` order."""
    from expcli.formats._parquet_columns import flat_array

    count = len(frames)
    values = (
        (frames / fps).astype(np.float32),
        frames,
        np.full(count, episode, np.int64),
        first + np.arange(count, dtype=np.int64),
        np.zeros(count, np.int64),
    )
    return [flat_array(v) for v in values]


def _fps(metadata: dict[str, Any], path: Path) -> int:
    """The frames per second (``settings.fps_of``); 1, said in one warning line, without one."""
    fps = fps_of(metadata)
    if fps is None:
        _log.warning(
            "warning: %s: no fps: the dataset records no render_fps of its env and none was "
            "given (--fps); writing fps %d, so each timestamp is its frame index",
            path,
            NO_FPS,
        )
        return NO_FPS
    return fps


def _info(features: list[Feature], fps: int, episodes: int, frames: int) -> dict[str, Any]:
    declared = {f.name: f.info() for f in features}
    declared["next.done"] = {"dtype": "bool", "shape": [1], "names": None}
    declared.update(AUTO_FEATURES)
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": None,
        "total_episodes": episodes,
        "total_frames": frames,
        "total_tasks": 1,
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": DATA_FILE_MB,
        "video_files_size_in_mb": 200,
        "fps": fps,
        "splits": {"train": f"0:{episodes}"},
        "data_path": DATA_PATH,
        "video_path": None,
        "features": declared,
    }


def _write_tasks(path: Path, tasks: list[str], pa: Any, pq: Any) -> None:
    """``meta/tasks.parquet`` as pandas writes it: the tasks are the index, named ``task``.

    LeRobot reads it with ``pd.read_parquet`` and takes a task as its row's index label.
    """
    pandas = {
        "index_columns": ["task"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": "task",
                "field_name": "task",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    table = pa.table(
        {"task_index": pa.array(range(len(tasks)), pa.int64()), "task": pa.array(tasks)}
    ).replace_schema_metadata({"pandas": json.dumps(pandas)})
    pq.write_table(table, path)


def _write_json(path: Path, value: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2)


def read_lerobot(path: Path) -> Dataset:
    """Read a LeRobot v3 dataset folder into memory.

    Raises:
        FormatError: Not a LeRobot v3 folder, a video feature without PyAV, or a damaged file
            (a video one too).
        SchemaError: The files disagree with ``info.json`` or with expcli's sidecar.
        ConfigError: The memory available cannot hold the data (said before reading any).
    """
    return read_whole(open_lerobot(path), path)


def open_lerobot(path: Path) -> tuple[Dataset, Callable[[], None]]:
    """Open a LeRobot v3 dataset folder, its frames read from the files when asked for.

    As ``read_lerobot``; call the closer once done.
    """
    info = _info_file(path)
    sidecar = _json_member(path, EXPCLI) if os.path.lexists(path / EXPCLI) else None
    frames = read_frames(path, info, sidecar)
    try:
        frames.check_order()
        if sidecar is None:
            return _foreign(path, info, frames), frames.close
        dataset = frames.scatter(path, sidecar)
        decoded = _decoded(frames)
        if decoded:  # what the folder's own writer (expcli) could not keep is said again
            dataset.metadata["lerobot"] = {"unknown": [decoded]}
            _log.warning("warning: %s: a LeRobot dataset does not say %s", path, decoded)
        return dataset, frames.close
    except BaseException:
        frames.close()
        raise


def _info_file(root: Path) -> dict[str, Any]:
    if not os.path.lexists(root / INFO):
        raise FormatError(f"not a LeRobot dataset folder: found no {INFO}", path=root)
    info = _json_member(root, INFO)
    version = info.get("codebase_version")
    if not (isinstance(version, str) and version.startswith("v3")):
        raise FormatError(
            f"LeRobot codebase_version {version!r} is not supported; expected v3.x",
            path=root / INFO,
            key="codebase_version",
        )
    return info


def _json_member(root: Path, name: str) -> dict[str, Any]:
    """``root/name``, a JSON object in a regular file reached through no link."""
    return metadata_file(member(root, root / name, "LeRobot"))


def _foreign(root: Path, info: dict[str, Any], frames: Frames) -> Dataset:
    """One env column of a folder LeRobot wrote, with what it cannot say stated."""
    unknown: list[str] = []
    names = frames.features
    ends = frames.episode_ends()
    count = len(ends)
    cells, following = Cells.consecutive(count), Cells.following(ends)
    observations = sorted(n for n in names if n.startswith("observation."))
    nexts = {n for n in names if n.startswith("next.observation.")}
    flags = {"next.done", "next.terminated", "next.truncated"}
    tensors: dict[str, Any] = {}
    for name in sorted(names):
        if name in observations:
            rest = name.removeprefix("observation.")
            tensor = "observations" if len(observations) == 1 else f"observations/{rest}"
            tensors[tensor] = frames.lazy(name, cells)
            if "next." + name in nexts:
                tensors["next_" + tensor] = frames.lazy("next." + name, cells)
            else:
                tensors["next_" + tensor] = frames.lazy(name, following)
                if not unknown:
                    unknown.append(
                        "the next observation after each episode's last frame (its own "
                        "observation repeated)"
                    )
        elif name == "action" or name.startswith("action."):
            tensors["actions" + name.removeprefix("action").replace(".", "/", 1)] = frames.lazy(
                name, cells
            )
        elif name == "next.reward":
            tensors["rewards"] = frames.lazy(name, cells)
        elif name not in nexts and name not in flags:
            tensors[name] = frames.lazy(name, cells)
    read = {flag: frames.column(flag) for flag in flags if flag in names}
    terminated = _flag(read.get("next.terminated"), ends)
    truncated = _flag(read.get("next.truncated"), ends)
    if "next.terminated" not in read or "next.truncated" not in read:
        split = read.get("next.done")
        if split is not None:
            unknown.append("whether each next.done is a termination or a truncation (truncated)")
            truncated |= _flag(split, ends)
            terminated[:] = False
    seams = np.flatnonzero(ends & ~(terminated | truncated))
    truncated |= ends
    tensors["terminated"] = terminated.reshape(count, 1, 1)
    tensors["truncated"] = truncated.reshape(count, 1, 1)
    lerobot = {"fps": info.get("fps"), "codebase_version": info.get("codebase_version")}
    if isinstance(info.get("robot_type"), str):
        lerobot["robot_type"] = info["robot_type"]
    decoded = _decoded(frames)
    if decoded:
        unknown.append(decoded)
    if frames.skipped:
        lerobot["skipped"] = frames.skipped
        unknown.append("its string features " + ", ".join(frames.skipped) + " (left out)")
    if unknown:
        lerobot["unknown"] = unknown
        _log.warning("warning: %s: a LeRobot dataset does not say %s", root, "; nor ".join(unknown))
    metadata: dict[str, Any] = {"layout": "lerobot", "lerobot": lerobot}
    if len(seams):
        metadata[SEAMS_KEY] = seams.tolist()
    state = CircularState(0, 0, filled=True) if count else CircularState()
    dataset = Dataset(tensors, state, metadata)
    dataset.validate(root)
    return dataset


def _decoded(frames: Frames) -> str:
    """What reading video features cannot say ("" when there are none)."""
    names = [name for name, feature in frames.features.items() if feature.video]
    if not names:
        return ""
    return (
        f"the exact frames of its video features {', '.join(names)} (decoded from MP4 as "
        "the codec stored them, lossy when encoded lossy)"
    )


def _flag(values: np.ndarray | None, ends: np.ndarray) -> np.ndarray:
    if values is None or not len(ends):  # no frame: nothing to reshape
        return np.zeros(len(ends), bool)
    return np.asarray(values.reshape(len(ends), -1).astype(bool).any(axis=1))
