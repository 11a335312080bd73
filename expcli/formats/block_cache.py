"""BlockCache: decoded blocks of compressed files, kept for the draws that come back to them.

A compressed file is decoded a block at a time (an HDF5 chunk's rows, a Parquet row
group), however few of its rows a draw wants. Sampling training batches touches blocks
at random, draw after draw, and without a cache pays the decoding of every block anew
each time. A ``BlockCache`` keeps decoded blocks up to a bound in bytes, shared by every
tensor of an open file or folder and by every thread that samples it, and counts what it
saved (``stats``). ``CachedBlocks`` reads one
tensor's rows through it: a draw looks up each block it touches once and copies out
only the cells it wants.

Example::

    cache = BlockCache(512 << 20)
    dataset, close = open_lazy("run.h5", cache=cache)
    ...  # sample
    print(cache.stats())  # hit rate 97.1% (...)
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from expcli.errors import ConfigError
from expcli.formats.row_gather import flat_rows

__all__ = ["DEFAULT_CACHE_BYTES", "BlockCache", "CacheStats", "CachedBlocks"]

DEFAULT_CACHE_BYTES = 512 << 20
"""Bytes of decoded blocks a sampler keeps by default (``DatasetStorage.open``): 4,000
steps of 84x84 frames and next frames from 8 envs, whatever the file's size."""


