"""What the backends share (as Gymnasium's ``vector/utils``): picking and placing per-env values.

The dummy, subproc and ray backends all hand results back as a ``StepBatch`` of the ids
asked for, and split per-env arguments among their groups: the helpers here do both for
values held either as a numpy array (fixed-shape observations, rewards, flags) or as a
list (anything else).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.envs.backend import StepBatch

if TYPE_CHECKING:
    from expcli.envs.env_group import Slots

__all__ = ["covers_all", "gather", "scatter", "take"]


def covers_all(ids: np.ndarray, n: int) -> bool:
    """True when ``ids`` is ``0 .. n-1`` in order: the common whole-batch call.

    Compares bytes, which costs a fraction of ``(ids == arange).all()`` on a hot path.
    """
    return len(ids) == n and ids.dtype == np.int64 and ids.tobytes() == _every_id_bytes(n)


@functools.lru_cache(maxsize=8)
def _every_id_bytes(n: int) -> bytes:
    return np.arange(n, dtype=np.int64).tobytes()


def take(
    values: np.ndarray | Sequence[Any], ids: Sequence[int] | np.ndarray
) -> np.ndarray | list[Any]:
    """``values[ids]`` as a new array for an array, else as a list."""
    if isinstance(values, np.ndarray):
        return values[ids]
    return [values[i] for i in np.asarray(ids).tolist()]


def scatter(dst: np.ndarray | list[Any], positions: np.ndarray, values: Any) -> None:
    """``dst[positions] = values`` for an array or a list."""
    if isinstance(dst, np.ndarray):
        dst[positions] = values
    else:
        for p, value in zip(positions.tolist(), values, strict=True):
            dst[p] = value


def gather(
    slots: Slots,
    ids: Sequence[int] | np.ndarray,
    infos: dict[int, dict[str, Any]],
    restarted: Sequence[int],
    offset: int = 0,
) -> StepBatch:
    """The slots of ``ids - offset`` as a ``StepBatch`` (copies, so slots can be reused)."""
    n = len(slots.rewards)
    pick: Callable[[np.ndarray], np.ndarray]
    keys: Sequence[int]
    if offset == 0 and covers_all(np.asarray(ids), n):
        pick, keys = np.ndarray.copy, range(n)  # every slot in order: whole copies
    else:
        local = np.asarray(ids) - offset
        pick, keys = operator.itemgetter(local), local.tolist()  # indexing copies
    obs = slots.obs
    return StepBatch(
        pick(obs) if isinstance(obs, np.ndarray) else [obs[i] for i in keys],
        pick(slots.rewards),
        pick(slots.terminated),
        pick(slots.truncated),
        [infos.get(i, {}) for i in keys] if infos else [{} for _ in keys],
        [int(i) + offset for i in restarted],
    )
