"""expcli: collect, inspect and convert reinforcement-learning experience datasets.

The public API is re-exported lazily: ``import expcli`` loads no torch, gymnasium, h5py
or ray; each name is imported from its module on first use. ``_EXPORTS`` is the one list
of it: ``__all__`` is made from it, and the ``TYPE_CHECKING`` imports, which only type
checkers read, are held to it by ``tests/test_public_api.py``.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from expcli._version import __version__ as __version__

if TYPE_CHECKING:  # ``X as X``: an explicit re-export, as strict type checkers want
    from expcli.collect import Collector as Collector
    from expcli.collect import CollectStats as CollectStats
    from expcli.conversion import convert as convert
    from expcli.conversion import load as load
    from expcli.conversion import save as save
    from expcli.envs import ParallelEnv as ParallelEnv
    from expcli.errors import ConfigError as ConfigError
    from expcli.errors import EnvError as EnvError
    from expcli.errors import ExpcliError as ExpcliError
    from expcli.errors import FormatError as FormatError
    from expcli.errors import IndexOutOfRangeError as IndexOutOfRangeError
    from expcli.errors import InvalidTypeError as InvalidTypeError
    from expcli.errors import InvalidValueError as InvalidValueError
    from expcli.errors import MissingDependencyError as MissingDependencyError
    from expcli.errors import OrderError as OrderError
    from expcli.errors import OutputError as OutputError
    from expcli.errors import OutputExistsError as OutputExistsError
    from expcli.errors import OutputLockedError as OutputLockedError
    from expcli.errors import SchemaError as SchemaError
    from expcli.errors import SourceNotFoundError as SourceNotFoundError
    from expcli.formats.dataset import Dataset as Dataset
    from expcli.memory import DictBatch as DictBatch
    from expcli.memory import EpisodeIndex as EpisodeIndex
    from expcli.memory import Memory as Memory
    from expcli.memory import RandomMemory as RandomMemory
    from expcli.memory import TemporalBatch as TemporalBatch
    from expcli.replay import PrioritizedSampler as PrioritizedSampler
    from expcli.replay import RandomSampler as RandomSampler
    from expcli.replay import ReplayBatchSampler as ReplayBatchSampler
    from expcli.replay import ReplayBuffer as ReplayBuffer
    from expcli.replay import ReplayDataset as ReplayDataset
    from expcli.replay import RoundRobinWriter as RoundRobinWriter
    from expcli.replay import SamplerWithoutReplacement as SamplerWithoutReplacement
    from expcli.replay import SliceSampler as SliceSampler
    from expcli.report import write_report as write_report
    from expcli.shaping import filter_episodes as filter_episodes
    from expcli.shaping import merge as merge
    from expcli.shaping import split as split
    from expcli.summary import Summary as Summary
    from expcli.summary import summarize as summarize

_EXPORTS: dict[str, str] = {
    # memories
    "Memory": "expcli.memory",
    "RandomMemory": "expcli.memory",
    "DictBatch": "expcli.memory",
    "TemporalBatch": "expcli.memory",
    "EpisodeIndex": "expcli.memory",
    # training-ready sampling
    "ReplayBuffer": "expcli.replay",
    "RandomSampler": "expcli.replay",
    "SamplerWithoutReplacement": "expcli.replay",
    "PrioritizedSampler": "expcli.replay",
    "SliceSampler": "expcli.replay",
    "RoundRobinWriter": "expcli.replay",
    "ReplayDataset": "expcli.replay",
    "ReplayBatchSampler": "expcli.replay",
    # environments and collection
    "ParallelEnv": "expcli.envs",
    "Collector": "expcli.collect",
    "CollectStats": "expcli.collect",
    # datasets on disk
    "load": "expcli.conversion",
    "save": "expcli.conversion",
    "convert": "expcli.conversion",
    "Dataset": "expcli.formats.dataset",
    # whole episodes of datasets into new ones
    "merge": "expcli.shaping",
    "split": "expcli.shaping",
    "filter_episodes": "expcli.shaping",
    # summaries
    "summarize": "expcli.summary",
    "Summary": "expcli.summary",
    "write_report": "expcli.report",  # inspect --html and --plot (the report extra)
    # errors: every class of ``expcli.errors.__all__`` (tests/test_public_api.py holds them equal)
    "ExpcliError": "expcli.errors",
    "FormatError": "expcli.errors",
    "SourceNotFoundError": "expcli.errors",
    "SchemaError": "expcli.errors",
    "EnvError": "expcli.errors",
    "ConfigError": "expcli.errors",
    "InvalidValueError": "expcli.errors",
    "IndexOutOfRangeError": "expcli.errors",
    "InvalidTypeError": "expcli.errors",
    "OrderError": "expcli.errors",
    "MissingDependencyError": "expcli.errors",
    "OutputError": "expcli.errors",
    "OutputExistsError": "expcli.errors",
    "OutputLockedError": "expcli.errors",
}

# Old names kept for one release: name -> (module, the name to use instead).
_DEPRECATED: dict[str, tuple[str, str]] = {
    "read_dataset": ("expcli.formats", "load"),
    "write_dataset": ("expcli.formats", "save"),
}

__all__ = sorted(["__version__", *_EXPORTS], key=lambda name: name.strip("_").casefold())


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        home, instead = _DEPRECATED[name]
        warnings.warn(
            f"expcli.{name} is deprecated and goes in the next release; use expcli.{instead}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'expcli' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
