"""How each tensor becomes a Parquet column and back, and the per-transition bookkeeping.

A tensor of one value a transition (feature shape ``()``, ``(1,)``...) is a plain column of
its dtype; a feature of at most
``LIST_MAX_BYTES`` bytes a nested ``fixed_size_list`` (polars ``Array(dtype, shape)``, HF
``List(..., length=n)``, duckdb ``T[]``); a larger one (frames) a ``fixed_size_binary`` of
its bytes in C order, about 7x faster to write and 10x faster to read than a list of
``uint8`` and smaller once compressed (``benchmarks``/README). Image-like uint8 frames
(``(H, W)``, ``(H, W, 1|3|4)``) are, unless the write plan says ``images: raw``, a PNG a
cell in HF ``datasets``' ``Image`` struct (``struct<bytes: binary, path: string>``,
``_png_cells``), which HF reads as images and arrays. Only pyarrow's plain types are
written and accepted: no extension type, no pandas metadata.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from expcli.errors import InvalidValueError
from expcli.formats._arrow_values import values_as
from expcli.formats._png_cells import decode_png, encode_png, image_like
from expcli.spec import ImagesForm, TensorSpec
from expcli.thread_pools import shared_pool

__all__ = [
    "BOOKKEEPING",
    "BOOKKEEPING_DTYPES",
    "LIST_MAX_BYTES",
    "VALID",
    "Carry",
    "Column",
    "column_for",
    "column_read",
    "flat_array",
    "from_arrow",
    "positions",
    "to_arrow",
    "transition_chunk",
]

LIST_MAX_BYTES = 4096
"""Largest feature (bytes per transition) stored as a fixed-size list; larger: binary."""

BOOKKEEPING = ("index", "episode_index", "frame_index", "env", "row", "timestamp")
"""The columns before the tensors: chronological number, episode and step, ``(t, n)``, and
the step's time in its episode (``frame_index / fps``, as LeRobot's ``timestamp``)."""

BOOKKEEPING_DTYPES = {
    name: np.dtype({"env": np.int32, "timestamp": np.float32}.get(name, np.int64))
    for name in BOOKKEEPING
}
"""Each bookkeeping column's dtype."""

SCALAR, LIST, BINARY, EMPTY, PNG = "scalar", "list", "binary", "empty", "png"
PNG_LEVEL = 6
"""zlib level of expcli's PNG cells, as Pillow's (and so HF's) default: Pong screens as a
file 1/560 of their npz, where level 1 gave 1/150 at 2-4x the write rate
(``benchmarks/parquet_frames.py``)."""
_CODERS = 2
"""Threads that deflate or inflate the PNG cells of a row group (zlib lets go of the GIL)."""
VALID = "valid"
"""Not a stored encoding: a nullable column read as its null bitmap, one bool a transition."""


@dataclass(frozen=True, slots=True)
class Column:
    """How one tensor is stored: its spec and its encoding (scalar, list, binary, empty).

    ``nullable``: its cells may be null (a next observation stored once: ``formats.frames``);
    read, a null cell holds any bytes and ``validity`` says which are null.
    """

    spec: TensorSpec
    encoding: str
    nullable: bool = False

    @property
    def key(self) -> str:
        """What a reader keeps its decoded groups under: the column's name, or its bitmap's."""
        return self.spec.name + ("\0valid" if self.encoding == VALID else "")

    def validity(self) -> Column:
        """The column read as its null bitmap: ``(n,)`` bools, True where a cell is stored."""
        return Column(TensorSpec(self.spec.name, "bool", ()), VALID, True)

    @property
    def row_bytes(self) -> int:
        """Bytes of one transition's feature."""
        return math.prod(self.spec.shape) * np.dtype(self.spec.dtype).itemsize

    def arrow_type(self) -> Any:
        """The Arrow type of the column (None for an empty feature, which has none)."""
        import pyarrow as pa

        if self.encoding == EMPTY:
            return None
        if self.encoding == BINARY:
            return pa.binary(self.row_bytes)
        if self.encoding == PNG:
            return pa.struct([("bytes", pa.binary()), ("path", pa.string())])
        kind: Any = pa.from_numpy_dtype(np.dtype(self.spec.dtype))
        for size in reversed(self.spec.shape if self.encoding == LIST else ()):
            kind = pa.list_(kind, size)
        return kind


