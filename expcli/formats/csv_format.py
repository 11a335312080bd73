"""CSV files: one row per transition in ``(t, env)`` order, columns ``name.i`` (skrl's header).

expcli writes every row (``T * N``, written or not) with numbers as ``_csv_text`` writes them
(floats as the shortest text that reads back bit for bit, a NaN other than numpy's default
as ``nan:0x<bits>``, bools as ``True``/``False``), and a sidecar ``FILE.meta.json`` holding
the metadata object plus the row count, which restores exact dtypes, shapes and circular
state. A CSV without sidecar, such as skrl's export (only the valid rows), is read with
inferred dtypes. Cells are parsed as numbers, never evaluated.

Both directions stream. The writer formats a chunk of rows at a time. The reader parses a
chunk at a time into a ``RowSpill`` (a scratch file in the temporary folder, never beside
the source) and serves each tensor from there as ``LazyRows``, so converting a CSV file
holds a few chunks in memory, whatever its size.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TextIO

import numpy as np

from expcli.errors import FormatError, SchemaError
from expcli.files.atomic import atomic_path, open_own
from expcli.formats._csv_rows import Chunk, Group, read_chunks
from expcli.formats._csv_text import encode_rows
from expcli.formats._guards import MAX_METADATA_BYTES
from expcli.formats.dataset import Dataset, read_whole
from expcli.formats.header import dataset_from_header, encode_header, header_specs, parse_header
from expcli.formats.lazy import LazyRows, RowSpill
from expcli.formats.rows import WritePlan
from expcli.spec import CircularState, TensorSpec

if TYPE_CHECKING:
    from expcli.formats.block_cache import BlockCache

__all__ = ["open_lazy", "read", "sidecar_path", "write", "write_rows"]

ROWS_KEY = "rows"
"""Key of the row count in the sidecar, next to the metadata object's keys."""

_SIZE_KEYS = ("memory_size", "num_envs", ROWS_KEY)
_CHUNK_CELLS = 1 << 16  # cells the writer formats at a time
_INDEX = re.compile(r"[0-9]+")


def sidecar_path(path: str | Path) -> Path:
    """Where the metadata of a CSV file lives: ``run.csv`` -> ``run.csv.meta.json``."""
    path = Path(path)
    return path.with_name(path.name + ".meta.json")


def write(dataset: Dataset, plan: WritePlan) -> None:
    """Write all ``T * N`` rows and the sidecar, both atomically, a chunk of rows at a time.

    Both go to temporary files first; the sidecar is then renamed into place, and the CSV
    last (a failed rename of the CSV puts the old sidecar back), so that an interrupted
    write changes neither file.

    Raises:
        SchemaError: The metadata uses the sidecar's reserved key ``rows``.
        OutputExistsError: The CSV or its sidecar exists and ``overwrite`` is false.
    """
    path = plan.target
    if ROWS_KEY in dataset.metadata:
        raise SchemaError(
            "this metadata key is reserved for the row count in the CSV sidecar",
            path=path,
            key=ROWS_KEY,
        )
    header = {**dataset.header(), ROWS_KEY: dataset.memory_size * dataset.num_envs}
    text = encode_header(header, path, indent=2)
    suffix = sidecar_path(path).name[len(path.name) :]
    with atomic_path(path, overwrite=plan.overwrite, companions=(suffix,)) as tmp:
        with open(tmp, "wb", opener=open_own) as file:
            write_rows(dataset, file)
        with open(sidecar_path(tmp), "w", encoding="utf-8", newline="", opener=open_own) as meta:
            meta.write(text)


