"""SumTree's descent and update compiled with numba: one call per batch, not thirty.

Imported only when numba is installed; ``SumTree`` falls back to numpy otherwise. The tree
is one float64 array, level after level (leaves first), ``starts`` giving where each level
begins; node ``i`` of a level has children ``16 i .. 16 i + 15`` in the level below. Every
sum is added up child after child, in the order the descent scans them, so a scan over all
children of a node ends exactly at the node's value.
"""

from __future__ import annotations

from collections.abc import Callable

import numba  # type: ignore[import-untyped, unused-ignore]
import numpy as np

__all__ = ["descend", "draw", "rebuild", "update"]

FANOUT_BITS = 4
FANOUT = 1 << FANOUT_BITS

_jit = numba.njit(cache=True, nogil=True)


def _pick(flat: np.ndarray, start: int, width: int, residual: np.ndarray, j: int) -> int:
    """The child of ``flat[start : start + width]`` holding mass ``residual[j]``.

    Leaves in ``residual[j]`` the mass left inside that child. Mass at or past the end
    (rounding) goes to the last positive child, and to the end of it (``inf``).
    """
    mass = residual[j]
    run = 0.0
    last = 0
    for k in range(width):
        value = flat[start + k]
        if value > 0:
            if mass < run + value:
                residual[j] = mass - run
                return k
            last = k
        run += value
    residual[j] = np.inf
    return last


_pick_jit = numba.njit(cache=True, nogil=True, inline="always")(_pick)


def _descend(flat: np.ndarray, starts: np.ndarray, residual: np.ndarray, out: np.ndarray) -> float:
    """``out[j]``: the leaf where the running sum of priorities first exceeds ``residual[j]``.

    Overwritten with the mass left inside that leaf.

    The batch goes down level by level: a first pass starts the loads of every draw's
    16 children (they miss the cache at the lower levels, and independent loads overlap),
    then a second pass scans them. Returns the sum of what the first pass read, which
    keeps the compiler from dropping those loads; callers ignore it.
    """
    depth = len(starts) - 1
    top = starts[depth]
    for j in range(len(residual)):
        out[j] = _pick_jit(flat, top, len(flat) - top, residual, j)
    touched = 0.0
    for level in range(depth - 1, -1, -1):
        first = starts[level]
        for j in range(len(residual)):
            row = first + out[j] * FANOUT
            touched += flat[row] + flat[row + FANOUT // 2]
        for j in range(len(residual)):
            row = first + out[j] * FANOUT
            out[j] = out[j] * FANOUT + _pick_jit(flat, row, FANOUT, residual, j)
    return touched


_descend_jit = _jit(_descend)


def _draw(
    flat: np.ndarray, starts: np.ndarray, uniform: np.ndarray, out: np.ndarray, priority: np.ndarray
) -> float:
    """Draw leaves in proportion to their priorities.

    ``out[j]`` is the leaf at fraction ``uniform[j]`` (in [0, 1); overwritten) of the total,
    ``priority[j]`` its priority.

    Returns:
        The total; when it is 0 nothing is drawn.
    """
    top = flat[starts[len(starts) - 1] :]
    total = 0.0
    for value in top:
        total += value
    if total <= 0:
        return total
    for j in range(len(uniform)):
        uniform[j] *= total
    _descend_jit(flat, starts, uniform, out)
    for j in range(len(out)):
        priority[j] = flat[out[j]]
    return total


def _update(
    flat: np.ndarray, starts: np.ndarray, index: np.ndarray, values: np.ndarray, smallest: float
) -> tuple[int, float]:
    """Write ``values`` at leaf ``index`` (in order: the last one wins).

    Then recompute every ancestor from its children.

    Returns:
        How many writes replaced a leaf equal to ``smallest`` (a repeated index may count
        twice), and the smallest value written.
    """
    hits = 0
    lowest = np.inf
    for j in range(len(index)):
        leaf = index[j]
        if flat[leaf] == smallest:
            hits += 1
        flat[leaf] = values[j]
        lowest = min(lowest, values[j])
    for level in range(len(starts) - 1):
        first, parents = starts[level], starts[level + 1]
        shift = FANOUT_BITS * (level + 1)
        for j in range(len(index)):
            node = index[j] >> shift
            row = first + node * FANOUT
            total = 0.0
            for k in range(FANOUT):
                total += flat[row + k]
            flat[parents + node] = total
    return hits, lowest


def _rebuild(flat: np.ndarray, starts: np.ndarray) -> None:
    """Recompute every node above the leaves from its children."""
    for level in range(len(starts) - 1):
        first, parents = starts[level], starts[level + 1]
        for node in range((parents - first) >> FANOUT_BITS):
            row = first + node * FANOUT
            total = 0.0
            for k in range(FANOUT):
                total += flat[row + k]
            flat[parents + node] = total


Arrays = np.ndarray
descend: Callable[[Arrays, Arrays, Arrays, Arrays], float] = _descend_jit
draw: Callable[[Arrays, Arrays, Arrays, Arrays, Arrays], float] = _jit(_draw)
update: Callable[[Arrays, Arrays, Arrays, Arrays, float], tuple[int, float]] = _jit(_update)
rebuild: Callable[[Arrays, Arrays], None] = _jit(_rebuild)
