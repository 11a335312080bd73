"""Gathering scattered rows from tensors left on disk, reading only the rows asked for.

A replay buffer draws a few hundred transitions at random from a dataset that may be far
larger than memory. ``take_rows`` serves such a draw from any source that reads a slice of
rows at a time (an HDF5 dataset, an ``.npz`` member, a scratch file): the rows are sorted,
neighbours are read together in one slice (rows of one HDF5 chunk always, so that each
chunk is decompressed once per draw), and each slice is bounded in bytes. Memory holds the
rows asked for plus one slice. ``gather_flat`` picks transitions ``t * num_envs + env``
out of any ``(T, N, *feature)`` tensor: a numpy array or memory map directly, a tensor
with ``take_cells`` (``LazyRows``, a sharded folder's tensors) through it, anything else with
``take`` by whole rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "GATHER_BYTES",
    "by_block",
    "cells_by_rows",
    "copy_cells",
    "flat_rows",
    "gather_flat",
    "read_spans",
    "take_flat",
    "take_rows",
]


def by_block(starts: np.ndarray, rows: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``rows`` (any order) by the block they lie in: each block and the positions of its rows.

    Blocks come in order. Block ``b`` holds rows ``starts[b]..starts[b + 1]`` (a row group,
    a file's frames), so that a reader decodes each block it touches once.
    """
    block = np.searchsorted(starts, rows, side="right") - 1
    order = np.argsort(block, kind="stable")
    edges = np.flatnonzero(np.diff(block[order])) + 1
    return [(int(block[at[0]]), at) for at in np.split(order, edges)] if len(order) else []


ROW_BY_ROW = 16 << 10
"""Cells at least this big are copied from a map one by one, into place."""

GAP_BYTES = 64 << 10
"""Rows this close together are read in one slice, the rows between them included."""

SPAN_BYTES = 4 << 20
"""The most one slice read for a gather holds (at least one row)."""

GATHER_BYTES = 64 << 20
"""Whole rows ``gather_flat`` asks of a lazy tensor at once, when a batch needs more."""


