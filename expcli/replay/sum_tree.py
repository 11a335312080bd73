"""SumTree: priorities with batch updates and prefix-sum sampling, compiled or in numpy.

A 16-ary tree: leaves hold the priorities, each level above holds the sums of 16 nodes of
the level below. An update writes the leaves and recomputes each ancestor from its 16
children: no change is ever added to a sum, so sums never drift from their leaves, and a
repeated index needs no special care.

Two ways to walk it, with the same results up to rounding:

* compiled (numba, when installed): one call per batch descends from a top of at most 16
  nodes, one call per batch updates;
* numpy: every call costs about a microsecond whatever its size, so the tree keeps a top
  level of up to ``TOP_SIZE`` nodes whose cumulative sum is cached, finds the top node of
  the whole batch with one ``searchsorted``, then descends two or three levels with eleven
  whole-batch operations each.
"""

from __future__ import annotations

import functools
from types import ModuleType

import numpy as np

from expcli.errors import InvalidValueError, MissingDependencyError

__all__ = ["SumTree", "compiled_available"]

FANOUT_BITS = 4  # 16 children per node
FANOUT = 1 << FANOUT_BITS
TOP_SIZE = 4096
"""Most nodes of the numpy tree's top level (searched through its cumulative sum)."""
LARGE_UPDATE = 1 / 64
"""An update of more than this share of the leaves rewrites them all, then rebuilds."""


@functools.cache
def _kernels() -> ModuleType | None:
    try:
        from expcli.replay import _sum_tree_jit
    except ImportError:
        return None
    return _sum_tree_jit


def compiled_available() -> bool:
    """Whether numba is installed, so that trees are walked by compiled code."""
    return _kernels() is not None