def column_for(spec: TensorSpec, images: ImagesForm = ImagesForm.RAW) -> Column:
    """The encoding of a tensor of ``spec``, by its feature's size and kind.

    ``images``: ``PNG``: frames too large for a list that are ``image_like`` are PNG cells.
    """
    if math.prod(spec.shape) == 1:  # () and (1,) alike: one value, a plain column
        return Column(spec, SCALAR)
    if math.prod(spec.shape) == 0:
        return Column(spec, EMPTY)
    size = math.prod(spec.shape) * np.dtype(spec.dtype).itemsize
    if size <= LIST_MAX_BYTES:
        return Column(spec, LIST)
    png = images is ImagesForm.PNG and image_like(spec.shape, spec.dtype)
    return Column(spec, PNG if png else BINARY)


def column_read(spec: TensorSpec, said: object) -> Column:
    """The column of ``spec`` as a file's footer says it is stored (``said``).

    PNG where the footer says so and a writer could have chosen it; else ``column_for``'s
    (which the caller compares with ``said``).
    """
    png = column_for(spec, ImagesForm.PNG)
    return png if said == PNG and png.encoding == PNG else column_for(spec)


def to_arrow(column: Column, rows: np.ndarray, valid: np.ndarray | None = None) -> Any:
    """Transitions ``(n, *feature)`` as an Arrow array of ``column``'s type (values untouched).

    ``valid``: ``(n,)`` bools; the cells where it is False are null (Parquet stores no value
    for them).
    """
    import pyarrow as pa

    native = np.ascontiguousarray(rows, dtype=rows.dtype.newbyteorder("="))
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    if column.encoding == PNG:
        return _png_array(column, native, valid, bitmap)
    if column.encoding == BINARY:
        data = pa.py_buffer(native.reshape(-1).view(np.uint8))
        kind = column.arrow_type()
        return pa.FixedSizeBinaryArray.from_buffers(kind, len(native), [bitmap, data])
    array: Any = flat_array(native.reshape(-1))
    for size in reversed(column.spec.shape[1:] if column.encoding == LIST else ()):
        array = pa.FixedSizeListArray.from_arrays(array, size)
    if column.encoding != LIST:
        return array
    outer = pa.list_(array.type, column.spec.shape[0])
    return pa.Array.from_buffers(outer, len(native), [bitmap], children=[array])


def _png_array(column: Column, frames: np.ndarray, valid: np.ndarray | None, bitmap: Any) -> Any:
    """Frames as HF ``Image`` structs of PNG bytes (a null cell: no bytes, no path)."""
    import pyarrow as pa

    wanted = range(len(frames)) if valid is None else np.flatnonzero(valid).tolist()
    blobs = [b""] * len(frames)
    coded = shared_pool("expcli-png", _CODERS).map(
        lambda at: encode_png(frames[at], PNG_LEVEL), wanted
    )
    for at, blob in zip(wanted, coded, strict=True):
        blobs[at] = blob
    offsets = np.zeros(len(frames) + 1, np.int64)
    np.cumsum([len(b) for b in blobs], out=offsets[1:])
    if offsets[-1] >= 1 << 31:  # a group is 8 MB of frames: never, but for a row of 2 GiB
        raise InvalidValueError("a row group's PNG cells hold 2 GiB or more; expected less")
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(blobs))]
    data = pa.Array.from_buffers(pa.binary(), len(frames), buffers)
    paths = pa.nulls(len(frames), pa.string())
    return pa.Array.from_buffers(column.arrow_type(), len(frames), [bitmap], children=[data, paths])


