"""Parquet ``.parquet`` files: one row per transition, readable by pyarrow, polars, duckdb, HF.

Rows go episode by episode (``expcli-parquet/2``, ``"order": "episodes"``): each episode's
transitions one after another, ``frame_index`` 0, 1, 2..., episodes in the order they start
(``_parquet_episodes``), so that ``ds[a:b]`` slices an episode and a filter on
``episode_index`` reads one run. ``RowOrder.STEPS`` writes them in chronological (write)
order, oldest first, time after time (``expcli-parquet/1``, read as before). The columns:
``index`` (the transition's chronological number), ``episode_index`` and ``frame_index``
(derived: per env column, an episode ends at a terminated or truncated step; numbered as
they start), ``env`` and ``row`` (where it sits in the ``(T, N)`` tensors), ``timestamp``
(``frame_index / fps``: the env's ``render_fps`` where the dataset records one, else 1, as
the footer's ``fps_from`` says), then one column per tensor under its own name
(``observations``, ``infos/x``, ``observations/pos``...), encoded as ``_parquet_columns``
says: scalars, nested fixed-size lists, or fixed-size binary for large features such as
frames. Rows never written are left out when they hold only zero bytes (they read back as
zeros), else stored last with episode and frame index -1.

The footer's key-value metadata holds the whole expcli header under ``expcli`` (the JSON
that ``.npz`` and ``.h5`` files carry: circular state, tensor specs, env, spaces) and the
encoding of each column under ``expcli.parquet``, so a file alone says what it is. Floats
are written plain (no dictionary, which could merge NaN payloads), zstd by default.

Next observations stored once (``formats.frames``, schema ``expcli/2``): a next-observation
column is null where its cell equals, byte for byte, the ``observations`` of the same ``env``
one ``row`` on (row 0 after the last; never, in a shard, for its last row: ``"wrap": false``);
the null bitmap is the index, and Parquet stores no value for a null. expcli fills the nulls
on reading, lazily; readers other than expcli (polars, duckdb, HF ``datasets``) see them.

pyarrow (``expcli[parquet]``, at least 14.0.1: CVE-2023-47248) is imported only when a
Parquet file is read or written. Reading trusts nothing in the file to build objects: the
columns must have exactly the plain Arrow types the header's specs give.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import (
    ExpcliError,
    FormatError,
    InvalidValueError,
    SchemaError,
)
from expcli.files.atomic import atomic_path
from expcli.formats._arrow_values import values_as
from expcli.formats._error_summary import error_summary, unreadable_group
from expcli.formats._guards import (
    MAX_METADATA_BYTES,
    check_memory,
    check_source,
    load_json,
    regular_size,
)
from expcli.formats._hf_features import HF_KEY, hf_metadata
from expcli.formats._manifest import file_crc32
from expcli.formats._parquet_columns import (
    BOOKKEEPING,
    BOOKKEEPING_DTYPES,
    EMPTY,
    PNG,
    VALID,
    Carry,
    Column,
    column_for,
    column_read,
    flat_array,
    from_arrow,
    positions,
    to_arrow,
    transition_chunk,
)
from expcli.formats._parquet_episode_groups import RowGroup, Shape, episode_groups
from expcli.formats._parquet_episode_read import EpisodeFile
from expcli.formats._parquet_episodes import timestamps
from expcli.formats._parquet_open import (
    SecondHandle,
    file_identity,
    open_parquet,
    pyarrow_parquet,
    refuse_extension_types,
)
from expcli.formats._parquet_set import open_files
from expcli.formats._png_gather import PngCells, png_rows
from expcli.formats._table_images import check_group_images
from expcli.formats.block_cache import BlockCache, CachedBlocks
from expcli.formats.builtin.parquet_file import PARQUET_FILE
from expcli.formats.column_roles import ColumnRoles
from expcli.formats.dataset import Dataset, read_whole
from expcli.formats.foreign_table import open_table
from expcli.formats.frames import ByCells, StoredOnce, find_cells, frame_pairs, kept_cells
from expcli.formats.header import dataset_from_header, encode_header, header_specs, parse_header
from expcli.formats.lazy import SLICE_BYTES, LazyRows
from expcli.formats.parquet_sources import is_pattern, table_files
from expcli.formats.row_gather import flat_rows, gather_flat
from expcli.formats.rows import WritePlan, WrittenShard
from expcli.spec import FRAMES_SCHEMA, FramesForm, ImagesForm, TensorSpec, done_flags

__all__ = [
    "EPISODES_LAYOUT",
    "LAYOUT",
    "RowOrder",
    "open_lazy",
    "read",
    "pyarrow_parquet",
    "refuse_extension_types",
    "shard_carry",
    "write",
    "write_shard",
]

LAYOUT = "expcli-parquet/1"
"""The value of ``layout`` in the ``expcli.parquet`` metadata of a file in time order."""
EPISODES_LAYOUT = "expcli-parquet/2"
"""Its value in a file episode by episode (``"order": "episodes"``): an expcli that reads
only ``/1`` refuses it rather than misreads it."""


class RowOrder(StrEnum):
    """The order of a file's rows.

    ``episodes``: each episode's transitions one after another, ``frame_index`` 0, 1, 2...,
    episodes in the order they start (what LeRobot, HF ``datasets`` and duckdb users slice
    and filter); ``steps``: time after time, env after env (step-major, the ``(T, N)``
    tensors' own order).
    """

    EPISODES = "episodes"
    STEPS = "steps"


HEADER_KEY, LAYOUT_KEY = b"expcli", b"expcli.parquet"
ENCODED_BYTES = 64 << 20
"""PNG bytes of row groups kept for random gathers (Pong: about 40,000 frames)."""
NULLS = "nulls"
"""The ``form`` of a next-observation column null where it is the next row's observation."""
GROUP_BYTES = 8 << 20
"""Target bytes of one row group before compression. A random draw decodes whole groups:
at 8 MB, 16 steps of 84x84 frames from 8 envs decode about 74 steps of a frame tensor,
where 32 MB groups decoded 296 (1.7 GiB of frames through a 512 MiB block cache: slices
2.3x faster, a scan 1.3x slower; ``benchmarks/_sampling_blocks.py --group-mib 32``). A
writer holds a few copies of one (the rows gathered, their Arrow arrays, the bookkeeping),
a reader one decoded group a tensor: well under 200 MB at peak either way, whatever the
file's size (benchmarks/parquet_scale)."""


def write(dataset: Dataset, plan: WritePlan, *, order: RowOrder = RowOrder.EPISODES) -> None:
    """Write ``dataset`` as one Parquet file, a row group of about 8 MB at a time.

    Args:
        dataset: What to write; tensors read lazily are read a row group at a time.
        plan: The file (``target``), whether it may be replaced, its compression (one of
            ``ParquetFile.compressions``, checked by the registry; None: the first) and
            ``frames``: ``FramesForm.ONCE``: a next observation equal to the next row's
            observation of its env column is null (``formats.frames``; the header's ``frames`` names
            such columns ``{"form": "nulls"}``). Readers other than expcli (polars, duckdb,
            HF ``datasets``) see those nulls: the value is the ``observations`` of the row of
            the same ``env`` whose ``row`` is one more (row 0 after the last, unless the
            ``frames`` entry says ``"wrap": false``).
        order: The rows' order (``RowOrder``): episode by episode (read in time order
            twice, the first time its flags alone; episodes under way kept in a window of
            the latest transitions where it fits in ``_parquet_spool.RAM_BYTES``, else in
            a spool, on disk beside the target past that), or time after time.

    Raises:
        SchemaError: A tensor is named as a bookkeeping column, or the metadata is not JSON.
        OutputExistsError, OutputError: As ``atomic_path``.
    """
    codec = plan.compression or PARQUET_FILE.compressions[0]
    carry = Carry.start(dataset.num_envs)
    where = (plan.target, plan.overwrite)
    _write(dataset, *where, codec, carry, plan.frames, True, plan.images, RowOrder(order))


def write_shard(
    dataset: Dataset,
    path: Path,
    *,
    compression: str,
    carry: object | None = None,
    frames: FramesForm = FramesForm.FULL,
    images: ImagesForm = ImagesForm.PNG,
    order: RowOrder = RowOrder.EPISODES,
) -> WrittenShard:
    """``write`` a folder's shard (full rows), its bookkeeping going on from ``carry``.

    ``carry``: what the shard before handed on (a ``Carry``; None: the first shard).
    ``frames``: as ``write``'s, over the shard's rows alone: its last row is kept.
    ``images``: as the write plan's (``_parquet_columns``).
    ``order``: as ``write``'s, within the shard: an episode under way at its end goes on
    at the start of the next shard (its ``frame_index`` going on).

    Returns:
        Its size and CRC-32 (read back), whether some next observations are stored once
        (the file's schema is ``FRAMES_SCHEMA``), and the carry after its rows (for the
        folder's next shard).
    """
    start = carry if isinstance(carry, Carry) else Carry.start(dataset.num_envs)
    forms = (frames, False, images, RowOrder(order))
    after, once = _write(dataset, path, True, compression, start, *forms)
    size, crc = regular_size(path), file_crc32(path)
    return WrittenShard(size, crc, once, after.next_shard(dataset.memory_size))


def _null_cells(dataset: Dataset, frames: FramesForm, wrap: bool) -> dict[str, np.ndarray]:
    """The kept cells of each next-observation column stored once.

    A column whose every cell differs is left whole.
    """
    if frames is not FramesForm.ONCE:
        return {}
    kept = {}
    for name, source in frame_pairs(dataset.tensors).items():
        every = dataset.memory_size * dataset.num_envs
        cells = kept_cells(dataset.tensors[name], dataset.tensors[source], wrap, every - 1)
        if cells is not None:
            kept[name] = cells
    return kept


def _frames_object(
    kept: dict[str, np.ndarray], wrap: bool, start: int, count: int, cells: int
) -> dict[str, Any]:
    """The header's ``frames`` object: each column's ``kept``, its cells the file stores.

    The file stores the ``count`` cells from flat index ``start`` on (circularly); a kept
    cell of the rows left out as never written is in no row, so not counted.
    """
    return {
        name: {"form": NULLS, "kept": int(((at - start) % cells < count).sum()), "wrap": wrap}
        for name, at in kept.items()
    }


def _write(
    dataset: Dataset,
    path: Path,
    overwrite: bool,
    compression: str,
    carry: Carry,
    frames: FramesForm = FramesForm.FULL,
    wrap: bool = True,
    images: ImagesForm = ImagesForm.PNG,
    order: RowOrder = RowOrder.EPISODES,
) -> tuple[Carry, bool]:
    """Write the file, a row group at a time, its rows in ``order``.

    Returns the carry after its rows, and whether some next observations are null where
    derived.
    """
    pq = pyarrow_parquet()
    import pyarrow as pa

    codec = compression.lower()
    kept = _null_cells(dataset, FramesForm(frames), wrap)
    columns = [column_for(spec, ImagesForm(images)) for spec in dataset.specs()]
    for column in columns:
        if column.spec.name in BOOKKEEPING:
            raise SchemaError(
                f"a tensor may not be named as a Parquet bookkeeping column "
                f"({', '.join(BOOKKEEPING)})",
                path=path,
                key=column.spec.name,
            )
    envs, cells = dataset.num_envs, dataset.memory_size * dataset.num_envs
    valid = min(len(dataset), cells)
    state = dataset.state
    start = (state.memory_index * envs + state.env_index) % max(cells, 1) if state.filled else 0
    count = valid if valid == cells or _unwritten_zero(dataset, valid) else cells
    header = dataset.header()
    if kept:
        forms = _frames_object(kept, wrap, start, count, cells)
        header = {**header, "schema": FRAMES_SCHEMA, "frames": forms}
    text = encode_header(header, path)
    fps, fps_from = _fps(dataset.metadata)
    layout = {
        "layout": LAYOUT if order is RowOrder.STEPS else EPISODES_LAYOUT,
        "order": str(order),
        "rows": count,
        "first_row": carry.row,
        "fps": fps,
        "fps_from": fps_from,
        "columns": {c.spec.name: c.encoding for c in columns},
    }
    stored = [c for c in columns if c.encoding != EMPTY]
    schema = pa.schema(
        [pa.field(name, pa.from_numpy_dtype(BOOKKEEPING_DTYPES[name])) for name in BOOKKEEPING]
        + [pa.field(c.spec.name, c.arrow_type()) for c in stored],
        metadata={HEADER_KEY: text.encode(), LAYOUT_KEY: json.dumps(layout).encode()},
    )
    pngs = {c.spec.name for c in stored if c.encoding == PNG}
    schema = schema.with_metadata({**schema.metadata, HF_KEY: hf_metadata(schema, pngs)})
    row_bytes = sum(c.row_bytes for c in stored) + 40
    # Whole rows of the (T, N) tensors a group, so that each group reads rows the last one
    # did not and the source's read-ahead of the next slice is the one asked for next.
    rows_per_group = max(1, min(1 << 20, GROUP_BYTES // row_bytes) // max(envs, 1))
    group = rows_per_group * max(envs, 1)
    head = (-start) % max(envs, 1)  # cells before the first row boundary
    firsts = sorted(f for f in {0, *range(head, count, group)} if f < count)
    chunks = list(zip(firsts, [*firsts[1:], count] if firsts else [], strict=True))
    with (
        atomic_path(path, overwrite=overwrite) as tmp,
        pq.ParquetWriter(
            str(tmp),
            schema,
            compression=codec,
            use_dictionary=False,
            # min/max of frames' bytes filter nothing and cost a third of a frame's write
            write_statistics=[
                f.name
                for f in schema
                if not pa.types.is_fixed_size_binary(f.type) and f.name not in pngs
            ],
            write_page_checksum=True,
        ) as writer,
    ):
        after = [carry]
        groups: Iterator[RowGroup]
        if order is RowOrder.STEPS:
            where = (start, cells, valid)
            groups = _step_groups(dataset, stored, where, chunks, (after, fps))
        else:
            shape = Shape(start, cells, envs, count, valid, chunks, group)
            read = functools.partial(_cells, envs=envs)
            groups, after[0] = episode_groups(
                dataset.tensors, stored, shape, carry, fps, (read, _done, path)
            )
        for book, flat, rows in groups:
            arrays = [flat_array(book[name]) for name in BOOKKEEPING]
            for c in stored:
                at = kept.get(c.spec.name)
                arrays.append(
                    to_arrow(c, rows[c.spec.name], None if at is None else find_cells(at, flat)[1])
                )
            table = pa.Table.from_arrays(arrays, schema=schema)
            writer.write_table(table, row_group_size=max(1, table.num_rows))
    return after[0], bool(kept)


def _step_groups(
    dataset: Dataset,
    stored: list[Column],
    where: tuple[int, int, int],
    chunks: list[tuple[int, int]],
    book: tuple[list[Carry], float],
) -> Iterator[RowGroup]:
    """Row groups of the transitions in time order (step-major, as expcli-parquet/1).

    ``where``: the first transition's flat cell, the cells, the transitions written.
    ``book``: the carry, replaced by the one after each group as it goes, and the fps.
    """
    start, cells, valid = where
    after, fps = book
    envs = dataset.num_envs
    for first, stop in chunks:
        flat = positions(start + first, stop - first, cells)
        rows = {c.spec.name: _cells(dataset.tensors[c.spec.name], flat, envs) for c in stored}
        done = _done(rows, max(0, min(stop, valid) - first))
        columns, after[0] = transition_chunk(flat, done, envs, after[0])
        columns["timestamp"] = timestamps(columns["frame_index"], fps)
        yield columns, flat, rows


def _fps(metadata: dict[str, Any]) -> tuple[float, str]:
    """The frames a second that ``timestamp`` counts in, and where it came from.

    The env's ``render_fps`` where the dataset records one (at collect time), else 1.0.
    """
    fps = metadata.get("render_fps")
    if (
        isinstance(fps, int | float)
        and not isinstance(fps, bool)
        and math.isfinite(fps)
        and fps > 0
    ):
        return float(fps), "render_fps"
    return 1.0, "none recorded: 1.0, timestamp is frame_index"


def _done(rows: dict[str, np.ndarray], written: int) -> np.ndarray:
    """Whether each of the first ``written`` transitions of ``rows`` ended its episode.

    Either flag set; a flag of no values (not stored) sets none.
    """
    done = np.zeros(written, bool)
    for name in ("terminated", "truncated") if written else ():
        if name in rows:
            with np.errstate(invalid="ignore"):  # flags of a float dtype may hold NaN: set
                done |= rows[name][:written].reshape(written, -1).any(axis=1)
    return done


def shard_carry(path: Path) -> Carry:
    """The carry after a folder's Parquet shard, from its bookkeeping columns and flags.

    Raises:
        FormatError: As ``open_lazy``, or bookkeeping columns that are not int64.
    """
    dataset, close = open_lazy(path)
    try:
        rows, envs = dataset.memory_size, dataset.num_envs
        flags: dict[str, Any] = {
            k: dataset.tensors[k][rows - 1 :]
            for k in ("terminated", "truncated")
            if k in dataset.tensors and rows
        }
        done = np.zeros(envs, bool)
        if rows * envs:
            with np.errstate(invalid="ignore"):
                done = done_flags(flags, 1, envs).reshape(-1)
    finally:
        close()
    names = ["index", "row", *BOOKKEEPING[1:3], "env"]
    book: dict[str, np.ndarray] = {name: np.zeros(0, np.int64) for name in names}
    top, count, last = -1, 0, -1  # the largest episode index and index, the rows read
    parquet = open_parquet(path)
    try:  # a group at a time (open_lazy bounded them), keeping the cells of the last row
        for group in range(parquet.metadata.num_row_groups):
            table = parquet.read_row_group(group, columns=names, use_threads=False)
            read = {name: _ints(table.column(name).combine_chunks()) for name in names}
            count += len(read["index"])
            if len(read["index"]):
                top = max(top, int(read["episode_index"].max()))
                last = max(last, int(read["index"].max()))
            book = {k: np.concatenate([book[k], v]) for k, v in read.items()}
            latest = book["row"] == book["row"].max() if len(book["row"]) else []
            book = {k: v[latest] for k, v in book.items()}
    except Exception as e:
        raise _damaged(path, e) from e
    finally:
        parquet.close()
    if not rows * envs:
        return dataclasses.replace(Carry.start(envs), row=int(rows))
    if count != rows * envs or not np.array_equal(np.sort(book["env"]), np.arange(envs)):
        raise FormatError(
            f"bookkeeping columns disagree with its {rows} rows of {envs} envs", path=path
        )
    by_env = np.argsort(book["env"])
    return Carry(
        last + 1,
        int(book["row"][0]) + 1,
        top + 1,
        book["episode_index"][by_env],
        book["frame_index"][by_env],
        done,
    )


def _ints(array: Any) -> np.ndarray:
    import pyarrow as pa

    if array.type not in (pa.int64(), pa.int32()) or array.null_count:
        raise InvalidValueError(f"a bookkeeping column is {array.type}; expected int64")
    return values_as(array, np.dtype(np.int64 if array.type == pa.int64() else np.int32))


def _cells(tensor: Any, flat: np.ndarray, envs: int) -> np.ndarray:
    """The transitions at flat cells ``flat`` (increasing but for one wrap), as ``(n, *f)``."""
    pieces = []
    breaks = np.flatnonzero(np.diff(flat) < 0) + 1
    for run in np.split(flat, breaks):
        if not run.size:
            continue
        first, last = int(run[0]) // envs, int(run[-1]) // envs + 1
        block = np.asarray(tensor[first:last])
        block = block.reshape((last - first) * envs, *block.shape[2:])
        pieces.append(block[int(run[0]) - first * envs : int(run[-1]) - first * envs + 1])
    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


def _unwritten_zero(dataset: Dataset, valid: int) -> bool:
    """Whether every cell past the first ``valid`` (row-major) holds only zero bytes."""
    envs = dataset.num_envs
    first = valid // envs if envs else 0
    for tensor in dataset.tensors.values():
        if tensor.size == 0:
            continue
        row_bytes = max(1, tensor.dtype.itemsize * math.prod(tensor.shape[1:]))
        step = max(1, SLICE_BYTES // row_bytes)
        for row in range(first, len(tensor), step):
            block = np.asarray(tensor[row : row + step])
            if row == first:
                block = block.reshape(-1, *block.shape[2:])[valid - first * envs :]
            if np.ascontiguousarray(block).view(np.uint8).any():
                return False
    return True


def open_lazy(
    path: Path,
    *,
    num_envs: int | None = None,
    cache: BlockCache | None = None,
    mapping: ColumnRoles | None = None,
) -> tuple[Dataset, Callable[[], None]]:
    """Open a Parquet file; each tensor's rows are read a row group at a time.

    A file without expcli's metadata, or whose rows disagree with it (filtered, reordered
    or added to by another tool), is read from its columns alone (``foreign_table``), with
    one warning line saying so. ``mapping``: the roles the caller gives columns
    (``--columns``) and what a lone ``done`` means (``--done-means``). A file expcli
    wrote whose metadata agrees is read from its columns too when ``mapping`` gives any
    column a role (the caller asked for those columns in those roles; its tensors' specs
    still decode its frames); ``done_means`` alone changes nothing there (expcli keeps
    both flags). A folder or a glob of Parquet files (``parquet_sources.table_files``) is
    read as one table from its columns (``_parquet_set``), ``mapping`` as for one file;
    one file found is read as that file.

    ``cache``: where each tensor keeps the row groups it decodes (its rows of them), for
    draws at random; without one, a tensor keeps the last group it read, and one read in
    order decodes the next meanwhile.

    Raises:
        FormatError: Not a Parquet file, truncated or damaged, with columns that are not of
            the types its metadata says, or (read from its columns) as ``open_table``.
        SchemaError: The metadata disagrees with itself.
        MissingDependencyError: pyarrow is not installed.
    """
    del num_envs
    check_source(path)
    if is_pattern(path) or os.path.isdir(path):  # a folder or a glob of Parquet files
        files = table_files(path)
        if len(files.paths) > 1 or files.split is not None:
            return open_files(files, _footer_specs, mapping)
        path = files.paths[0]  # one file: read as itself (expcli's footer kept)
    with open(path, "rb") as file:
        identity = file_identity(os.fstat(file.fileno()))
    parquet = open_parquet(path)
    try:
        return _open(parquet, path, identity, cache, mapping)
    except BaseException as e:
        parquet.close()
        if isinstance(e, ExpcliError | MemoryError) or not isinstance(e, Exception):
            raise
        raise _damaged(path, e) from e


def _footer_specs(kv: dict[bytes, bytes] | None, path: Path) -> dict[str, TensorSpec] | None:
    """The tensors an expcli footer names, or None: none (files of a folder or a glob).

    Raises:
        FormatError, SchemaError: The footer is too large or malformed.
    """
    if not kv or HEADER_KEY not in kv:
        return None
    if len(kv[HEADER_KEY]) > MAX_METADATA_BYTES:
        raise FormatError("metadata too large", path=path, key=HEADER_KEY.decode())
    header = parse_header(kv[HEADER_KEY], path, HEADER_KEY.decode())
    return {spec.name: spec for spec in header_specs(header, path)}


def _open(
    parquet: Any,
    path: Path,
    identity: tuple[int, ...],
    cache: BlockCache | None,
    mapping: ColumnRoles | None,
) -> tuple[Dataset, Callable[[], None]]:
    kv = parquet.metadata.metadata or {}
    reopen = functools.partial(SecondHandle, path, identity)  # read from its columns
    if HEADER_KEY not in kv:
        return open_table(parquet, path, "no expcli metadata", None, mapping, reopen)
    for key in (HEADER_KEY, LAYOUT_KEY):
        if len(kv.get(key, b"")) > MAX_METADATA_BYTES:
            raise FormatError("metadata too large", path=path, key=key.decode())
    header = parse_header(kv[HEADER_KEY], path, HEADER_KEY.decode())
    layout = load_json(kv.get(LAYOUT_KEY, b"null"), path, LAYOUT_KEY.decode())
    order = _order(layout, path)
    encodings, rows = layout.get("columns"), layout.get("rows")
    stored = parquet.metadata.num_rows
    nullable = _nullable(header, path, stored)
    said = encodings if isinstance(encodings, dict) else {}
    columns = [column_read(spec, said.get(spec.name)) for spec in header_specs(header, path)]
    columns = [dataclasses.replace(c, nullable=c.spec.name in nullable) for c in columns]
    if not isinstance(encodings, dict) or encodings != {c.spec.name: c.encoding for c in columns}:
        raise FormatError(
            "column encodings disagree with the tensors' specs", path=path, key=LAYOUT_KEY.decode()
        )
    state, _ = Dataset.split_header(header, path)
    size, envs = header.get("memory_size"), header.get("num_envs")
    if not all(type(v) is int and v >= 0 for v in (size, envs)):
        raise FormatError("expected sizes of 0 or more", path=path, key="memory_size")
    assert isinstance(size, int) and isinstance(envs, int)
    cells = size * envs
    valid = min(state.valid_length(size, envs), cells)
    if rows != stored or stored not in (valid, cells):  # filtered or added to by another tool
        disagree = (
            f"its rows disagree with its expcli metadata ({stored:,} rows, {valid:,} recorded)"
        )
        specs = {c.spec.name: c.spec for c in columns}
        return open_table(parquet, path, disagree, specs, mapping, reopen)
    if mapping is not None and mapping.columns:
        mapped = f"its columns given roles ({mapping.described()}), its expcli metadata set aside"
        specs = {c.spec.name: c.spec for c in columns}
        return open_table(parquet, path, mapped, specs, mapping, reopen)
    schema = parquet.schema_arrow
    for column in columns:
        if column.encoding == EMPTY:
            continue
        index = schema.get_field_index(column.spec.name)
        kind = schema.field(index).type if index >= 0 else None
        if kind != column.arrow_type():
            raise FormatError(
                f"column is {kind}; expected {column.arrow_type()} for "
                f"{column.spec.dtype} {list(column.spec.shape)}",
                path=path,
                key=column.spec.name,
            )
        if column.encoding == PNG:  # its footer says the PNGs' bytes, not their pixels'
            meta = parquet.metadata
            most = max((meta.row_group(g).num_rows for g in range(meta.num_row_groups)), default=0)
            check_group_images(most, column.spec.shape, path, column.spec.name)
    if order is RowOrder.EPISODES:
        first_row = layout.get("first_row")
        if type(first_row) is not int or first_row < 0:
            raise FormatError("expected a first_row of 0 or more", path=path, key="first_row")
        decoder = _Groups(parquet, path, identity, keep=False)  # EpisodeFile keeps groups
        file = EpisodeFile(decoder, (parquet, path, reopen), (size, envs, stored), first_row)
        return _episode_dataset(file, columns, header, nullable, cache, identity), file.close
    groups = _Groups(parquet, path, identity, keep=cache is None)
    start = (state.memory_index * envs + state.env_index) % max(cells, 1) if state.filled else 0
    bounds = (
        _tensor_bounds(groups.ends, start, cells, envs) if cache is not None and cells else None
    )
    where = (start, cells, envs, stored)
    arrays = _tensors(
        columns,
        (size, envs, stored),
        lambda column: _lazy(groups, column, where, bounds, cache, identity),
        nullable,
        path,
    )
    return dataset_from_header(arrays, header, path), groups.close


def _order(layout: Any, path: Path) -> RowOrder:
    """The rows' order a file's ``expcli.parquet`` object says (``/1``: time order).

    Raises:
        FormatError: Not an object of a layout this expcli reads.
    """
    if isinstance(layout, dict) and layout.get("layout") == LAYOUT:
        return RowOrder.STEPS
    if (
        isinstance(layout, dict)
        and layout.get("layout") == EPISODES_LAYOUT
        and layout.get("order") == RowOrder.EPISODES
    ):
        return RowOrder.EPISODES
    raise FormatError(
        f"expected an object with layout {LAYOUT!r}, or {EPISODES_LAYOUT!r} with order "
        f"{str(RowOrder.EPISODES)!r}",
        path=path,
        key=LAYOUT_KEY.decode(),
    )


def _episode_dataset(
    file: EpisodeFile,
    columns: list[Column],
    header: dict[str, Any],
    nullable: dict[str, tuple[bool, int]],
    cache: BlockCache | None,
    identity: tuple[int, ...],
) -> Dataset:
    """The dataset of an episode-ordered file, its tensors read through its placement."""
    size, envs, path = file.size, file.envs, file.path
    # a block of one env column holds a row group's rows, as the writer cut them
    block_rows = int(np.diff(file.starts).max()) if len(file.starts) > 1 else 1
    stored = int(file.starts[-1])
    arrays = _tensors(
        columns,
        (size, envs, stored),
        lambda column: file.tensor(column, cache, (path, identity, column.key), block_rows),
        nullable,
        path,
    )
    return dataset_from_header(arrays, header, path)


def _tensors(
    columns: list[Column],
    shape: tuple[int, int, int],
    lazy: Callable[[Column], LazyRows],
    nullable: dict[str, tuple[bool, int]],
    path: Path,
) -> dict[str, Any]:
    """Each column's tensor read by ``lazy``; a next observation null where derived filled.

    ``shape``: T, N and the file's rows.
    """
    size, envs, stored = shape
    arrays: dict[str, Any] = {}
    for column in columns:
        if column.encoding == EMPTY or size * envs == 0:
            arrays[column.spec.name] = np.zeros((size, envs, *column.spec.shape), column.spec.dtype)
            continue
        tensor: Any = lazy(column)
        if column.nullable:
            wrap, kept = nullable[column.spec.name]
            once = StoredOnce(kept, stored, (stored - kept) * column.row_bytes, NULLS)
            tensor = _NullRows(
                tensor, lazy(column.validity()), (path, column.spec.name), wrap, once
            )
        arrays[column.spec.name] = tensor
    for name, array in arrays.items():
        if isinstance(array, _NullRows):
            array.observations = arrays[name.removeprefix("next_")]
    return arrays


def _lazy(
    groups: _Groups,
    column: Column,
    where: tuple[int, int, int, int],
    bounds: np.ndarray | None,
    cache: BlockCache | None,
    identity: tuple[int, ...],
) -> LazyRows:
    """A column's ``(T, N, *feature)`` rows read lazily (through ``cache`` where given).

    ``where``: the first cell's flat index, the cells, N, and the file's rows.
    """
    start, cells, envs, stored = where
    shape = (cells // max(envs, 1), envs, *column.spec.shape)
    dtype = np.dtype(column.spec.dtype)
    reader = _TensorRows(groups, column, start, cells, envs, stored)
    blocks = None
    if cache is not None and bounds is not None:
        name = (groups.path, identity, column.key)
        blocks = CachedBlocks(reader.block, bounds, cache, name, shape, dtype)
    read = reader.read if blocks is None else blocks.read
    if column.encoding == PNG:  # gathers decode the cells drawn, not their groups
        encoded = functools.partial(groups.encoded, column)
        gather = functools.partial(groups.png_cells, column, where, encoded)
        return PngCells(shape, dtype, read, blocks, gather)
    return LazyRows(shape, dtype, read, blocks=blocks)


def _nullable(header: dict[str, Any], path: Path, stored: int) -> dict[str, tuple[bool, int]]:
    """The next-observation columns null where derived, each with its ``wrap`` and ``kept``.

    ``stored``: the file's rows, of which ``kept`` counts those not null.

    Raises:
        SchemaError: The ``frames`` object is malformed.
    """
    forms = header.get("frames", {})
    tensors = header.get("tensors")
    if not isinstance(forms, dict) or not isinstance(tensors, dict):
        raise SchemaError("malformed 'frames' object in metadata", path=path, key="frames")
    out = {}
    for name, form in forms.items():
        if (
            not isinstance(form, dict)
            or form.get("form") != NULLS
            or type(form.get("wrap")) is not bool
            or type(form.get("kept")) is not int
            or not 0 <= form["kept"] <= stored
            or name.partition("/")[0] != "next_observations"
            or tensors.get(name) is None
            or tensors.get(name) != tensors.get(name.removeprefix("next_"))
        ):
            raise SchemaError(
                f'expected {{"form": "{NULLS}", "kept": a count of at most its {stored:,} '
                'rows, "wrap": a bool} for a tensor listed with its observations, of their kind',
                path=path,
                key=f"frames.{name}",
            )
        out[name] = bool(form["wrap"]), int(form["kept"])
    return out


class _NullRows(ByCells):
    """A next-observation column null where derived: the observations one row on fill it.

    ``stored`` holds any bytes at null cells, ``valid`` says which are stored. Row ``t``'s
    null cells read ``observations[(t + 1) % T]``; without the wrap, a null in the last
    row has nothing to be derived from and is refused. ``once``: what ``inspect`` reports,
    from the header's ``kept`` (the writer's count of the cells it stored; the bitmap, not
    that count, says which cells are null, so a wrong count misreports, never misreads).
    """

    def __init__(
        self,
        stored: LazyRows,
        valid: LazyRows,
        where: tuple[Path, str],
        wrap: bool,
        once: StoredOnce,
    ) -> None:
        super().__init__(stored.shape, stored.dtype, self._rows)
        self.stored, self.valid, self.wrap, self.once = stored, valid, wrap, once
        self.observations: Any = None  # set once every column is built
        self._where = where

    def stored_once(self) -> StoredOnce:
        """Its cells kept, as the header counts them, and the bytes the nulls save."""
        return self.once

    def _rows(self, start: int, stop: int) -> np.ndarray:
        size = self.shape[0]
        out = np.array(self.stored[start:stop])
        valid = np.asarray(self.valid[start:stop])
        if valid.all():
            return out
        self._check(stop == size and not valid[-1].all())
        ahead = np.asarray(self.observations[start + 1 : min(stop + 1, size)])
        if stop == size:
            ahead = np.concatenate([ahead, np.asarray(self.observations[0:1])])
        out[~valid] = ahead[~valid]
        return out

    def take_cells(self, index: np.ndarray) -> np.ndarray:
        """The cells at flat ``index``: stored ones, the rest from the observations one on."""
        size, envs = self.shape[0], self.shape[1]
        wanted, flat = flat_rows(index, size * envs)
        out = np.array(gather_flat(self.stored, flat, envs))
        null = ~np.asarray(gather_flat(self.valid, flat, envs), bool)
        if null.any():
            rows, columns = np.divmod(flat[null], envs)
            self._check(bool((rows == size - 1).any()))
            out[null] = gather_flat(self.observations, (rows + 1) % size * envs + columns, envs)
        return out.reshape(*wanted.shape, *self.shape[2:])

    def _check(self, last_row_null: bool) -> None:
        if last_row_null and not self.wrap:
            path, name = self._where
            raise FormatError(
                'null in the last row of a column that says "wrap": false; expected it stored',
                path=path,
                key=name,
            )


def _tensor_bounds(ends: np.ndarray, start: int, cells: int, envs: int) -> np.ndarray:
    """The tensor rows where the file's row groups begin: the blocks of a cached tensor.

    File row ``f`` holds cell ``(f + start) % cells`` of the ``(T, N)`` tensors. The writer
    starts each group at a row of them, so a block is a group's rows (a row split between
    two groups, of a file written mid-row, goes to the block of its first cell).
    """
    edges = np.concatenate([[0], ends, [cells - start]]).astype(np.int64)
    rows = (edges + start) % cells // envs
    return np.unique(np.concatenate([rows, [0, cells // envs]]))


class _Groups:
    """The row groups of one open file, one decoded column group kept per tensor."""

    def __init__(
        self, parquet: Any, path: Path, identity: tuple[int, ...], keep: bool = True
    ) -> None:
        """Read ``parquet``; ``keep``: keep each tensor's last group decoded.

        And decode the next ahead of reads in order; else (a ``BlockCache`` keeps the rows)
        decode each group read anew.
        """
        self.parquet, self.path, self.identity, self.keep = parquet, path, identity, keep
        meta = parquet.metadata
        counts = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        self.ends = np.cumsum(counts, dtype=np.int64)
        self._lock = threading.Lock()
        self._kept: dict[str, tuple[int, np.ndarray]] = {}
        self._ahead: dict[str, tuple[int, Future[np.ndarray]]] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._own: SecondHandle | None = None  # the decoding thread's handle on the file
        self._pid = os.getpid()  # a forked child decodes ahead on a thread of its own
        # a nullable column's null bitmap of each group decoded, until it is asked for
        self._bitmaps: dict[tuple[str, int], np.ndarray] = {}
        self._bitmaps_lock = threading.Lock()
        self._encoded: dict[tuple[str, int], Any] = {}  # PNG groups read for gathers

    def copy_rows(self, column: Column, first: int, stop: int, out: np.ndarray) -> None:
        """Copy stored rows ``first..stop`` of ``column`` to ``out``, a row group at a time."""
        group = int(np.searchsorted(self.ends, first, side="right"))
        at = 0
        while first < stop:
            begin = int(self.ends[group - 1]) if group else 0
            decoded = self.group(column, group, int(self.ends[group]) - begin)
            take = min(stop, int(self.ends[group])) - first
            out[at : at + take] = decoded[first - begin : first - begin + take]
            first, at, group = first + take, at + take, group + 1

    def group(self, column: Column, group: int, count: int) -> np.ndarray:
        """RowGroup ``group`` (of ``count`` rows) of ``column``, decoded."""
        name = column.key
        with self._lock:
            kept = self._kept.get(name)
            if kept is not None and kept[0] == group:
                return kept[1]
            if self._pid != os.getpid():  # forked since: the decoding thread is not here
                self._pid, self._executor, self._own = os.getpid(), None, None
                self._ahead.clear()
            ahead = self._ahead.pop(name, None)
            if ahead is not None and ahead[0] == group:
                decoded = ahead[1].result()
            else:
                decoded = self._decode(self.parquet, column, group, count)
            if not self.keep:
                return decoded
            self._kept[name] = (group, decoded)
            following = group + 1
            if kept is not None and kept[0] == group - 1 and following < len(self.ends):
                # read in order: the next group decodes on its own file meanwhile
                rows = int(self.ends[following] - self.ends[group])
                future = self._decoder().submit(self._decode_ahead, column, following, rows)
                self._ahead[name] = (following, future)
            return decoded

    def encoded(self, column: Column, group: int) -> Any:
        """Group ``group`` of a PNG column as Arrow (its PNG bytes), kept for the next draws.

        Kept up to ``ENCODED_BYTES`` over all columns, the least recently used dropped.
        """
        key = (column.spec.name, group)
        with self._lock:
            found = self._encoded.pop(key, None)
            if found is None:
                try:
                    table = self.parquet.read_row_group(
                        group, columns=[column.spec.name], use_threads=False
                    )
                except Exception as e:
                    raise unreadable_group(e, self.path, column.spec.name, group) from e
                found = table.column(0).combine_chunks()
            self._encoded[key] = found  # the most recent last
            while sum(a.nbytes for a in self._encoded.values()) > ENCODED_BYTES:
                if len(self._encoded) == 1:
                    break
                self._encoded.pop(next(iter(self._encoded)))
            return found

    def png_cells(
        self,
        column: Column,
        where: tuple[int, int, int, int],
        encoded: Callable[[int], Any],
        flat: np.ndarray,
    ) -> np.ndarray:
        """The PNG cells at flat ``flat`` of a file in time order (``where`` as ``_lazy``'s)."""
        start, cells, _, stored = where
        rows = (flat - start) % max(cells, 1)  # file rows
        return self.png_rows(column, np.where(rows < stored, rows, -1), encoded)

    def png_rows(
        self, column: Column, rows: np.ndarray, encoded: Callable[[int], Any] | None = None
    ) -> np.ndarray:
        """The PNG cells of ``column`` at file rows ``rows`` (-1: zeros), each decoded alone.

        A refused PNG is named with file and column. ``encoded(group)``: that group's PNG
        bytes as Arrow (None: this file's ``encoded``, which keeps them for later draws).
        """
        if encoded is None:
            encoded = functools.partial(self.encoded, column)
        try:
            return png_rows(column, self.ends, encoded, rows)
        except InvalidValueError as e:
            raise FormatError(
                f"a PNG cell cannot be read ({e}); the file is damaged",
                path=self.path,
                key=column.spec.name,
            ) from e

    def _decoder(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="expcli-parquet-decode")
        return self._executor

    def _decode_ahead(self, column: Column, group: int, count: int) -> np.ndarray:
        """``_decode`` on the decoding thread's own handle (a reader is not shared by threads).

        The handle is opened on the same file that was checked (device, inode, size and
        modification time): a file put in its place since is refused, never parsed.
        """
        if self._own is None:
            self._own = SecondHandle(self.path, self.identity)  # closed in close()
        return self._decode(self._own, column, group, count)

    def _decode(self, parquet: Any, column: Column, group: int, count: int) -> np.ndarray:
        name = column.spec.name
        if column.encoding == VALID:  # taken when the cells were decoded, if they were
            with self._bitmaps_lock:
                bitmap = self._bitmaps.pop((name, group), None)
            if bitmap is not None and len(bitmap) == count:
                return bitmap
        if count * column.row_bytes > SLICE_BYTES:  # a smaller group never strains memory
            check_memory(count * column.row_bytes, self.path, name)
        try:
            table = parquet.read_row_group(group, columns=[name], use_threads=False)
            chunks = table.column(0)  # one chunk is taken as it is: combining copies it
            whole = chunks.chunk(0) if chunks.num_chunks == 1 else chunks.combine_chunks()
            decoded = from_arrow(column, whole)
            if column.nullable and column.encoding != VALID:
                bitmap = from_arrow(column.validity(), whole)
                with self._bitmaps_lock:
                    self._bitmaps[name, group] = bitmap
        except Exception as e:
            if isinstance(e, ExpcliError) and not isinstance(e, InvalidValueError):
                raise
            raise unreadable_group(e, self.path, name, group) from e
        if len(decoded) != count:
            raise FormatError(
                f"row group {group} holds {len(decoded)} rows; its footer says {count}",
                path=self.path,
                key=name,
            )
        return decoded

    def close(self) -> None:
        """Close the file and drop what was kept (after a decode under way ends)."""
        with self._lock:
            executor, self._executor = self._executor, None
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)
            if self._own is not None:
                self._own.close()
                self._own = None
            self._kept.clear()
            self._ahead.clear()
            self._encoded.clear()
            self.parquet.close()


class _TensorRows:
    """Rows ``[first, stop)`` of one ``(T, N, *f)`` tensor from chronological file rows."""

    def __init__(
        self, groups: _Groups, column: Column, start: int, cells: int, envs: int, stored: int
    ) -> None:
        self.groups, self.column = groups, column
        self.start, self.cells, self.envs, self.stored = start, cells, envs, stored

    def read(self, first: int, stop: int) -> np.ndarray:
        spec = self.column.spec
        count = (stop - first) * self.envs
        fill = np.empty if self.stored == self.cells else np.zeros  # unstored cells: zeros
        if self.column.encoding == VALID and self.stored != self.cells:
            fill = np.ones  # unstored cells are zeros, stored as they are: not derived
        out = fill((count, *spec.shape), np.dtype(spec.dtype))
        # The cells are file rows lo.. on, wrapping once at most: two runs, never an index
        # per cell (for a flag, eight times the rows' own bytes).
        lo = (first * self.envs - self.start) % max(self.cells, 1)
        at = 0
        for begin, end in ((lo, min(lo + count, self.cells)), (0, lo + count - self.cells)):
            if end > begin:
                if min(end, self.stored) > begin:
                    hi = min(end, self.stored)
                    self.groups.copy_rows(self.column, begin, hi, out[at : at + hi - begin])
                at += end - begin
        return out.reshape(stop - first, self.envs, *spec.shape)

    def block(self, first: int, stop: int) -> np.ndarray:
        """Rows ``[first, stop)`` for a ``BlockCache``: a row group's decoded rows as they are.

        When the rows are exactly one stored group's, its decoded array (on Arrow's buffer)
        is the block, copied nowhere; else ``read``.
        """
        lo = (first * self.envs - self.start) % max(self.cells, 1)
        count = (stop - first) * self.envs
        ends = self.groups.ends
        group = int(np.searchsorted(ends, lo, side="right"))
        begin = int(ends[group - 1]) if group else 0
        if begin != lo or group >= len(ends) or ends[group] != lo + count:
            return self.read(first, stop)
        decoded = self.groups.group(self.column, group, count)
        return decoded.reshape(stop - first, self.envs, *self.column.spec.shape)


def _damaged(path: Path, error: Exception) -> FormatError:
    return FormatError(f"corrupt or truncated Parquet file ({error_summary(error)})", path=path)


def read(path: Path, *, num_envs: int | None = None) -> Dataset:
    """Load a Parquet file of expcli's whole, when memory has room for it.

    Raises:
        FormatError, SchemaError, MissingDependencyError: As ``open_lazy``.
        ConfigError: The memory available cannot hold the data (said before reading any).
    """
    return read_whole(open_lazy(path, num_envs=num_envs), path)
