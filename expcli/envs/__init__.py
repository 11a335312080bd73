"""Parallel gymnasium environments (this package owns gymnasium, and ray lazily).

The mode enums load nothing heavy; ``ParallelEnv`` and the others are imported on first use,
so that the CLI can type its options with ``EnvMode``/``AsyncMode`` without loading gymnasium.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from expcli._lazy_names import lazy_names
from expcli.envs.modes import AsyncMode, EnvMode

if TYPE_CHECKING:
    from expcli.envs.factories import EnvFactory
    from expcli.envs.parallel_env import ParallelEnv
    from expcli.envs.watchdog import StepInterrupted

__all__ = ["AsyncMode", "EnvFactory", "EnvMode", "ParallelEnv", "StepInterrupted"]

_LAZY = {
    "EnvFactory": "expcli.envs.factories",
    "ParallelEnv": "expcli.envs.parallel_env",
    "StepInterrupted": "expcli.envs.watchdog",
}

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
