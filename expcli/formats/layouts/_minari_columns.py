"""The episodes of a Minari dataset in parquet or arrow storage, read an episode at a time.

Scanning a folder opens every episode file once: its schema must give the same leaves as
the first episode's (names, shapes, dtypes), and its flags are read (a byte a step: episode
ends and seams need them). Each tensor is then a ``ConcatRows`` over the episodes; an
episode's rows of a tensor are decoded when a slice or a gather first touches them, the
file opened for that and closed again, and the last episode decoded kept per tensor, so
that memory holds about one episode of each tensor whatever the folder's size. Only plain
Arrow types are read (no extension type, no binary): JPEG-encoded images are refused.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import ExpcliError, FormatError, SchemaError
from expcli.formats._error_summary import error_summary
from expcli.formats._guards import check_source
from expcli.formats._parquet_columns import LIST, SCALAR, Column, flat_array, from_arrow
from expcli.formats.concat_rows import ConcatRows
from expcli.formats.dataset import Dataset
from expcli.formats.layouts._episodes import SEAMS_KEY, native, one_column
from expcli.formats.layouts._minari_meta import expcli_metadata, jpeg_image_shape
from expcli.space_json import encode_text
from expcli.spec import CircularState, TensorSpec

__all__ = [
    "ARROW_STORAGES",
    "DATA_FILE",
    "MAX_EPISODE_ROWS",
    "flat_array",
    "mark_seams",
    "scan_folder",
]

ARROW_STORAGES = ("parquet", "arrow")
"""Minari's ``data_format`` values of the arrow storage (``arrow``: Arrow IPC files)."""

DATA_FILE = "part-0"
"""An episode file's name, less its suffix (``pyarrow.dataset.write_dataset``'s)."""

MAX_EPISODE_ROWS = 1 << 17
"""Rows Minari's reader takes as one episode: the pyarrow scanner's batch size."""

_EPISODE = re.compile(r"0|[1-9][0-9]{0,17}")
_IGNORED = ("_", ".")  # with metadata.json: what Minari's reader leaves out of an episode
_PARQUET_MAGIC, _IPC_MAGIC = b"PAR1", b"ARROW1"
_EXTENSION_KEY = b"ARROW:extension:name"
_FLAGS = (("terminations", "terminated"), ("truncations", "truncated"))
_RELEASE_BYTES = 1 << 20


@dataclass(frozen=True)
class _Leaf:
    """One tensor's place in an episode file.

    Attributes:
        name: The expcli tensor (``observations/pos``, ``next_observations``, ``infos/k``).
        column: The file's top-level column.
        fields: The struct fields below it, down to the leaf.
        feature: The tensor's feature shape (``()`` for a scalar, stored as ``(1,)``).
        stored: The dtype of the stored values (``encode``: the tensor's).
        size: Values a row of a flat fixed-size list; None for a scalar.
        text: A Text leaf's ``max_length`` (strings, read as code points).
        offset: The episode row of the tensor's first row (next observations, infos: 1).
    """

    name: str
    column: str
    fields: tuple[str, ...]
    feature: tuple[int, ...]
    stored: np.dtype[Any]
    size: int | None
    text: int | None
    offset: int

    def key(self) -> str:
        return "/".join((self.column, *self.fields))

    def dtype(self, path: Path) -> np.dtype[Any]:
        if self.text is not None:
            return np.dtype(np.int32)
        return native(np.empty(0, self.stored), path, self.key()).dtype


