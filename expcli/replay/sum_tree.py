"""SumTree: priorities with vectorised batch updates and prefix-sum sampling, in numpy.

A 16-ary tree: leaves hold the priorities, each level above holds the sums of 16 nodes of
the level below, up to a top level of at most 4096 nodes whose cumulative sum is cached.
Sampling finds the top node by one ``searchsorted`` for the whole batch, then descends
two or three levels of 16 children with whole-batch array operations. An update of ``B``
priorities writes the leaves and adds the changes to their ancestors (``np.add.at``, a
few array operations per level, never a Python loop over the batch). Sums built from
added changes drift by rounding; the tree is rebuilt from its leaves every
``REBUILD_EVERY`` updates, and a draw that lands on a zero-priority leaf is drawn again.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SumTree"]

FANOUT_BITS = 4  # 16 children per node
TOP_SIZE = 4096
REBUILD_EVERY = 20_000


class SumTree:
    """Non-negative priorities of ``capacity`` items; sample items in proportion to them.

    Also keeps the smallest positive priority (for importance weights) with a count of
    the leaves holding it, recounted over all leaves only when the last of them changes:
    in prioritized replay the smallest priority is the least likely to be drawn and
    updated, so that is rare.

    Args:
        capacity: Number of items (leaves); priorities start at 0 (never drawn).

    Raises:
        ValueError: ``capacity`` is less than 1.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        fanout = 1 << FANOUT_BITS
        depth = 0
        while -(-capacity // fanout**depth) > TOP_SIZE:
            depth += 1
        padded = -(-capacity // fanout**depth) * fanout**depth
        self.capacity = int(capacity)
        self._levels = [np.zeros(padded >> (FANOUT_BITS * level)) for level in range(depth + 1)]
        self._children = [level.reshape(-1, fanout) for level in self._levels[:-1]]
        self._owner = np.zeros(padded, dtype=np.int64)  # scratch: dedupes batch updates
        self._top_cumsum: np.ndarray | None = None
        self._before = np.zeros(0)
        self._updates = 0
        self._min = 0.0  # smallest positive priority (0.0: none), and how many leaves hold it
        self._min_count = 0

    @property
    def leaves(self) -> np.ndarray:
        """The priorities (read-only view; padding beyond ``capacity`` excluded)."""
        view = self._levels[0][: self.capacity]
        view.flags.writeable = False
        return view

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
            if index.min() < 0 or index.max() >= self.capacity:
                raise ValueError(f"index out of range 0..{self.capacity - 1}")
            if not (np.isfinite(values).all() and (values >= 0).all()):
                raise ValueError("priorities must be finite and non-negative")
        leaves = self._levels[0]
        old = leaves[index]
        leaves[index] = values
        order = np.arange(index.size)
        self._owner[index] = order
        last = self._owner[index] == order  # one occurrence per distinct index
        new = leaves[index]
        delta = np.where(last, new - old, 0.0)
        for level in range(1, len(self._levels)):
            np.add.at(self._levels[level], index >> (FANOUT_BITS * level), delta)
        self._top_cumsum = None
        self._track_min(old[last], new[last])
        self._updates += 1
        if self._updates >= REBUILD_EVERY:
            self.rebuild()

    def _track_min(self, old: np.ndarray, new: np.ndarray) -> None:
        if self._min_count <= 0:
            return  # recounted on demand anyway
        self._min_count -= int((old == self._min).sum())
        positive = new[new > 0]
        if positive.size:
            lowest = float(positive.min())
            if lowest < self._min:
                self._min, self._min_count = lowest, int((positive == lowest).sum())
            elif lowest == self._min:
                self._min_count += int((positive == lowest).sum())

    def rebuild(self) -> None:
        """Recompute every sum from the leaves (clears the rounding drift of updates)."""
        for level in range(1, len(self._levels)):
            self._children[level - 1].sum(axis=1, out=self._levels[level])
        self._top_cumsum = None
        self._updates = 0

    def sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """``batch_size`` leaf indexes drawn with probability ``priority / total``.

        Raises:
            ValueError: Every priority is zero.
        """
        mass = rng.random(batch_size) * self.total()
        # Descending in sorted order reads the tree front to back, which the cache likes
        # (a quarter faster at a million leaves); the draws keep their random order.
        order = mass.argsort()
        index = np.empty(batch_size, dtype=np.int64)
        index[order] = self.find(mass[order])
        empty = self._levels[0][index] <= 0
        while empty.any():  # rounding put a draw on an empty leaf: draw it again
            index[empty] = self.find(rng.random(int(empty.sum())) * self.total())
            empty = self._levels[0][index] <= 0
        return index

    def find(self, mass: np.ndarray) -> np.ndarray:
        """Leaf index where the running sum of priorities first exceeds each ``mass``."""
        cumsum = self._cumsum()
        if cumsum[-1] <= 0:
            raise ValueError("cannot sample: every priority is zero")
        node = np.searchsorted(cumsum, mass, side="right")
        np.minimum(node, len(cumsum) - 1, out=node)
        mass = mass - self._before[node]
        fanout, count = 1 << FANOUT_BITS, len(mass)
        # scratch arrays reused level after level: allocations cost as much as the work
        block = np.empty((count, fanout))
        sums = np.empty((count, 2 * fanout))
        beyond = np.empty((count, fanout), dtype=bool)
        pick = np.empty(count, dtype=np.int64)
        flat = np.empty(count, dtype=np.int64)
        before = np.empty(count)
        base = np.arange(0, 2 * fanout * count, 2 * fanout)
        for children in reversed(self._children):
            children.take(node, axis=0, out=block)
            # sums of the children before each child, then up to and including it (BLAS)
            np.matmul(block, _PREFIXES, out=sums)
            np.greater(sums[:, fanout:], mass[:, None], out=beyond)
            beyond[:, -1] = True  # rounding may leave mass past the last child
            beyond.argmax(axis=1, out=pick)
            np.add(base, pick, out=flat)
            sums.take(flat, out=before)
            mass -= before
            node <<= FANOUT_BITS
            node += pick
        return np.asarray(node, dtype=np.int64)

    def _cumsum(self) -> np.ndarray:
        """Running sums of the top level (and ``_before``, the sums before each node)."""
        if self._top_cumsum is None:
            top = self._levels[-1]
            self._top_cumsum = np.cumsum(top)
            self._before = self._top_cumsum - top
        return self._top_cumsum


_PREFIXES = np.hstack(
    [np.triu(np.ones((1 << FANOUT_BITS,) * 2), 1), np.triu(np.ones((1 << FANOUT_BITS,) * 2))]
)
"""``block @ _PREFIXES``: each row's exclusive, then inclusive, running sums."""
