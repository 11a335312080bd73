"""Frames once: a next observation stored only where it is not the next row's observation.

Cell ``(t, n)`` of ``next_observations`` (or of a leaf ``next_observations/<key>``) is
*derived* when its bytes equal those of ``observations[(t + 1) % T, n]``: inside an
episode, that is every cell but the newest row. A writer compares the two byte for byte,
so nothing is inferred that was not checked: the cells that differ (episode ends, the
newest row, rows never written, an env that mutates its output buffer) are *kept*. The
file then holds, instead of the tensor, its kept cells ``(K, *feature)`` as member
``__next__/<name>/kept`` and their flat indexes ``t * N + n`` (sorted int64) as
``__next__/<name>/cells``; the metadata's ``frames`` object names each such tensor
(``{"next_observations": {"form": "sparse", "kept": K}}``) and its schema is
``FRAMES_SCHEMA``, which older readers refuse. Readers give the whole tensor back as
``DerivedRows``: observation rows one step on, with the kept cells written over them.

A shard of a folder holds a run of rows, not a whole circular memory: its last row's
successor is the next shard's first row, which it does not hold. Such a file is encoded
without the wrap (``wrap=False``: its last row's cells are all kept, whatever they hold),
and its ``frames`` object says ``"wrap": false``, which a reader checks against the cells.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from expcli.errors import SchemaError
from expcli.formats.lazy import LazyRows, row_chunks
from expcli.formats.row_gather import cells_by_rows, copy_cells, flat_rows, gather_flat, take_rows
from expcli.spec import FRAMES_SCHEMA, SUPPORTED_DTYPES, FramesForm

__all__ = [
    "FRAMES_CELL_BYTES",
    "PREFIX",
    "ByCells",
    "DerivedRows",
    "StoredOnce",
    "combined",
    "derive",
    "encode",
    "find_cells",
    "frame_pairs",
    "kept_cells",
    "sparse_members",
    "stored_once",
]

FRAMES_CELL_BYTES = 64
"""Next-observation cells of at least this many bytes are stored once by default.

