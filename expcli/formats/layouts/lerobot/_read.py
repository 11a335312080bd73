"""Reading the frames of a LeRobot v3 folder: its features checked, its rows read when asked.

The features come from ``meta/info.json`` (or, for a folder expcli wrote, the tensors its
sidecar ``meta/expcli.json`` names); every data file's columns must be of the declared
types, with no nulls. Frames are numbered in file order (LeRobot's ``index`` order). A
tensor is ``LazyRows`` whose rows are gathered from the row groups they lie in, a few
decoded row groups kept (``_GroupCache``), so that ``convert``, ``inspect`` and ``sample``
hold a bounded amount whatever the folder's size. A folder expcli wrote is placed in its
``(T, N)`` cells from ``meta/episodes`` (``expcli/env``, ``expcli/first_row``: a row per
episode), one range of rows at a time (``Cells``); of one LeRobot wrote, the
``episode_index`` of every frame is read, a block at a time, to tell where its episodes
end (a byte a frame kept). Video features are no columns: ``lerobot._video`` decodes their
frames from the MP4 files (``Frames.videos``).
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError, SchemaError
from expcli.formats._folder_members import members
from expcli.formats._guards import brief
from expcli.formats._parquet_open import open_parquet, read_columns
from expcli.formats.dataset import Dataset
from expcli.formats.frames import PREFIX, derive, sparse_members
from expcli.formats.header import dataset_from_header, header_specs, parse_header
from expcli.formats.layouts.lerobot._features import AUTO_FEATURES, Feature, feature_for
from expcli.formats.layouts.lerobot._features import feature_values as column_values
from expcli.formats.layouts.lerobot._next import kept_feature, read_kept
from expcli.formats.layouts.lerobot._video import VideoFrames, require_decoder
from expcli.formats.lazy import LazyRows
from expcli.formats.row_gather import by_block
from expcli.spec import SUPPORTED_DTYPES, TensorSpec

__all__ = ["EXPCLI", "INFO", "Cells", "Frames", "read_frames", "sidecar_header"]

INFO = "meta/info.json"
EXPCLI = "meta/expcli.json"

_CACHE_BYTES = 8 << 20
_BLOCK_FRAMES = 1 << 20  # frames whose episode index or flags one read takes
_FOOTER_BYTES = 3 << 20  # footers (as stored) of the data files kept open: ~10x that parsed
_BOOK_CELLS = 1 << 16  # cells a read places at once (their frame numbers: 8 bytes each)


class Frames:
    """The frames of a folder's data files, numbered in file order, read when asked.

    Attributes:
        features: Each feature to read, by name.
        count: The number of frames.
        skipped: The string features left out (text has no tensor).
        videos: The frames of the video features, decoded when read (None: there are none).
    """

    def __init__(
        self,
        features: list[Feature],
        groups: _GroupCache,
        skipped: list[str],
        videos: VideoFrames | None = None,
    ) -> None:
        self.features = {f.name: f for f in features}
        self.skipped = skipped
        self.count = int(groups.starts[-1])
        self._groups = groups
        self.videos = videos

    def episode_ends(self) -> np.ndarray:
        """Whether each frame is the last one of its episode (a byte a frame).

        ``episode_index`` is read ``_BLOCK_FRAMES`` frames at a time.
        """
        counter = Feature("episode_index", TensorSpec("episode_index", "int64", (1,)), False)
        ends = np.ones(self.count, bool)
        for start in range(0, self.count, _BLOCK_FRAMES):
            frames = np.arange(start, min(self.count, start + _BLOCK_FRAMES + 1))
            episodes = self._groups.take(counter, frames).reshape(-1)
            ends[start : start + len(episodes) - 1] = episodes[1:] != episodes[:-1]
        return ends

    def check_order(self) -> None:
        """Refuse frames out of LeRobot's ``index`` order (rows reordered by another tool).

        Frames are numbered in file order; their ``index`` must count up by one from the
        first. Read ``_BLOCK_FRAMES`` frames at a time.

        Raises:
            FormatError: Naming the first frame out of order.
        """
        counter = Feature("index", TensorSpec("index", "int64", (1,)), False)
        first = None
        for start in range(0, self.count, _BLOCK_FRAMES):
            frames = np.arange(start, min(self.count, start + _BLOCK_FRAMES))
            index = self._groups.take(counter, frames).reshape(-1)
            first = int(index[0]) if first is None else first
            wrong = np.flatnonzero(index - frames != first)
            if len(wrong):
                at = int(frames[wrong[0]])
                path, row = self._groups.where(at)
                raise FormatError(
                    f"row {row} has index {int(index[wrong[0]])}; expected {first + at}: the "
                    "rows are out of LeRobot's index order (reordered or filtered by another "
                    "tool), so frames would be read as other data",
                    path=path,
                    key="index",
                )

    def column(self, name: str) -> np.ndarray:
        """A feature's values of every frame ``(F, *shape)``, read whole (the flags)."""
        feature = self.features[name]
        out = np.empty((self.count, *feature.spec.shape), feature.spec.dtype)
        for start in range(0, self.count, _BLOCK_FRAMES):
            frames = np.arange(start, min(self.count, start + _BLOCK_FRAMES))
            out[start : start + len(frames)] = self._groups.take(feature, frames)
        return out

    def lazy(self, name: str, cells: Cells, spec: TensorSpec | None = None) -> LazyRows:
        """A tensor ``(T, N, *shape)`` whose cell ``(t, n)`` is frame ``cells[t, n]``.

        A cell of -1 holds no frame: zeros. ``spec``: the tensor's own (default the feature's).
        """
        feature = self.features[name]
        shape = (spec or feature.spec).shape or (1,)
        groups = self.videos if feature.video and self.videos is not None else self._groups

        envs = max(1, cells.shape[1])
        step = max(1, _BOOK_CELLS // envs)  # rows whose frame numbers are worked out at once

        def read(start: int, stop: int) -> np.ndarray:
            out = np.zeros((stop - start, *cells.shape[1:], *shape), feature.spec.dtype)
            for first in range(start, stop, step):
                part = cells[first : min(stop, first + step)]
                held = part >= 0
                rows = out[first - start : first - start + len(part)]
                rows[held] = groups.take(feature, part[held]).reshape(-1, *shape)
            return out

        return LazyRows((*cells.shape, *shape), np.dtype(feature.spec.dtype), read)

    def close(self) -> None:
        """Let go of the decoded row groups kept (and close the video files)."""
        self._groups.clear()
        if self.videos is not None:
            self.videos.close()

    def scatter(self, root: Path, sidecar: dict[str, Any]) -> Dataset:
        """The frames of a folder expcli wrote back in their ``(T, N)`` cells (lazily).

        Raises:
            FormatError, SchemaError: The sidecar, the episodes or the frames disagree.
        """
        header = sidecar_header(root, sidecar)
        names = sidecar.get("features")
        size, envs = header.get("memory_size"), header.get("num_envs")
        if not isinstance(names, dict) or type(size) is not int or type(envs) is not int:
            raise FormatError(
                "lacks the features, memory_size or num_envs", path=root / EXPCLI, key="features"
            )
        if size < 0 or envs < 0 or size * envs > 1 << 40:
            raise FormatError(f"memory_size {size} x num_envs {envs}", path=root / EXPCLI)
        state, _ = Dataset.split_header(header, root / EXPCLI)
        valid = state.valid_length(size, envs)
        if valid != self.count:  # else a header could make every row as wide as it likes
            raise FormatError(
                f"says {valid:,} transitions ({size:,} rows of {envs:,} envs); the data files "
                f"hold {self.count:,} frames",
                path=root / EXPCLI,
                key="expcli",
            )
        cells = _episode_cells(root, self.count, size, envs)
        arrays: dict[str, Any] = {}
        apart = sparse_members(header, root / EXPCLI)  # next observations stored once
        for spec in header_specs(header, root / EXPCLI):
            if f"{PREFIX}{spec.name}/kept" in apart:
                kept = apart[f"{PREFIX}{spec.name}/kept"][1][0]
                arrays.update(read_kept(root, kept_feature(feature_for(spec, False)), kept))
                continue
            name = str(names.get(spec.name))
            if name not in self.features:
                raise SchemaError("has no feature in the folder", path=root / EXPCLI, key=spec.name)
            arrays[spec.name] = self.lazy(name, cells, spec)
        if apart:
            arrays = derive(arrays, header, root / EXPCLI)
        dataset = dataset_from_header(arrays, header, root)
        dataset.metadata["layout"] = "lerobot"
        return dataset


class Cells:
    """The frame in each ``(t, n)`` cell of a ``(T, N)`` grid, worked out a row range at a time.

    ``cells[start:stop]`` is an int64 array ``(stop - start, N)``; -1 where no frame lies.
    What is held is the rule, not the grid: a run per episode (a folder expcli wrote), or
    nothing but the frame count (one LeRobot wrote), so that a folder of any size opens in
    memory that grows with its episodes at most, not with its frames.
    """

    def __init__(self, rows: int, columns: int, rows_of: Callable[[int, int], np.ndarray]):
        self.shape = (rows, columns)
        self._rows_of = rows_of

    @classmethod
    def consecutive(cls, count: int) -> Cells:
        """Frame ``t`` in cell ``(t, 0)``: one env column, in file order."""
        return cls(count, 1, lambda start, stop: np.arange(start, stop, dtype=np.int64)[:, None])

    @classmethod
    def of_runs(
        cls,
        root: Path,
        size: int,
        envs: int,
        starts: np.ndarray,
        stops: np.ndarray,
        env: np.ndarray,
        first: np.ndarray,
    ) -> Cells:
        """Episodes of frames ``[starts, stops)``, frame ``k`` in row ``(first + k) % T``.

        Each episode lies in its own env column ``env``.

        Raises:
            FormatError: Two frames fall in one cell, or an episode is longer than ``T``.
        """
        lengths = stops - starts
        first = first % max(size, 1)
        if len(lengths) and int(lengths.max()) > size:
            raise FormatError("an episode is longer than the memory's rows", path=root)
        wraps = first + lengths > size  # an episode past row T - 1 goes on at row 0
        piece_env = np.concatenate([env, env[wraps]])
        piece_row = np.concatenate([first, np.zeros(int(wraps.sum()), np.int64)])
        piece_end = np.concatenate(
            [np.minimum(first + lengths, size), (first + lengths - size)[wraps]]
        )
        piece_frame = np.concatenate([starts, (starts + size - first)[wraps]])
        order = np.lexsort((piece_row, piece_env))
        piece_env, piece_row, piece_end, piece_frame = (
            a[order] for a in (piece_env, piece_row, piece_end, piece_frame)
        )
        same = piece_env[1:] == piece_env[:-1]
        if (same & (piece_row[1:] < piece_end[:-1])).any():
            raise FormatError("two frames of the episodes fall in one (t, n) cell", path=root)
        bounds = np.searchsorted(piece_env, np.arange(envs + 1))

        def rows_of(start: int, stop: int) -> np.ndarray:
            out = np.full((stop - start, envs), -1, np.int64)
            for column in range(envs):
                lo, hi = int(bounds[column]), int(bounds[column + 1])
                row, end = piece_row[lo:hi], piece_end[lo:hi]
                a = int(np.searchsorted(end, start, side="right"))
                b = int(np.searchsorted(row, stop, side="left"))
                for k in range(lo + a, lo + b):
                    low, high = max(start, int(piece_row[k])), min(stop, int(piece_end[k]))
                    base = int(piece_frame[k]) - int(piece_row[k])
                    out[low - start : high - start, column] = np.arange(low, high) + base
            return out

        return cls(size, envs, rows_of)

    def __getitem__(self, rows: slice) -> np.ndarray:
        start, stop, _ = rows.indices(self.shape[0])
        return self._rows_of(start, max(start, stop))

    @classmethod
    def following(cls, ends: np.ndarray) -> Cells:
        """One env column in file order, each cell the frame after its own.

        That is ``t + 1``, or ``t`` itself at an episode's end (``ends[t]``).
        """

        def rows_of(start: int, stop: int) -> np.ndarray:
            frames = np.arange(start, stop, dtype=np.int64)
            following: np.ndarray = frames + ~ends[start:stop]
            return following[:, None]

        return cls(len(ends), 1, rows_of)


class _GroupCache:
    """The data files' row groups, a few decoded ones kept (about ``_CACHE_BYTES``).

    Of each file only its row groups' row counts are held. An open file keeps its parsed
    footer (about 10 KB a row group, and LeRobot writes a row group per episode), so files
    are kept open while their footers total ``_FOOTER_BYTES`` as stored (one at least): an
    expcli folder of several env columns has each column's episodes in other files, and a
    slice of rows reads from all of them. A file opened again must have the same row groups.
    """

    def __init__(self, groups: list[list[int]], paths: list[Path]) -> None:
        self._paths = paths
        self._where: list[tuple[int, int]] = []
        starts = [0]
        for number, rows in enumerate(groups):
            for group, count in enumerate(rows):
                self._where.append((number, group))
                starts.append(starts[-1] + count)
        self.starts = np.asarray(starts, np.int64)
        self._groups = [len(rows) for rows in groups]
        self._open: OrderedDict[int, tuple[Any, int]] = OrderedDict()  # file, footer bytes
        self._footers = 0
        self._kept: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # readers ahead share the files and the kept groups

    def take(self, feature: Feature, frames: np.ndarray) -> np.ndarray:
        """Values ``(len(frames), *shape)`` of the frames numbered ``frames``."""
        out = np.empty((len(frames), *feature.spec.shape), feature.spec.dtype)
        with self._lock:
            for group, at in by_block(self.starts, frames):
                out[at] = self._group(feature, group)[frames[at] - self.starts[group]]
        return out

    def where(self, frame: int) -> tuple[Path, int]:
        """The data file that holds frame number ``frame``, and its row there."""
        group = int(np.searchsorted(self.starts, frame, side="right")) - 1
        number, _ = self._where[group]
        begin = next(g for g, (n, _) in enumerate(self._where) if n == number)
        return self._paths[number], frame - int(self.starts[begin])

    def clear(self) -> None:
        """Drop the decoded row groups and close the files."""
        with self._lock:
            self._kept.clear()
            self._bytes = 0
            self._open.clear()
            self._footers = 0

    def _file(self, number: int) -> Any:
        """Data file ``number``, open (the least recently read closed past ``_FOOTER_BYTES``)."""
        found = self._open.get(number)
        if found is not None:
            self._open.move_to_end(number)
            return found[0]
        parquet, _ = open_data_file(self._paths[number])
        if parquet.metadata.num_row_groups != self._groups[number]:
            raise FormatError(
                f"holds {parquet.metadata.num_row_groups} row groups; it held "
                f"{self._groups[number]} when the folder was opened",
                path=self._paths[number],
            )
        footer = int(parquet.metadata.serialized_size)
        self._open[number] = (parquet, footer)
        self._footers += footer
        while self._footers > _FOOTER_BYTES and len(self._open) > 1:
            self._footers -= self._open.popitem(last=False)[1][1]
        return parquet

    def _group(self, feature: Feature, group: int) -> np.ndarray:
        key = (feature.name, group)
        found = self._kept.get(key)
        if found is not None:
            self._kept.move_to_end(key)
            return found
        number, index = self._where[group]
        path = self._paths[number]
        try:
            table = self._file(number).read_row_group(
                index, columns=[feature.name], use_threads=False
            )
        except (OSError, ValueError, KeyError) as e:  # pyarrow's errors derive from these
            raise FormatError(
                f"cannot read its frames ({type(e).__name__}: {brief(str(e))})", path=path
            ) from e
        values = _values(feature, table.column(0), path).copy()  # not a view holding the table
        expected = self.starts[group + 1] - self.starts[group]
        if len(values) != expected:
            raise FormatError(
                f"row group {index} holds {len(values)} rows; expected {expected}", path=path
            )
        self._kept[key] = values
        self._bytes += values.nbytes
        while self._bytes > _CACHE_BYTES and len(self._kept) > 1:
            _, dropped = self._kept.popitem(last=False)
            self._bytes -= dropped.nbytes
        return values


def read_frames(root: Path, info: dict[str, Any], sidecar: dict[str, Any] | None) -> Frames:
    """Open every data file (its footer read).

    Raises:
        FormatError: A malformed feature, a video feature without PyAV or its files, a
            missing or damaged data file, a column of another type than declared, or frames
            out of ``index`` order.
    """
    features, skipped = _features(root, info, sidecar)
    paths = members(root, "data", ".parquet", "LeRobot")
    if not paths:
        raise FormatError("holds no data/*/*.parquet files", path=root)
    groups: list[list[int]] = []
    videos = [f for f in features if f.video]
    # episodes' ends, the frames' order, video times
    read = {"episode_index", "index", *(["timestamp"] if videos else [])}
    for path in paths:
        parquet, names = open_data_file(path)
        for name in [f.name for f in features if not f.video] + sorted(read):  # videos: MP4s
            if name not in names:
                raise FormatError(
                    "cannot read its frames: a declared feature is missing", path=path, key=name
                )
        metadata = parquet.metadata
        groups.append([metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)])
    cache = _GroupCache(groups, paths)
    return Frames(
        features, cache, skipped, VideoFrames(root, info, videos, cache) if videos else None
    )