class SumTree:
    """Non-negative priorities of ``capacity`` items; sample items in proportion to them.

    Also keeps the smallest positive priority (for importance weights) with a count of
    the leaves holding it, recounted over all leaves only when the last of them changes:
    in prioritized replay the smallest priority is the least likely to be drawn and
    updated, so that is rare.

    Args:
        capacity: Number of items (leaves); priorities start at 0 (never drawn).
        compiled: Walk the tree with numba-compiled code (True), with numpy (False), or
            the former when numba is installed (None).

    Raises:
        ValueError: ``capacity`` is less than 1.
        MissingDependencyError: ``compiled`` is True but numba is not installed.
    """

    def __init__(self, capacity: int, compiled: bool | None = None) -> None:
        if capacity < 1:
            raise InvalidValueError(f"capacity must be at least 1, got {capacity}")
        self._jit = _kernels() if compiled is not False else None
        if compiled and self._jit is None:
            raise MissingDependencyError("numba", "fast", "a compiled SumTree")
        top = FANOUT if self._jit is not None else TOP_SIZE
        depth = 0
        while -(-capacity // FANOUT**depth) > top:
            depth += 1
        padded = -(-capacity // FANOUT**depth) * FANOUT**depth
        sizes = [padded >> (FANOUT_BITS * level) for level in range(depth + 1)]
        starts = np.cumsum([0, *sizes])
        self.capacity = int(capacity)
        self._flat = _aligned_zeros(int(starts[-1]))
        self._starts = np.asarray(starts[:-1], dtype=np.int64)
        self._levels = [self._flat[a:b] for a, b in zip(starts[:-1], starts[1:], strict=True)]
        self._rows = [level.reshape(-1, FANOUT) for level in self._levels[:-1]]
        self._top_cumsum: np.ndarray | None = None
        self._before = np.zeros(0)
        self._min = 0.0  # smallest positive priority (0.0: none), and how many leaves hold it
        self._min_count = 0

    @property
    def compiled(self) -> bool:
        """Whether numba-compiled code walks this tree."""
        return self._jit is not None

    @property
    def leaves(self) -> np.ndarray:
        """The priorities (read-only view; padding beyond ``capacity`` excluded)."""
        view = self._levels[0][: self.capacity]
        view.flags.writeable = False
        return view

    @property
    def levels(self) -> list[np.ndarray]:
        """Read-only views of every level, leaves first, top last (for checks)."""
        views = [level.view() for level in self._levels]
        for view in views:
            view.flags.writeable = False
        return views

    def total(self) -> float:
        """Sum of every priority."""
        return float(self._cumsum()[-1])

    def min_positive(self) -> float:
        """Smallest priority above zero; 0.0 when every priority is 0."""
        if self._min_count <= 0:
            leaves = self._levels[0]
            positive = leaves[leaves > 0]
            self._min = float(positive.min()) if positive.size else 0.0
            self._min_count = int((positive == self._min).sum()) if positive.size else 1
        return self._min

    def __getitem__(self, index: np.ndarray | int) -> np.ndarray:
        return np.asarray(self._levels[0][index])

    def update(
        self, index: np.ndarray, priority: np.ndarray | float, *, checked: bool = False
    ) -> None:
        """Set the priorities at ``index`` (the last one wins for a repeated index).

        Args:
            index: Leaf indexes (int64).
            priority: One value per index, or one for all.
            checked: The caller has made sure that indexes are in range and priorities
                finite and non-negative (skips those checks).

        Raises:
            ValueError: A priority is negative or not finite, or an index is out of range.
        """
        index = np.asarray(index, dtype=np.int64).reshape(-1)
        values = np.asarray(priority, dtype=np.float64)
        if values.shape != index.shape:
            values = np.broadcast_to(values, index.shape)
        if not index.size:
            return
        if not checked:
            # as unsigned, a negative index is beyond any capacity
            if index.view(np.uint64).max() >= self.capacity:
                raise InvalidValueError(f"index out of range 0..{self.capacity - 1}")
            if not (values.min() >= 0 and np.isfinite(values.max())):
                raise InvalidValueError("priorities must be finite and non-negative")
        leaves = self._levels[0]
        self._top_cumsum = None
        if index.size > LARGE_UPDATE * leaves.size:
            leaves[index] = values
            self.rebuild()
            self._min_count = 0  # recounted on demand
            return
        if self._jit is not None:
            hits, lowest = self._jit.update(
                self._flat,
                self._starts,
                np.ascontiguousarray(index),
                np.ascontiguousarray(values),
                self._min,
            )
        else:
            hits = int(np.count_nonzero(leaves.take(index) == self._min))
            leaves[index] = values
            node = index
            for rows, parents in zip(self._rows, self._levels[1:], strict=True):
                node = node >> FANOUT_BITS
                parents[node] = rows.take(node, axis=0) @ _ONES
            lowest = float(values.min())
        if self._min_count > 0:  # else the minimum is recounted on demand anyway
            self._min_count -= hits
            if self._min_count > 0 and lowest <= self._min:
                self._add_to_min(index)

    def _add_to_min(self, index: np.ndarray) -> None:
        """Count the leaves just written at or below the minimum (each index once)."""
        written = self._levels[0].take(index)
        positive = written > 0
        if not positive.any():
            return
        lowest = float(written[positive].min())
        if lowest <= self._min:
            count = np.unique(index[written == lowest]).size
            self._min_count = count + (self._min_count if lowest == self._min else 0)
            self._min = lowest

    def rebuild(self) -> None:
        """Recompute every sum from the leaves."""
        if self._jit is not None:
            self._jit.rebuild(self._flat, self._starts)
        else:
            for rows, parents in zip(self._rows, self._levels[1:], strict=True):
                np.matmul(rows, _ONES, out=parents)
        self._top_cumsum = None

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """``batch_size`` leaf indexes drawn with probability ``priority / total``.

        Raises:
            ValueError: Every priority is zero.
        """
        return self.draw(batch_size, rng)[0]

    def draw(self, batch_size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``sample``, and the priorities of the leaves drawn.

        All positive: ``find`` never ends on an empty leaf.

        Raises:
            ValueError: Every priority is zero.
        """
        uniform = rng.random(batch_size)
        if self._jit is not None:
            index = np.empty(batch_size, dtype=np.int64)
            priority = np.empty(batch_size)
            if self._jit.draw(self._flat, self._starts, uniform, index, priority) <= 0:
                raise InvalidValueError("cannot sample: every priority is zero")
            return index, priority
        mass = uniform * self.total()
        # Descending in sorted order reads the tree front to back, which the cache likes;
        # the draws keep their random order.
        order = mass.argsort()
        index = np.empty(batch_size, dtype=np.int64)
        index[order] = self.find(mass.take(order))
        return index, self._levels[0].take(index)

    def find(self, mass: np.ndarray) -> np.ndarray:
        """Leaf index where the running sum of priorities first exceeds each ``mass``.

        ``mass`` is meant to lie in ``[0, total)``; past the total (or past the end of a
        node, by rounding) comes the last positive leaf before: never an empty one.

        Raises:
            ValueError: Every priority is zero.
        """
        cumsum = self._cumsum()
        if cumsum[-1] <= 0:
            raise InvalidValueError("cannot sample: every priority is zero")
        if self._jit is not None:
            residual = np.array(mass, dtype=np.float64)  # a copy: the descent overwrites it
            leaf = np.empty(residual.shape, dtype=np.int64)
            self._jit.descend(self._flat, self._starts, residual, leaf)
            return leaf
        node = np.searchsorted(cumsum, mass, side="right")
        np.minimum(node, len(cumsum) - 1, out=node)
        mass = mass - self._before.take(node)
        count = len(mass)
        # scratch arrays reused level after level: allocations cost as much as the work
        block = np.empty((count, FANOUT))
        prefix = np.empty((count, FANOUT))
        reached = np.empty((count, FANOUT), dtype=bool)
        first_short = np.empty(count, dtype=np.int64)
        pick = np.empty(count, dtype=np.int64)
        before = np.empty(count)
        rows_start = np.arange(0, FANOUT * count, FANOUT)
        for rows in reversed(self._rows):
            rows.take(node, axis=0, out=block)
            np.matmul(block, _EXCLUSIVE, out=prefix)  # sums of the children before each
            np.less_equal(prefix, mass[:, None], out=reached)
            # the child is the last one reached: the one before the first not reached, or
            # the last child (index -1 & 15) when all are; prefix[:, 0] == 0 is always reached
            reached.argmin(axis=1, out=first_short)
            _LAST_REACHED.take(first_short, out=pick)
            prefix.take(rows_start + pick, out=before)
            mass -= before
            node <<= FANOUT_BITS
            node += pick
        # Mass at or past the end of a node (rounding) went to its last child, which may be
        # empty: take the last positive leaf before it instead, as the compiled tree does.
        leaves = self._levels[0]
        for j in np.flatnonzero(leaves.take(node) <= 0):
            node[j] = np.flatnonzero(leaves[: node[j] + 1])[-1]
        return np.asarray(node, dtype=np.int64)

    def _cumsum(self) -> np.ndarray:
        """Running sums of the top level (and ``_before``, the sums before each node)."""
        if self._top_cumsum is None:
            top = self._levels[-1]
            self._top_cumsum = np.cumsum(top)
            self._before = self._top_cumsum - top
        return self._top_cumsum


def _aligned_zeros(size: int) -> np.ndarray:
    """Zeros starting on a 64-byte cache line, so that 16 children fill exactly two lines."""
    spare = np.zeros(size + 8)
    skip = (-spare.ctypes.data % 64) // spare.itemsize
    return spare[skip : skip + size]


_ONES = np.ones(FANOUT)
_EXCLUSIVE = np.triu(np.ones((FANOUT, FANOUT)), 1)
"""``block @ _EXCLUSIVE``: in each row, the sum of the entries before each entry."""
_LAST_REACHED = (np.arange(FANOUT) - 1) % FANOUT
"""Child picked, by the position of the first child whose prefix is beyond the mass."""
