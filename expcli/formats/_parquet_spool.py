"""Transitions put at their file rows as they are read in time, taken in file order.

A file written episode by episode from a source read in time order (a slice of all envs'
rows at a time) holds each transition until every row before it in the file is there.
The spool keeps those rows in segments of ``SEGMENT_BYTES`` (a range of file rows, each
one record of every column), in memory up to ``RAM_BYTES`` of them and past that in
temporary files in the target's folder (created exclusively, never through a link, named
as ``atomic`` names temporaries so that the next write removes those a killed writer
left), and drops each segment once its rows are taken. What it holds is the rows of the
episodes under way and those after them: a short episode of one env does not wait for a
long one of another in memory, but on disk.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from expcli.files.atomic import create_temp, open_own, output_errors
from expcli.files.temp_names import remove

__all__ = ["RAM_BYTES", "SEGMENT_BYTES", "Spool"]

RAM_BYTES = 96 << 20
"""Bytes of segments kept in memory; past them, segments are files. The episode writer's
window of the latest transitions is taken only where it fits in as many."""

SEGMENT_BYTES = 32 << 20
"""Bytes of one segment, all columns together (one row at least)."""


class _Segment:
    """File rows ``first..first + rows``, each one record of every column: an array or a file."""

    def __init__(self, width: int, rows: int, file: Path | None) -> None:
        self.file, self.fd, self.width = file, -1, width
        self.array = np.zeros((rows, width), np.uint8) if file is None else None
        if file is not None:
            self.fd = open_own(file, os.O_RDWR)
        self.bytes = rows * width

    def put(self, rows: np.ndarray, records: np.ndarray) -> None:
        """``records`` at local rows ``rows``: a scatter, or (increasing) a write a run."""
        if self.array is not None:
            self.array[rows] = records
            return
        cut = np.flatnonzero(np.diff(rows) != 1) + 1
        for lo, hi in zip(np.append(0, cut), np.append(cut, len(rows)), strict=True):
            view = np.ascontiguousarray(records[lo:hi]).data.cast("B")
            at = int(rows[lo]) * self.width
            while len(view):  # a write to a regular file is short only when the disk is full
                written = os.pwrite(self.fd, view, at)
                view, at = view[written:], at + written

    def take(self, row: int, count: int) -> np.ndarray:
        """Local rows ``row..row + count``, ``(count, width)``."""
        if self.array is not None:
            return self.array[row : row + count]
        want = count * self.width
        data = os.pread(self.fd, want, row * self.width)
        if len(data) < want:  # rows never put at the file's end (cells all null): zeros
            data += bytes(want - len(data))
        return np.frombuffer(data, np.uint8).reshape(count, self.width)

    def close(self) -> None:
        self.array = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.file is not None:
            remove(self.file)
            self.file = None


def _unit(size: int) -> int:
    """The widest word (8, 4, 2 or 1 bytes) that divides ``size``."""
    return next(u for u in (8, 4, 2, 1) if size % u == 0) if size else 8


class Spool:
    """Rows of columns put at any file rows, taken in file order, dropped once taken.

    A context manager: leaving it removes every temporary file, however it is left
    (an error, Ctrl-C, SIGTERM turned into one).
    """

    def __init__(self, target: Path, widths: dict[str, int]) -> None:
        """Spool for the columns ``widths`` (bytes a row each) of the file ``target``.

        A row is one record of every column, in the order of ``widths``, so that a
        transition is put with one copy and a run of rows written with one call.
        """
        self.target, self.widths = target, widths
        # the widest unit first, so that each column's bytes copy as 8-, 4- or 2-byte words
        self._at, at = {}, 0
        for name in sorted(widths, key=lambda n: -_unit(widths[n])):
            self._at[name], at = at, at + widths[name]
        self.width = max(8, -(-at // 8) * 8)
        self.rows = max(1, SEGMENT_BYTES // self.width)
        self._segments: dict[int, _Segment] = {}
        self._made: list[Path] = []
        self._ram = 0

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def files(self) -> int:
        """How many segments are files now."""
        return sum(s.fd >= 0 for s in self._segments.values())

    def records(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        """Each column's rows (any dtype, ``(n, ...)``) packed into ``(n, width)`` records."""
        n = len(next(iter(columns.values()))) if columns else 0
        out = np.empty((n, self.width), np.uint8)
        for name, values in columns.items() if n else ():
            at, width = self._at[name], self.widths[name]
            word = np.dtype(f"u{_unit(width | at)}")
            flat = np.ascontiguousarray(values).reshape(n, -1).view(np.uint8).view(word)
            out.view(word)[:, at // word.itemsize : (at + width) // word.itemsize] = flat
        return out

    def _segment(self, number: int) -> _Segment:
        found = self._segments.get(number)
        if found is None:
            size = self.rows * self.width
            file = None
            if self._ram + size > RAM_BYTES:
                spool = self.target.with_name(self.target.name + ".spool")
                file = create_temp(spool, made=self._made)
            else:
                self._ram += size
            with output_errors(self.target, every=True):
                found = self._segments[number] = _Segment(self.width, self.rows, file)
        return found

    def put(self, rows: np.ndarray, records: np.ndarray) -> None:
        """Put ``(n, width)`` records (``records``) at file rows ``rows`` (distinct)."""
        if not len(rows):
            return
        segment = rows // self.rows
        low, high = int(segment.min()), int(segment.max())
        parts: list[tuple[int, Any]] = [(low, slice(None))]  # one segment: all rows
        if low != high:  # one sort by segment, then a slice of it each
            by = np.argsort(segment, kind="stable")
            cuts = np.searchsorted(segment[by], np.arange(low, high + 2))
            parts = [
                (low + k, by[cuts[k] : cuts[k + 1]])
                for k in range(high - low + 1)
                if cuts[k + 1] > cuts[k]
            ]
        with output_errors(self.target):
            for number, inside in parts:
                local = rows[inside] - number * self.rows
                found = self._segment(number)
                if found.fd >= 0:  # a file: its runs written in order
                    order = np.argsort(local, kind="stable")
                    found.put(local[order], records[inside][order])
                else:
                    found.put(local, records[inside])

    def take(self, first: int, stop: int) -> dict[str, np.ndarray]:
        """File rows ``first..stop`` of each column, ``(n, width)`` uint8 (views of records)."""
        pieces = []
        while first < stop:
            number = first // self.rows
            count = min(stop, (number + 1) * self.rows) - first
            pieces.append(self._segment(number).take(first % self.rows, count))
            first += count
        if not pieces:
            whole = np.zeros((0, self.width), np.uint8)
        else:
            whole = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        return {name: whole[:, at : at + self.widths[name]] for name, at in self._at.items()}

    def drop_before(self, row: int) -> None:
        """Drop the segments wholly before file row ``row`` (taken)."""
        for number in [n for n in self._segments if (n + 1) * self.rows <= row]:
            segment = self._segments.pop(number)
            if segment.fd < 0:
                self._ram -= segment.bytes
            segment.close()

    def close(self) -> None:
        """Drop every segment and remove the temporary files."""
        for segment in self._segments.values():
            segment.close()
        self._segments.clear()
        for made in self._made:
            remove(made)
        self._made.clear()
        self._ram = 0
