"""How gymnasium spaces become memory tensors, and their JSON description for the metadata.

Box, MultiBinary and MultiDiscrete samples keep their dimensions; a Discrete sample is
one int64 stored with the feature shape ``(1,)``. A Dict or Tuple space is stored one
tensor per leaf (``observations/pos``, ``observations/0``...; see ``expcli.space_json``),
each leaf in its own dtype and shape. A ``Text`` leaf is stored as ``max_length`` int32
code points padded with 0. Other spaces (Graph, Sequence, MiniGrid's MissionSpace...) are
refused with a ``ConfigError`` naming the leaf and the fix, before any step is taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from expcli.errors import ConfigError, EnvError
from expcli.space_json import SEPARATOR, encode_text, write_bounds

__all__ = ["Leaf", "SpaceLayout", "space_record", "layout_of"]


def space_record(space: Any) -> dict[str, Any]:
    """A JSON-serialisable description of a gymnasium space.

    ``{"type": "Box", "low": ..., "high": ..., "shape": [...], "dtype": "float32"}`` (a
    bound is one number when every element shares it, else nested lists; infinities are
    the strings ``"inf"``/``"-inf"``), ``{"type": "Discrete", "n": 2, "start": 0}``,
    ``{"type": "MultiDiscrete", "nvec": [...], "start": [...]}``, ``{"type":
    "MultiBinary", "n": [...]}``, ``{"type": "Text", "min_length": 1, "max_length": 8,
    "charset": "..."}``, and ``Dict``/``Tuple`` with ``spaces``.
    """
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "low": write_bounds(space.low),
            "high": write_bounds(space.high),
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
    if isinstance(space, spaces.Text):
        return {
            "type": "Text",
            "min_length": int(space.min_length),
            "max_length": int(space.max_length),
            "charset": space.characters,
        }
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: space_record(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_record(s) for s in space.spaces]}
    return {"type": type(space).__name__, "repr": repr(space)}


@dataclass(frozen=True)
class Leaf:
    """One stored tensor of a space.

    Attributes:
        suffix: What follows the prefix in the tensor's name (``""``, ``"/pos"``).
        path: Keys from a sample of the whole space to this leaf's value.
        space: The leaf's gymnasium space.
        shape: Feature shape in the memory.
        dtype: numpy dtype in the memory.
        text: Whether the leaf is a ``Text`` space, stored as code points.
    """

    suffix: str
    path: tuple[str | int, ...]
    space: Any
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    text: bool = False

    def rows(self, values: Any, num_envs: int) -> np.ndarray:
        """A batch of this leaf's values as ``(num_envs, *shape)`` of ``dtype``."""
        if self.text:
            try:
                codes = encode_text(_strings(values), self.shape[0])
            except ValueError as e:
                raise EnvError(f"the env gave a sample outside its Text space ({e})") from e
            return codes.reshape(num_envs, *self.shape)
        array = np.asarray(values)
        if array.shape[1:] != self.shape:
            array = array.reshape(num_envs, *self.shape)
        return array.astype(self.dtype, copy=False)

    def batched(self, rows: np.ndarray) -> Any:
        """Stored rows as gymnasium batches them.

        ``(num_envs, *space.shape)``; strings for Text.
        """
        if self.text:
            from expcli.space_json import decode_text

            return decode_text(rows)
        return rows.reshape(len(rows), *self.space.shape)


@dataclass(frozen=True)
class SpaceLayout:
    """The tensors that store samples of a space, and how a batch of samples becomes rows.

    Attributes:
        space: The gymnasium space.
        leaves: One entry per stored tensor (one for an array space).
        composite: Whether the space is a Dict or Tuple.
    """

    space: Any
    leaves: tuple[Leaf, ...]
    composite: bool

    def rows(self, batch: Any, num_envs: int) -> dict[str, np.ndarray]:
        """A batch of ``num_envs`` samples as ``{suffix: (num_envs, *shape) array}``.

        ``batch`` is an array ``(num_envs, ...)``, gymnasium's batched dict/tuple of such
        arrays, or a sequence of one sample per env.
        """
        if not self.composite:
            return {"": _array_rows(self.leaves[0], batch, num_envs)}
        if isinstance(batch, (dict, tuple)):  # batched by gymnasium: arrays per leaf
            return {leaf.suffix: leaf.rows(_at(batch, leaf.path), num_envs) for leaf in self.leaves}
        out: dict[str, np.ndarray] = {}
        for leaf in self.leaves:
            values = [_at(batch[i], leaf.path) for i in range(num_envs)]
            if leaf.text:
                out[leaf.suffix] = leaf.rows(values, num_envs)
                continue
            rows = np.empty((num_envs, *leaf.shape), dtype=leaf.dtype)
            for i, value in enumerate(values):
                rows[i] = np.reshape(value, leaf.shape)
            out[leaf.suffix] = rows
        return out

    def batched(self, rows: dict[str, np.ndarray]) -> Any:
        """Leaf rows as a policy sees a batch.

        A dict (Dict) or tuple (Tuple) of ``(num_envs, *leaf.shape)`` arrays, nested as the space
        is.
        """
        leaves = iter(self.leaves)

        def build(space: Any) -> Any:
            from gymnasium import spaces

            if isinstance(space, spaces.Dict):
                return {key: build(sub) for key, sub in space.spaces.items()}
            if isinstance(space, spaces.Tuple):
                return tuple(build(sub) for sub in space.spaces)
            leaf = next(leaves)
            return leaf.batched(rows[leaf.suffix])

        return build(self.space)