def scan_folder(data: Path, meta: dict[str, Any]) -> tuple[Dataset, Callable[[], None]]:
    """Read the ``data`` folder of a Minari dataset in arrow storage lazily (see module).

    Raises:
        FormatError: Episode folders missing or not numbered ``0..E-1``, a damaged file or
            one of other types, JPEG-encoded images, data that is not numbers.
        SchemaError: Episodes disagree in their leaves, or an episode has no rows.
        MissingDependencyError: pyarrow is not installed.
    """
    from expcli.formats.parquet_format import pyarrow_parquet

    pyarrow_parquet()
    storage = str(meta.get("data_format"))
    files = _episode_files(data, meta, storage)
    metadata = expcli_metadata(meta)
    spaces = {k: metadata.get(f"{k[:-1]}_space") for k in ("observations", "actions")}
    jpeg = jpeg_image_shape(meta) is not None
    leaves: list[_Leaf] | None = None
    skipped: list[str] = []
    lengths: list[int] = []
    flags: dict[str, list[np.ndarray]] = {"terminated": [], "truncated": []}
    episodes = [_EpisodeFile(path, storage) for path in files]
    for path, episode in zip(files, episodes, strict=True):
        found, missed = _leaves(episode.schema(), spaces, path, jpeg)
        if leaves is None:
            leaves, skipped = found, missed
        elif [(f.name, f.feature, f.stored) for f in found] != [
            (f.name, f.feature, f.stored) for f in leaves
        ]:
            raise SchemaError(
                f"its columns differ from those of episode 0 ({files[0].name})", path=path
            )
        steps = -1
        for column, flag in _FLAGS:
            values = episode.flag(column)
            steps = len(values) - 1
            flags[flag].append(values[:-1])
        if steps < 0:
            raise SchemaError("has no rows; expected the reset observation at least", path=path)
        lengths.append(steps)
    tensors: dict[str, Any] = {}
    columns = _Columns(episodes)
    for leaf in leaves or []:
        reader = _TensorReader(columns, leaf, lengths)
        tensors[leaf.name] = ConcatRows(
            reader.episode, lengths, (1, *(leaf.feature or (1,))), reader.dtype
        )
        if leaf.name == "rewards":  # the flags after the rewards, as the hdf5 storage's
            seams = mark_seams(lengths, flags["terminated"], flags["truncated"])
            for flag, pieces in flags.items():
                tensors[flag] = one_column(np.concatenate(pieces))
            if seams:
                metadata[SEAMS_KEY] = seams
    if skipped:
        metadata["minari"]["skipped"] = skipped
    state = CircularState(0, 0, filled=True) if tensors else CircularState()
    dataset = Dataset(tensors, state, metadata)
    dataset.validate(data)
    return dataset, lambda: None


def mark_seams(
    lengths: list[int], terminated: list[np.ndarray], truncated: list[np.ndarray]
) -> list[int]:
    """Mark ``truncated`` the last step of every episode but the last that ends unflagged.

    So that expcli's view keeps episodes apart; returns the rows marked. ``truncated``'s
    arrays (one per episode) are replaced where marked.
    """
    seams: list[int] = []
    total = 0
    for number, (steps, ended, cut) in enumerate(zip(lengths, terminated, truncated, strict=True)):
        total += steps
        if number < len(lengths) - 1 and steps and not (ended[-1] or cut[-1]):
            truncated[number] = cut.copy()
            truncated[number][-1] = True
            seams.append(total - 1)
    return seams


def _episode_files(data: Path, meta: dict[str, Any], storage: str) -> list[Path]:
    """Each episode's data file, in id order (folders ``0..E-1``, one data file each)."""
    try:
        names = [p.name for p in os.scandir(data) if p.is_dir(follow_symlinks=False)]
    except OSError as e:
        raise FormatError(f"cannot list the episodes ({error_summary(e)})", path=data) from e
    ids = sorted(int(name) for name in names if _EPISODE.fullmatch(name))
    total = meta.get("total_episodes")
    if ids != list(range(len(ids))) or (type(total) is int and total != len(ids)):
        wanted = f"0 to {total - 1}" if type(total) is int else "0, 1, ... without a gap"
        raise FormatError(
            f"holds episode folders {_span(ids)}; expected {wanted} (total_episodes of "
            "metadata.json)",
            path=data,
        )
    files = []
    for number in ids:
        folder = data / str(number)
        found = sorted(
            p
            for p in folder.iterdir()
            if not p.name.startswith(_IGNORED) and p.name != "metadata.json"
        )
        if len(found) != 1:
            raise FormatError(
                f"holds {len(found)} data files; expected one ({DATA_FILE}.{storage})",
                path=folder,
            )
        check_source(found[0])
        if not found[0].is_file():
            raise FormatError(f"is not a file; expected an episode's {storage} file", path=found[0])
        files.append(found[0])
    return files


