"""Parallel gymnasium environments (this package owns gymnasium, and ray lazily)."""

from expcli.envs.factories import EnvFactory
from expcli.envs.modes import AsyncMode, EnvMode
from expcli.envs.parallel_env import ParallelEnv
from expcli.envs.watchdog import StepInterrupted

__all__ = ["AsyncMode", "EnvFactory", "EnvMode", "ParallelEnv", "StepInterrupted"]