def read_spans(rows: np.ndarray, row_bytes: int, block_rows: int | None = None) -> list[range]:
    """Split sorted distinct ``rows`` into groups, each to be read as one slice.

    A group is a range of positions in ``rows``; its slice runs from its first row to its
    last. Rows join a group while the gap between them is under ``GAP_BYTES``, the slice
    stays under ``SPAN_BYTES``, and (with ``block_rows``, an HDF5 chunk's rows) they lie in
    the same block.
    """
    if not len(rows):
        return []
    gap_rows = GAP_BYTES // max(1, row_bytes)
    span_rows = max(1, SPAN_BYTES // max(1, row_bytes))
    breaks = np.diff(rows) > gap_rows + 1
    if block_rows:
        blocks = rows // block_rows
        breaks |= blocks[1:] != blocks[:-1]
    edges = [0, *(np.flatnonzero(breaks) + 1).tolist(), len(rows)]
    groups = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        while rows[hi - 1] - rows[lo] >= span_rows:  # too wide a slice: cut it
            cut = int(np.searchsorted(rows, rows[lo] + span_rows, "left"))
            groups.append(range(lo, cut))
            lo = cut
        groups.append(range(lo, hi))
    return groups


def flat_rows(index: Any, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``index`` as an array, and its row numbers flat (int64), negatives counted from the end.

    Raises:
        IndexError: An index is not an integer or lies outside ``count`` rows.
    """
    wanted = np.asarray(index)
    if wanted.size and wanted.dtype.kind not in "iu":
        raise IndexError(f"row indexes must be integers, got {wanted.dtype}")
    flat = wanted.reshape(-1).astype(np.int64, copy=False)
    if flat.size and (int(flat.min()) < -count or int(flat.max()) >= count):
        raise IndexError(f"row index out of range for {count} rows")
    return wanted, np.where(flat < 0, flat + count, flat)


def take_rows(
    read: Callable[[int, int], np.ndarray],
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    index: Any,
    block_rows: int | None = None,
) -> np.ndarray:
    """Rows ``index`` (any shape of ints, in that order) of a tensor read by slices.

    Args:
        read: Rows ``start`` to ``stop`` of the tensor, as a numpy array.
        shape: The tensor's shape.
        dtype: The dtype ``read`` gives.
        index: Row numbers; negative ones count from the end.
        block_rows: Rows of one storage block (an HDF5 chunk), if any.

    Returns:
        An array shaped ``(*index.shape, *shape[1:])``.

    Raises:
        IndexError: An index is not an integer or lies outside the rows.
    """
    wanted, flat = flat_rows(index, shape[0] if shape else 0)
    rows, inverse = np.unique(flat, return_inverse=True)
    out = np.empty((len(rows), *shape[1:]), dtype)
    row_bytes = math.prod(shape[1:]) * np.dtype(dtype).itemsize
    for group in read_spans(rows, row_bytes, block_rows):
        part = rows[group.start : group.stop]
        start = int(part[0])
        out[group.start : group.stop] = read(start, int(part[-1]) + 1)[part - start]
    if len(rows) == len(flat) and np.array_equal(rows, flat):
        return out.reshape(*wanted.shape, *shape[1:])
    return out[inverse.reshape(-1)].reshape(*wanted.shape, *shape[1:])


def gather_flat(array: Any, index: Any, num_envs: int) -> np.ndarray:
    """The transitions at flat ``index`` of a ``(T, N, *feature)`` tensor.

    ``index`` holds ``t * num_envs + env`` in any shape; the result is ``(*index.shape, *feature)``.

    Raises:
        IndexError: An index lies outside ``T * N``.
    """
    wanted = np.asarray(index, dtype=np.int64)
    feature = tuple(array.shape[2:])
    capacity = int(array.shape[0]) * num_envs
    if wanted.size and (int(wanted.min()) < 0 or int(wanted.max()) >= capacity):
        raise IndexError(f"transition index out of range for {capacity} transitions")
    if isinstance(array, np.ndarray):
        return take_flat(array.reshape(capacity, *feature), wanted)
    cells = getattr(array, "take_cells", None)
    if callable(cells) and int(array.shape[1]) == num_envs:
        return np.asarray(cells(wanted))
    if not callable(getattr(array, "take", None)):
        whole = np.asarray(array)
        return take_flat(whole.reshape(capacity, *feature), wanted)
    return cells_by_rows(array.take, tuple(array.shape), np.dtype(array.dtype), wanted)


def cells_by_rows(
    take: Callable[[np.ndarray], Any], shape: tuple[int, ...], dtype: np.dtype[Any], index: Any
) -> np.ndarray:
    """The cells at flat ``index`` (``t * N + env``) of a ``(T, N, *feature)`` tensor.

    Read as whole rows by ``take``, at most ``GATHER_BYTES`` of them at once.

    Raises:
        IndexError: An index is not an integer or lies outside ``T * N``.
    """
    num_envs, feature = shape[1], shape[2:]
    wanted, flat = flat_rows(index, shape[0] * num_envs)
    rows, envs = np.divmod(flat, num_envs)
    distinct, inverse = np.unique(rows, return_inverse=True)
    out = np.empty((len(rows), *feature), dtype)
    row_bytes = num_envs * math.prod(feature) * dtype.itemsize
    step = max(1, GATHER_BYTES // max(1, row_bytes))
    for first in range(0, len(distinct), step):
        block = np.asarray(take(distinct[first : first + step]))
        if first == 0 and step >= len(distinct):
            out[...] = block[inverse, envs]
            break
        mine = (inverse >= first) & (inverse < first + step)
        out[mine] = block[inverse[mine] - first, envs[mine]]
    return out.reshape(*wanted.shape, *feature)


def take_flat(flat: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``flat.take(index, axis=0)``, reading only the rows asked for.

    Also where the rows are misaligned (an ``.npz`` member mapped in place), which numpy would first
    copy whole.
    """
    if flat.flags.aligned or not flat.flags.c_contiguous or flat.dtype.itemsize == 1:
        return np.asarray(flat.take(index, axis=0))
    rows = flat.reshape(len(flat), -1).view(np.uint8).take(index, axis=0)
    return np.asarray(rows.view(flat.dtype).reshape(*index.shape, *flat.shape[1:]))


def copy_cells(
    array: Any, index: np.ndarray, num_envs: int, out: np.ndarray, at: np.ndarray
) -> None:
    """Cells at flat ``index`` (1-d, in range) of a ``(T, N, *feature)`` tensor, into ``out[at]``.

    A numpy array (a map) is copied from directly: cells of ``ROW_BY_ROW`` bytes or more
    (frames) one by one, with no batch-sized temporary; anything else through
    ``gather_flat``.
    """
    if not isinstance(array, np.ndarray):
        out[at] = gather_flat(array, index, num_envs)
        return
    feature = array.shape[2:]
    flat = array.reshape(array.shape[0] * num_envs, *feature)  # -1: ambiguous for no bytes
    if math.prod(feature) * array.dtype.itemsize >= ROW_BY_ROW:
        for target, cell in zip(at.tolist(), index.tolist(), strict=True):
            out[target] = flat[cell]
    else:
        out[at] = flat.take(index, 0)