A kept cell costs an 8-byte index entry, and a derived read a gather from the observations;
below 64 bytes (CartPole's cells are 16) the saving is small and the full form, read as it
lies, stays simplest.
"""

PREFIX = "__next__/"
"""Members of the sparse form are named ``__next__/<tensor>/kept`` and ``.../cells``."""

_SPARSE = "sparse"


def frame_pairs(tensors: Mapping[str, Any]) -> dict[str, str]:
    """Next-observation tensors that may be stored once, each with its observation tensor.

    ``next_observations`` goes with ``observations``, ``next_observations/<leaf>`` with
    ``observations/<leaf>``, when both are there with one dtype and shape, not empty, and
    cells of at least ``FRAMES_CELL_BYTES``.
    """
    pairs = {}
    for name, array in tensors.items():
        if name != "next_observations" and not name.startswith("next_observations/"):
            continue
        source = tensors.get(name.removeprefix("next_"))
        if source is None or np.dtype(source.dtype) != np.dtype(array.dtype):
            continue
        if tuple(source.shape) != tuple(array.shape) or not array.size:
            continue
        if math.prod(array.shape[2:]) * np.dtype(array.dtype).itemsize >= FRAMES_CELL_BYTES:
            pairs[name] = name.removeprefix("next_")
    return pairs


def kept_cells(
    following: Any, observations: Any, wrap: bool = True, limit: int | None = None
) -> np.ndarray | None:
    """Flat indexes (``t * N + n``, sorted int64) of the cells of ``following`` to keep.

    Those whose bytes differ from ``observations[(t + 1) % T, n]``; without ``wrap``, the
    cells of the last row too (their successors lie outside the rows). Read slice of rows
    by slice of rows: each slice compared with the observations one row on (the next
    slice's first row, or row 0 after the last), so memory holds two slices and the index.
    None, as soon as they number more than ``limit``: the tensor is then stored whole, and
    the index of a tensor whose cells all differ (an env that mutates its output buffer)
    is never built. A tensor taken from these observations that knows the cells where it
    may differ (``cells_apart``: a foreign table's next observations) is not read: those
    are kept (a few more than differ, never fewer).
    """
    size, envs = int(following.shape[0]), int(following.shape[1])
    apart = getattr(following, "cells_apart", None)  # taken from these observations
    known = apart(observations) if apart is not None else None
    if known is not None:
        return None if limit is not None and len(known) > limit else known
    found: list[np.ndarray] = []
    count = 0
    chunks = row_chunks(following)
    for start in chunks:
        stop = min(size, start + chunks.step)
        rows = np.asarray(following[start:stop])
        ahead = np.asarray(observations[start + 1 : stop + 1])
        if stop == size:
            ahead = np.concatenate([ahead, np.asarray(observations[0:1])])
        differ = (_cell_bytes(rows, envs) != _cell_bytes(ahead, envs)).any(axis=2)
        if stop == size and not wrap:
            differ[-1] = True
        found.append(np.flatnonzero(differ) + start * envs)
        count += len(found[-1])
        if limit is not None and count > limit:
            return None
    return np.concatenate(found).astype(np.int64) if found else np.empty(0, np.int64)


def _cell_bytes(rows: np.ndarray, envs: int) -> np.ndarray:
    """Rows ``(k, N, *feature)`` as their bytes, ``(k, N, cell_bytes)`` uint8."""
    native = np.ascontiguousarray(rows, dtype=rows.dtype.newbyteorder("="))
    return native.reshape(len(rows), envs, -1).view(np.uint8)


def encode(
    tensors: Mapping[str, Any],
    header: Mapping[str, Any],
    frames: FramesForm | str,
    path: str | os.PathLike[str],
    wrap: bool = True,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The members a file stores and its metadata object, in the form ``frames`` asks.

    With ``FramesForm.ONCE``, each tensor of ``frame_pairs`` whose kept cells take fewer bytes
    than the whole tensor is replaced by its two sparse members, and ``header`` gains
    ``frames`` and ``FRAMES_SCHEMA``; else the tensors and header are as given. ``wrap``:
    whether the last row's successor is row 0 (a whole memory) or unknown (a shard).

    Raises:
        SchemaError: A tensor's name starts with ``PREFIX``, which the sparse form owns.
    """
    members, out = dict(tensors), dict(header)
    for name in members:
        if name.startswith(PREFIX):
            raise SchemaError(f"names starting {PREFIX!r} are reserved", path=path, key=name)
    if FramesForm(frames) is FramesForm.FULL:
        return members, out
    forms = {}
    for name, source in frame_pairs(tensors).items():
        following = tensors[name]
        cell = math.prod(following.shape[2:]) * np.dtype(following.dtype).itemsize
        total = following.shape[0] * following.shape[1] * cell
        cells = kept_cells(following, tensors[source], wrap, (total - 1) // (cell + 8))
        if cells is None:
            continue  # no saving: leave it whole
        del members[name]
        members[f"{PREFIX}{name}/kept"] = _kept_rows(following, cells)
        members[f"{PREFIX}{name}/cells"] = cells
        forms[name] = {"form": _SPARSE, "kept": len(cells)} | ({} if wrap else {"wrap": False})
    if forms:
        out["schema"] = FRAMES_SCHEMA
        out["frames"] = forms
    return members, out


def _kept_rows(following: Any, cells: np.ndarray) -> LazyRows:
    """The cells ``cells`` of ``following`` as a lazy ``(K, *feature)`` tensor, read when sliced.

    A tensor left on disk, derived ones too, is read by slices of the rows that hold those
    cells (every lazy tensor reads slices; not every one gathers cells, and a derived
    tensor gathers through a map, whose pages would stay in the process); an array is
    gathered.
    """
    shape, dtype = tuple(int(d) for d in following.shape), np.dtype(following.dtype)
    if isinstance(following, LazyRows):

        def rows(first: int, stop: int) -> np.ndarray:
            return np.asarray(following.window(first, stop)[0 : stop - first])

        take = partial(take_rows, rows, shape, dtype)

        def read(start: int, stop: int) -> np.ndarray:
            return cells_by_rows(take, shape, dtype, cells[start:stop])
    else:

        def read(start: int, stop: int) -> np.ndarray:
            return gather_flat(following, cells[start:stop], shape[1])

    return LazyRows((len(cells), *shape[2:]), dtype, read)


def sparse_members(
    header: Mapping[str, Any], path: str | os.PathLike[str]
) -> dict[str, tuple[np.dtype[Any], tuple[int, ...]]]:
    """The members that the metadata's ``frames`` object says the file stores, with dtype and shape.

    Raises:
        SchemaError: ``frames`` is malformed or names a tensor the metadata does not list.
    """
    if "frames" not in header:
        return {}
    forms, tensors = header["frames"], header.get("tensors")
    if not isinstance(forms, dict) or not isinstance(tensors, dict):
        raise SchemaError("malformed 'frames' object in metadata", path=path, key="frames")
    size, envs = header.get("memory_size"), header.get("num_envs")
    out: dict[str, tuple[np.dtype[Any], tuple[int, ...]]] = {}
    for name, form in forms.items():
        spec = tensors.get(name)
        kept = form.get("kept") if isinstance(form, dict) else None
        if (
            not isinstance(form, dict)
            or name.partition("/")[0] != "next_observations"
            or form.get("form") != _SPARSE
            or type(kept) is not int
            or type(form.get("wrap", True)) is not bool
            or not isinstance(spec, dict)
            or spec.get("dtype") not in SUPPORTED_DTYPES
            or not isinstance(spec.get("shape"), list)
            or not all(type(d) is int and d >= 0 for d in spec["shape"])
            or type(size) is not int
            or type(envs) is not int
            or not 0 <= kept <= size * envs
            or name.removeprefix("next_") not in tensors
        ):
            raise SchemaError(
                f'expected {{"form": "{_SPARSE}", "kept": a count of cells, optionally "wrap": '
                "a bool} for a tensor listed with its observations",
                path=path,
                key=f"frames.{name}",
            )
        feature = tuple(spec["shape"])
        out[f"{PREFIX}{name}/kept"] = (np.dtype(spec["dtype"]), (kept, *feature))
        out[f"{PREFIX}{name}/cells"] = (np.dtype(np.int64), (kept,))
    return out


def derive(
    members: dict[str, Any],
    header: Mapping[str, Any],
    path: str | os.PathLike[str],
    source: Callable[[Any], Any] | None = None,
) -> dict[str, Any]:
    """The tensors of a file from its members: each sparse tensor rebuilt as ``DerivedRows``.

    ``source``: what the tensors derived from an observation tensor gather its cells and
    their kept cells through (a map of the file, where the format allows); by default the
    tensors themselves.
    Slices of rows are read through the tensor, so that reading a file through stays
    bounded (the pages of a map read in order stay in the process).

    Raises:
        SchemaError: A sparse member is missing, of another dtype or shape, or its cells
            are not sorted distinct indexes of the tensor.
    """
    expected = sparse_members(header, path)
    tensors = {k: v for k, v in members.items() if k not in expected}
    for key, (dtype, shape) in expected.items():
        got = members.get(key)
        if got is None:
            raise SchemaError("listed in the metadata's frames but missing", path=path, key=key)
        if np.dtype(got.dtype) != dtype or tuple(got.shape) != shape:
            raise SchemaError(
                f"stored as {np.dtype(got.dtype).name} shaped {tuple(got.shape)}; expected "
                f"{dtype.name} shaped {shape}",
                path=path,
                key=key,
            )
    for name, form in header.get("frames", {}).items():
        observations = tensors.get(name.removeprefix("next_"))
        if observations is None:
            raise SchemaError("its observations are missing", path=path, key=name)
        dtype, feature = (
            expected[f"{PREFIX}{name}/kept"][0],
            expected[f"{PREFIX}{name}/kept"][1][1:],
        )
        rows = (header["memory_size"], header["num_envs"], *feature)
        if np.dtype(observations.dtype) != dtype or tuple(observations.shape) != rows:
            raise SchemaError(
                f"stored as {np.dtype(observations.dtype).name} shaped "
                f"{tuple(observations.shape)}; expected {dtype.name} shaped {rows}, as "
                f"{name} is derived from it",
                path=path,
                key=name.removeprefix("next_"),
            )
        cells = np.asarray(members[f"{PREFIX}{name}/cells"][:], np.int64)
        capacity = int(observations.shape[0]) * int(observations.shape[1])
        if len(cells) and (
            cells[0] < 0 or cells[-1] >= capacity or bool((np.diff(cells) <= 0).any())
        ):
            raise SchemaError(
                f"expected sorted distinct cell indexes below {capacity}",
                path=path,
                key=f"{PREFIX}{name}/cells",
            )
        last = capacity - int(observations.shape[1])
        if form.get("wrap") is False and len(cells[cells >= last]) != capacity - last:
            raise SchemaError(
                'says "wrap": false; expected every cell of the last row kept',
                path=path,
                key=f"frames.{name}",
            )
        kept = members[f"{PREFIX}{name}/kept"]
        tensors[name] = DerivedRows(
            observations,
            kept,
            cells,
            form.get("wrap", True),
            gather=None if source is None else (source(observations), source(kept)),
        )
    return tensors


@dataclass(frozen=True, slots=True)
class StoredOnce:
    """A next-observation tensor stored once: its form, its cells kept of all, the bytes saved.

    ``sparse`` (``.pt``, ``.npz``, ``.h5`` and npz shards): the kept cells plus an 8-byte
    index entry each, so ``saved_bytes`` is ``cells * cell - kept * (cell + 8)``. ``nulls``
    (Parquet): the index is the column's null bitmap, which the full form writes too (its
    columns are nullable), so ``saved_bytes`` is the derived cells' bytes,
    ``(cells - kept) * cell``; ``cells`` are those the file holds a row for (rows never
    written and left out are in neither form). Both count bytes before compression.
    """

    kept: int
    cells: int
    saved_bytes: int
    form: str = _SPARSE

    def to_json(self) -> dict[str, int | str]:
        """What ``inspect --json`` prints under ``frames``."""
        return {
            "form": self.form,
            "kept": self.kept,
            "cells": self.cells,
            "saved_bytes": self.saved_bytes,
        }


def stored_once(tensors: Mapping[str, object]) -> dict[str, StoredOnce]:
    """The tensors stored once, in name order: read from either form, or a folder's shards.

    Counted from what opening the file read (the sparse cells' shape, a Parquet header's
    kept count, a folder's shards' figures), never from the data.
    """
    out = {}
    for name, array in sorted(tensors.items()):
        form = getattr(array, "once", None)  # a folder's ``ConcatRows``: its shards' figures
        form = form if isinstance(form, StoredOnce) else None
        if isinstance(array, ByCells):
            form = array.stored_once()
        if form is not None:
            out[name] = form
    return out


def combined(pieces: Sequence[tuple[StoredOnce | None, int]]) -> StoredOnce | None:
    """The figures of a tensor made of ``pieces`` (a shard's, or None where stored whole).

    Each piece comes with its cells; one stored whole keeps them all and saves nothing. None
    when no piece is stored once.
    """
    forms = {once.form for once, _ in pieces if once is not None}
    if not forms:
        return None
    kept = sum(cells if once is None else once.kept for once, cells in pieces)
    saved = sum(0 if once is None else once.saved_bytes for once, _ in pieces)
    return StoredOnce(kept, sum(cells for _, cells in pieces), saved, "+".join(sorted(forms)))


class ByCells(LazyRows):
    """A derived tensor: its rows are gathered cell by cell, through ``take_cells``."""

    def stored_once(self) -> StoredOnce | None:
        """What storing it once saved, as its file says (None: not known)."""
        return None

    def take(self, index: np.ndarray) -> np.ndarray:
        """Rows ``index`` (any shape), as ``LazyRows.take``: their cells through ``take_cells``."""
        wanted, rows = flat_rows(index, self.shape[0])
        envs = self.shape[1]
        cells = rows[:, None] * envs + np.arange(envs, dtype=np.int64)
        return self.take_cells(cells).reshape(*wanted.shape, *self.shape[1:])

    def take_cells(self, index: np.ndarray) -> np.ndarray:
        """The cells at flat ``index`` (any shape)."""
        raise NotImplementedError


class DerivedRows(ByCells):
    """A next-observation tensor rebuilt from the observations and its kept cells.

    Row ``t`` is ``observations[(t + 1) % T]`` with the kept cells of that row written over
    it; the observations are read through their own reader (a map, ``LazyRows``), never
    whole. It has no ``file_offset``: gathers go through ``take_cells``, which reads the
    observation cells one step on and the kept cells asked for.
    """

    def __init__(
        self,
        observations: Any,
        kept: Any,
        cells: np.ndarray,
        wrap: bool = True,
        gather: tuple[Any, Any] | None = None,
    ) -> None:
        """``kept``: ``(K, *feature)``, the cells at flat indexes ``cells`` (sorted).

        ``wrap``: false where every cell of the last row is kept (a shard), which is then
        never read from row 0. ``gather``: the observations and the kept cells as cells
        are gathered from (maps of the file); by default ``observations`` and ``kept``,
        which slices of rows read.
        """
        super().__init__(tuple(observations.shape), np.dtype(observations.dtype), self._rows)
        self.observations, self.kept, self.cells = observations, kept, cells
        self.wrap = wrap
        self.gather = (observations, kept) if gather is None else gather

    def _rows(self, start: int, stop: int) -> np.ndarray:
        size, envs = self.shape[0], self.shape[1]
        out = np.empty((stop - start, *self.shape[1:]), self.dtype)
        inside = min(stop + 1, size) - (start + 1)
        if inside > 0:
            out[:inside] = self.observations[start + 1 : start + 1 + inside]
        if stop == size and stop > start and self.wrap:
            out[-1] = np.asarray(self.observations[0:1])[0]
        lo, hi = np.searchsorted(self.cells, [start * envs, stop * envs])
        if hi > lo:
            flat = out.reshape(-1, *self.shape[2:])
            flat[self.cells[lo:hi] - start * envs] = np.asarray(self.kept[int(lo) : int(hi)])
        return out

    def stored_once(self) -> StoredOnce:
        """Its kept cells of all, and the bytes they and their index save."""
        cells = self.shape[0] * self.shape[1]
        cell = math.prod(self.shape[2:]) * self.dtype.itemsize
        kept = len(self.cells)
        return StoredOnce(kept, cells, cells * cell - kept * (cell + 8))

    def take_cells(self, index: np.ndarray) -> np.ndarray:
        """The cells at flat ``index``: observation cells one step on, kept cells over them."""
        size, envs = self.shape[0], self.shape[1]
        wanted, flat = flat_rows(index, size * envs)
        out = np.empty((len(flat), *self.shape[2:]), self.dtype)
        self.cells_into(flat, out, np.arange(len(flat)))
        return out.reshape(*wanted.shape, *self.shape[2:])

    def cells_into(self, flat: np.ndarray, out: np.ndarray, at: np.ndarray) -> None:
        """The cells at ``flat`` (1-d, in range) into ``out[at]``, each copied once."""
        size, envs = self.shape[0], self.shape[1]
        rows, columns = np.divmod(flat, envs)
        copy_cells(self.gather[0], (rows + 1) % size * envs + columns, envs, out, at)
        found, hit = find_cells(self.cells, flat)
        if hit.any():
            out[at[hit]] = _take(self.gather[1], found[hit])


def find_cells(cells: np.ndarray, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of ``flat`` lies in the sorted ``cells``, and whether it is one of them."""
    if not len(cells):
        return np.zeros(len(flat), np.int64), np.zeros(len(flat), bool)
    found = np.minimum(np.searchsorted(cells, flat), len(cells) - 1)
    return found, cells[found] == flat


def _take(array: Any, index: np.ndarray) -> np.ndarray:
    """Rows ``index`` of an array or a lazy tensor."""
    if isinstance(array, np.ndarray):
        return np.asarray(array[index])
    return np.asarray(array.take(index))