def open_data_file(path: Path) -> tuple[Any, set[str]]:
    """A data file as a ``pyarrow.parquet.ParquetFile`` (its footer read), and its columns.

    Raises:
        FormatError: The file is missing or no Parquet file.
    """
    try:
        parquet = open_parquet(path)
        return parquet, set(parquet.schema_arrow.names)
    except (OSError, ValueError, KeyError) as e:  # pyarrow's errors derive from these
        raise FormatError(
            f"cannot read its frames ({type(e).__name__}: {brief(str(e))})", path=path
        ) from e


def _values(feature: Feature, column: Any, path: Path) -> np.ndarray:
    try:
        return column_values(feature, column, feature.name)
    except FormatError as e:
        raise FormatError(e.message, path=path, key=e.key) from e


def _features(
    root: Path, info: dict[str, Any], sidecar: dict[str, Any] | None
) -> tuple[list[Feature], list[str]]:
    """The features to read (all declared but the bookkeeping), and the string ones left out.

    ``next.done`` is read only from a folder LeRobot wrote (expcli's keeps both flags).
    """
    declared = info.get("features")
    if not isinstance(declared, dict):
        raise FormatError("lacks a 'features' object", path=root / INFO, key="features")
    specs: dict[str, TensorSpec] = {}
    if sidecar is not None:
        names = sidecar.get("features")
        header = sidecar_header(root, sidecar)
        if not isinstance(names, dict):
            raise FormatError("lacks a 'features' object", path=root / EXPCLI, key="features")
        specs = {str(names.get(s.name)): s for s in header_specs(header, root / EXPCLI)}
    derived = {*AUTO_FEATURES, *(("next.done",) if sidecar is not None else ())}
    features: list[Feature] = []
    skipped: list[str] = []
    for name, entry in declared.items():
        if name in derived and name not in specs:
            continue
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if not isinstance(dtype, str) or not (
            isinstance(shape, list) and shape and all(type(d) is int and d > 0 for d in shape)
        ):
            raise FormatError(
                f"malformed feature {brief(entry)}; expected "
                '{"dtype": str, "shape": [positive sizes], "names": ...}',
                path=root / INFO,
                key=f"features/{name}",
            )
        if math.prod(shape) > 1 << 28:
            raise FormatError(
                f"has shape {shape}: more than {1 << 28:,} values a frame",
                path=root / INFO,
                key=f"features/{name}",
            )
        if dtype == "video":
            require_decoder(root / INFO, f"features/{name}")
        if dtype == "string" and name not in specs:  # text has no tensor: left out, and said
            skipped.append(name)
            continue
        spec = specs.get(name) or _spec(root, name, dtype, shape, entry.get("names"))
        if math.prod(spec.shape or (1,)) != math.prod(shape):
            raise SchemaError(
                f"shape {list(spec.shape)} of {_sidecar_name(specs, name)} does not hold the "
                f"feature {name!r} of shape {shape} that meta/info.json declares",
                path=root / EXPCLI,
                key=name,
            )
        features.append(Feature(name, spec, image=dtype == "image", video=dtype == "video"))
    return features, skipped


