"""Feature shapes and dtypes for memory tensors, from ints, sequences or gymnasium spaces."""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import numpy as np
import numpy.typing as npt

from expcli.errors import InvalidTypeError, InvalidValueError

if TYPE_CHECKING:
    import torch
    from gymnasium import spaces

__all__ = [
    "DTypeLike",
    "SizeLike",
    "dtype_name",
    "feature_shape",
    "numpy_dtype",
    "numpy_dtypes",
    "torch_dtype",
]

# What ``create_tensor`` takes as a size: an int, a sequence of ints or a gymnasium space.
SizeLike: TypeAlias = "int | float | np.integer[Any] | Sequence[int] | spaces.Space[Any] | None"
# What it takes as a dtype: a torch dtype, or anything numpy reads as one (None: default).
DTypeLike: TypeAlias = "torch.dtype | npt.DTypeLike | None"

_STORED = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
"""The dtypes numpy and torch share that expcli stores (CPU tensors of these get numpy views)."""


@functools.cache
def numpy_dtypes() -> frozenset[torch.dtype]:
    """The torch dtypes with a numpy twin that expcli stores (imports torch)."""
    import torch

    return frozenset(getattr(torch, name) for name in _STORED)


def feature_shape(size: SizeLike, keep_dimensions: bool = False) -> tuple[int, ...]:
    """Shape of one sample of a tensor created with ``create_tensor(size=...)``.

    Without ``keep_dimensions`` the sample is flattened to one dimension of the number of
    elements it occupies (skrl's rule: a ``Discrete`` occupies 1, a ``MultiDiscrete`` one
    per sub-space, ``Dict``/``Tuple`` the sum of their parts). With it, the dimensions of a
    sequence or of a Box/MultiBinary/MultiDiscrete space are kept.

    Raises:
        ValueError: The size is not positive, or composite spaces with ``keep_dimensions``.
        TypeError: The size is neither an int, a sequence of ints nor a gymnasium space.
    """
    if isinstance(size, bool):
        raise InvalidTypeError(
            f"size must be an int, a sequence of ints or a gymnasium space, got {size!r}"
        )
    if isinstance(size, (int, np.integer)) or (isinstance(size, float) and size.is_integer()):
        return (_positive(int(size)),)
    if isinstance(size, (list, tuple)):
        dims = tuple(_positive(_as_int(d)) for d in size)
        return dims if keep_dimensions else (math.prod(dims),)
    from gymnasium import spaces

    if isinstance(size, spaces.Space):
        if keep_dimensions:
            return _kept_space_shape(size)
        return (_positive(occupied_size(size)),)
    raise InvalidTypeError(
        f"size must be an int, a sequence of ints or a gymnasium space, got {size!r}"
    )


def occupied_size(space: spaces.Space[Any]) -> int:
    """Number of scalars a sample of ``space`` occupies once flattened."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return 1
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.prod(space.nvec.shape))
    if isinstance(space, spaces.Tuple):
        return sum(occupied_size(s) for s in space.spaces)
    if isinstance(space, spaces.Dict):
        return sum(occupied_size(s) for s in space.spaces.values())
    return int(spaces.flatdim(space))


def _kept_space_shape(space: spaces.Space[Any]) -> tuple[int, ...]:
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return (1,)
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        raise InvalidValueError(
            f"keep_dimensions=True cannot keep the dimensions of a composite space ({space}); "
            "create one tensor per sub-space or flatten it"
        )
    if space.shape is None:
        raise InvalidValueError(f"space {space} has no shape to keep")
    return tuple(_positive(int(d)) for d in space.shape)


def _as_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidTypeError(f"size dimensions must be ints, got {value!r}")
    return int(value)


def _positive(n: int) -> int:
    if n < 1:
        raise InvalidValueError(f"size dimensions must be positive, got {n}")
    return n


def numpy_dtype(dtype: DTypeLike) -> np.dtype[Any]:
    """The numpy dtype of a torch dtype, a numpy dtype or a dtype name; None -> the default.

    The default is torch's default dtype when torch is loaded (``torch.set_default_dtype``),
    else float32, torch's own default: a memory of numpy arrays never imports torch to ask.

    Raises:
        TypeError: The dtype is not one expcli stores.
    """
    torch = sys.modules.get("torch")
    if dtype is None:
        dtype = torch.get_default_dtype() if torch is not None else np.float32
    if torch is not None and isinstance(dtype, torch.dtype):
        name = str(dtype).removeprefix("torch.")
    else:
        try:
            name = np.dtype(cast("npt.DTypeLike", dtype)).name
        except TypeError as e:
            raise InvalidTypeError(f"unknown dtype {dtype!r}") from e
    if name not in _STORED:
        raise InvalidTypeError(
            f"dtype {name} is not supported; expected one of {', '.join(_STORED)}"
        )
    return np.dtype(name)


def dtype_name(dtype: np.dtype[Any]) -> str:
    """How torch names a numpy dtype of ``_STORED`` (``torch.float32``), for messages."""
    return f"torch.{dtype.name}"


def torch_dtype(dtype: DTypeLike) -> torch.dtype:
    """A ``torch.dtype`` from a torch dtype, a numpy dtype or a dtype name; None -> default.

    Raises:
        TypeError: The dtype has no torch equivalent that expcli stores.
    """
    import torch

    if dtype is None:
        return torch.get_default_dtype()
    if isinstance(dtype, torch.dtype):
        return dtype
    return cast("torch.dtype", getattr(torch, numpy_dtype(dtype).name))