def _span(ids: list[int]) -> str:
    if not ids:
        return "none"
    return f"{ids[0]} to {ids[-1]} ({len(ids)})"


class _EpisodeFile:
    """One episode's data file, checked and opened for each read (then closed).

    Its columns' positions are kept once its schema was read: an Arrow IPC file is then
    opened once per column read, not a second time to find the column.
    """

    def __init__(self, path: Path, storage: str) -> None:
        self.path, self.storage = path, storage
        self._fields: dict[str, int] | None = None
        _check_plain(path, storage)

    def schema(self) -> Any:
        with self._errors("its schema"):
            if self.storage == "parquet":
                schema = self._parquet().schema_arrow
            else:
                with self._ipc() as reader:
                    schema = reader.schema
        self._fields = {name: i for i, name in enumerate(schema.names)}
        return schema

    def flag(self, column: str) -> np.ndarray:
        """A flag column's values, a bool a row."""
        values = self.column(column)
        with self._errors(column):
            if values.null_count or not (_is_number(values.type) or _is_bool(values.type)):
                raise FormatError(
                    f"is {values.type} with {values.null_count} nulls; expected booleans",
                    path=self.path,
                    key=column,
                )
            dtype = np.dtype(values.type.to_pandas_dtype())
            stored = TensorSpec(column, dtype.name, ())
            return np.asarray(from_arrow(Column(stored, SCALAR), values), bool)

    def column(self, name: str) -> Any:
        """A top-level column, whole, as one Arrow array."""
        with self._errors(name):
            if self.storage == "parquet":
                parquet = self._parquet()
                if parquet.schema_arrow.get_field_index(name) < 0:
                    raise FormatError("missing from the episode", path=self.path, key=name)
                table = parquet.read(columns=[name], use_threads=False)
            else:
                import pyarrow as pa

                index = self._field_map().get(name, -1)
                if index < 0:
                    raise FormatError("missing from the episode", path=self.path, key=name)
                options = pa.ipc.IpcReadOptions(included_fields=[index], use_threads=False)
                with self._ipc(options) as reader:
                    table = reader.read_all()
            return table.column(0).combine_chunks()

    def _field_map(self) -> dict[str, int]:
        """Each column's position, from the schema (read once)."""
        if self._fields is None:
            self.schema()
        assert self._fields is not None
        return self._fields

    def _parquet(self) -> Any:
        import pyarrow.parquet as pq

        return pq.ParquetFile(str(self.path), page_checksum_verification=True, pre_buffer=False)

    def _ipc(self, options: Any = None) -> Any:
        import pyarrow as pa

        return pa.ipc.open_file(pa.OSFile(str(self.path)), options=options)

    def _errors(self, what: str) -> contextlib.AbstractContextManager[None]:
        return _as_format_errors(self.path, what)


@contextlib.contextmanager
def _as_format_errors(path: Path, what: str) -> Iterator[None]:
    """Turn what pyarrow raises for a damaged file, while ``what`` is read, into one line."""
    try:
        yield
    except (ExpcliError, MemoryError):
        raise
    except Exception as e:
        raise FormatError(
            f"cannot read {what} ({error_summary(e)}); the file is damaged", path=path
        ) from e


def _check_plain(path: Path, storage: str) -> None:
    """Refuse a file that is not of the storage, or that names an extension type, unread.

    pyarrow builds a schema's extension types as it opens a file, running the deserialiser
    of any type registered in the process; Minari writes none.
    """
    magic = _PARQUET_MAGIC if storage == "parquet" else _IPC_MAGIC
    with open(path, "rb") as file:
        head = file.read(len(magic))
        file.seek(0, 2)
        size = file.tell()
        file.seek(max(0, size - len(magic)))
        tail = file.read(len(magic))
    if head != magic or tail != magic or size < 2 * len(magic) + 4:
        raise FormatError(
            f"not a complete {storage} file (no {magic.decode()} at both ends)", path=path
        )
    if storage == "parquet":
        from expcli.formats.parquet_format import refuse_extension_types

        refuse_extension_types(path, size)
        return
    with open(path, "rb") as file:  # IPC: the schema is in the first message and the footer
        head = file.read(1 << 16)
        file.seek(max(0, size - (1 << 16)))
        tail = file.read()
    if _EXTENSION_KEY in head or _EXTENSION_KEY in tail:
        raise FormatError(
            "its Arrow schema declares an extension type; Minari writes only plain types "
            "and expcli never builds types named by a file",
            path=path,
        )


