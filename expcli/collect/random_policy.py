"""The random policy: each env draws its actions from its own stream, whatever the split.

Env ``i`` of a run seeded ``seed`` samples a copy of the action space seeded with
``env_stream_seed(seed, i)`` (numpy's ``SeedSequence(seed, spawn_key=(i,))``), one
``space.sample()`` per step. So an env's actions depend on the seed and its global index
only: a run whose envs are split over Ray actors (each drawing for its own slice) gives
the bytes of a run that draws for all of them in one process.

Array spaces are drawn in blocks of steps (one generator call per env per block): for
bounded Box, Discrete and MultiDiscrete spaces numpy draws a block as the same numbers
the steps would draw one by one, so the stream is the space's own (a test holds us to
it), at a fraction of the per-step cost. Other spaces (Dict, Tuple, unbounded Box,
MultiBinary, whose int8 draws are buffered per call) call ``sample()`` per env and step.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from expcli.collect.action_checks import ARRAY_SPACES

__all__ = ["RandomPolicy", "env_stream_seed"]

_BLOCK_ELEMENTS = 1 << 16  # action values drawn per block, all envs together
_MAX_BLOCK_STEPS = 256

Draw = Callable[[np.random.Generator, int], np.ndarray]


def env_stream_seed(seed: int, index: int) -> int:
    """The seed of env ``index``'s action stream in a run seeded ``seed``."""
    state = np.random.SeedSequence(seed, spawn_key=(index,)).generate_state(1, np.uint64)
    return int(state[0])


class RandomPolicy:
    """Uniform random actions, each env from its own stream (see the module docstring).

    Args:
        action_space: One env's action space.
        num_envs: Envs in the batch (rows of every batch of actions).
        seed: The run's seed; None draws fresh entropy (then ``entropy`` holds it, so
            that another process can draw the same streams).
        first_env: Global index of the batch's first env (an actor's slice starts there).

    Array spaces give ``(num_envs, *shape)`` arrays of the space's dtype; Dict and Tuple
    spaces give gymnasium's batch: a dict (tuple) of ``(num_envs, *leaf_shape)`` arrays.
    """

    def __init__(
        self, action_space: Any, num_envs: int, seed: int | None, first_env: int = 0
    ) -> None:
        self.action_space = action_space
        self.num_envs = num_envs
        self.first_env = first_env
        self.description: dict[str, Any] = {"kind": "random", "spec": "random", "seed": seed}
        self._draw_block = _block_drawer(action_space)
        shape = tuple(action_space.shape or ()) if self._draw_block else ()
        elements = max(1, int(np.prod(shape)))
        self._block_steps = max(
            1, min(_MAX_BLOCK_STEPS, _BLOCK_ELEMENTS // (elements * max(1, num_envs)))
        )
        self.seed(seed)

    def seed(self, seed: int | None) -> None:
        """Reseed every env's stream (the same seed gives the same actions)."""
        self.entropy = int(np.random.SeedSequence().entropy) if seed is None else seed  # type: ignore[arg-type]
        seeds = [env_stream_seed(self.entropy, self.first_env + i) for i in range(self.num_envs)]
        self._block: Any = None
        self._row = 0
        if self._draw_block is not None:
            self._rngs = [np.random.Generator(np.random.PCG64(s)) for s in seeds]
            return
        self._spaces = [copy.deepcopy(self.action_space) for _ in seeds]
        for space, s in zip(self._spaces, seeds, strict=True):
            space.seed(s)

    def __call__(self, observations: Any = None) -> Any:
        """A batch of random actions (the observations are ignored)."""
        if self._draw_block is None:
            from gymnasium.vector.utils import concatenate, create_empty_array

            out: Any = create_empty_array(self.action_space, self.num_envs)
            return concatenate(self.action_space, [s.sample() for s in self._spaces], out)
        if self._block is None or self._row == len(self._block):
            self._refill()
        row = self._block[self._row]
        self._row += 1
        return row

    def _refill(self) -> None:
        """Draw the next block of steps, env by env: ``(block_steps, num_envs, *shape)``."""
        assert self._draw_block is not None
        k = self._block_steps
        first = self._draw_block(self._rngs[0], k)
        block = np.empty((k, self.num_envs, *first.shape[1:]), first.dtype)
        block[:, 0] = first
        for i in range(1, self.num_envs):
            block[:, i] = self._draw_block(self._rngs[i], k)
        self._block, self._row = block, 0  # a new array: rows handed out stay as they were


def _block_drawer(space: Any) -> Draw | None:
    """``draw(rng, k)``: k steps of ``space.sample()`` from ``rng``, as one array; None if none.

    The arithmetic is Gymnasium's for one sample: Box ``low + (high - low) * random()``
    (floored for integers), Discrete ``start + integers(n)``, MultiDiscrete
    ``floor(random() * nvec) + start``; drawn for k steps at once, numpy consumes the
    generator exactly as k single draws do.
    """
    from gymnasium import spaces

    if type(space).__name__ not in ARRAY_SPACES:
        return None
    if isinstance(space, spaces.Discrete):
        n, start = int(space.n), space.start

        def discrete(rng: np.random.Generator, k: int) -> np.ndarray:
            return rng.integers(n, size=k) + start  # type: ignore[no-any-return]

        return discrete
    if isinstance(space, spaces.MultiDiscrete):
        nvec = space.nvec.astype(np.float64)
        dtype, start = space.dtype, space.start

        def multi(rng: np.random.Generator, k: int) -> np.ndarray:
            return (rng.random((k, *nvec.shape)) * nvec).astype(dtype) + start

        return multi
    if isinstance(space, spaces.Box) and space.is_bounded("both"):
        return _box_drawer(space)
    return None


def _box_drawer(space: Any) -> Draw | None:
    """A bounded Box's block drawer, or None where Gymnasium's sampler does more."""
    dtype, shape = space.dtype, space.shape
    low = space.low.astype(np.float64)
    if dtype.kind == "f":
        span = space.high.astype(np.float64) - low
        if not np.isfinite(span).all():
            return None

        def floats(rng: np.random.Generator, k: int) -> np.ndarray:
            return (low + span * rng.random((k, *shape))).astype(dtype)  # type: ignore[no-any-return]

        return floats
    if dtype.kind not in "iu":
        return None
    span = (space.high.astype(np.int64) + 1).astype(np.float64) - low
    info = np.iinfo(dtype)
    margin = 2 if dtype == np.int64 else 0
    lo_clip, hi_clip = info.min + margin, info.max - margin
    needs_clip = bool(low.min() < lo_clip or (low + span).max() > hi_clip)
    int_low, int_high = space.low, space.high

    def integers(rng: np.random.Generator, k: int) -> np.ndarray:
        sample = np.floor(low + span * rng.random((k, *shape)))
        if needs_clip:
            sample = sample.clip(min=lo_clip, max=hi_clip)
        out = sample.astype(dtype)
        if dtype == np.int64:
            out = out.clip(min=int_low, max=int_high)
        return out  # type: ignore[no-any-return]

    return integers
