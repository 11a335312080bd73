"""How gymnasium spaces become memory tensors, and their JSON description for the metadata.

Box, MultiBinary and MultiDiscrete samples keep their dimensions; a Discrete sample is
one int64; Dict and Tuple samples are flattened with ``gymnasium.spaces.flatten``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SpaceLayout", "describe_space", "layout_of"]


def describe_space(space: Any) -> dict[str, Any]:
    """A JSON-serialisable description of a gymnasium space.

    ``{"type": "Box", "low": [...], "high": [...], "shape": [...], "dtype": "float32"}``,
    ``{"type": "Discrete", "n": 2, "start": 0}``, ``{"type": "MultiDiscrete", "nvec": [...],
    "start": [...]}``, ``{"type": "MultiBinary", "n": [...]}``, and ``Dict``/``Tuple`` with
    ``spaces``. Infinite bounds are written as the strings ``"inf"``/``"-inf"``.
    """
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "low": _json_numbers(space.low),
            "high": _json_numbers(space.high),
            "shape": list(space.shape),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": space.nvec.tolist(),
            "start": space.start.tolist(),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.atleast_1d(space.n).tolist()}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: describe_space(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [describe_space(s) for s in space.spaces]}
    return {"type": type(space).__name__, "repr": repr(space)}


def _json_numbers(array: np.ndarray) -> Any:
    """Nested lists of numbers with ±inf as strings (JSON has no infinity)."""
    values = np.asarray(array, dtype=np.float64)
    if np.isfinite(values).all():
        return array.tolist()
    as_text = np.where(np.isposinf(values), "inf", np.where(np.isneginf(values), "-inf", ""))
    out = np.where(as_text == "", values.astype(object), as_text.astype(object))
    return out.tolist()


@dataclass(frozen=True)
class SpaceLayout:
    """The tensor that stores samples of a space, and how a batch of samples becomes rows.

    Attributes:
        shape: Feature shape of one sample in the memory.
        dtype: numpy dtype of the memory tensor.
        direct: Whether a batch arrives as an array ``(N, *shape)`` (else flatten each).
    """

    space: Any
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    direct: bool

    def rows(self, batch: Any, num_envs: int) -> np.ndarray:
        """A batch of ``num_envs`` samples as an array ``(num_envs, *shape)`` of ``dtype``."""
        if self.direct and isinstance(batch, np.ndarray) and batch.dtype != object:
            if batch.shape[1:] == self.shape:
                return batch
            return batch.reshape(num_envs, *self.shape)
        from gymnasium import spaces

        out = np.empty((num_envs, *self.shape), dtype=self.dtype)
        for i in range(num_envs):
            sample = batch[i]
            if self.direct:
                out[i] = np.reshape(sample, self.shape)
            else:
                out[i] = spaces.flatten(self.space, sample)
        return out


def layout_of(space: Any) -> SpaceLayout:
    """The memory layout for samples of ``space``."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return SpaceLayout(space, (1,), np.dtype(np.int64), True)
    if isinstance(space, (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)):
        shape = tuple(int(d) for d in space.shape) or (1,)
        dtype = np.dtype(space.dtype)
        if isinstance(space, spaces.MultiDiscrete):
            dtype = np.dtype(np.int64)
        return SpaceLayout(space, shape, dtype, True)
    flat = spaces.flatten_space(space)
    return SpaceLayout(space, tuple(int(d) for d in flat.shape or ()), np.dtype(flat.dtype), False)