def _is_number(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind))


def _is_bool(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_boolean(kind))


def _leaves(
    schema: Any, spaces: dict[str, Any], path: Path, jpeg: bool
) -> tuple[list[_Leaf], list[str]]:
    """The tensors an episode file holds, and the infos it holds that cannot be read."""
    found: list[_Leaf] = []
    skipped: list[str] = []
    names = set(schema.names)
    for column in ("observations", "actions", "rewards", *(c for c, _ in _FLAGS)):
        if column not in names:
            raise FormatError("missing from the episode", path=path, key=column)
    for column in ("observations", "actions", "rewards"):
        field = schema.field(column)
        space = spaces.get(column)
        _walk(field, column, column, (), space, path, jpeg and column == "observations", found)
    if "infos" in names:
        infos = schema.field("infos")
        import pyarrow as pa

        if pa.types.is_struct(infos.type):
            for child in infos.type:
                info: list[_Leaf] = []
                try:
                    _walk(
                        child,
                        f"infos/{child.name}",
                        "infos",
                        (child.name,),
                        None,
                        path,
                        False,
                        info,
                    )
                except (FormatError, SchemaError):
                    skipped.append(f"infos/{child.name}")
                found += [replace(leaf, offset=1) for leaf in info]  # the reset info dropped
    for leaf in [leaf for leaf in found if leaf.column == "observations"]:
        found.append(replace(leaf, name="next_" + leaf.name, offset=1))  # from the next row on
    return found, skipped


def _walk(
    field: Any,
    name: str,
    column: str,
    fields: tuple[str, ...],
    space: Any,
    path: Path,
    jpeg: bool,
    out: list[_Leaf],
) -> None:
    """Add the leaves under ``field`` (a struct's parts, recursively) to ``out``."""
    import pyarrow as pa

    kind = field.type
    key = "/".join((column, *fields))
    if pa.types.is_struct(kind):
        parts = space.get("subspaces") if isinstance(space, dict) else None
        for index, child in enumerate(kind):
            sub = None
            if isinstance(parts, dict):
                sub = parts.get(child.name)
            elif isinstance(parts, list) and index < len(parts):
                sub = parts[index]
            _walk(
                child, f"{name}/{child.name}", column, (*fields, child.name), sub, path, jpeg, out
            )
        return
    kind_of_space = space.get("type") if isinstance(space, dict) else None
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        length = space.get("max_length") if kind_of_space == "Text" else None
        if type(length) is not int or not 0 <= length <= 1 << 16:
            raise FormatError("holds strings but its space is no Text space", path=path, key=key)
        out.append(_Leaf(name, column, fields, (length,), np.dtype(np.int32), None, length, 0))
        return
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        what = "JPEG-encoded images (jpeg_encoding); decoding them is not supported"
        raise FormatError(
            f"holds {what if jpeg else 'binary data; expected numbers'}", path=path, key=key
        )
    if pa.types.is_fixed_size_list(kind) and (
        _is_number(kind.value_type) or _is_bool(kind.value_type)
    ):
        size = int(kind.list_size)
        feature = _shape(field, space, size)
        stored = np.dtype(kind.value_type.to_pandas_dtype())
        out.append(_Leaf(name, column, fields, feature, stored, size, None, 0))
        return
    if _is_number(kind) or _is_bool(kind):
        stored = np.dtype(kind.to_pandas_dtype())
        out.append(_Leaf(name, column, fields, (), stored, None, None, 0))
        return
    raise FormatError(f"is {kind}; expected a type Minari writes", path=path, key=key)


