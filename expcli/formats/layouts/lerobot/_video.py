"""Video features of LeRobot v3 folders: decoded with PyAV when read, encoded when asked.

LeRobot keeps a ``"dtype": "video"`` feature ``K`` in MP4 files
(``videos/K/chunk-CCC/file-FFF.mp4``, the ``video_path`` of ``meta/info.json``), the
episodes one after another in a file; each ``meta/episodes`` row says where its episode
lies (``videos/K/chunk_index``, ``videos/K/file_index``, ``videos/K/from_timestamp``).
Frame ``k`` of an episode is the video frame shown at ``from_timestamp + timestamp``
(``timestamp`` the frame's own, ``frame_index / fps``), as ``LeRobotDataset._query_videos``
asks its decoder: the frame whose presentation time lies within ``TOLERANCE_S`` of it
(LeRobot's default ``tolerance_s``), else the read fails. Frames are RGB (PyAV's
``rgb24``, what LeRobot's ``pyav`` backend converts to; its ``torchcodec`` backend converts
colours with its own code, not checked here) and kept uint8 ``(H, W, 3)`` as
expcli's image features are, where ``LeRobotDataset[i]`` gives float ``(3, H, W)`` in
[0, 1] (the same values divided by 255). They are what the codec stored: lossy when the
video was encoded lossy (LeRobot encodes AV1 at ``crf`` 30), which a read states.

Reads decode only what they ask for, in bounded memory: at most ``_CURSORS`` files are
open, each a decoder positioned in its file. A frame a little ahead of a decoder's position
is reached by decoding forward (the rows a conversion reads in order never seek again), one
further off or behind by seeking to the key frame before it; the frames read are kept,
about ``_CACHE_BYTES`` of them. A missing or damaged file, a frame time with no frame, or
frames of another size than the feature declares are a one-line ``FormatError``.

``VideoWriter`` writes uint8 ``(H, W, 3)`` tensors the same way (``--storage video``): AV1
(``libsvtav1``, ``crf`` 30, a key frame every 2 frames, ``yuv420p``) as LeRobot's
``encode_video_frames`` does, or H.264 where PyAV lacks SVT-AV1.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import string
import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from expcli.errors import FormatError
from expcli.formats._folder_members import member, members
from expcli.formats._guards import brief
from expcli.formats._parquet_open import read_columns
from expcli.formats.block_cache import BlockCache
from expcli.formats.layouts.lerobot._features import Feature
from expcli.spec import TensorSpec

__all__ = [
    "TOLERANCE_S",
    "VIDEO_PATH",
    "VideoFrames",
    "VideoWriter",
    "can_encode",
    "require_decoder",
]

VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
TOLERANCE_S = 1e-4
"""How far a frame's time may lie from the time asked (``LeRobotDataset``'s default)."""

_CACHE_BYTES = 32 << 20
_CURSORS = 4  # video files open at once, each with its decoder
_AHEAD_FRAMES = 32  # a frame at most this far ahead is decoded to, not sought
_EPISODE = Feature("episode_index", TensorSpec("episode_index", "int64", (1,)), image=False)
_TIMESTAMP = Feature("timestamp", TensorSpec("timestamp", "float32", (1,)), image=False)
_INDEX_FIELD = re.compile(r"\d{0,2}d?")
_VIDEO_FILE_MB = 200  # a new video file is started past this size, as LeRobot does
_LONGEST_S = 1e9  # a frame time past this (31 years) is damage, refused before a seek


def _check_file(path: Path, key: str) -> None:
    """Refuse a video file that is missing or no regular file (a pipe would block a read)."""
    try:
        regular = path.is_file()
    except OSError:  # a name too long, say
        regular = False
    if not regular:
        raise FormatError(
            "is missing or no regular file: a video file meta/episodes names", path=path, key=key
        )


class _Rows(Protocol):
    def take(self, feature: Feature, frames: np.ndarray) -> np.ndarray: ...


def _av(path: Path, key: str) -> Any:
    """PyAV, or a one-line refusal that says how to install it."""
    try:
        import av
    except ImportError as e:
        raise FormatError(
            "is a video feature (frames in MP4 files): decoding it needs PyAV, which is not "
            "installed; install it with: pip install 'expcli[video]'",
            path=path,
            key=key,
        ) from e
    return av


def require_decoder(path: Path, key: str) -> None:
    """Refuse a video feature in one line when PyAV is not installed.

    Raises:
        FormatError: PyAV cannot be imported.
    """
    _av(path, key)


def _video_file(root: Path, template: Any, key: str, chunk: int, number: int) -> Path:
    """The file ``template`` (``info.json``'s ``video_path``) names, checked to lie in ``root``.

    Raises:
        FormatError: A template with other fields than LeRobot's, or a path out of ``root``.
    """
    where = root / "meta" / "info.json"
    fields = {"video_key", "chunk_index", "file_index"}
    try:
        parsed = list(string.Formatter().parse(template)) if isinstance(template, str) else None
    except ValueError:
        parsed = None
    if parsed is None or any(
        name is not None
        and (
            name not in fields
            or conversion
            or not (_INDEX_FIELD.fullmatch(spec or "") and (name != "video_key" or not spec))
        )
        for _, name, spec, conversion in parsed
    ):
        raise FormatError(
            f"video_path {brief(template)}; expected a path such as {VIDEO_PATH!r}",
            path=where,
            key="video_path",
        )
    relative = Path(template.format(video_key=key, chunk_index=chunk, file_index=number))
    if relative.is_absolute() or ".." in relative.parts:
        raise FormatError(f"video_path names {brief(str(relative))}, out of the folder", path=where)
    try:
        return member(root, root / relative, "LeRobot")
    except FileNotFoundError:
        return root / relative  # said by _check_file


class VideoFrames:
    """The frames of a folder's video features, decoded when asked (``take``).

    Args:
        root: The folder.
        info: Its ``meta/info.json``.
        features: Its video features.
        rows: Reads the frames' ``episode_index`` and ``timestamp`` from the data files.

    Raises:
        FormatError: PyAV is missing, a feature is not ``[H, W, 3]``, or ``meta/episodes``
            lacks a feature's columns or names a file that is not there.
    """

    def __init__(
        self, root: Path, info: dict[str, Any], features: list[Feature], rows: _Rows
    ) -> None:
        for feature in features:
            shape = feature.spec.shape
            if len(shape) != 3 or shape[2] != 3:
                raise FormatError(
                    f"is a video of shape {list(shape)}; expected [height, width, 3] "
                    "(its frames decode as RGB)",
                    path=root / "meta" / "info.json",
                    key=f"features/{feature.name}",
                )
        self._av = _av(root / "meta" / "info.json", f"features/{features[0].name}")
        self._root = root
        self._rows = rows
        self._episodes, columns = _episode_columns(root, [f.name for f in features])
        template = info.get("video_path")
        self._files: dict[str, list[Path]] = {}
        self._file_of: dict[str, np.ndarray] = {}
        self._start: dict[str, np.ndarray] = {}
        for feature in features:
            name = feature.name
            places = np.stack(
                [columns[f"videos/{name}/{c}"] for c in ("chunk_index", "file_index")], axis=1
            )
            pairs, where = np.unique(places, axis=0, return_inverse=True)
            self._file_of[name] = where.reshape(-1)  # each episode's file, numbered here
            self._files[name] = [
                _video_file(root, template, name, int(c), int(n)) for c, n in pairs
            ]
            for path in self._files[name]:
                _check_file(path, name)
            self._start[name] = columns[f"videos/{name}/from_timestamp"]
        self._cursors: list[_Cursor] = []
        self._kept = BlockCache(_CACHE_BYTES)  # frames read, for reads that come back to them
        self._lock = threading.Lock()

    def take(self, feature: Feature, frames: np.ndarray) -> np.ndarray:
        """The decoded frames ``(len(frames), H, W, 3)`` numbered ``frames``.

        Raises:
            FormatError: A frame's episode has no row in ``meta/episodes``, its file is
                damaged, holds no frame at its time, or frames of another size.
        """
        wanted, back = np.unique(frames, return_inverse=True)
        episodes = self._rows.take(_EPISODE, wanted).reshape(-1)
        stamps = self._rows.take(_TIMESTAMP, wanted).reshape(-1).astype(np.float64)
        at = np.searchsorted(self._episodes, episodes).clip(0, max(0, len(self._episodes) - 1))
        if not len(self._episodes) or (self._episodes[at] != episodes).any():
            missing = episodes[self._episodes[at] != episodes] if len(self._episodes) else episodes
            raise FormatError(
                f"has no row for episode {int(missing[0])}, which frames of the data name",
                path=self._root / "meta" / "episodes",
                key=feature.name,
            )
        files = self._file_of[feature.name][at]
        times = self._start[feature.name][at] + stamps
        if not (np.abs(times) < _LONGEST_S).all():  # NaN too
            bad = times[~(np.abs(times) < _LONGEST_S)][0]
            raise FormatError(
                f"a frame's time is {bad} s: from_timestamp + timestamp is no time in a video",
                path=self._root / "data",
                key="timestamp",
            )
        out = np.empty((len(wanted), *feature.spec.shape), np.uint8)
        with self._lock:
            for i in np.lexsort((times, files)):
                out[i] = self._frame(feature, int(files[i]), float(times[i]))
        return out[back.reshape(-1)]

    def close(self) -> None:
        """Close the video files and drop the frames kept."""
        with self._lock:
            for cursor in self._cursors:
                cursor.close()
            self._cursors.clear()
            self._kept.clear()

    def _frame(self, feature: Feature, number: int, time: float) -> np.ndarray:
        path = self._files[feature.name][number]

        def decode() -> np.ndarray:
            frame = self._cursor(path, feature, time).frame_at(time)
            if frame is None:
                raise FormatError(
                    f"holds no frame within {TOLERANCE_S} s of {time:.6f} s, where a frame of "
                    "the feature lies (from_timestamp + timestamp)",
                    path=path,
                    key=feature.name,
                )
            return frame

        return self._kept.get((feature.name, number, time), decode)

    def _cursor(self, path: Path, feature: Feature, time: float) -> _Cursor:
        """A decoder of ``path`` that reaches ``time`` by decoding forward, else one sought."""
        mine = [c for c in self._cursors if c.path == path]
        ready = [c for c in mine if c.reaches(time)]
        if ready:
            cursor = max(ready, key=lambda c: c.position)
        elif mine and len(self._cursors) >= _CURSORS:
            cursor = mine[0]
            cursor.seek(time)
        else:
            if len(self._cursors) >= _CURSORS:
                self._cursors.pop(0).close()
            cursor = _Cursor(self._av, path, feature)
            self._cursors.append(cursor)
            if not cursor.reaches(time):
                cursor.seek(time)
        self._cursors.remove(cursor)
        self._cursors.append(cursor)  # the most recently used last
        return cursor


class _Cursor:
    """One video file open, its decoder at a place: the frames from ``position`` on come next."""

    def __init__(self, av: Any, path: Path, feature: Feature) -> None:
        self.path = path
        self._av = av
        self._feature = feature
        self._shape = feature.spec.shape
        self._container = self._call(av.open, str(path), "r")
        try:
            streams = self._container.streams.video
            if not streams or streams[0].codec_context is None:
                raise FormatError(
                    "holds no video stream it can decode", path=path, key=feature.name
                )
            self._stream = streams[0]
            size = (self._stream.codec_context.height, self._stream.codec_context.width)
            if size != self._shape[:2]:
                raise FormatError(
                    f"holds frames of {size[0]}x{size[1]} pixels; the feature declares "
                    f"{list(self._shape)}",
                    path=path,
                    key=feature.name,
                )
            self._base = Fraction(self._stream.time_base)
            rate = self._stream.average_rate or self._stream.guessed_rate or 1
            self._ahead = _AHEAD_FRAMES / float(rate)
        except BaseException:
            self._container.close()
            raise
        self._decoded = self._call(self._container.decode, self._stream)
        self._pending: tuple[float, Any] | None = None
        self.position = -math.inf  # the start: frames from the first on come next

    def reaches(self, time: float) -> bool:
        """Whether ``time`` lies at or a little after the decoder's place."""
        if self.position == -math.inf:
            return time <= self._ahead
        return self.position - TOLERANCE_S <= time <= self.position + self._ahead

    def seek(self, time: float) -> None:
        """Put the decoder at the key frame at or before ``time``."""
        offset = math.floor((Fraction(time) - Fraction(TOLERANCE_S)) / self._base)
        self._call(  # an offset past int64 is an OverflowError: told as the file's
            self._container.seek, offset, backward=True, any_frame=False, stream=self._stream
        )
        self._decoded = self._call(self._container.decode, self._stream)
        self._pending = None
        self.position = time

    def frame_at(self, time: float) -> np.ndarray | None:
        """The frame within ``TOLERANCE_S`` of ``time`` (uint8 RGB), or None when there is none.

        Decodes forward from the decoder's place; the first frame past ``time`` stays next.
        """
        while True:
            if self._pending is None:
                frame = self._call(next, self._decoded, None)
                if frame is None:
                    return None
                if frame.pts is None:
                    continue
                self._pending = (float(frame.pts * self._base), frame)
            shown, frame = self._pending
            self.position = shown
            if shown <= time - TOLERANCE_S:
                self._pending = None
                continue
            if shown >= time + TOLERANCE_S:
                return None
            if (frame.height, frame.width) != self._shape[:2]:
                raise FormatError(
                    f"holds a frame of {frame.height}x{frame.width} pixels at {shown:.6f} s; "
                    f"the feature declares {list(self._shape)}",
                    path=self.path,
                    key=self._feature.name,
                )
            array: np.ndarray = self._call(frame.to_ndarray, format="rgb24")
            return array

    def close(self) -> None:
        """Close the file."""
        self._container.close()

    def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        """``function(*args, **kwargs)``, PyAV's errors a one-line ``FormatError``."""
        try:
            return function(*args, **kwargs)
        except (self._av.FFmpegError, OSError, ValueError, EOFError, OverflowError) as e:
            raise FormatError(
                f"cannot decode its frames ({type(e).__name__}: {brief(str(e))})",
                path=self.path,
                key=self._feature.name,
            ) from e


def _episode_columns(root: Path, names: list[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The episode numbers of ``meta/episodes`` (sorted) and each video column, in their order.

    Raises:
        FormatError: The episodes are unreadable, lack a column, repeat an episode, or hold a
            negative index or a time that is not a finite number of seconds.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from expcli.formats.layouts.lerobot._features import feature_values

    files = members(root, "meta/episodes", ".parquet", "LeRobot")
    if not files:
        raise FormatError("holds no meta/episodes/*/*.parquet files", path=root)
    wanted = ["episode_index"]
    for name in names:
        wanted += [f"videos/{name}/{c}" for c in ("chunk_index", "file_index", "from_timestamp")]
    found: dict[str, list[np.ndarray]] = {column: [] for column in wanted}
    for path in files:
        try:
            table = read_columns(path, wanted)
        except (OSError, ValueError, KeyError) as e:  # pyarrow's errors derive from these
            raise FormatError(
                f"cannot read the episodes' video columns ({type(e).__name__}: {brief(str(e))})",
                path=path,
            ) from e
        for column in wanted:
            values = table.column(column)
            if column.endswith("_timestamp"):
                if not pa.types.is_floating(values.type) or values.null_count:
                    raise FormatError(f"is {values.type}; expected seconds", path=path, key=column)
                seconds = pc.cast(values, pa.float64()).to_numpy()
                if not np.isfinite(seconds).all() or (seconds < 0).any():
                    raise FormatError("holds a time that is not >= 0 s", path=path, key=column)
                found[column].append(seconds)
                continue
            counter = Feature(column, TensorSpec(column, "int64", (1,)), image=False)
            try:
                numbers = feature_values(counter, values, column).reshape(-1)
            except FormatError as e:
                raise FormatError(e.message, path=path, key=e.key) from e
            if len(numbers) and numbers.min() < 0:
                raise FormatError("holds a negative index", path=path, key=column)
            found[column].append(numbers)
    merged = {column: np.concatenate(parts) for column, parts in found.items()}
    order = np.argsort(merged["episode_index"], kind="stable")
    merged = {column: values[order] for column, values in merged.items()}
    episodes = merged.pop("episode_index")
    if len(episodes) > 1 and (episodes[1:] == episodes[:-1]).any():
        raise FormatError("lists an episode twice", path=files[0], key="episode_index")
    return episodes, merged


def can_encode(spec: TensorSpec) -> bool:
    """Whether ``--storage video`` stores a tensor as video: uint8 ``(H, W, 3)``, H and W >= 4.

    SVT-AV1 takes frames from 4x4 pixels; H.264 in ``yuv420p`` (where SVT-AV1 is missing)
    takes even sizes only.
    """
    shape = spec.shape
    if spec.dtype != "uint8" or len(shape) != 3 or shape[2] != 3 or min(shape[:2]) < 4:
        return False
    return _codec() == "libsvtav1" or (shape[0] % 2 == 0 and shape[1] % 2 == 0)


def _codec() -> str:
    """LeRobot's codec, SVT-AV1, when PyAV has it, else H.264."""
    import av

    return "libsvtav1" if "libsvtav1" in av.codecs_available else "libx264"


class VideoWriter:
    """Writes video features as LeRobot does: a file per feature, episodes one after another.

    Args:
        root: The folder being written.
        features: The video features.
        fps: Frames per second (a frame's time in its file is its number over ``fps``).
        chunks_size: Files per chunk folder.
    """

    def __init__(self, root: Path, features: list[Feature], fps: int, chunks_size: int) -> None:
        import av

        self._av: Any = av  # PyAV's stubs differ between versions: used untyped
        self._root = root
        self._fps = fps
        self._chunks_size = chunks_size
        self.codec = _codec()
        self._open: dict[str, tuple[Any, Any, Path]] = {}
        self._files = dict.fromkeys((f.name for f in features), 0)
        self._frames = dict.fromkeys(self._files, 0)
        self._begun: dict[str, float] = {}
        self._features = {f.name: f for f in features}
        # SVT-AV1 prints a banner per encoder unless told otherwise, and reads this once opened
        os.environ.setdefault("SVT_LOG", "1")

    def start_episode(self) -> None:
        """Begin an episode in each feature's file (a new file past ``_VIDEO_FILE_MB``)."""
        for name in self._features:
            found = self._open.get(name)  # made once the encoder hands out its first packet
            if (
                found is not None
                and found[2].is_file()
                and found[2].stat().st_size >= (_VIDEO_FILE_MB << 20)
            ):
                self._close(name)
            if name not in self._open:
                self._start_file(name)
            self._begun[name] = self._frames[name] / self._fps

    def write(self, feature: Feature, frames: np.ndarray) -> None:
        """Encode frames ``(n, H, W, 3)`` uint8 of ``feature``, after those written."""
        container, stream, _ = self._open[feature.name]
        with _own_scheduling():
            for frame in frames:
                picture = self._av.VideoFrame.from_ndarray(
                    np.ascontiguousarray(frame), format="rgb24"
                )
                picture.pts = self._frames[feature.name]
                picture.time_base = Fraction(1, self._fps)
                container.mux(stream.encode(picture))
                self._frames[feature.name] += 1

    def episode_columns(self) -> dict[str, Any]:
        """The ``meta/episodes`` video columns of the episode just written."""
        row: dict[str, Any] = {}
        for name in self._features:
            chunk, number = divmod(self._files[name] - 1, self._chunks_size)
            row[f"videos/{name}/chunk_index"] = chunk
            row[f"videos/{name}/file_index"] = number
            row[f"videos/{name}/from_timestamp"] = self._begun[name]
            row[f"videos/{name}/to_timestamp"] = self._frames[name] / self._fps
        return row

    def close(self) -> None:
        """Flush the encoders and close the files."""
        for name in list(self._open):
            self._close(name)

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if error is None:
            self.close()
            return
        for name in list(self._open):  # the write failed: its error is the one told
            with contextlib.suppress(Exception):
                self._close(name)

    def infos(self) -> dict[str, dict[str, Any]]:
        """Each feature's ``info`` in ``meta/info.json`` (as LeRobot's ``get_video_info``)."""
        codec = "av1" if self.codec == "libsvtav1" else "h264"
        return {
            name: {
                "video.height": feature.spec.shape[0],
                "video.width": feature.spec.shape[1],
                "video.codec": codec,
                "video.pix_fmt": "yuv420p",
                "video.is_depth_map": False,
                "video.fps": self._fps,
                "video.channels": 3,
                "has_audio": False,
            }
            for name, feature in self._features.items()
        }

    def _start_file(self, name: str) -> None:
        chunk, number = divmod(self._files[name], self._chunks_size)
        path = self._root / VIDEO_PATH.format(video_key=name, chunk_index=chunk, file_index=number)
        path.parent.mkdir(parents=True, exist_ok=True)
        options = {"g": "2", "crf": "30"} | ({"preset": "12"} if self.codec == "libsvtav1" else {})
        container = self._av.open(str(path), "w")
        stream = container.add_stream(self.codec, rate=self._fps, options=options)
        height, width = self._features[name].spec.shape[:2]
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = Fraction(1, self._fps)
        self._open[name] = (container, stream, path)
        self._files[name] += 1
        self._frames[name] = 0

    def _close(self, name: str) -> None:
        container, stream, _ = self._open.pop(name)
        with _own_scheduling():
            container.mux(stream.encode(None))
            container.close()


@contextlib.contextmanager
def _own_scheduling() -> Iterator[None]:
    """Put the calling thread's scheduling policy back after calls into an encoder.

    SVT-AV1 (libSvtAv1Enc 4.1, in PyAV 18's wheels), run by root, makes the thread that
    opens an encoder SCHED_FIFO priority 99: the whole process stayed so after a write,
    and the processes it started inherited it (a busy env then held a core for good).
    """
    if not hasattr(os, "sched_getscheduler"):
        yield
        return
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        yield
    finally:
        if os.sched_getscheduler(0) != policy:
            os.sched_setscheduler(0, policy, param)
