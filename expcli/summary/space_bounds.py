"""Gymnasium spaces from their JSON description in the metadata, and whether rows fit them.

Two spellings are read (see ``expcli.space_json``): expcli's (``describe_space``: bounds
as one number or nested lists, with the strings ``"inf"``/``"-inf"``) and Minari's
(``serialize_space``: bounds as full lists, where JSON's ``Infinity`` stands for inf)::

    {"type": "Box", "low": -1.0, "high": [...], "shape": [4], "dtype": "float32"}
    {"type": "Discrete", "n": 2, "start": 0}
    {"type": "MultiDiscrete", "nvec": [3, 2], "start": [0, 0]}
    {"type": "MultiBinary", "n": [4]}
    {"type": "Text", "min_length": 1, "max_length": 8, "charset": "..."}

Stored rows follow ``expcli.collect.spaces.layout_of``: a Discrete sample is one int64 (a
feature shape ``(1,)``), a Box of shape ``()`` is ``(1,)``, a Text sample ``max_length``
code points; the others keep their shape. Dict and Tuple spaces are checked leaf by leaf,
each leaf against its own tensor (``observations/pos``...; ``leaf_bounds``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from expcli.space_json import children, leaf_tensors, read_bounds, space_for

__all__ = ["SpaceBounds", "leaf_bounds", "parse_space", "space_text"]

_MAX_CODE_POINT = 0x10FFFF


@dataclass(frozen=True)
class SpaceBounds:
    """What a space allows, elementwise over a row's feature shape.

    Attributes:
        kind: The space's type name.
        shape: Feature shape of a stored row.
        dtype: The space's dtype name, when the description gives one.
        low: Smallest allowed value of each element (broadcast to ``shape``).
        high: Largest allowed value of each element.
        integral: Whether values must be whole numbers.
        text: A short description for messages, such as ``Box(-4.8..4.8, (4,), float32)``.
    """

    kind: str
    shape: tuple[int, ...]
    dtype: str | None
    low: np.ndarray
    high: np.ndarray
    integral: bool
    text: str

    def outside(self, rows: np.ndarray) -> np.ndarray:
        """Which of ``rows`` (shaped ``(k, n, *shape)``) hold a value the space does not
        allow (NaN included); a boolean array ``(k, n)``."""
        values = rows.reshape(*rows.shape[:2], -1)
        low, high = self.low.reshape(-1), self.high.reshape(-1)
        with np.errstate(invalid="ignore"):
            bad = ~((values >= low) & (values <= high))
            if self.integral and values.dtype.kind == "f":
                bad |= values != np.floor(values)
        return np.asarray(bad.any(axis=2))

    def fits_shape(self, feature: tuple[int, ...]) -> bool:
        """Whether rows of this feature shape can hold samples of the space."""
        return tuple(feature) == self.shape


def parse_space(description: Any) -> SpaceBounds | None:
    """The bounds of a described Box, Discrete, MultiDiscrete or MultiBinary space.

    Returns None for other spaces and for descriptions that are not understood (the checks
    then say the space was not checked, rather than fail).
    """
    if not isinstance(description, dict):
        return None
    kind = description.get("type")
    try:
        if kind == "Box":
            return _box(description)
        if kind == "Discrete":
            start, n = int(description.get("start", 0)), int(description["n"])
            text = f"Discrete({n}" + (f", start={start})" if start else ")")
            low, high = np.array([start], float), np.array([start + n - 1], float)
            return SpaceBounds(kind, (1,), description.get("dtype"), low, high, True, text)
        if kind == "MultiDiscrete":
            nvec = np.asarray(description["nvec"], dtype=np.float64)
            offset = np.asarray(description.get("start", np.zeros_like(nvec)), dtype=np.float64)
            low, high = np.broadcast_to(offset, nvec.shape), offset + nvec - 1
            text = f"MultiDiscrete({nvec.astype(np.int64).tolist()})"
            dtype = description.get("dtype")
            return SpaceBounds(kind, nvec.shape, dtype, low, high, True, text)
        if kind == "MultiBinary":
            n = description["n"]
            shape = tuple(int(d) for d in (n if isinstance(n, list) else [n]))
            zeros = np.zeros(shape)
            return SpaceBounds(kind, shape, None, zeros, zeros + 1, True, f"MultiBinary({n})")
        if kind == "Text":
            length = int(description["max_length"])
            low, high = np.zeros(length), np.full(length, float(_MAX_CODE_POINT))
            text = f"Text(max_length={length})"
            return SpaceBounds(kind, (length,), "int32", low, high, True, text)
    except (KeyError, TypeError, ValueError):
        return None
    return None


def leaf_bounds(metadata: Any, prefix: str) -> list[tuple[str, Any, SpaceBounds | None]]:
    """``(tensor name, leaf description, bounds)`` of every leaf of the space of ``prefix``.

    ``prefix`` is ``observations``, ``next_observations`` or ``actions``; a space that is
    not a Dict or Tuple is the one leaf ``prefix``. Empty without a space in the metadata.
    """
    description = space_for(metadata, prefix) if isinstance(metadata, dict) else None
    if description is None:
        return []
    return [(name, leaf, parse_space(leaf)) for name, leaf in leaf_tensors(description, prefix)]


def space_text(description: Any) -> str:
    """A one-line description of a space: ``Dict(pos: Box(...), phase: Discrete(4))``."""
    parts = children(description)
    if parts is not None:
        kind = description["type"]
        if kind == "Tuple":
            return f"Tuple({', '.join(space_text(sub) for _, sub in parts)})"
        return f"Dict({', '.join(f'{key}: {space_text(sub)}' for key, sub in parts)})"
    bounds = parse_space(description)
    if bounds is not None:
        return bounds.text
    if isinstance(description, dict) and isinstance(description.get("type"), str):
        return str(description["type"])
    return "?"


def _box(description: dict[str, Any]) -> SpaceBounds:
    shape = tuple(int(d) for d in description["shape"])
    stored = shape or (1,)
    low = read_bounds(description["low"], shape).reshape(stored)
    high = read_bounds(description["high"], shape).reshape(stored)
    dtype = description.get("dtype")
    integral = dtype is not None and np.dtype(dtype).kind in "iub"
    text = f"Box({_bound(low)}..{_bound(high)}, {shape}, {dtype})"
    return SpaceBounds("Box", stored, dtype, low, high, integral, text)


def _bound(values: np.ndarray) -> str:
    """One number when every element shares it, else the range of the elements."""
    lo, hi = float(values.min()), float(values.max())
    return _short(lo) if lo == hi else f"[{_short(lo)}, {_short(hi)}]"


def _short(value: float) -> str:
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4g}"