@dataclass(frozen=True, slots=True)
class CacheStats:
    """What a ``BlockCache`` did: lookups served from memory or decoded, and what it holds.

    Attributes:
        hits: Lookups of a block found decoded (or being decoded by another thread).
        misses: Lookups that decoded the block.
        blocks_decoded: Blocks decoded (a failed decode counts as a miss, not here).
        bytes_decoded: Their bytes once decoded.
        evictions: Blocks let go of to stay within the bound.
        bytes_held: Bytes of the blocks held now.
        max_bytes: The bound.
    """

    hits: int = 0
    misses: int = 0
    blocks_decoded: int = 0
    bytes_decoded: int = 0
    evictions: int = 0
    bytes_held: int = 0
    max_bytes: int = 0

    @property
    def hit_rate(self) -> float:
        """Hits per lookup; 0 before any."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else 0.0

    def __sub__(self, earlier: CacheStats) -> CacheStats:
        """The counts since ``earlier`` (a benchmark's phase); what is held, as now."""
        return CacheStats(
            self.hits - earlier.hits,
            self.misses - earlier.misses,
            self.blocks_decoded - earlier.blocks_decoded,
            self.bytes_decoded - earlier.bytes_decoded,
            self.evictions - earlier.evictions,
            self.bytes_held,
            self.max_bytes,
        )

    def __str__(self) -> str:
        mib = 1 << 20
        return (
            f"hit rate {self.hit_rate:.1%} ({self.hits:,} hits, {self.misses:,} misses); "
            f"{self.blocks_decoded:,} blocks, {self.bytes_decoded / mib:,.1f} MiB decoded; "
            f"{self.bytes_held / mib:,.1f} of {self.max_bytes / mib:,.1f} MiB held"
        )


class BlockCache:
    """Decoded blocks by key, at most ``max_bytes`` of them.

    Training draws touch blocks at random, each draw many of them in file order, so the
    least recently used block is the one the next draw wants soonest: an LRU cache smaller
    than the blocks a draw touches would hit nothing. Here a block goes out at random, and
    once the cache is full a block just decoded is kept with the probability the cache
    holds of the data (``max_bytes`` over the bytes of the tensors announced with
    ``expect``): what is held stays an even sample of the data, not the last draw's
    blocks (uniform draws from the Parquet row groups of 452 MB of frames, 256 MB held:
    58% of lookups hit, 9% with LRU).

    Thread-safe: a block asked for by two threads at once is decoded once, the second
    waiting for the first. A block larger than the bound is decoded and handed over, never
    kept. ``clear`` lets go of every block (closing the file that fed them).

    Raises:
        ConfigError: ``max_bytes`` is negative.
    """

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ConfigError(f"a block cache holds 0 bytes or more, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self._lock = threading.Lock()
        self._blocks: dict[Hashable, np.ndarray] = {}
        self._keys: list[Hashable] = []  # the keys held, for a choice at random
        self._loading: dict[Hashable, Future[np.ndarray]] = {}
        self._sources: dict[Hashable, int] = {}  # bytes of the tensors behind the blocks
        self._data = 0  # their sum
        self._random = random.Random(0)  # the same choices every run
        self._generation = 0  # moves on with clear(): decodes begun before are not kept
        self._held = 0
        self._counts = [0] * 5  # hits, misses, blocks and bytes decoded, evictions

    def expect(self, source: Hashable, nbytes: int) -> None:
        """Announce a tensor of ``nbytes`` whose blocks may come here (again: no change)."""
        with self._lock:
            self._data += int(nbytes) - self._sources.get(source, 0)
            self._sources[source] = int(nbytes)

    def get(self, key: Hashable, load: Callable[[], np.ndarray]) -> np.ndarray:
        """The block of ``key``, decoded by ``load()`` unless held (read-only, not to be changed).

        Raises:
            Whatever ``load`` raises (to every thread waiting for that block).
        """
        with self._lock:
            block = self._blocks.get(key)
            if block is not None:
                self._counts[0] += 1
                return block
            pending = self._loading.get(key)
            mine = pending is None
            if pending is None:
                pending = self._loading[key] = Future()
                self._counts[1] += 1
            else:
                self._counts[0] += 1
            generation = self._generation
        if not mine:
            return pending.result()
        try:
            block = load()
        except BaseException as e:
            with self._lock:
                self._loading.pop(key, None)
            pending.set_exception(e)
            raise
        block.flags.writeable = False
        self._keep(key, block, generation)
        pending.set_result(block)
        return block

    def held(self, key: Hashable) -> np.ndarray | None:
        """The block of ``key`` if held (a hit, counted), else None (nothing counted)."""
        with self._lock:
            block = self._blocks.get(key)
            if block is not None:
                self._counts[0] += 1
            return block

    def _keep(self, key: Hashable, block: np.ndarray, generation: int) -> None:
        with self._lock:
            self._loading.pop(key, None)
            self._counts[2] += 1
            self._counts[3] += block.nbytes
            if generation != self._generation or block.nbytes > self.max_bytes:
                return
            if self._held + block.nbytes > self.max_bytes and not self._admitted(block.nbytes):
                return
            while self._held + block.nbytes > self.max_bytes:
                self._evict()
            self._blocks[key] = block
            self._keys.append(key)
            self._held += block.nbytes

    def _admitted(self, nbytes: int) -> bool:
        """Whether a block of ``nbytes`` goes into the full cache (else it is used once)."""
        small = nbytes <= self.max_bytes // 1024  # costs a decode's overhead, not its bytes
        data = self._data
        return small or data <= self.max_bytes or self._random.random() * data < self.max_bytes

    def _evict(self) -> None:
        """Let go of a block at random: the larger of two drawn.

        A small block costs as much to decode again as a large one, for the little room it takes.
        """
        keys, blocks = self._keys, self._blocks
        first, second = (self._random.randrange(len(keys)) for _ in range(2))
        position = first if blocks[keys[first]].nbytes >= blocks[keys[second]].nbytes else second
        keys[position], keys[-1] = keys[-1], keys[position]
        self._held -= blocks.pop(keys.pop()).nbytes
        self._counts[4] += 1

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._blocks

    def stats(self) -> CacheStats:
        """The counts so far and what is held now."""
        with self._lock:
            hits, misses, blocks, decoded, evictions = self._counts
            return CacheStats(hits, misses, blocks, decoded, evictions, self._held, self.max_bytes)

    def clear(self) -> None:
        """Let go of every block; the counts stay."""
        with self._lock:
            self._blocks.clear()
            self._keys.clear()
            self._held = 0
            self._generation += 1


class CachedBlocks:
    """One tensor's rows, read a block at a time through a ``BlockCache``.

    A block is a range of rows (a Parquet row group, an HDF5 chunk's rows), or, with
    ``read_column``, a range of rows of one env column (an HDF5 file chunked by column):
    a draw of a few cells then decodes their columns only, not the other ``N - 1``.

    Args:
        read: Rows ``start`` to ``stop`` of the tensor, as a numpy array (a block's, on a miss).
        bounds: The first row of each block, then the row count (increasing, from 0).
        cache: Where decoded blocks are kept.
        key: Tells this tensor's blocks from others' in the cache (a file and a name).
        shape: The tensor's shape, ``(T, N, *feature)``.
        dtype: The dtype ``read`` gives.
        read_column: ``(start, stop, env)``: rows ``start`` to ``stop`` of env column ``env``,
            shaped ``(stop - start, *feature)``; given, blocks hold one column each.
    """

    def __init__(
        self,
        read: Callable[[int, int], np.ndarray],
        bounds: Sequence[int] | np.ndarray,
        cache: BlockCache,
        key: Hashable,
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
        read_column: Callable[[int, int, int], np.ndarray] | None = None,
    ) -> None:
        self._read = read
        self._read_column = read_column if len(shape) >= 2 else None
        self.bounds = np.asarray(bounds, dtype=np.int64)
        self.cache = cache
        self.key = key
        self.shape, self.dtype = shape, np.dtype(dtype)
        cache.expect(key, math.prod(shape) * self.dtype.itemsize)

    @property
    def by_column(self) -> bool:
        """Whether a block holds one env column's rows (else whole rows)."""
        return self._read_column is not None

    def block(self, number: int, env: int | None = None) -> np.ndarray:
        """Block ``number``'s rows (column ``env``'s if blocks are columns), decoded once."""
        start, stop = int(self.bounds[number]), int(self.bounds[number + 1])
        if self._read_column is None:
            return self.cache.get((self.key, number), lambda: self._read(start, stop))
        column = int(env if env is not None else 0)
        read = self._read_column
        return self.cache.get((self.key, number, column), lambda: read(start, stop, column))

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start`` to ``stop`` (a new array), from the blocks holding them."""
        if self._read_column is not None:
            return self.take(np.arange(start, stop))
        first = int(np.searchsorted(self.bounds, start, side="right")) - 1
        pieces = []
        while start < stop:
            low, high = int(self.bounds[first]), int(self.bounds[first + 1])
            end = min(stop, high)
            pieces.append(self.block(first)[start - low : end - low])
            start, first = end, first + 1
        if len(pieces) == 1:
            return pieces[0].copy()
        if not pieces:
            return self._read(start, start)
        return np.concatenate(pieces)

    def take(self, index: Any) -> np.ndarray:
        """Rows ``index`` (any shape, negatives from the end) as ``(*index.shape, *shape[1:])``.

        Raises:
            IndexError: An index is not an integer or lies outside the rows.
        """
        feature = self.shape[1:]
        wanted, rows = flat_rows(index, self.shape[0])
        if self._read_column is not None:
            envs = self.shape[1]
            cells = (rows[:, None] * envs + np.arange(envs)).reshape(-1)
            return self.take_cells(cells).reshape(*wanted.shape, *feature)
        out = np.empty((rows.size, *feature), self.dtype)
        numbers = np.searchsorted(self.bounds, rows, side="right") - 1
        self._gather(numbers, out, lambda block, at: block[rows[at] - self.bounds[numbers[at]]])
        return out.reshape(*wanted.shape, *feature)

    def take_cells(self, index: Any) -> np.ndarray:
        """The cells at flat ``index`` (``row * N + env``) as ``(*index.shape, *shape[2:])``.

        Only those cells are copied out of the blocks, not their whole rows.

        Raises:
            IndexError: An index is not an integer or lies outside the cells.
        """
        count, envs, *feature = self.shape
        wanted, cells = flat_rows(index, count * envs)
        rows, columns = np.divmod(cells, envs)
        out = np.empty((cells.size, *feature), self.dtype)
        numbers = np.searchsorted(self.bounds, rows, side="right") - 1
        local = rows - self.bounds[numbers]
        if self._read_column is not None:
            self._gather(numbers * envs + columns, out, lambda block, at: block[local[at]])
        else:
            self._gather(numbers, out, lambda block, at: block[local[at], columns[at]])
        return out.reshape(*wanted.shape, *feature)

    def _gather(
        self,
        blocks: np.ndarray,
        out: np.ndarray,
        pick: Callable[[np.ndarray, np.ndarray], np.ndarray],
    ) -> None:
        """Fill ``out[i]`` from block ``blocks[i]``, one lookup per block touched.

        A block is named by its number, or ``number * N + env`` when blocks are columns.
        ``pick(block, at)`` gives the values at positions ``at`` of ``out`` from the block.
        The blocks held are read first, then the others decoded: a draw's decoding never
        pushes out a block that it wants itself (in order, a draw wanting more blocks than
        the cache holds would find none of them).
        """
        if not blocks.size:
            return
        order = np.argsort(blocks, kind="stable")
        ordered = blocks[order]
        edges = [0, *(np.flatnonzero(np.diff(ordered)) + 1).tolist(), len(ordered)]
        envs = self.shape[1] if self._read_column is not None else 0
        missed = []
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            name = int(ordered[lo])
            key = (self.key, *divmod(name, envs)) if envs else (self.key, name)
            block = self.cache.held(key)
            if block is None:
                missed.append((lo, hi, name))
                continue
            at = order[lo:hi]
            out[at] = pick(block, at)
        for lo, hi, name in missed:
            at = order[lo:hi]
            block = self.block(*divmod(name, envs)) if envs else self.block(name)
            out[at] = pick(block, at)