def write_rows(dataset: Dataset, file: IO[bytes]) -> None:
    """Write the header row and all ``T * N`` rows to ``file`` (no sidecar).

    A chunk of rows at a time; ``file`` may be a stream.
    """
    num_envs, specs = dataset.num_envs, dataset.specs()
    columns = _columns(specs)
    rows = max(1, _CHUNK_CELLS // max(1, len(columns)))  # CSV rows formatted at a time
    step = max(1, rows // max(1, num_envs))  # tensor rows read at a time
    line = io.StringIO()
    csv.writer(line, lineterminator="\n").writerow(columns)
    file.write(line.getvalue().encode())
    for start in range(0, dataset.memory_size, step):
        count = min(step, dataset.memory_size - start) * num_envs
        blocks = [
            np.asarray(dataset.tensors[s.name][start : start + step]).reshape(
                count, math.prod(s.shape)
            )
            for s in specs
        ]
        for first in range(0, count, rows):
            file.write(encode_rows([b[first : first + rows] for b in blocks]))


def read(path: Path, *, num_envs: int | None = None) -> Dataset:
    """Read a CSV file, with its sidecar when there is one, into memory.

    Args:
        path: File to read.
        num_envs: Env columns of a CSV without sidecar (default 1); its rows are then
            ``t * num_envs + env``, and a last incomplete row of envs marks an unfilled memory.

    Raises:
        FormatError: Empty file, malformed header, ragged rows, cells that are not numbers
            of the expected dtype, a wrong row count, or an unreadable sidecar.
        SchemaError: The sidecar is not expcli's schema or disagrees with the file.
        ConfigError: The memory available cannot hold the data (said once the text is
            parsed into the scratch file, before any of it is read into memory).
    """
    return read_whole(open_lazy(path, num_envs=num_envs), path)


def open_lazy(
    path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
) -> tuple[Dataset, Callable[[], None]]:
    """Like ``read``, but the tensors are ``LazyRows`` over a scratch file of parsed rows.

    The scratch file is in the temporary folder (``TMPDIR``), never beside the CSV; call the
    closer after.

    Raises:
        FormatError, SchemaError: As ``read``.
    """
    del cache  # the parsed rows are a scratch file, read in place
    sidecar = sidecar_path(path)
    try:
        with open(path, encoding="utf-8-sig", newline="") as file:
            reader = csv.reader(file)
            try:
                columns = next(reader, None)
            except csv.Error as e:
                raise FormatError(f"line {reader.line_num}: malformed CSV: {e}", path=path) from e
            if columns is None:
                raise FormatError(
                    "file is empty; expected a header row of name.i columns", path=path
                )
            first = reader.line_num + 1
            if sidecar.is_file():
                return _with_sidecar(path, sidecar, file, columns, first)
            return _foreign(path, file, columns, first, num_envs or 1)
    except UnicodeDecodeError as e:
        raise FormatError(f"not UTF-8 text ({e.reason}); expected a CSV file", path=path) from e


def _columns(specs: Sequence[TensorSpec]) -> list[str]:
    return [f"{s.name}.{i}" for s in specs for i in range(math.prod(s.shape))]


def _with_sidecar(
    path: Path, sidecar: Path, file: TextIO, columns: list[str], first: int
) -> tuple[Dataset, Callable[[], None]]:
    with open(sidecar, "rb") as f:
        text = f.read(MAX_METADATA_BYTES + 1)
    if len(text) > MAX_METADATA_BYTES:
        raise FormatError(f"is larger than {MAX_METADATA_BYTES:,} bytes", path=sidecar)
    header = parse_header(text, sidecar, "sidecar")
    Dataset.split_header(header, sidecar)
    specs = header_specs(header, sidecar)
    memory_size, num_envs, rows = (_count(header, k, sidecar) for k in _SIZE_KEYS)
    if rows != memory_size * num_envs:
        raise SchemaError(
            f"rows is {rows}; expected memory_size * num_envs = {memory_size * num_envs}",
            path=sidecar,
            key=ROWS_KEY,
        )
    expected = sum(math.prod(s.shape) for s in specs)  # counted first: shapes may be absurd
    if expected != len(columns):
        raise FormatError(
            f"line 1: header has {len(columns)} columns; the sidecar expects {expected}",
            path=path,
        )
    _check_names(path, columns, _columns(specs))
    groups, start = [], 0
    for spec in specs:
        groups.append(Group(spec.name, start, math.prod(spec.shape), np.dtype(spec.dtype)))
        start += math.prod(spec.shape)
    spill = RowSpill([g.width for g in groups])
    try:
        for chunk in read_chunks(path, file, columns, groups, first):
            if spill.rows + len(chunk.lines) > rows:
                line = chunk.lines[rows - spill.rows]
                raise FormatError(
                    f"line {line}: more rows than the {rows} the sidecar lists", path=path
                )
            spill.append(chunk.arrays)
        if spill.rows != rows:
            raise FormatError(
                f"has {spill.rows} data rows; the sidecar {sidecar.name} says {rows}", path=path
            )
        arrays: dict[str, Any] = {
            s.name: _lazy(spill, index, (memory_size, num_envs, *s.shape), np.dtype(s.dtype))
            for index, s in enumerate(specs)
        }
        own = {k: v for k, v in header.items() if k != ROWS_KEY}
        return dataset_from_header(arrays, own, path), spill.close
    except BaseException:
        spill.close()
        raise


def _count(header: dict[str, Any], key: str, sidecar: Path) -> int:
    value = header.get(key)
    if type(value) is not int or value < 0:
        raise SchemaError(f"is {value!r}; expected a non-negative integer", path=sidecar, key=key)
    return value


def _foreign(
    path: Path, file: TextIO, columns: list[str], first: int, num_envs: int
) -> tuple[Dataset, Callable[[], None]]:
    """A CSV without sidecar (skrl's export): dtypes inferred, feature sizes from the header."""
    groups = [Group(name, start, width, None) for name, (start, width) in _groups(path, columns)]
    kinds = _Kinds(path, columns, groups)
    spill = RowSpill([g.width for g in groups])
    try:
        for chunk in read_chunks(path, file, columns, groups, first):
            kinds.add(chunk)
            spill.append(chunk.arrays)
        rows = spill.rows
        memory_size = -(-rows // num_envs)
        filled = rows > 0 and rows % num_envs == 0
        state = CircularState(
            0 if filled else rows // num_envs, 0 if filled else rows % num_envs, filled
        )
        arrays: dict[str, Any] = {
            g.name: _lazy(spill, index, (memory_size, num_envs, g.width), dtype)
            for index, (g, dtype) in enumerate(zip(groups, kinds.dtypes(), strict=True))
        }
        dataset = Dataset(arrays, state, {})
        dataset.validate(path)
        return dataset, spill.close
    except BaseException:
        spill.close()
        raise


def _lazy(spill: RowSpill, group: int, shape: tuple[int, ...], dtype: np.dtype[Any]) -> LazyRows:
    """A tensor over the spill's rows of a group.

    Rows ``t * N + env``, cast to ``dtype`` (int64 through float64, as the text would have been
    read), padded past the last row (NaN for floats, else zero).
    """
    num_envs = shape[1]

    def read(start: int, stop: int) -> np.ndarray:
        rows = spill.read(group, start * num_envs, min(stop * num_envs, spill.rows))
        if dtype.kind == "f" and rows.dtype.kind != "f":
            rows = rows.astype(np.float64)
        rows = rows.astype(dtype, copy=False)
        missing = (stop - start) * num_envs - len(rows)
        if missing:
            fill = np.full((missing, *rows.shape[1:]), np.nan if dtype.kind == "f" else 0, dtype)
            rows = np.concatenate([rows, fill])
        return rows.reshape(stop - start, *shape[1:])

    return LazyRows(shape, dtype, read)


class _Kinds:
    """The dtypes of the tensors of a CSV without sidecar, from what their chunks held.

    Bool if every cell is True or False, else int64 if every cell is an integer, else float32 when
    every value is one exactly, else float64.
    """

    def __init__(self, path: Path, columns: list[str], groups: list[Group]) -> None:
        self.path, self.columns, self.groups = path, columns, groups
        self.kinds: list[str] = ["" for _ in groups]  # "", "b", "i" or "f"
        self.exact = [True for _ in groups]  # every value so far is a float32
        self.first: list[tuple[int, str]] = [(0, "") for _ in groups]  # line, first cell

    def add(self, chunk: Chunk) -> None:
        """Take a chunk's arrays into account.

        Raises:
            FormatError: A tensor holds bools in some rows and numbers in others.
        """
        for index, (group, array) in enumerate(zip(self.groups, chunk.arrays, strict=True)):
            kind, seen = array.dtype.kind, self.kinds[index]
            if array.size and not seen:
                self.first[index] = (chunk.lines[0], str(array[0, 0]))
            if seen and (seen == "b") != (kind == "b"):
                # The first cell that is not a number: the first of the first chunk when it
                # held bools, else the first of this chunk, which holds nothing but bools.
                line, cell = self.first[index] if seen == "b" else (chunk.lines[0], array[0, 0])
                raise FormatError(
                    f"line {line}, column {group.start + 1} ({self.columns[group.start]!r}): "
                    f"expected a number (float64), got {str(cell)!r}",
                    path=self.path,
                    key=group.name,
                )
            self.kinds[index] = max(seen, kind, key="bif".find) if seen else kind
            if kind != "b" and self.exact[index]:
                floats = array.astype(np.float64)
                with np.errstate(over="ignore"):
                    narrow = floats.astype(np.float32)
                self.exact[index] = bool(np.array_equal(narrow, floats, equal_nan=True))

    def dtypes(self) -> list[np.dtype[Any]]:
        """Each tensor's dtype (float32 for one without rows)."""
        names = {"b": "bool", "i": "int64"}
        return [
            np.dtype(names.get(kind) or ("float32" if exact else "float64"))
            for kind, exact in zip(self.kinds, self.exact, strict=True)
        ]


def _check_names(path: Path, found: list[str], expected: list[str]) -> None:
    for index, (got, want) in enumerate(zip(found, expected, strict=True)):
        if got != want:
            raise FormatError(
                f"line 1, column {index + 1}: header {got!r} does not match the sidecar, "
                f"which expects {want!r}",
                path=path,
                key=got,
            )


def _groups(path: Path, columns: list[str]) -> list[tuple[str, tuple[int, int]]]:
    """Tensor name -> (first column, width) from a header of ``name.0, name.1, ...`` runs."""
    groups: dict[str, tuple[int, int]] = {}
    current: str | None = None
    for index, column in enumerate(columns):
        name, dot, number = column.rpartition(".")
        expected = groups[name][1] if name == current else 0
        if not (dot and name and _INDEX.fullmatch(number) and int(number) == expected) or (
            name != current and name in groups
        ):
            raise FormatError(
                f"line 1, column {index + 1}: header {column!r}; expected NAME.INDEX columns "
                f"numbered 0, 1, ... for each tensor"
                + (f" (here {current}.{groups[current][1]})" if current else ""),
                path=path,
                key=column,
            )
        start = groups[name][0] if name == current else index
        groups[name] = (start, expected + 1)
        current = name
    return list(groups.items())
