"""CSV files: one row per transition in ``(t, env)`` order, columns ``name.i`` (skrl's header).

expcli writes every row (``T * N``, written or not), floats as the shortest repr that reads
back to the same value (NaN payloads and signs are not kept: every NaN reads back as the
canonical NaN), bools as ``True``/``False``, and a sidecar ``FILE.meta.json`` holding the
metadata object plus the row count, which restores exact dtypes, shapes and circular state.
A CSV without sidecar, such as skrl's export (only the valid rows), is read with inferred
dtypes. Cells are parsed as numbers, never evaluated.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from expcli.errors import FormatError, SchemaError
from expcli.formats._atomic import atomic_write, check_writable
from expcli.formats.dataset import Dataset
from expcli.formats.registry import dataset_from_header, encode_header, header_specs, parse_header
from expcli.spec import CircularState, TensorSpec

__all__ = ["read", "sidecar_path", "write"]

ROWS_KEY = "rows"
"""Key of the row count in the sidecar, next to the metadata object's keys."""

_SIZE_KEYS = ("memory_size", "num_envs", ROWS_KEY)
_CHUNK_ROWS = 8192
_TRUE, _FALSE = ("True", "true", "1"), ("False", "false", "0")
_INDEX = re.compile(r"[0-9]+")


class _Reader(Iterator[list[str]], Protocol):
    """What ``csv.reader`` returns: rows, and the line number of the last one read."""

    line_num: int


def sidecar_path(path: str | Path) -> Path:
    """Where the metadata of a CSV file lives: ``run.csv`` -> ``run.csv.meta.json``."""
    path = Path(path)
    return path.with_name(path.name + ".meta.json")


