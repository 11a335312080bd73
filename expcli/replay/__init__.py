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

from typing import TYPE_CHECKING

from expcli._lazy_names import lazy_names

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
    "DatasetStorage": ".storages",
    "MemoryStorage": ".storages",
    "PrioritizedSampler": ".samplers",
    "RandomSampler": ".samplers",
    "ReplayBatchSampler": ".torch_dataset",
    "ReplayBuffer": ".buffer",
    "ReplayDataset": ".torch_dataset",
    "RoundRobinWriter": ".writers",
    "Sampler": ".samplers",
    "SamplerWithoutReplacement": ".samplers",
    "SliceSampler": ".samplers",
    "Storage": ".storages",
    "SumTree": ".sum_tree",
}

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
