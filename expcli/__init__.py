"""expcli: collect, inspect and convert reinforcement-learning experience datasets.

The public API is re-exported lazily: ``import expcli`` loads no torch, gymnasium, h5py
or ray; each name is imported from its module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from expcli._version import __version__

if TYPE_CHECKING:
    from expcli.collect import Collector, CollectStats
    from expcli.conversion import convert, load, save
    from expcli.envs import ParallelEnv
    from expcli.errors import (
        ConfigError,
        EnvError,
        ExpcliError,
        FormatError,
        MissingDependencyError,
        OutputError,
        OutputExistsError,
        SchemaError,
    )
    from expcli.formats import read_dataset, write_dataset
    from expcli.formats.dataset import Dataset
    from expcli.memory import Memory, RandomMemory
    from expcli.replay import (
        DictBatch,
        EpisodeIndex,
        PrioritizedSampler,
        RandomSampler,
        ReplayBuffer,
        RoundRobinWriter,
        SamplerWithoutReplacement,
        SliceSampler,
        TemporalBatch,
    )
    from expcli.summary import Summary, summarize

_EXPORTS: dict[str, str] = {
    # memories
    "Memory": "expcli.memory",
    "RandomMemory": "expcli.memory",
    # training-ready sampling
    "ReplayBuffer": "expcli.replay",
    "RandomSampler": "expcli.replay",
    "SamplerWithoutReplacement": "expcli.replay",
    "PrioritizedSampler": "expcli.replay",
    "SliceSampler": "expcli.replay",
    "RoundRobinWriter": "expcli.replay",
    "DictBatch": "expcli.replay",
    "TemporalBatch": "expcli.replay",
    "EpisodeIndex": "expcli.replay",
    # environments and collection
    "ParallelEnv": "expcli.envs",
    "Collector": "expcli.collect",
    "CollectStats": "expcli.collect",
    # datasets on disk
    "load": "expcli.conversion",
    "save": "expcli.conversion",
    "convert": "expcli.conversion",
    "Dataset": "expcli.formats.dataset",
    "read_dataset": "expcli.formats",
    "write_dataset": "expcli.formats",
    # summaries
    "summarize": "expcli.summary",
    "Summary": "expcli.summary",
    # errors
    "ExpcliError": "expcli.errors",
    "FormatError": "expcli.errors",
    "SchemaError": "expcli.errors",
    "EnvError": "expcli.errors",
    "ConfigError": "expcli.errors",
    "MissingDependencyError": "expcli.errors",
    "OutputError": "expcli.errors",
    "OutputExistsError": "expcli.errors",
}

__all__ = [
    "Collector",
    "CollectStats",
    "ConfigError",
    "convert",
    "Dataset",
    "DictBatch",
    "EnvError",
    "EpisodeIndex",
    "ExpcliError",
    "FormatError",
    "load",
    "Memory",
    "MissingDependencyError",
    "OutputError",
    "OutputExistsError",
    "ParallelEnv",
    "PrioritizedSampler",
    "RandomMemory",
    "RandomSampler",
    "read_dataset",
    "ReplayBuffer",
    "RoundRobinWriter",
    "SamplerWithoutReplacement",
    "save",
    "SchemaError",
    "SliceSampler",
    "summarize",
    "Summary",
    "TemporalBatch",
    "__version__",
    "write_dataset",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'expcli' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