def write(dataset: Dataset, path: Path, *, overwrite: bool) -> None:
    """Write all ``T * N`` rows and the sidecar, both atomically.

    The CSV is written to its temporary file first; the sidecar is then written and renamed
    into place, and the CSV last, so that an interrupted write changes neither file.

    Raises:
        SchemaError: The metadata uses the sidecar's reserved key ``rows``.
        OutputExistsError: The CSV or its sidecar exists and ``overwrite`` is false.
    """
    sidecar = sidecar_path(path)
    if ROWS_KEY in dataset.metadata:
        raise SchemaError(
            "this metadata key is reserved for the row count in the CSV sidecar",
            path=path,
            key=ROWS_KEY,
        )
    check_writable(path, overwrite=overwrite)
    check_writable(sidecar, overwrite=overwrite)
    num_envs, specs = dataset.num_envs, dataset.specs()
    header = {**dataset.header(), ROWS_KEY: dataset.memory_size * num_envs}
    text = encode_header(header, path, indent=2)
    step = max(1, _CHUNK_ROWS // max(num_envs, 1))
    with atomic_write(path, "w", overwrite=overwrite) as file:
        writer = csv.writer(file, lineterminator="\n")
        writer.writerow(_columns(specs))
        for start in range(0, dataset.memory_size, step):
            parts = [dataset.tensors[s.name][start : start + step] for s in specs]
            count = parts[0].shape[0] * num_envs
            flat = [
                _cells(p.reshape(count, math.prod(s.shape)))
                for p, s in zip(parts, specs, strict=True)
            ]
            writer.writerows(np.concatenate(flat, axis=1).tolist())
        with atomic_write(sidecar, "w", overwrite=overwrite) as meta:
            meta.write(text)


def read(path: Path, *, num_envs: int | None = None) -> Dataset:
    """Read a CSV file, with its sidecar when there is one.

    Args:
        path: File to read.
        num_envs: Env columns of a CSV without sidecar (default 1); its rows are then
            ``t * num_envs + env``, and a last incomplete row of envs marks an unfilled memory.

    Raises:
        FormatError: Empty file, malformed header, ragged rows, cells that are not numbers
            of the expected dtype, a wrong row count, or an unreadable sidecar.
        SchemaError: The sidecar is not expcli's schema or disagrees with the file.
    """
    sidecar = sidecar_path(path)
    try:
        with open(path, encoding="utf-8-sig", newline="") as file:
            reader = csv.reader(file)
            columns = next(reader, None)
            if columns is None:
                raise FormatError(
                    "file is empty; expected a header row of name.i columns", path=path
                )
            if sidecar.is_file():
                return _read_with_sidecar(path, sidecar, columns, reader)
            return _read_foreign(path, columns, reader, num_envs or 1)
    except UnicodeDecodeError as e:
        raise FormatError(f"not UTF-8 text ({e.reason}); expected a CSV file", path=path) from e
    except csv.Error as e:
        raise FormatError(f"line {reader.line_num}: malformed CSV: {e}", path=path) from e


def _columns(specs: Sequence[TensorSpec]) -> list[str]:
    return [f"{s.name}.{i}" for s in specs for i in range(math.prod(s.shape))]


def _read_with_sidecar(path: Path, sidecar: Path, columns: list[str], reader: _Reader) -> Dataset:
    header = parse_header(sidecar.read_bytes(), sidecar, "sidecar")
    Dataset.split_header(header, sidecar)
    specs = header_specs(header, sidecar)
    memory_size, num_envs, rows = (_count(header, k, sidecar) for k in _SIZE_KEYS)
    if rows != memory_size * num_envs:
        raise SchemaError(
            f"rows is {rows}; expected memory_size * num_envs = {memory_size * num_envs}",
            path=sidecar,
            key=ROWS_KEY,
        )
    _check_columns(path, columns, _columns(specs))
    out = [np.empty((rows, math.prod(s.shape)), dtype=s.dtype) for s in specs]
    done = 0
    for lines, cells in _chunks(path, reader, len(columns)):
        if done + len(lines) > rows:
            raise FormatError(
                f"line {lines[rows - done]}: more rows than the {rows} the sidecar lists",
                path=path,
            )
        start = 0
        for spec, array in zip(specs, out, strict=True):
            width = array.shape[1]
            where = _Where(path, spec.name, lines, columns, start)
            array[done : done + len(lines)] = _parse(
                cells[:, start : start + width], array.dtype, where
            )
            start += width
        done += len(lines)
    if done != rows:
        raise FormatError(
            f"has {done} data rows; the sidecar {sidecar.name} says {rows}", path=path
        )
    arrays = {
        s.name: a.reshape(memory_size, num_envs, *s.shape) for s, a in zip(specs, out, strict=True)
    }
    return dataset_from_header(arrays, {k: v for k, v in header.items() if k != ROWS_KEY}, path)


def _count(header: dict[str, Any], key: str, sidecar: Path) -> int:
    value = header.get(key)
    if type(value) is not int or value < 0:
        raise SchemaError(f"is {value!r}; expected a non-negative integer", path=sidecar, key=key)
    return value


def _read_foreign(path: Path, columns: list[str], reader: _Reader, num_envs: int) -> Dataset:
    """A CSV without sidecar (skrl's export): dtypes inferred, feature sizes from the header."""
    groups = _groups(path, columns)
    chunks = list(_chunks(path, reader, len(columns)))
    lines = [line for chunk_lines, _ in chunks for line in chunk_lines]
    cells = (
        np.concatenate([c for _, c in chunks]) if chunks else np.empty((0, len(columns)), dtype=str)
    )
    rows = len(lines)
    memory_size = -(-rows // num_envs)
    filled = rows > 0 and rows % num_envs == 0
    state = CircularState(
        0 if filled else rows // num_envs, 0 if filled else rows % num_envs, filled
    )
    arrays: dict[str, np.ndarray] = {}
    for name, (start, width) in groups.items():
        where = _Where(path, name, lines, columns, start)
        values = _infer(cells[:, start : start + width], where)
        padded = np.full(
            (memory_size * num_envs, width), np.nan if values.dtype.kind == "f" else 0, values.dtype
        )
        padded[:rows] = values
        arrays[name] = padded.reshape(memory_size, num_envs, width)
    dataset = Dataset(arrays, state, {})
    dataset.validate(path)
    return dataset


def _check_columns(path: Path, found: list[str], expected: list[str]) -> None:
    for index, (got, want) in enumerate(zip(found, expected, strict=False)):
        if got != want:
            raise FormatError(
                f"line 1, column {index + 1}: header {got!r} does not match the sidecar, "
                f"which expects {want!r}",
                path=path,
                key=got,
            )
    if len(found) != len(expected):
        raise FormatError(
            f"line 1: header has {len(found)} columns; the sidecar expects {len(expected)}",
            path=path,
        )


def _groups(path: Path, columns: list[str]) -> dict[str, tuple[int, int]]:
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
    return groups


def _chunks(path: Path, reader: _Reader, width: int) -> Iterator[tuple[list[int], np.ndarray]]:
    """Data rows in chunks: their line numbers and their cells as a 2-D string array."""
    lines: list[int] = []
    rows: list[list[str]] = []
    for row in reader:
        line = reader.line_num
        if len(row) != width:
            raise FormatError(
                f"line {line}: {len(row)} columns; expected {width} like the header", path=path
            )
        lines.append(line)
        rows.append(row)
        if len(rows) == _CHUNK_ROWS:
            yield lines, np.array(rows, dtype=str).reshape(len(rows), width)
            lines, rows = [], []
    if rows:
        yield lines, np.array(rows, dtype=str).reshape(len(rows), width)


_NAN_BITS = "nan:"


@dataclass(frozen=True, slots=True)
class _Where:
    """Locates the cells of one tensor for error messages: file, line numbers, header."""

    path: Path
    name: str
    lines: list[int]
    columns: list[str]
    start: int

    def error(self, cells: np.ndarray, expected: str, ok: Callable[[str], bool]) -> FormatError:
        """The error for the first cell that ``ok`` rejects."""
        for (row, col), cell in np.ndenumerate(cells):
            if not ok(str(cell)):
                column = self.start + col
                return FormatError(
                    f"line {self.lines[row]}, column {column + 1} ({self.columns[column]!r}): "
                    f"expected {expected}, got {str(cell)!r}",
                    path=self.path,
                    key=self.name,
                )
        return FormatError(f"expected {expected}", path=self.path, key=self.name)


def _parse(cells: np.ndarray, dtype: np.dtype[Any], where: _Where) -> np.ndarray:
    """Cells (strings) as an array of ``dtype``; a FormatError locates the first bad one."""
    if dtype.kind == "b":
        true = np.isin(cells, _TRUE)
        if not (true | np.isin(cells, _FALSE)).all():
            raise where.error(cells, "True or False", lambda s: s in _TRUE or s in _FALSE)
        return true
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        expected = f"an integer in {info.min}..{info.max} ({dtype.name})"
        try:
            ints = cells.astype(np.int64)
        except (ValueError, OverflowError) as e:
            raise where.error(cells, expected, lambda s: _int_in(s, info.min, info.max)) from e
        if ((ints < info.min) | (ints > info.max)).any():
            raise where.error(cells, expected, lambda s: _int_in(s, info.min, info.max))
        return np.asarray(ints.astype(dtype))
    payloads = np.char.startswith(cells, _NAN_BITS) if cells.size else np.zeros(cells.shape, bool)
    bits = cells[payloads]
    if bits.size:
        cells = np.where(payloads, "nan", cells)
    try:
        floats = cells.astype(np.float64)
    except ValueError as e:
        raise where.error(cells, f"a number ({dtype.name})", _is_float) from e
    with np.errstate(over="ignore"):
        values = floats.astype(dtype)
        if (np.isinf(values) & np.isfinite(floats)).any():
            raise where.error(cells, f"a number within {dtype.name}'s range", _fits(dtype))
    if bits.size:
        values.view(f"u{dtype.itemsize}")[payloads] = _nan_bits(bits, dtype, where)
    return values


def _cells(values: np.ndarray) -> np.ndarray:
    """Values as Python objects for the csv writer; a NaN that is not numpy's own NaN
    (another sign or payload) becomes ``nan:0x<bits>`` so that it reads back bit for bit."""
    cells = values.astype(object)
    if values.dtype.kind == "f":
        raw = values.view(f"u{values.dtype.itemsize}")
        canonical = np.array(np.nan, dtype=values.dtype).view(raw.dtype)
        odd = np.isnan(values) & (raw != canonical)
        if odd.any():
            cells[odd] = [f"{_NAN_BITS}{int(b):#x}" for b in raw[odd]]
    return cells


def _nan_bits(texts: np.ndarray, dtype: np.dtype[Any], where: _Where) -> np.ndarray:
    """The raw bits written as ``nan:0x...``, checked to be NaNs of ``dtype``."""
    unsigned = np.dtype(f"u{dtype.itemsize}")

    def valid(text: str) -> bool:
        try:
            value = int(text[len(_NAN_BITS) :], 16)
        except ValueError:
            return not text.startswith(_NAN_BITS)
        if not 0 <= value <= np.iinfo(unsigned).max:
            return False
        return bool(np.isnan(np.array(value, dtype=unsigned).view(dtype)))

    if not all(valid(str(t)) for t in texts):
        raise where.error(texts.reshape(1, -1), f"nan:0x<bits of a {dtype.name} NaN>", valid)
    return np.array([int(str(t)[len(_NAN_BITS) :], 16) for t in texts], dtype=unsigned)


def _infer(cells: np.ndarray, where: _Where) -> np.ndarray:
    """Parse cells of unknown dtype: bool, else int64, else float32 when exact, else float64."""
    if cells.size and np.isin(cells, ("True", "False")).all():
        return np.asarray(cells == "True")
    if cells.size:
        try:
            return cells.astype(np.int64)
        except (ValueError, OverflowError):
            pass
    floats = _parse(cells, np.dtype(np.float64), where)
    with np.errstate(over="ignore"):
        narrow = floats.astype(np.float32)
    return narrow if np.array_equal(narrow, floats, equal_nan=True) else floats


def _int_in(text: str, low: int, high: int) -> bool:
    try:
        return low <= int(text) <= high
    except ValueError:
        return False


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _fits(dtype: np.dtype[Any]) -> Callable[[str], bool]:
    def ok(text: str) -> bool:
        value = float(text)
        return not math.isfinite(value) or bool(np.isfinite(np.array(value).astype(dtype)))

    return ok