def flat_array(values: np.ndarray) -> Any:
    """A 1-D C-contiguous native numpy array as an Arrow array on its memory (bools packed).

    Built from buffers: ``pa.array`` would import pandas (half a second) to look at it.
    """
    import pyarrow as pa

    kind = pa.from_numpy_dtype(values.dtype)
    if values.dtype == np.bool_:
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
    else:
        data = pa.py_buffer(values.view(np.uint8))
    return pa.Array.from_buffers(kind, len(values), [None, data])


def from_arrow(column: Column, array: Any) -> np.ndarray:
    """An Arrow array of ``column``'s type as transitions ``(n, *feature)`` of its dtype.

    Raises:
        InvalidValueError: The array holds nulls and the column is not ``nullable``, or
            nulls below its top level.
    """
    dtype = np.dtype(column.spec.dtype)
    count = len(array)
    if array.null_count and not column.nullable:
        raise InvalidValueError(f"{array.null_count} null values; expected none")
    if column.encoding == VALID:
        if not array.null_count:
            return np.ones(count, bool)
        bits = np.unpackbits(np.frombuffer(array.buffers()[0], np.uint8), bitorder="little")
        return bits[array.offset : array.offset + count].astype(bool)
    if column.encoding == PNG:
        return _png_frames(column, array)
    if column.encoding == BINARY:
        data = array.buffers()[1]
        start = array.offset * column.row_bytes
        flat = np.frombuffer(data, np.uint8, count * column.row_bytes, start)
        return flat.view(dtype).reshape(count, *column.spec.shape)  # on Arrow's buffer
    values = array
    for size in column.spec.shape if column.encoding == LIST else ():
        # ``values`` keeps the slots of null lists (``flatten`` would drop them)
        values = values.values.slice(values.offset * size, len(values) * size)
        if values.null_count and not column.nullable:
            raise InvalidValueError(f"{values.null_count} null values; expected none")
    return values_as(values, dtype).reshape(count, *column.spec.shape)


def _png_frames(column: Column, array: Any) -> np.ndarray:
    """HF ``Image`` structs of PNG bytes as ``(n, *feature)`` uint8 (a null cell: zeros).

    Raises:
        InvalidValueError: A stored cell holds no bytes, or a PNG ``decode_png`` refuses
            (the message names its row in the array).
    """
    count, shape = len(array), column.spec.shape
    out = np.zeros((count, *shape), np.uint8)
    data = array.field("bytes")  # on the struct's offset
    stored = np.ones(count, bool) if not array.null_count else from_arrow(column.validity(), array)
    if data.null_count and (~np.asarray(data.is_valid()) & stored).any():
        raise InvalidValueError("a cell holds no image bytes (a path alone?); expected a PNG")
    offsets = np.frombuffer(data.buffers()[1], np.int32, count + 1, data.offset * 4)
    values = data.buffers()[2]
    view = memoryview(values) if values is not None else memoryview(b"")

    def decode(at: int) -> None:
        try:
            decode_png(view[offsets[at] : offsets[at + 1]], shape, out[at])
        except InvalidValueError as e:
            raise InvalidValueError(f"row {at:,} of a row group {e}") from e

    wanted = np.flatnonzero(stored).tolist()
    if len(wanted) > 1:
        list(shared_pool("expcli-png", _CODERS).map(decode, wanted))
    else:
        for at in wanted:
            decode(at)
    return out


def positions(state_start: int, count: int, cells: int) -> np.ndarray:
    """Flat ``t * N + n`` cells of transitions ``0..count`` in chronological order."""
    return (state_start + np.arange(count, dtype=np.int64)) % max(cells, 1)


