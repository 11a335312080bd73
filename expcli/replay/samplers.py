"""Samplers: which flat indexes a replay buffer reads next (torchrl's sampler family).

A sampler draws from the buffer's ``numpy.random.Generator``, so a seeded buffer draws the
same batches every run. ``update`` tells it what changed in the storage (the flat indexes
written, or None for "anything may have"), so it keeps priorities and caches right however
the data was written.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from expcli.errors import ConfigError, MissingDependencyError, OrderError, SchemaError
from expcli.replay.storages import Storage
from expcli.replay.sum_tree import SumTree, compiled_available
from expcli.spec import chronological_rows, done_flags

__all__ = [
    "PrioritizedSampler",
    "RandomSampler",
    "Sampler",
    "SamplerWithoutReplacement",
    "SliceSampler",
]

Info = dict[str, Any]


class Sampler:
    """Base class: ``sample`` returns flat indexes (and extra info such as weights)."""

    ran_out = False
    """True once a finite sampler has handed out its last batch of the epoch."""

    def sample(
        self, storage: Storage, batch_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, Info]:
        """Indexes shaped ``(batch_size,)`` (or ``(slices, steps)``) and an info dict."""
        raise NotImplementedError

    def update(self, storage: Storage, written: np.ndarray | None) -> None:
        """The storage changed: ``written`` flat indexes, or None for anything."""

    def snapshot(self) -> Any:
        """State that ``sample`` changes besides the generator (for prefetching)."""
        return None

    def restore(self, snapshot: Any) -> None:
        """Return to a ``snapshot``."""


def _require_data(storage: Storage) -> int:
    count = len(storage)
    if count < 1:
        raise SchemaError("the buffer holds no transitions to sample")
    return count


class RandomSampler(Sampler):
    """Uniform draws with replacement among the transitions the storage holds."""

    def sample(
        self, storage: Storage, batch_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, Info]:
        """See ``Sampler.sample``."""
        return rng.integers(0, _require_data(storage), batch_size), {}


class SamplerWithoutReplacement(Sampler):
    """Each transition once per epoch, in a fresh random order every epoch.

    Args:
        drop_last: Skip an epoch's last batch when it would be short (its transitions
            are then not drawn in that epoch); otherwise hand it out short.
        shuffle: Random order (True) or storage order (False).
    """

    def __init__(self, drop_last: bool = False, shuffle: bool = True) -> None:
        self.drop_last = drop_last
        self.shuffle = shuffle
        self._order = np.zeros(0, dtype=np.int64)
        self._cursor = 0
        self.ran_out = False

    def sample(
        self, storage: Storage, batch_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, Info]:
        """See ``Sampler.sample``."""
        left = len(self._order) - self._cursor
        if left <= 0 or (self.drop_last and left < batch_size):
            count = _require_data(storage)
            if self.drop_last and count < batch_size:
                raise ConfigError(
                    f"batch size {batch_size} exceeds the {count} transitions held, and "
                    "drop_last drops every batch"
                )
            self._order = rng.permutation(count) if self.shuffle else np.arange(count)
            self._cursor = 0
        index = self._order[self._cursor : self._cursor + batch_size]
        self._cursor += len(index)
        left = len(self._order) - self._cursor
        self.ran_out = left <= 0 or (self.drop_last and left < batch_size)
        return index, {}

    def update(self, storage: Storage, written: np.ndarray | None) -> None:
        """See ``Sampler.update``."""
        if written is None:  # reset or reloaded: indexes of this epoch may hold nothing
            self._order = np.zeros(0, dtype=np.int64)
            self._cursor = 0
            self.ran_out = False

    def snapshot(self) -> Any:
        """See ``Sampler.snapshot``."""
        return self._order, self._cursor, self.ran_out

    def restore(self, snapshot: Any) -> None:
        """See ``Sampler.restore``."""
        self._order, self._cursor, self.ran_out = snapshot


class PrioritizedSampler(Sampler):
    """Prioritized experience replay (Schaul et al. 2015) on a ``SumTree``.

    Transition ``i`` is drawn with probability ``P(i) = p_i / sum_j p_j`` where
    ``p_i = (priority_i + eps) ** alpha``; new transitions get the largest ``p`` seen so
    far (1.0 at first). Each batch comes with importance weights
    ``w_i = (N * P(i)) ** -beta / max_j w_j`` in ``info["priority_weight"]``, the maximum
    taken over every transition held (that of the smallest priority), as torchrl does.

    Args:
        alpha: How much priorities count (0: uniform).
        beta: Importance-sampling correction (0: none, 1: full).
        eps: Added to every priority so that none is exactly zero.
        compiled: Walk the sum-tree with numba-compiled code (True), with numpy (False),
            or the former when numba is installed (None); see ``SumTree``.

    Raises:
        ConfigError: ``alpha``, ``beta`` or ``eps`` is negative.
        MissingDependencyError: ``compiled`` is True but numba is not installed.
    """

    def __init__(
        self,
        alpha: float = 0.6,
        beta: float = 0.4,
        eps: float = 1e-8,
        *,
        compiled: bool | None = None,
    ) -> None:
        if alpha < 0 or beta < 0 or eps < 0:
            raise ConfigError(
                f"alpha, beta and eps must be non-negative, got {alpha}, {beta}, {eps}"
            )
        if compiled and not compiled_available():
            raise MissingDependencyError("numba", "fast", "a compiled sum-tree")
        self.alpha, self.beta, self.eps = float(alpha), float(beta), float(eps)
        self.compiled = compiled
        self.max_priority = 1.0
        self._tree: SumTree | None = None
        self._storage: Storage | None = None

    @property
    def tree(self) -> SumTree | None:
        """The sum-tree of ``p_i`` (None until the sampler first sees its storage)."""
        return self._tree

    def update(self, storage: Storage, written: np.ndarray | None) -> None:
        """See ``Sampler.update``."""
        self._storage = storage
        if self._tree is None or self._tree.capacity != storage.capacity or written is None:
            self._tree = SumTree(storage.capacity, compiled=self.compiled)
            written = np.arange(len(storage), dtype=np.int64)
        self._tree.update(written, self.max_priority)

    def sample(
        self, storage: Storage, batch_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, Info]:
        """See ``Sampler.sample``."""
        _require_data(storage)
        tree = self._tree
        if tree is None:
            raise OrderError(
                "PrioritizedSampler.sample before update(): the sampler has not seen the storage "
                "(a ReplayBuffer calls update for it)"
            )
        index, priority = tree.draw(batch_size, rng)
        if self.beta == 0:
            weight = np.ones(batch_size, dtype=np.float32)
        else:
            # (N P_i)^-beta / (N P_min)^-beta == (p_i / p_min)^-beta
            priority /= tree.min_positive()
            weight = np.power(priority, -self.beta, out=priority).astype(np.float32)
        return index, {"priority_weight": weight}

    def update_priority(self, index: Any, priority: Any) -> None:
        """Set the priorities of the transitions at flat ``index`` (torchrl's signature).

        Prefer ``ReplayBuffer.update_priority``, which first brings the sampler up to date
        with the storage.

        Raises:
            ConfigError: The sampler has not served a buffer yet, shapes disagree, a
                priority is negative or not finite, or an index holds no transition.
        """
        storage = self._storage
        if storage is None or self._tree is None:
            raise ConfigError("this sampler serves no buffer yet: give it to a ReplayBuffer")
        index = np.asarray(index, dtype=np.int64).reshape(-1)
        values = np.asarray(priority, dtype=np.float64).reshape(-1)
        if values.size == 1:
            values = np.broadcast_to(values, index.shape)
        if values.shape != index.shape:
            raise ConfigError(
                f"got {values.size} priorities for {index.size} indexes; expected one each"
            )
        if not index.size:
            return
        highest = values.max()
        # min >= 0 is False for NaN
        if not (values.min() >= 0 and highest < np.inf):
            raise ConfigError("priorities must be finite and non-negative")
        # as unsigned, a negative index is beyond any length
        if index.view(np.uint64).max() >= len(storage):
            raise ConfigError(
                f"index out of range: the buffer holds transitions 0..{len(storage) - 1}"
            )
        stored = values + self.eps
        np.power(stored, self.alpha, out=stored)
        self._tree.update(index, stored, checked=True)
        # the power is monotonic: the largest priority given makes the largest stored
        self.max_priority = max(self.max_priority, float(highest + self.eps) ** self.alpha)


class SliceSampler(Sampler):
    """Contiguous sequences of ``slice_len`` steps of one env: ``(slices, slice_len)`` indexes.

    The batch size counts transitions, as torchrl's does: a batch of 512 with
    ``slice_len=16`` is 32 slices. Slices follow a column's chronological order, so one may
    run over the end of the tensors back to row 0, but never across the write head; nor,
    unless ``cross_episodes``, across an episode's end (the end may be a slice's last step).
    Every valid slice is equally likely.

    Args:
        slice_len: Steps per slice.
        num_slices: Slices per batch instead (then ``slice_len = batch_size // num_slices``).
        cross_episodes: Let slices run on into the next episode of the same env.
        strict_length: Only full-length slices (torchrl's default). Otherwise a slice may
            start at any step and stop early at an episode's end or at the newest step;
            ``info["lengths"]`` then gives each slice's length, and the buffer's
            ``TemporalBatch`` pads the rest with zeros.

    Raises:
        ConfigError: Neither or both of ``slice_len`` and ``num_slices``, or one below 1.
    """

    def __init__(
        self,
        slice_len: int | None = None,
        num_slices: int | None = None,
        cross_episodes: bool = False,
        strict_length: bool = True,
    ) -> None:
        if (slice_len is None) == (num_slices is None):
            raise ConfigError("give exactly one of slice_len and num_slices")
        if (slice_len or num_slices or 0) < 1:
            raise ConfigError(f"slice_len and num_slices must be at least 1, got {slice_len}")
        self.slice_len = slice_len
        self.num_slices = num_slices
        self.cross_episodes = cross_episodes
        self.strict_length = strict_length
        self._starts: tuple[Hashable, int, np.ndarray, np.ndarray] | None = None

    def shape(self, batch_size: int) -> tuple[int, int]:
        """``(slices, steps)`` of a batch of ``batch_size`` transitions.

        Raises:
            ConfigError: ``batch_size`` is not a multiple of the slice length or count.
        """
        per = self.slice_len if self.slice_len is not None else self.num_slices
        assert per is not None
        if batch_size % per:
            raise ConfigError(
                f"batch size {batch_size} is not a multiple of "
                f"{'slice_len' if self.slice_len else 'num_slices'} {per}"
            )
        if self.slice_len is not None:
            return batch_size // per, per
        return per, batch_size // per

    def sample(
        self, storage: Storage, batch_size: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, Info]:
        """See ``Sampler.sample``."""
        slices, steps = self.shape(batch_size)
        starts = self.valid_starts(storage, steps)
        if not len(starts):
            what = "" if self.cross_episodes else " within one episode"
            raise ConfigError(
                f"no slice of {steps} steps fits{what}: the buffer holds "
                f"{len(storage)} transitions over {storage.num_envs} env(s)"
            )
        assert self._starts is not None
        pick = rng.integers(0, len(starts), slices)
        row, env = np.divmod(starts[pick], storage.num_envs)
        offsets = np.arange(steps)
        info: Info = {}
        if not self.strict_length:
            lengths = self._starts[3][pick]
            offsets = np.minimum(offsets, lengths[:, None] - 1)  # padding repeats the last
            info["lengths"] = lengths
        rows = (row[:, None] + offsets) % storage.memory_size
        return rows * storage.num_envs + env[:, None], info

    def valid_starts(self, storage: Storage, steps: int) -> np.ndarray:
        """Flat indexes where a slice of ``steps`` may begin (cached until the data changes)."""
        key = storage.revision()
        if self._starts is None or self._starts[:2] != (key, steps):
            starts, lengths = _slice_starts(storage, steps, self.cross_episodes, self.strict_length)
            self._starts = (key, steps, starts, lengths)
        return self._starts[2]

    def update(self, storage: Storage, written: np.ndarray | None) -> None:
        """See ``Sampler.update``."""
        self._starts = None


def _slice_starts(
    storage: Storage, steps: int, cross_episodes: bool, strict_length: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Where slices may start, and how many steps each holds (up to ``steps``).

    A full slice needs ``steps - 1`` newer steps in its column and, unless crossing, no
    episode end before its last step; a short one (not ``strict_length``) stops there.
    """
    memory_size, num_envs = storage.memory_size, storage.num_envs
    state = storage.state
    order = chronological_rows(state, memory_size, num_envs).T  # (T, N): position -> row
    envs = np.arange(num_envs)
    count = np.full(num_envs, memory_size, dtype=np.int64)
    if not state.filled:
        count[:] = state.memory_index
        count[: state.env_index] += 1
    position = np.arange(memory_size)[:, None]
    length = np.minimum(count[None, :] - position, steps)  # steps left in the column
    if not cross_episodes and steps > 1:
        done = done_flags(storage.arrays(), memory_size, num_envs)[order, envs]
        # position of the next episode end at or after each position (T when none)
        ends = np.where(done, position, memory_size)
        ends = np.minimum.accumulate(ends[::-1], axis=0)[::-1]
        length = np.minimum(length, ends - position + 1)
    ok = length >= (steps if strict_length else 1)
    position_ok, env_ok = np.nonzero(ok)
    starts = np.asarray(order[position_ok, env_ok] * num_envs + env_ok, dtype=np.int64)
    return starts, np.asarray(length[position_ok, env_ok], dtype=np.int64)
