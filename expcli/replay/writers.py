"""RoundRobinWriter: samples go to the write head, env slot after env slot, wrapping around."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from expcli.errors import ConfigError
from expcli.replay.storages import MemoryStorage, Storage

__all__ = ["RoundRobinWriter"]


class RoundRobinWriter:
    """Write ``n`` samples in flat order (``t * num_envs + env``) from the write head on.

    The Memory's own circular order is round robin, so the writer cuts the samples into
    ``add_samples`` calls that fill the current row, then whole rows, and so on.
    """

    def extend(self, storage: Storage, data: Mapping[str, Any]) -> np.ndarray:
        """Write ``data`` (name to ``(n, *feature)`` values) and return the flat indexes used.

        Raises:
            ConfigError: The storage is read-only, or the values disagree on ``n``.
            ValueError: A value does not fit its tensor (from ``Memory.add_samples``).
        """
        if not isinstance(storage, MemoryStorage):
            raise ConfigError(
                "this storage is read-only (a loaded dataset); sample from it, or write to "
                "RandomMemory.from_dataset(dataset) instead"
            )
        memory = storage.memory
        values = {k: v if hasattr(v, "shape") else np.asarray(v) for k, v in data.items()}
        values = {k: v for k, v in values.items() if v is not None}
        counts = {k: int(v.shape[0]) for k, v in values.items()}
        if not counts or len(set(counts.values())) > 1:
            raise ConfigError(f"expected values with a common first dimension n, got {counts}")
        n = next(iter(counts.values()))
        head = memory.memory_index * memory.num_envs + memory.env_index
        done = 0
        while done < n:
            free = n - done if memory.num_envs == 1 else memory.num_envs - memory.env_index
            take = min(free, n - done)
            memory.add_samples(**{k: v[done : done + take] for k, v in values.items()})
            done += take
        return np.asarray((head + np.arange(n, dtype=np.int64)) % storage.capacity)
