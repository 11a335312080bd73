"""Refusing, before the memory is allocated, a collect run this machine cannot hold.

The estimate counts what every stored transition takes (observation and next observation,
action, reward, two flags) from the env's spaces, times the rows the run keeps: its
``--memory-size``, or every row of a ``--steps`` run (which grows towards them). Infos and
the envs themselves are not counted, so the real need is a little higher.
"""

from __future__ import annotations

import math
from typing import Any

from expcli.host_memory import check_fits

__all__ = ["check_run_fits", "derivable_bytes", "sample_bytes"]

_REWARD_AND_FLAGS = 4 + 1 + 1  # float32 reward, bool terminated, bool truncated


def check_run_fits(
    observation_space: Any,
    action_space: Any,
    num_envs: int,
    memory_size: int | None,
    steps: int | None,
) -> None:
    """Refuse a run whose memory would not fit in the memory this machine has available.

    Raises:
        ConfigError: The estimate and what is available, in one line.
    """
    per_transition = (
        2 * sample_bytes(observation_space) + sample_bytes(action_space) + _REWARD_AND_FLAGS
    )
    per = f"{per_transition:,} bytes per transition"
    if memory_size is not None:
        rows = memory_size
        what = f"--memory-size {memory_size:,} rows x {num_envs:,} envs ({per})"
        advice = "lower --memory-size or --envs"
    elif steps is not None:
        rows = -(-steps // num_envs)
        what = f"--steps {steps:,} ({per})"
        advice = "collect fewer steps, or keep only the newest with --memory-size"
    else:
        return  # an episodes run grows as it goes
    check_fits(rows * num_envs * per_transition, what, advice)


def derivable_bytes(space: Any) -> int:
    """Bytes of an observation of ``space`` that the once form may store only once.

    The leaves of at least ``FRAMES_CELL_BYTES`` (``formats.frames``): their next
    observations are left off the disk where they equal the next row's observations.
    """
    from gymnasium import spaces

    from expcli.formats.frames import FRAMES_CELL_BYTES

    if isinstance(space, spaces.Dict):
        return sum(derivable_bytes(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return sum(derivable_bytes(s) for s in space.spaces)
    size = sample_bytes(space)
    return size if size >= FRAMES_CELL_BYTES else 0


def sample_bytes(space: Any) -> int:
    """Bytes one sample of ``space`` takes in the memory (an estimate for unusual spaces)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return 8
    if isinstance(space, spaces.MultiDiscrete):
        return 8 * max(1, math.prod(space.shape))
    if isinstance(space, (spaces.Box, spaces.MultiBinary)):
        return int(space.dtype.itemsize) * max(1, math.prod(space.shape))
    if isinstance(space, spaces.Dict):
        return sum(sample_bytes(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return sum(sample_bytes(s) for s in space.spaces)
    try:
        return 8 * max(1, int(spaces.flatdim(space)))
    except Exception:
        return 8