def layout_of(space: Any, name: str = "observations") -> SpaceLayout:
    """The memory layout for samples of ``space``, stored under the tensor ``name``.

    Raises:
        ConfigError: A leaf of a kind expcli cannot store (the message names it, e.g.
            ``observations/mission``, and the wrapper that would fix it).
    """
    from gymnasium import spaces

    leaves: list[Leaf] = []

    def visit(sub: Any, path: tuple[str | int, ...]) -> None:
        suffix = "".join(f"{SEPARATOR}{key}" for key in path)
        if isinstance(sub, spaces.Dict):
            if not sub.spaces:
                raise ConfigError(f"{name}{suffix} is an empty Dict space; nothing to store")
            for key, part in sub.spaces.items():
                visit(part, (*path, key))
        elif isinstance(sub, spaces.Tuple):
            if not sub.spaces:
                raise ConfigError(f"{name}{suffix} is an empty Tuple space; nothing to store")
            for i, part in enumerate(sub.spaces):
                visit(part, (*path, i))
        else:
            leaves.append(_leaf(sub, suffix, path, name))

    visit(space, ())
    composite = isinstance(space, (spaces.Dict, spaces.Tuple))
    return SpaceLayout(space, tuple(leaves), composite)


def _leaf(space: Any, suffix: str, path: tuple[str | int, ...], name: str) -> Leaf:
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return Leaf(suffix, path, space, (1,), np.dtype(np.int64))
    if isinstance(space, (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)):
        shape = tuple(int(d) for d in space.shape) or (1,)
        dtype = np.dtype(space.dtype)
        if isinstance(space, spaces.MultiDiscrete):
            dtype = np.dtype(np.int64)
        return Leaf(suffix, path, space, shape, dtype)
    if isinstance(space, spaces.Text):
        if "\0" in space.characters:
            raise ConfigError(
                f"{name}{suffix} is a Text space whose charset holds NUL, which pads stored "
                "text; use a charset without it"
            )
        return Leaf(suffix, path, space, (int(space.max_length),), np.dtype(np.int32), True)
    wrapper = "an ObservationWrapper" if name.endswith("observations") else "an ActionWrapper"
    raise ConfigError(
        f"{name}{suffix} is a {type(space).__name__} space, which expcli cannot store (it "
        f"stores Box, Discrete, MultiDiscrete, MultiBinary and Text leaves); drop or encode it "
        f"with {wrapper} given as `collect --wrapper MODULE:CALLABLE` (for MiniGrid: "
        "--wrapper minigrid.wrappers:ImgObsWrapper)"
    )


def _array_rows(leaf: Leaf, batch: Any, num_envs: int) -> np.ndarray:
    """An array space's batch: used as is when it is already ``(N, *shape)``."""
    if leaf.text:
        return leaf.rows(batch, num_envs)
    if isinstance(batch, np.ndarray) and batch.dtype != object:
        if batch.shape[1:] == leaf.shape:
            return batch
        return batch.reshape(num_envs, *leaf.shape)
    out = np.empty((num_envs, *leaf.shape), dtype=leaf.dtype)
    for i in range(num_envs):
        out[i] = np.reshape(batch[i], leaf.shape)
    return out


def _at(sample: Any, path: tuple[str | int, ...]) -> Any:
    for key in path:
        sample = sample[key]
    return sample


def _strings(values: Any) -> Sequence[str] | np.ndarray:
    if isinstance(values, np.ndarray):
        return values
    return [str(v) for v in values]