def _shape(field: Any, space: Any, size: int) -> tuple[int, ...]:
    """A flat list's shape: its space's, else its field's ``shape`` metadata, else ``(size,)``."""
    shape: Any = space.get("shape") if isinstance(space, dict) else None
    if isinstance(space, dict) and space.get("type") in ("MultiBinary", "MultiDiscrete"):
        n = space.get("n", space.get("nvec"))
        shape = n if isinstance(n, list) and space.get("type") == "MultiBinary" else [size]
    if shape is None and field.metadata and b"shape" in field.metadata:
        text = field.metadata[b"shape"].decode("ascii", "replace")
        parts = [p for p in text.split(",") if p]
        shape = [int(p) for p in parts if p.isdigit()] if len(parts) < 32 else None
        if shape is not None and len(shape) != len(parts):
            shape = None
    if isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape):
        if math.prod(shape) == size:
            return tuple(shape)
    return (size,)


class _Columns:
    """The top-level columns of the episode files, each read whole; the last episode kept.

    Shared by the tensors: observations and next observations read their column once.
    """

    def __init__(self, episodes: list[_EpisodeFile]) -> None:
        self.episodes = episodes  # checked by the scan, their schemas read
        self.files = [episode.path for episode in episodes]
        self._kept: dict[str, tuple[int, Any]] = {}

    def get(self, number: int, name: str) -> Any:
        kept = self._kept.pop(name, None)
        if kept is not None and kept[0] == number:
            self._kept[name] = kept
            return kept[1]
        array = self.episodes[number].column(name)
        self._kept[name] = (number, array)
        return array


class _TensorReader:
    """One tensor's rows of each episode, decoded when asked; the last episode kept."""

    def __init__(self, columns: _Columns, leaf: _Leaf, lengths: list[int]) -> None:
        self.columns, self.files, self.leaf, self.lengths = columns, columns.files, leaf, lengths
        self.dtype = leaf.dtype(self.files[0] if self.files else Path())
        self._kept: tuple[int, np.ndarray] | None = None

    def episode(self, number: int) -> np.ndarray:
        """Episode ``number``'s rows, ``(steps, 1, *feature)``."""
        if self._kept is not None and self._kept[0] == number:
            return self._kept[1]
        self._kept = None  # let go of the last one first
        rows = self._decode(number)
        self._kept = (number, rows)
        _release_unused(rows.nbytes)
        return rows

    def _decode(self, number: int) -> np.ndarray:
        leaf, path, steps = self.leaf, self.files[number], self.lengths[number]
        array = self.columns.get(number, leaf.column)
        key = leaf.key()
        with _as_format_errors(path, key):
            for name in leaf.fields:
                index = array.type.get_field_index(name)
                array = array.flatten()[index]
            if len(array) < leaf.offset + steps:
                raise SchemaError(
                    f"has {len(array)} rows; expected {leaf.offset + steps}", path=path, key=key
                )
            array = array.slice(leaf.offset, steps)
            if leaf.text is not None:
                values = array.to_pylist()
                if None in values:
                    raise FormatError("holds nulls; expected strings", path=path, key=key)
                rows = encode_text(np.asarray(values, dtype=str), leaf.text)
            else:
                spec = TensorSpec(
                    leaf.name, leaf.stored.name, () if leaf.size is None else (leaf.size,)
                )
                try:
                    flat = from_arrow(Column(spec, SCALAR if leaf.size is None else LIST), array)
                except ExpcliError as e:
                    raise FormatError(e.message, path=path, key=key) from e
                rows = native(flat.reshape(steps, *leaf.feature), path, key)
        return one_column(rows).astype(self.dtype, copy=False)


_decoded = [0]  # bytes decoded since the pool last gave back what it kept


def _release_unused(decoded: int) -> None:
    """Give back what pyarrow's pool keeps of freed columns, every ``_RELEASE_BYTES`` decoded.

    mimalloc keeps the pages of freed arrays: about 150 MiB more at peak reading a 240 MiB
    folder; giving them back after every episode (of 50 steps) doubles the time to read,
    after every MiB adds about 15 %.
    """
    _decoded[0] += decoded
    if _decoded[0] < _RELEASE_BYTES:
        return
    _decoded[0] = 0
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