def _sidecar_name(specs: dict[str, TensorSpec], name: str) -> str:
    """The tensor a sidecar maps to feature ``name`` (for messages)."""
    return repr(specs[name].name) if name in specs else "the tensor"


def _spec(root: Path, name: str, dtype: str, shape: list[int], names: Any) -> TensorSpec:
    if dtype in ("image", "video"):
        if len(shape) != 3:
            raise FormatError(
                f"is an image of shape {shape}; expected [height, width, channels]",
                path=root / INFO,
                key=f"features/{name}",
            )
        if isinstance(names, list) and names and names[0] == "channels":
            shape = [shape[1], shape[2], shape[0]]  # PNG frames decode height first
        return TensorSpec(name, "uint8", tuple(shape))
    if dtype not in SUPPORTED_DTYPES:
        raise FormatError(
            f"has dtype {dtype!r}; expected one of {sorted(SUPPORTED_DTYPES)} or image",
            path=root / INFO,
            key=f"features/{name}",
        )
    return TensorSpec(name, dtype, tuple(shape))


def _episode_cells(root: Path, count: int, size: int, envs: int) -> Cells:
    """The frame in each ``(t, n)`` cell (-1: none), from ``meta/episodes``, an episode at a time.

    Each episode holds frames ``[dataset_from_index, dataset_to_index)``, its frame ``k`` in
    row ``(expcli/first_row + k) % T`` of env column ``expcli/env``.

    Raises:
        FormatError: The episodes are unreadable, leave frames out, overlap, or fall outside
            the ``(T, N)`` cells.
    """
    files = members(root, "meta/episodes", ".parquet", "LeRobot")
    if not files:
        raise FormatError("holds no meta/episodes/*/*.parquet files", path=root)
    wanted = ["dataset_from_index", "dataset_to_index", "expcli/env", "expcli/first_row"]
    found: dict[str, list[np.ndarray]] = {name: [] for name in wanted}
    for path in files:
        try:
            table = read_columns(path, wanted, max_rows=count)
        except (OSError, ValueError, KeyError) as e:
            raise FormatError(
                f"cannot read the episodes ({type(e).__name__}: {brief(str(e))})", path=path
            ) from e
        for name in wanted:
            counter = Feature(name, TensorSpec(name, "int64", (1,)), image=False)
            found[name].append(_values(counter, table.column(name), path).reshape(-1))
    starts, stops, env, first = (np.concatenate(found[name]) for name in wanted)
    order = np.argsort(starts, kind="stable")
    starts, stops, env, first = starts[order], stops[order], env[order], first[order]
    bounds = np.append(starts, count)
    if (
        (len(starts) and starts[0] != 0)
        or not np.array_equal(stops, bounds[1:])
        or (len(env) and (env.min() < 0 or env.max() >= envs or first.min() < 0))
    ):
        raise FormatError(
            f"the episodes do not cover the {count} frames in order, each in one of {envs} env "
            "columns",
            path=files[0],
        )
    return Cells.of_runs(root, size, envs, starts, stops, env, first)


def sidecar_header(root: Path, sidecar: dict[str, Any]) -> dict[str, Any]:
    """The expcli header kept in ``meta/expcli.json``.

    Raises:
        FormatError: The sidecar lacks it.
    """
    header = sidecar.get("expcli")
    if not isinstance(header, dict):
        raise FormatError("lacks the 'expcli' header object", path=root / EXPCLI, key="expcli")
    return parse_header(json.dumps(header), root / EXPCLI, "expcli")
