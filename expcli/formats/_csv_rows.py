"""The data rows of a CSV file, read and parsed a block of lines at a time.

A block goes first to numpy's C parser (``np.loadtxt``, one typed field per column), which
takes plain numeric text such as expcli writes. Anything it refuses (a NaN payload, a
ragged or blank line, a bad cell) sends the block to the careful parser (``csv`` module and
``_csv_cells``), which reads every syntax the format allows and names the line and column
of a bad cell. From the first quote or NUL on, the rest of the file is read carefully: a
quoted cell may span lines.
"""

from __future__ import annotations

import csv
import itertools
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from expcli.errors import FormatError
from expcli.formats._csv_cells import FALSE, TRUE, Where, infer, narrow, parse

__all__ = ["Chunk", "Group", "read_chunks"]

_BLOCK_CHARS = 1 << 20  # text per block: several thousand rows
_CAREFUL_ROWS = 4096
# Bool cells are read as strings this long: a longer cell is not cut down to a valid word.
_BOOL_CHARS = 1 + max(len(word) for word in TRUE + FALSE)


@dataclass(frozen=True, slots=True)
class Group:
    """One tensor's run of columns, and its dtype (None: inferred from the cells)."""

    name: str
    start: int
    width: int
    dtype: np.dtype[Any] | None


@dataclass(frozen=True, slots=True)
class Chunk:
    """Consecutive data rows: their line numbers, and one ``(rows, width)`` array per group.

    A group of unknown dtype comes as bool, int64 or float64, whichever its cells in this
    chunk allow (``_csv_cells.infer``).
    """

    lines: Sequence[int]
    arrays: list[np.ndarray]


def read_chunks(
    path: Path, file: TextIO, columns: Sequence[str], groups: Sequence[Group], first: int
) -> Iterator[Chunk]:
    """Parse the data rows that follow the header, chunk by chunk.

    Args:
        path: The file, for error messages.
        file: The file, opened with ``newline=""`` and positioned after the header.
        columns: The header's cells.
        groups: The tensors, covering the columns in order.
        first: Line number of the first data line.

    Raises:
        FormatError: A row with another number of cells than the header, a cell that is
            not a number of its column's dtype, or malformed CSV.
        UnicodeDecodeError: The text is not UTF-8.
    """
    line = first
    kinds = [g.dtype for g in groups]  # an inferred group: the dtype its last chunk had
    while block := file.readlines(_BLOCK_CHARS):
        joined = "".join(block)
        if '"' in joined or "\0" in joined:
            yield from _careful(path, itertools.chain(block, file), columns, groups, line)
            return
        known = [kind for kind in kinds if kind is not None]
        arrays = _fast(block, groups, known) if len(known) == len(kinds) else None
        chunks = (
            [Chunk(range(line, line + len(block)), arrays)]
            if arrays is not None
            else _careful(path, block, columns, groups, line)
        )
        for chunk in chunks:
            yield chunk
            kinds = [g.dtype or a.dtype for g, a in zip(groups, chunk.arrays, strict=True)]
        line += len(block)


def _fast(
    block: list[str], groups: Sequence[Group], kinds: Sequence[np.dtype[Any]]
) -> list[np.ndarray] | None:
    """The block through numpy's C parser; None when it refuses any of it.

    Each group is parsed as ``kinds`` says (its dtype, or for an inferred group the kind of
    its last chunk). Only plain decimal numbers, ``nan``, ``inf`` and bool words pass, each
    read as the careful parser would read it; the careful parser decides the rest.
    """
    if not any(group.width for group in groups):
        return None
    fields = [
        (str(index), _field(kind), (g.width,))
        for index, (g, kind) in enumerate(zip(groups, kinds, strict=True))
    ]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy 1.x warns where it should refuse
            table = np.loadtxt(
                block, np.dtype(fields), comments=None, delimiter=",", ndmin=1, encoding=None
            )
    except (ValueError, Warning):
        return None
    if len(table) != len(block):  # loadtxt skips blank lines
        return None
    arrays = []
    for index, (group, kind) in enumerate(zip(groups, kinds, strict=True)):
        array = _convert(table[str(index)], group, kind)
        if array is None:
            return None
        arrays.append(array)
    return arrays


def _field(kind: np.dtype[Any]) -> str:
    if kind.kind == "f":
        return "f8"
    return "i8" if kind.kind in "iu" else f"U{_BOOL_CHARS}"


def _convert(cells: np.ndarray, group: Group, kind: np.dtype[Any]) -> np.ndarray | None:
    """Parsed cells ``(rows, width)`` as ``kind``.

    None where the careful parser must decide (a cell that is not a bool word, an integer or a float
    out of range).
    """
    if kind.kind == "b":
        true, false = (TRUE, FALSE) if group.dtype is not None else (("True",), ("False",))
        is_true = np.isin(cells, true)
        if not (is_true | np.isin(cells, false)).all():
            return None
        return is_true
    if kind.kind in "iu":
        info = np.iinfo(kind)
        if info.bits < 64 and ((cells < info.min) | (cells > info.max)).any():
            return None
        return cells.astype(kind)
    return narrow(cells, kind)


def _careful(
    path: Path, lines: Iterable[str], columns: Sequence[str], groups: Sequence[Group], first: int
) -> Iterator[Chunk]:
    """Rows through the csv module, cells parsed one tensor at a time with ``_csv_cells``."""
    reader = csv.reader(lines)
    width = len(columns)
    numbers: list[int] = []
    rows: list[list[str]] = []
    try:
        for row in reader:
            line = first - 1 + reader.line_num
            if len(row) != width:
                raise FormatError(
                    f"line {line}: {len(row)} columns; expected {width} like the header",
                    path=path,
                )
            numbers.append(line)
            rows.append(row)
            if len(rows) == _CAREFUL_ROWS:
                yield _cells(path, numbers, rows, columns, groups)
                numbers, rows = [], []
    except csv.Error as e:
        line = first - 1 + reader.line_num
        raise FormatError(f"line {line}: malformed CSV: {e}", path=path) from e
    if rows:
        yield _cells(path, numbers, rows, columns, groups)


def _cells(
    path: Path,
    lines: list[int],
    rows: list[list[str]],
    columns: Sequence[str],
    groups: Sequence[Group],
) -> Chunk:
    cells = np.array(rows, dtype=str).reshape(len(rows), len(columns))
    arrays = []
    for group in groups:
        where = Where(path, group.name, lines, columns, group.start)
        part = cells[:, group.start : group.start + group.width]
        arrays.append(
            infer(part, where) if group.dtype is None else parse(part, group.dtype, where)
        )
    return Chunk(lines, arrays)
