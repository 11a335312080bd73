"""Streaming tensor statistics in float64: min, max, mean, std and NaN/inf counts.

Each block of values is reduced on its own (a float64 sum, then the sum of squared
deviations from the block's mean, corrected by the deviations' own sum), and blocks are
merged with Chan et al.'s parallel update of Welford's algorithm, the means kept relative
to a fixed shift: memory stays bounded, and the results agree with numpy on the whole
array to about 1e-12 relative, without the cancellation a plain sum of squares suffers.
Booleans are counted instead. NaN and ±inf are counted too, and the other statistics are
over the finite values only (a single inf would make the mean and std meaningless).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["TensorAccumulator", "TensorStats"]

_BLOCK = 1 << 16  # values reduced at once: float64 temporaries stay in the CPU cache


@dataclass(frozen=True, slots=True)
class TensorStats:
    """Statistics of one tensor over the valid transitions.

    Attributes:
        name: Tensor name.
        dtype: numpy dtype name.
        shape: Stored shape ``(T, N, *feature)``.
        count: Values over the valid transitions (transitions times feature size).
        min: Smallest finite value (NaN when there is none).
        max: Largest finite value (NaN when there is none).
        mean: Mean of the finite values (NaN when there is none).
        std: Population standard deviation (``ddof=0``, as numpy) of the finite values.
        nan: Number of NaN values.
        inf: Number of +inf and -inf values.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    count: int
    min: float
    max: float
    mean: float
    std: float
    nan: int
    inf: int

    def to_json(self) -> dict[str, Any]:
        """The ``tensors`` entry of ``inspect --json`` (NaN as null)."""
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "count": self.count,
            "min": _json_number(self.min),
            "max": _json_number(self.max),
            "mean": _json_number(self.mean),
            "std": _json_number(self.std),
            "nan": self.nan,
            "inf": self.inf,
        }


class TensorAccumulator:
    """Accumulates the statistics of one tensor, chunk after chunk."""

    def __init__(self, name: str, dtype: np.dtype[Any], shape: tuple[int, ...]) -> None:
        self.name = name
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        self.count = 0
        self.nan = 0
        self.inf = 0
        self._n = 0  # finite values
        self._shift: float | None = None
        self._mean = 0.0  # of the finite values minus ``_shift``
        self._m2 = 0.0
        self._min: Any = None
        self._max: Any = None

    def update(self, values: np.ndarray) -> int:
        """Add a chunk of values (any shape); returns how many of them are NaN or inf."""
        flat = values.reshape(-1)
        self.count += flat.size
        bad = 0
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is counted, not warned
            for start in range(0, flat.size, _BLOCK):
                bad += self._block(flat[start : start + _BLOCK])
        return bad

    def _block(self, values: np.ndarray) -> int:
        if values.dtype.kind == "b":
            return self._flags(values)
        wide = values.astype(np.float64)
        total = float(np.sum(wide))
        bad = 0
        if not math.isfinite(total) and values.dtype.kind == "f":
            bad = self._count_bad(values)
            keep = np.isfinite(values)
            values, wide = values[keep], wide[keep]
            total = float(np.sum(wide))
        n = values.size
        if n == 0:
            return bad
        low, high = values.min(), values.max()
        self._min = low if self._min is None or low < self._min else self._min
        self._max = high if self._max is None or high > self._max else self._max
        if self._shift is None:
            self._shift = float(wide[0])
        mean = total / n
        if not math.isfinite(mean):  # float64 values near the overflow: scale first
            mean = float(np.mean(wide / n)) * n
        wide -= mean
        # The corrected two-pass algorithm: the deviations' own sum removes the rounding of
        # ``mean``. The mean is kept relative to a fixed shift (the first value), where the
        # merge of chunk means, which carries rounding linearly, loses nothing.
        residual = float(np.sum(wide))
        # einsum, not np.dot: BLAS threads spinning between calls would take the cores.
        m2 = float(np.einsum("i,i->", wide, wide)) - residual * residual / n
        self._merge(n, (mean - self._shift) + residual / n, m2)
        return bad

    def _flags(self, values: np.ndarray) -> int:
        """Booleans: their statistics follow from how many are true."""
        n = values.size
        if n:
            ones = int(np.count_nonzero(values))
            self._min = (
                values.dtype.type(ones == n) if self._min is None else self._min & (ones == n)
            )
            self._max = values.dtype.type(ones > 0) if self._max is None else self._max | (ones > 0)
            if self._shift is None:
                self._shift = 0.0
            self._merge(n, ones / n, ones * (n - ones) / n)
        return 0

    def _count_bad(self, values: np.ndarray) -> int:
        nan = int(np.count_nonzero(np.isnan(values)))
        inf = int(np.count_nonzero(np.isinf(values)))
        self.nan += nan
        self.inf += inf
        return nan + inf

    def _merge(self, n: int, mean: float, m2: float) -> None:
        """Chan et al.'s combination of two (count, mean, sum of squared deviations)."""
        total = self._n + n
        delta = mean - self._mean
        self._mean += delta * (n / total)
        self._m2 += m2 + delta * delta * (self._n * (n / total))
        self._n = total

    def result(self) -> TensorStats:
        """The statistics of everything added so far."""
        found = self._n > 0
        return TensorStats(
            name=self.name,
            dtype=self.dtype.name,
            shape=self.shape,
            count=self.count,
            min=_number(self._min) if found else math.nan,
            max=_number(self._max) if found else math.nan,
            mean=self._mean + (self._shift or 0.0) if found else math.nan,
            std=math.sqrt(max(self._m2, 0.0) / self._n) if found else math.nan,
            nan=self.nan,
            inf=self.inf,
        )


def _number(value: Any) -> float:
    """A numpy scalar as a Python number: ints stay exact, bools become 0 or 1."""
    item = value.item()
    return int(item) if isinstance(item, bool | int) else float(item)


def _json_number(value: float) -> float | None:
    return value if math.isfinite(value) else None
