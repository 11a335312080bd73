"""CSV cells (strings) as numbers, parsed with care.

The first bad cell is named by its line, column and header. Cells are parsed as numbers, never
evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError
from expcli.formats._csv_text import NAN_BITS

__all__ = ["FALSE", "TRUE", "Where", "infer", "parse"]

TRUE, FALSE = ("True", "true", "1"), ("False", "false", "0")
"""What a bool cell may hold (expcli writes the first of each)."""


@dataclass(frozen=True, slots=True)
class Where:
    """Locates the cells of one tensor for error messages: file, line numbers, header."""

    path: Path
    name: str
    lines: Sequence[int]
    columns: Sequence[str]
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


def parse(cells: np.ndarray, dtype: np.dtype[Any], where: Where) -> np.ndarray:
    """Cells (strings) as an array of ``dtype``; a FormatError locates the first bad one."""
    if dtype.kind == "b":
        true = np.isin(cells, TRUE)
        if not (true | np.isin(cells, FALSE)).all():
            raise where.error(cells, "True or False", lambda s: s in TRUE or s in FALSE)
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
    payloads = np.char.startswith(cells, NAN_BITS) if cells.size else np.zeros(cells.shape, bool)
    numbers = np.where(payloads, "nan", cells) if payloads.any() else cells
    try:
        floats = numbers.astype(np.float64)
    except ValueError as e:
        raise where.error(cells, f"a number ({dtype.name})", _is_float) from e
    values = narrow(floats, dtype)
    if values is None:
        raise where.error(numbers, f"a number within {dtype.name}'s range", _fits(dtype))
    if payloads.any():
        values.view(f"u{dtype.itemsize}")[payloads] = _nan_bits(cells, payloads, dtype, where)
    return values


def narrow(floats: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray | None:
    """float64 values cast to ``dtype``; None when a finite one is out of its range."""
    with np.errstate(over="ignore"):
        values = floats.astype(dtype)
    if dtype.itemsize < 8 and (np.isinf(values) & np.isfinite(floats)).any():
        return None
    return values


def infer(cells: np.ndarray, where: Where) -> np.ndarray:
    """Cells of unknown dtype: bool when all are True/False, else int64, else float64."""
    if cells.size and np.isin(cells, ("True", "False")).all():
        return np.asarray(cells == "True")
    if cells.size:
        try:
            return cells.astype(np.int64)
        except (ValueError, OverflowError):
            pass
    return parse(cells, np.dtype(np.float64), where)


def _nan_bits(
    cells: np.ndarray, payloads: np.ndarray, dtype: np.dtype[Any], where: Where
) -> np.ndarray:
    """The raw bits of the ``payloads`` cells (``nan:0x...``), checked to be NaNs of ``dtype``."""
    unsigned = np.dtype(f"u{dtype.itemsize}")

    def valid(text: str) -> bool:
        if not text.startswith(NAN_BITS):
            return True
        try:
            value = int(text[len(NAN_BITS) :], 16)
        except ValueError:
            return False
        if not 0 <= value <= np.iinfo(unsigned).max:
            return False
        return bool(np.isnan(np.array(value, dtype=unsigned).view(dtype)))

    texts = [str(t) for t in cells[payloads]]
    if not all(valid(t) for t in texts):
        raise where.error(cells, f"nan:0x<bits of a {dtype.name} NaN>", valid)
    return np.array([int(t[len(NAN_BITS) :], 16) for t in texts], dtype=unsigned)


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
        with np.errstate(over="ignore"):
            return not math.isfinite(value) or bool(np.isfinite(np.array(value).astype(dtype)))

    return ok
