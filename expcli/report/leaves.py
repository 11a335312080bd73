"""What each tensor of a dataset is to a report: an image, text, or a few numbers per step.

A report shows observations, actions, rewards and the other tensors a dataset carries
(``infos/lives``, ``log_prob``), each leaf of a Dict or Tuple space under its own name
(``observations/image``). ``leaves`` lists them with their space's description; ``ImageView``
says how an image leaf becomes a picture: which axes are height, width and channels, and
how many pixels to skip so that no side exceeds ``MAX_SIDE`` (every k-th row and column,
so that a shown pixel is a stored one).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from expcli.space_json import SEPARATOR, leaf_tensors, space_for
from expcli.summary.space_bounds import SpaceBounds, parse_space

__all__ = ["MAX_SIDE", "Kind", "ShownLeaf", "Role", "ImageView", "leaves"]

MAX_SIDE = 320
"""Pixels on a shown frame's longer side at most: larger frames show every k-th pixel."""

_NOT_SHOWN = ("next_observations", "terminated", "truncated")


class Role(enum.StrEnum):
    """Which part of a transition a tensor is."""

    OBSERVATION = "observations"
    ACTION = "actions"
    REWARD = "rewards"
    OTHER = "other"


class Kind(enum.StrEnum):
    """How a leaf is shown."""

    IMAGE = "image"
    """Frames: a picture per step."""
    TEXT = "text"
    """A ``Text`` space: code points, shown as the string."""
    NUMBERS = "numbers"
    """A few numbers per step: distributions per dimension, lines over an episode."""


@dataclass(frozen=True, slots=True)
class ImageView:
    """How the rows of an image leaf become pictures ``(height, width, channels)``.

    Attributes:
        axes: The feature axes that are height, width and (or None) channels.
        frame: The index along a fourth axis (a stack of frames: its last), or None.
        step: Every ``step``-th row and column is shown (1: all of them).
    """

    axes: tuple[int, int, int | None]
    frame: int | None
    step: int

    def picture(self, cells: np.ndarray) -> np.ndarray:
        """Cells ``(k, *feature)`` as ``(k, height, width)`` or ``(k, height, width, channels)``."""
        height, width, channels = self.axes
        array = cells
        if self.frame is not None:  # a stack of frames: the newest
            stack = next(a for a in range(cells.ndim - 1) if a not in (height, width, channels))
            array = np.take(cells, self.frame, axis=stack + 1)
            height, width = (a - (a > stack) for a in (height, width))
            channels = None
        order = [0, height + 1, width + 1] + ([channels + 1] if channels is not None else [])
        array = array.transpose(order)
        if self.step > 1:
            array = array[:, :: self.step, :: self.step]
        if array.ndim == 4 and array.shape[3] == 1:
            array = array[..., 0]
        return np.ascontiguousarray(array)


@dataclass(frozen=True, slots=True)
class ShownLeaf:
    """One tensor as a report shows it.

    Attributes:
        name: The tensor's name (``observations``, ``observations/image``, ``infos/lives``).
        role: Observation, action, reward or another tensor.
        kind: Image, text or numbers.
        dtype: Its numpy dtype.
        feature: Its feature shape (a row's shape, after ``(T, N)``).
        space: The leaf's space description from the metadata, when there is one.
        bounds: What the space allows, when it is a Box, Discrete, MultiDiscrete or
            MultiBinary space that fits the feature shape.
        view: How an image leaf becomes pictures; None for other kinds.
    """

    name: str
    role: Role
    kind: Kind
    dtype: np.dtype[Any]
    feature: tuple[int, ...]
    space: Any
    bounds: SpaceBounds | None
    view: ImageView | None

    @property
    def dims(self) -> int:
        """Numbers in one row."""
        return math.prod(self.feature)

    @property
    def discrete(self) -> bool:
        """Whether its values are categories (a Discrete space, or one integer per step)."""
        if isinstance(self.space, dict) and self.space.get("type") == "Discrete":
            return True
        return self.dims == 1 and self.dtype.kind in "iub"


def leaves(tensors: Mapping[str, Any], metadata: Mapping[str, Any]) -> list[ShownLeaf]:
    """The tensors a report shows: observations, actions, rewards, then the others.

    Leaves of a structured space come in the space's order; next observations and the
    done flags are left out (the episodes show them).
    """
    described: dict[str, Any] = {}
    for prefix in ("observations", "actions"):
        space = space_for(metadata, prefix)
        if space is not None:
            described.update(leaf_tensors(space, prefix))
    out = []
    order = {name: i for i, name in enumerate(described)}
    for name in sorted(tensors, key=lambda n: (_role_rank(n), order.get(n, len(order)), n)):
        if _prefix(name) in _NOT_SHOWN:
            continue
        array = tensors[name]
        dtype, feature = np.dtype(array.dtype), tuple(int(d) for d in array.shape[2:])
        space = described.get(name)
        bounds = parse_space(space)
        if bounds is not None and not bounds.fits_shape(feature):
            bounds = None
        text = isinstance(space, dict) and space.get("type") == "Text"
        view = None if text else _view(feature, dtype)
        kind = Kind.TEXT if text else Kind.IMAGE if view is not None else Kind.NUMBERS
        out.append(ShownLeaf(name, _role(name), kind, dtype, feature, space, bounds, view))
    return out


def _prefix(name: str) -> str:
    return name.split(SEPARATOR, 1)[0]


def _role(name: str) -> Role:
    prefix = _prefix(name)
    for role in (Role.OBSERVATION, Role.ACTION):
        if prefix == role.value:
            return role
    return Role.REWARD if name == "rewards" else Role.OTHER


def _role_rank(name: str) -> int:
    return list(Role).index(_role(name))


def _view(feature: tuple[int, ...], dtype: np.dtype[Any]) -> ImageView | None:
    """How rows of this shape become pictures; None when they are not images.

    ``(H, W)``, ``(H, W, C)`` and ``(C, H, W)`` with C of 1 or 3 are images; a stack of
    grey frames ``(k, H, W)`` or ``(H, W, k)`` (other k: 4 is Atari's stack, far more common
    than RGBA) shows its newest frame. Images are at least 2 pixels on each side, of
    numbers or booleans.
    """
    if dtype.kind not in "biuf" or not 2 <= len(feature) <= 3:
        return None
    if len(feature) == 2:
        axes: tuple[int, int, int | None] = (0, 1, None)
        frame = None
    elif feature[2] in (1, 3):
        axes, frame = (0, 1, 2), None
    elif feature[0] in (1, 3):
        axes, frame = (1, 2, 0), None
    elif feature[0] <= feature[2]:  # frames stacked first: (k, H, W)
        axes, frame = (1, 2, None), feature[0] - 1
    else:  # (H, W, k)
        axes, frame = (0, 1, None), feature[2] - 1
    height, width = feature[axes[0]], feature[axes[1]]
    if min(height, width) < 2:
        return None
    return ImageView(axes, frame, max(1, math.ceil(max(height, width) / MAX_SIDE)))
