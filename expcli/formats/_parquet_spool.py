"""Transitions put at their file rows as they are read in time, taken in file order.

A file written episode by episode from a source read in time order (a slice of all envs'
rows at a time) holds each transition until every row before it in the file is there.
The spool keeps those rows in segments of ``SEGMENT_BYTES`` (all columns of a range of
file rows), in memory up to ``RAM_BYTES`` of them and past that in temporary files in
the target's folder (created exclusively, never through a link, named as ``atomic``
names temporaries so that the next write removes those a killed writer left), and drops
each segment once its rows are taken. What it holds is the rows of the episodes under way
and those after them: a short episode of one env does not wait for a long one of another
in memory, but on disk.
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
"""Bytes of segments kept in memory; past them, segments are files."""

SEGMENT_BYTES = 8 << 20
"""Bytes of one segment, all columns together (one row at least)."""


class _Segment:
    """File rows ``first..first + rows`` of every column: arrays, or regions of a file."""

    def __init__(self, widths: dict[str, int], rows: int, file: Path | None) -> None:
        self.file, self.fd = file, -1
        self.arrays: dict[str, np.ndarray] = {}
        self.at: dict[str, int] = {}
        offset = 0
        for name, width in widths.items():
            self.at[name] = offset
            offset += rows * width
        if file is None:
            self.arrays = {name: np.zeros((rows, w), np.uint8) for name, w in widths.items()}
        else:
            self.fd = open_own(file, os.O_RDWR)
        self.bytes = offset

    def put(self, name: str, rows: np.ndarray, data: np.ndarray) -> None:
        """Rows ``data`` at local rows ``rows``: a scatter, or (increasing) a write a run."""
        if self.fd < 0:
            self.arrays[name][rows] = data
            return
        cut = np.flatnonzero(np.diff(rows) != 1) + 1
        for lo, hi in zip(np.append(0, cut), np.append(cut, len(rows)), strict=True):
            view = np.ascontiguousarray(data[lo:hi]).data.cast("B")
            at = self.at[name] + int(rows[lo]) * data.shape[1]
            while len(view):  # a write to a regular file is short only when the disk is full
                written = os.pwrite(self.fd, view, at)
                view, at = view[written:], at + written

    def take(self, name: str, row: int, count: int, width: int) -> np.ndarray:
        if self.fd < 0:
            return self.arrays[name][row : row + count]
        want = count * width
        data = os.pread(self.fd, want, self.at[name] + row * width)
        if len(data) < want:  # rows never put (a column's cells all null): zeros
            data += bytes(want - len(data))
        return np.frombuffer(data, np.uint8).reshape(count, width)

    def close(self) -> None:
        self.arrays.clear()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.file is not None:
            remove(self.file)
            self.file = None


class Spool:
    """Rows of columns put at any file rows, taken in file order, dropped once taken.

    A context manager: leaving it removes every temporary file, however it is left
    (an error, Ctrl-C, SIGTERM turned into one).
    """

    def __init__(self, target: Path, widths: dict[str, int]) -> None:
        """Spool for the columns ``widths`` (bytes a row each) of the file ``target``."""
        self.target, self.widths = target, widths
        self.rows = max(1, SEGMENT_BYTES // max(1, sum(widths.values())))
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

    def _segment(self, number: int) -> _Segment:
        found = self._segments.get(number)
        if found is None:
            size = self.rows * sum(self.widths.values())
            file = None
            if self._ram + size > RAM_BYTES:
                spool = self.target.with_name(self.target.name + ".spool")
                file = create_temp(spool, made=self._made)
            else:
                self._ram += size
            with output_errors(self.target, every=True):
                found = self._segments[number] = _Segment(self.widths, self.rows, file)
        return found

    def put(self, rows: np.ndarray, columns: dict[str, np.ndarray]) -> None:
        """Put each column's ``(n, width)`` uint8 rows at file rows ``rows`` (distinct)."""
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
                picked = columns if low == high else {n: d[inside] for n, d in columns.items()}
                found = self._segment(number)
                if found.fd >= 0:  # a file: its runs written in order
                    order = np.argsort(local, kind="stable")
                    picked = {name: data[order] for name, data in picked.items()}
                    local = local[order]
                for name, data in picked.items():
                    found.put(name, local, data)

    def take(self, name: str, first: int, stop: int) -> np.ndarray:
        """File rows ``first..stop`` of column ``name``, ``(n, width)`` uint8."""
        width, pieces = self.widths[name], []
        while first < stop:
            number = first // self.rows
            count = min(stop, (number + 1) * self.rows) - first
            pieces.append(self._segment(number).take(name, first % self.rows, count, width))
            first += count
        if not pieces:
            return np.zeros((0, width), np.uint8)
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)

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
