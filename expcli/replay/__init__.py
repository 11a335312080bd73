"""Training-ready sampling: a composable replay buffer over a Memory or a dataset file.

torchrl's design (storage, sampler, writer, transform, prefetch) with tianshou's episode
bookkeeping, rlstructures' batches (``DictBatch``, ``TemporalBatch`` and ``EpisodeIndex``
are exported by ``expcli.memory``, their one home) and a ``torch.utils.data`` face
(``ReplayDataset``).

Each name is imported on first use. Batches are torch tensors (``ReplayBuffer.sample``),
but the buffer, its storages and samplers load torch only when a tensor is made, so
``ReplayBuffer.sample_arrays`` (``expcli sample``) runs without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from expcli.replay.buffer import ReplayBuffer
    from expcli.replay.samplers import (
        PrioritizedSampler,
        RandomSampler,
        Sampler,
        SamplerWithoutReplacement,
        SliceSampler,
    )
    from expcli.replay.storages import DatasetStorage, MemoryStorage, Storage
    from expcli.replay.sum_tree import SumTree
    from expcli.replay.torch_dataset import ReplayBatchSampler, ReplayDataset
    from expcli.replay.writers import RoundRobinWriter

__all__ = [
    "DatasetStorage",
    "MemoryStorage",
    "PrioritizedSampler",
    "RandomSampler",
    "ReplayBatchSampler",
    "ReplayBuffer",
    "ReplayDataset",
    "RoundRobinWriter",
    "Sampler",
    "SamplerWithoutReplacement",
    "SliceSampler",
    "Storage",
    "SumTree",
]

_HOMES = {
    "DatasetStorage": "storages",
    "MemoryStorage": "storages",
    "PrioritizedSampler": "samplers",
    "RandomSampler": "samplers",
    "ReplayBatchSampler": "torch_dataset",
    "ReplayBuffer": "buffer",
    "ReplayDataset": "torch_dataset",
    "RoundRobinWriter": "writers",
    "Sampler": "samplers",
    "SamplerWithoutReplacement": "samplers",
    "SliceSampler": "samplers",
    "Storage": "storages",
    "SumTree": "sum_tree",
}


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
