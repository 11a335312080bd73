"""The episodes of a Minari dataset in parquet or arrow storage, read an episode at a time.

Scanning a folder opens every episode file once: its schema must give the same leaves as
the first episode's (names, shapes, dtypes), and its flags are read (a byte a step: episode
ends and seams need them). Each tensor is then a ``ConcatRows`` over the episodes; an
episode's rows of a tensor are decoded when a slice or a gather first touches them (a
Parquet leaf decoded alone, an Arrow IPC file mapped: its columns are views, not copies),
the file opened for that and closed again, and the last episode decoded kept per tensor.
Observations and next observations are one leaf: a Parquet episode's rows of it are
decoded once for both when the other reads them soon enough (``_Decoded``). Memory holds
about one episode of each tensor, and at most 96 MiB of rows decoded for the other
tensor, whatever the folder's size. Only plain Arrow types are read (no extension type,
no binary): JPEG-encoded images are refused.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import ExpcliError, FormatError, SchemaError
from expcli.formats._error_summary import error_summary
from expcli.formats._folder_members import folder_member, member
from expcli.formats._parquet_columns import LIST, SCALAR, Column, flat_array, from_arrow
from expcli.formats.concat_rows import ConcatRows
from expcli.formats.dataset import Dataset
from expcli.formats.layouts._episodes import SEAMS_KEY, native, one_column
from expcli.formats.layouts.minari._meta import expcli_metadata, jpeg_image_shape
from expcli.formats.lazy import SLICE_BYTES
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
_RELEASE_BYTES = SLICE_BYTES
_KEPT_BYTES = {"parquet": 96 << 20, "arrow": 0}
"""Decoded rows kept for the tensor that shares them and has yet to read them: the
observations of a folder's shard (at most half its 128 MiB) with room for the episodes
at its ends. An Arrow IPC file's columns are views on its mapping: none kept, but the
mappings (``_MAPPED_BYTES``)."""
_MAPPED_BYTES = 2 * SLICE_BYTES
"""Arrow IPC files kept mapped, the last ones read: the episodes of a slice of every
tensor (``load``, ``inspect``) map once, not once per tensor."""


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
        schema, read = episode.scan()
        found, missed = _leaves(schema, spaces, path, jpeg)
        assert read is not None  # else _leaves said which column is missing
        if leaves is None:
            leaves, skipped = found, missed
        elif [(f.name, f.feature, f.stored) for f in found] != [
            (f.name, f.feature, f.stored) for f in leaves
        ]:
            raise SchemaError(
                f"its columns differ from those of episode 0 ({files[0].name})", path=path
            )
        steps = -1
        for (_, flag), values in zip(_FLAGS, episode.flags(read), strict=True):
            steps = len(values) - 1
            flags[flag].append(values[:-1])
        if steps < 0:
            raise SchemaError("has no rows; expected the reset observation at least", path=path)
        lengths.append(steps)
    tensors: dict[str, Any] = {}
    spans: dict[str, tuple[int, int]] = {}
    readers: dict[str, int] = {}
    for leaf in leaves or []:
        first, last = spans.get(leaf.key(), (leaf.offset, leaf.offset))
        spans[leaf.key()] = (min(first, leaf.offset), max(last, leaf.offset))
        readers[leaf.key()] = readers.get(leaf.key(), 0) + 1
    decoded = _Decoded(episodes, lengths, spans, readers)
    for leaf in leaves or []:
        reader = _TensorReader(decoded, leaf)
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
    return dataset, decoded.clear


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
        names = [p.name for p in os.scandir(data) if p.is_dir() or p.is_symlink()]
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
            for p in folder_member(data, folder, "Minari").iterdir()
            if not p.name.startswith(_IGNORED) and p.name != "metadata.json"
        )
        if len(found) != 1:
            raise FormatError(
                f"holds {len(found)} data files; expected one ({DATA_FILE}.{storage})",
                path=folder,
            )
        files.append(member(data, found[0], "Minari"))
    return files


def _span(ids: list[int]) -> str:
    if not ids:
        return "none"
    return f"{ids[0]} to {ids[-1]} ({len(ids)})"


class _EpisodeFile:
    """One episode's data file, checked, and opened for each read (then closed).

    An Arrow IPC file is mapped, not read: its columns are views on the mapping, so that
    reading one costs the pages it touches, not a copy (the mapping goes once no array
    holds it). pyarrow copies what it reads with ``included_fields``, so the whole record
    batch is mapped and the column picked from it. A Parquet file's leaf is read alone.
    """

    def __init__(self, path: Path, storage: str) -> None:
        self.path, self.storage = path, storage
        self.size = _check_plain(path, storage)

    def scan(self) -> tuple[Any, list[Any] | None]:
        """The file's schema and its flag columns (terminations, truncations), unchecked.

        Read together, the file opened once; the flags are None when a flag column is
        missing (the schema's leaves say so, in their order).
        """
        return self._read([column for column, _ in _FLAGS])

    def flags(self, arrays: list[Any]) -> list[np.ndarray]:
        """The flag columns ``scan`` read, checked, a bool a row each."""
        found = []
        for (name, _), values in zip(_FLAGS, arrays, strict=True):
            with self._errors(name):
                if values.null_count or not (_is_number(values.type) or _is_bool(values.type)):
                    raise FormatError(
                        f"is {values.type} with {values.null_count} nulls; expected booleans",
                        path=self.path,
                        key=name,
                    )
                dtype = np.dtype(values.type.to_pandas_dtype())
                stored = TensorSpec(name, dtype.name, ())
                found.append(np.asarray(from_arrow(Column(stored, SCALAR), values), bool))
        return found

    def leaf(self, column: str, fields: tuple[str, ...], mapped: Any = None) -> Any:
        """The values of the leaf at ``fields`` under a top-level column, as one Arrow array.

        ``mapped``: an Arrow IPC file's table as ``mapped`` gave it (else mapped anew).
        """
        key = "/".join((column, *fields))
        # pyarrow names a Parquet leaf by its dotted path: a name holding a dot is ambiguous
        path = ".".join((column, *fields)) if "." not in "".join((column, *fields)) else None
        _, arrays = self._read([column], path, mapped)
        if arrays is None:
            raise FormatError("missing from the episode", path=self.path, key=column)
        array = arrays[0]
        with self._errors(key):
            for name in fields:
                array = array.flatten()[array.type.get_field_index(name)]
        return array

    def mapped(self) -> Any:
        """An Arrow IPC file's record batch as a table of views on the file's mapping."""
        import pyarrow as pa

        with (
            self._errors("its record batch"),
            pa.memory_map(str(self.path)) as source,
            pa.ipc.open_file(source) as reader,
        ):
            return reader.read_all()

    def _read(
        self, names: list[str], parquet_path: str | None = None, mapped: Any = None
    ) -> tuple[Any, list[Any] | None]:
        """The schema and top-level columns, whole (None if one is missing).

        Parquet: only the leaf at ``parquet_path`` under the one column named.
        """
        with self._errors(", ".join(names)):
            if self.storage == "parquet":
                parquet = self._parquet()
                schema = parquet.schema_arrow
            else:
                table = mapped if mapped is not None else self.mapped()
                schema = table.schema
            if any(schema.get_field_index(name) < 0 for name in names):
                return schema, None
            if self.storage == "parquet":
                read = [parquet_path] if parquet_path is not None else names
                table = parquet.read(columns=read, use_threads=False)
            else:
                table = table.select(names)
            return schema, [_one_chunk(table.column(i)) for i in range(len(names))]

    def _parquet(self) -> Any:
        from expcli.formats._parquet_open import open_parquet

        return open_parquet(self.path, pre_buffer=False)

    def _errors(self, what: str) -> contextlib.AbstractContextManager[None]:
        return _as_format_errors(self.path, what)


def _one_chunk(chunks: Any) -> Any:
    """A column's only chunk as it is (combining copies even one), else them combined."""
    return chunks.chunk(0) if chunks.num_chunks == 1 else chunks.combine_chunks()


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


def _check_plain(path: Path, storage: str) -> int:
    """Refuse a file that is not of the storage, or that names an extension type, unread.

    Returns its size.

    pyarrow builds a schema's extension types as it opens a file, running the deserialiser
    of any type registered in the process; Minari writes none.
    """
    magic = _PARQUET_MAGIC if storage == "parquet" else _IPC_MAGIC
    ends = len(magic) if storage == "parquet" else 1 << 16  # IPC: the schema's messages too
    with open(path, "rb") as file:
        head = file.read(ends)
        size = file.seek(0, 2)
        file.seek(max(0, size - ends))
        tail = file.read()
    if not head.startswith(magic) or not tail.endswith(magic) or size < 2 * len(magic) + 4:
        raise FormatError(
            f"not a complete {storage} file (no {magic.decode()} at both ends)", path=path
        )
    if storage == "parquet":  # its footer is checked as it is opened (open_parquet)
        return size
    # IPC: the schema is in the first message and the footer
    if _EXTENSION_KEY in head or _EXTENSION_KEY in tail:
        raise FormatError(
            "its Arrow schema declares an extension type; Minari writes only plain types "
            "and expcli never builds types named by a file",
            path=path,
        )
    return size


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


class _Decoded:
    """Each episode's rows of each leaf, decoded once for the tensors that share them.

    Observations and next observations are one leaf from rows 0 and 1 on: an episode's
    rows of both are decoded together (``spans``: the first row and the last offset a
    leaf is read from) and kept until the other tensor has read them too (``readers``:
    how many tensors read a leaf), up to the storage's ``_KEPT_BYTES``; beyond, a
    decoded episode is not kept. A folder writer reads the observations of a shard, then
    their next observations: these find the shard's episodes decoded; a whole tensor read
    before the other finds its first episodes decoded.
    """

    def __init__(
        self,
        episodes: list[_EpisodeFile],
        lengths: list[int],
        spans: dict[str, tuple[int, int]],
        readers: dict[str, int],
    ) -> None:
        self.episodes, self.lengths, self.spans = episodes, lengths, spans
        self._readers = readers
        self._kept: dict[tuple[int, str], tuple[np.ndarray, set[str]]] = {}
        self._held = 0
        self._budget = _KEPT_BYTES[episodes[0].storage] if episodes else 0
        self._mapped: OrderedDict[int, Any] = OrderedDict()
        self._mapped_bytes = 0
        self._lock = threading.Lock()

    def rows(self, number: int, leaf: _Leaf, dtype: np.dtype[Any]) -> np.ndarray:
        """Episode ``number``'s rows of the leaf, ``(steps + extra, 1, *feature)``."""
        key = (number, leaf.key())
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._read_by(key, leaf.name)
                return kept[0]
        rows = self._decode(number, leaf, dtype)
        _release_unused(rows.nbytes)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:  # another thread decoded it meanwhile
                self._read_by(key, leaf.name)
                return kept[0]
            if self._readers[key[1]] > 1 and self._held + rows.nbytes <= self._budget:
                self._kept[key] = (rows, {leaf.name})
                self._held += rows.nbytes
        return rows

    def _read_by(self, key: tuple[int, str], name: str) -> None:
        """Count tensor ``name`` as having read the kept rows; let go of them once all have."""
        rows, names = self._kept[key]
        names.add(name)
        if len(names) >= self._readers[key[1]]:
            del self._kept[key]
            self._held -= rows.nbytes

    def clear(self) -> None:
        """Let go of the rows kept and the files mapped (the folder's closer)."""
        with self._lock:
            self._kept.clear()
            self._mapped.clear()
            self._held = self._mapped_bytes = 0

    def _table(self, number: int) -> Any:
        """An Arrow IPC episode's mapped table, kept for its other leaves (None: Parquet).

        The last files mapped stay mapped up to ``_MAPPED_BYTES`` of them: the pages
        their tensors touched stay in this process while they do.
        """
        episode = self.episodes[number]
        if episode.storage == "parquet":
            return None
        with self._lock:
            table = self._mapped.get(number)
            if table is not None:
                self._mapped.move_to_end(number)
                return table
        table = episode.mapped()
        with self._lock:
            if number not in self._mapped:
                self._mapped[number] = table
                self._mapped_bytes += episode.size
            while self._mapped_bytes > _MAPPED_BYTES and len(self._mapped) > 1:
                self._mapped_bytes -= self.episodes[self._mapped.popitem(last=False)[0]].size
        return table

    def _decode(self, number: int, leaf: _Leaf, dtype: np.dtype[Any]) -> np.ndarray:
        episode, key = self.episodes[number], leaf.key()
        first, last = self.spans[key]
        path, steps = episode.path, self.lengths[number] + last - first
        array = episode.leaf(leaf.column, leaf.fields, self._table(number))
        with _as_format_errors(path, key):
            if len(array) < first + steps:
                raise SchemaError(
                    f"has {len(array)} rows; expected {first + steps}", path=path, key=key
                )
            array = array.slice(first, steps)
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
        return one_column(rows).astype(dtype, copy=False)


class _TensorReader:
    """One tensor's rows of each episode, from the leaf's decoded rows; the last episode kept."""

    def __init__(self, decoded: _Decoded, leaf: _Leaf) -> None:
        self.decoded, self.leaf = decoded, leaf
        files = [episode.path for episode in decoded.episodes]
        self.dtype = leaf.dtype(files[0] if files else Path())
        self._kept: tuple[int, np.ndarray] | None = None

    def episode(self, number: int) -> np.ndarray:
        """Episode ``number``'s rows, ``(steps, 1, *feature)``."""
        if self._kept is not None and self._kept[0] == number:
            return self._kept[1]
        self._kept = None  # let go of the last one first
        first = self.leaf.offset - self.decoded.spans[self.leaf.key()][0]
        rows = self.decoded.rows(number, self.leaf, self.dtype)
        rows = rows[first : first + self.decoded.lengths[number]]
        self._kept = (number, rows)
        return rows


_decoded = [0]  # bytes decoded since the pool last gave back what it kept


def _release_unused(decoded: int) -> None:
    """Give back what pyarrow's pool keeps of freed columns, every ``_RELEASE_BYTES`` decoded.

    mimalloc keeps the pages of freed arrays: about 150 MiB more at peak reading a 240 MiB
    folder; giving them back after every episode (of 50 steps) doubles the time to read.
    After every MiB, Parquet episodes of 4 MB decode 30 % slower (27 ms, not 21); after
    every 16 MiB, as fast, for about 20 MiB more at peak. These figures are mimalloc's, the
    pool a user gets by setting ``ARROW_DEFAULT_MEMORY_POOL``; with expcli's default,
    jemalloc (``pyarrow_parquet``), the call purges what jemalloc kept.
    """
    _decoded[0] += decoded
    if _decoded[0] < _RELEASE_BYTES:
        return
    _decoded[0] = 0
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
