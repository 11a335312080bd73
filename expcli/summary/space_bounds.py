"""Gymnasium spaces from their JSON description in the metadata, and whether rows fit them.

Two spellings are read (see ``expcli.space_json``): expcli's (``collect.spaces.space_record``:
bounds as one number or nested lists, with the strings ``"inf"``/``"-inf"``) and Minari's
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

from expcli.errors import InvalidTypeError, InvalidValueError
from expcli.space_json import children, leaf_tensors, space_for

__all__ = ["SpaceBounds", "leaf_bounds", "parse_space", "space_text"]

_MAX_CODE_POINT = 0x10FFFF
_SHOWN_BOUNDS = 4  # elements of a Box bound that differ shown before "..."


@dataclass(frozen=True)
class SpaceBounds:
    """What a space allows, elementwise over a row's feature shape.

    The bounds are kept as the description gives them (one number, or an array that
    broadcasts to the shape), never expanded: a description is only as large as its JSON,
    whatever shape it declares.

    Attributes:
        kind: The space's type name.
        shape: Feature shape of a stored row.
        dtype: The space's dtype name, when the description gives one.
        low: Smallest allowed value of each element (broadcasts to ``shape``).
        high: Largest allowed value of each element (broadcasts to ``shape``).
        integral: Whether values must be whole numbers.
        text: A short description for messages, such as
            ``Box(low=-4.8, high=4.8, shape=(4,), dtype=float32)``.
    """

    kind: str
    shape: tuple[int, ...]
    dtype: str | None
    low: np.ndarray
    high: np.ndarray
    integral: bool
    text: str

    def outside(self, rows: np.ndarray) -> np.ndarray:
        """Which rows hold a value the space does not allow (NaN included).

        ``rows`` is shaped ``(k, n, *shape)``; the answer is a boolean array ``(k, n)``.
        """
        with np.errstate(invalid="ignore"):
            bad = ~((rows >= self.low) & (rows <= self.high))
            if self.integral and rows.dtype.kind == "f":
                bad |= rows != np.floor(rows)
        return np.asarray(bad.reshape(*rows.shape[:2], -1).any(axis=2))

    def fits_shape(self, feature: tuple[int, ...]) -> bool:
        """Whether rows of this feature shape can hold samples of the space."""
        return tuple(feature) == self.shape


def parse_space(description: object) -> SpaceBounds | None:
    """The bounds of a described Box, Discrete, MultiDiscrete or MultiBinary space.

    Returns None for other spaces and for descriptions that are not understood (sizes
    that are not counts, bounds that are not numbers or do not fit the shape, numbers too
    large for a float): the checks then say the space was not checked, rather than fail.
    """
    if not isinstance(description, dict):
        return None
    kind = description.get("type")
    try:
        if kind == "Box":
            return _box(description)
        if kind == "Discrete":
            start, n = _integer(description.get("start", 0)), _integer(description["n"])
            if n < 1:
                return None
            text = f"Discrete({n}" + (f", start={start})" if start else ")")
            low, high = np.array([float(start)]), np.array([float(start + n - 1)])
            return SpaceBounds(kind, (1,), _dtype(description), low, high, True, text)
        if kind == "MultiDiscrete":
            nvec = _numbers(description["nvec"])
            if nvec.ndim < 1 or not (nvec >= 1).all():
                return None
            offset = _numbers(description.get("start", 0))
            np.broadcast_shapes(offset.shape, nvec.shape)
            high = offset + nvec - 1
            text = f"MultiDiscrete({_short_list(nvec)})"
            return SpaceBounds(kind, nvec.shape, _dtype(description), offset, high, True, text)
        if kind == "MultiBinary":
            n = description["n"]
            shape = tuple(_integer(d) for d in (n if isinstance(n, list) else [n]))
            if any(d < 0 for d in shape):
                return None
            text = f"MultiBinary({list(shape) if isinstance(n, list) else shape[0]})"
            return SpaceBounds(kind, shape, None, np.zeros(()), np.ones(()), True, text)
        if kind == "Text":
            length = _integer(description["max_length"])
            if length < 0:
                return None
            text = f"Text(max_length={length})"
            high = np.array(float(_MAX_CODE_POINT))
            return SpaceBounds(kind, (length,), "int32", np.zeros(()), high, True, text)
    except (KeyError, TypeError, ValueError, OverflowError):
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
    shape = tuple(_integer(d) for d in description["shape"])
    if any(d < 0 for d in shape):
        raise InvalidValueError(f"negative size in {shape}")
    stored = shape or (1,)
    low, high = _numbers(description["low"]), _numbers(description["high"])
    for bound in (low, high):  # bounds broadcast to the shape; they are not expanded
        if np.broadcast_shapes(bound.shape, shape) != shape:
            raise InvalidValueError(f"bounds of shape {bound.shape} do not fit {shape}")
    dtype = _dtype(description)
    integral = dtype is not None and np.dtype(dtype).kind in "iub"
    text = f"Box(low={_bound(low)}, high={_bound(high)}, shape={shape}"
    text += f", dtype={dtype})" if dtype is not None else ")"
    return SpaceBounds("Box", stored, dtype, low, high, integral, text)


def _integer(value: Any) -> int:
    """A size or offset: an int (not a bool, not a float)."""
    if type(value) is not int:
        raise InvalidTypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _dtype(description: dict[str, Any]) -> str | None:
    """The description's dtype, when it names a numeric numpy dtype."""
    dtype = description.get("dtype")
    if dtype is None:
        return None
    if not isinstance(dtype, str) or np.dtype(dtype).kind not in "biuf":
        raise InvalidValueError(f"not a numeric dtype: {dtype!r}")
    return dtype


def _numbers(value: Any) -> np.ndarray:
    """Bounds as float64, reading ``"inf"``/``"-inf"`` strings and JSON's Infinity."""
    array = np.asarray(value, dtype=object)
    flat = [float(v) for v in array.reshape(-1)]  # float("inf") reads the strings
    return np.asarray(flat, dtype=np.float64).reshape(array.shape)


def _short_list(values: np.ndarray) -> str:
    flat = values.reshape(-1)
    items = [int(v) for v in flat[:8]]  # Python ints: no overflow warning for huge sizes
    shown = ", ".join(map(str, items)) + (", ..." if flat.size > 8 else "")
    return f"[{shown}]"


def _bound(values: np.ndarray) -> str:
    """One number when every element shares it, else the first elements as a list."""
    flat = values.reshape(-1)
    if flat.size and (flat == flat[0]).all():
        return _short(float(flat[0]))
    shown = ", ".join(_short(float(v)) for v in flat[:_SHOWN_BOUNDS])
    return f"[{shown}{', ...' if flat.size > _SHOWN_BOUNDS else ''}]"


def _short(value: float) -> str:
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value + 0.0:.4g}"  # + 0.0: -0.0 prints as 0