@dataclass(frozen=True, slots=True)
class Carry:
    """Where the bookkeeping of a folder's next Parquet shard goes on from its earlier shards.

    So that ``index``, ``row`` and ``episode_index`` count across shards (a duckdb or polars
    query over the shard glob groups whole episodes) and ``frame_index`` goes on within one.

    Attributes:
        index: The transition number of the shard's first row.
        row: The row (``t``) of the folder its first row is.
        next_episode: The number the next episode to start gets.
        episode: Per env column, the episode its last transition was in (-1: none yet).
        frame: Per env column, that transition's frame index.
        ended: Per env column, whether that transition ended its episode.
    """

    index: int
    row: int
    next_episode: int
    episode: np.ndarray
    frame: np.ndarray
    ended: np.ndarray

    @classmethod
    def start(cls, num_envs: int) -> Carry:
        """Before a folder's first shard: every env column starts an episode."""
        none = np.full(num_envs, -1, np.int64)
        return cls(0, 0, 0, none, none.copy(), np.ones(num_envs, bool))

    def next_shard(self, rows: int) -> Carry:
        """The carry for the shard after one of ``rows`` rows that ended in this carry."""
        return replace(self, row=self.row + rows)


def transition_chunk(
    flat: np.ndarray, done: np.ndarray, num_envs: int, carry: Carry
) -> tuple[dict[str, np.ndarray], Carry]:
    """The bookkeeping columns of consecutive stored transitions, and the carry after them.

    A file is written a chunk at a time, so none of this is ever as long as the data.

    Args:
        flat: The transitions' flat cells ``t * N + n``, in chronological order.
        done: Whether each of the first ``len(done)`` transitions ended its episode; those
            after it are unwritten cells stored as they are (episode and frame -1).
        num_envs: N.
        carry: Where the earlier chunks (or a folder's earlier shards) left off.

    Episodes are per env column, split after a done transition, numbered in the order
    they start; the episode a column's carry left open goes on.
    """
    count, valid = len(flat), len(done)
    env = flat % max(num_envs, 1)
    episode = np.full(count, -1, np.int64)
    frame = np.full(count, -1, np.int64)
    last_episode, last_frame, ended = carry.episode.copy(), carry.frame.copy(), carry.ended.copy()
    next_episode = carry.next_episode
    if valid:
        # Each column's transitions side by side, in time order within a column.
        order = np.argsort(env[:valid], kind="stable")
        column = env[:valid][order]
        first = np.ones(valid, bool)
        first[1:] = column[1:] != column[:-1]
        ends = done[order]
        begins = np.empty(valid, bool)  # in column order
        begins[1:] = ends[:-1]
        begins[first] = carry.ended[column[first]]
        in_time = np.empty(valid, bool)
        in_time[order] = begins
        numbers = next_episode + np.cumsum(in_time) - 1  # of each transition that begins one
        at = np.arange(valid)
        column_start = np.maximum.accumulate(np.where(first, at, 0))
        latest = np.maximum.accumulate(np.where(begins, at, -1))  # its column's latest begin
        own = latest >= column_start
        episodes = np.where(own, numbers[order[np.maximum(latest, 0)]], carry.episode[column])
        frames = np.where(own, at - latest, carry.frame[column] + 1 + at - column_start)
        episode[:valid][order] = episodes
        frame[:valid][order] = frames
        last = np.flatnonzero(np.append(first[1:], True))
        last_episode[column[last]] = episodes[last]
        last_frame[column[last]] = frames[last]
        ended[column[last]] = ends[last]
        next_episode += int(in_time.sum())
    book: dict[str, np.ndarray] = {
        "index": carry.index + np.arange(count, dtype=np.int64),
        "episode_index": episode,
        "frame_index": frame,
        "env": env.astype(np.int32),
        "row": np.asarray(carry.row + flat // max(num_envs, 1), np.int64),
    }
    after = Carry(carry.index + count, carry.row, next_episode, last_episode, last_frame, ended)
    return book, after
