"""Training-ready sampling: a composable replay buffer over a Memory or a dataset file.

torchrl's design (storage, sampler, writer, transform, prefetch) with tianshou's episode
bookkeeping, rlstructures' batches (``DictBatch``, ``TemporalBatch`` and ``EpisodeIndex``
are exported by ``expcli.memory``, their one home) and a ``torch.utils.data`` face
(``ReplayDataset``). This package imports torch (through ``memory``).
"""

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
