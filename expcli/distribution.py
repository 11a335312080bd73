"""``Distribution``: the mean, spread and median of some values, as collect and inspect report them.

One type for both, so that a collect's summary and ``expcli inspect`` describe episode
returns and lengths the same way. Numpy only, below every package that uses it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Distribution"]


@dataclass(frozen=True, slots=True)
class Distribution:
    """Mean, std (``ddof=0``), min, median and max of some values (NaN when there are none)."""

    mean: float
    std: float
    min: float
    median: float
    max: float

    @classmethod
    def of(cls, values: np.ndarray) -> Distribution:
        """The distribution of ``values`` (float64)."""
        if values.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan, math.nan)
        return cls(
            float(np.mean(values)),
            float(np.std(values)),
            float(np.min(values)),
            _median(values),
            float(np.max(values)),
        )

    def to_json(self) -> dict[str, float | None]:
        """``{"mean", "std", "min", "median", "max"}`` with NaN as null."""
        return {k: (v if math.isfinite(v) else None) for k, v in self._items()}

    def _items(self) -> list[tuple[str, float]]:
        return [
            ("mean", self.mean),
            ("std", self.std),
            ("min", self.min),
            ("median", self.median),
            ("max", self.max),
        ]


def _median(values: np.ndarray) -> float:
    """``np.median`` of non-empty ``values``, without the ``numpy.ma`` import it makes.

    ``np.median`` looks for masked arrays through ``np.ma``, whose first import took 40 ms
    and more, a tenth of a tiny collect. Here, as there: the mean of the middle one or
    two values in order, NaN when any value is NaN.
    """
    ordered = np.sort(values, axis=None)
    if ordered.dtype.kind == "f" and np.isnan(ordered[-1]):  # NaNs sort last
        return math.nan
    half = ordered.size // 2
    middle = ordered[half - 1 : half + 1] if ordered.size % 2 == 0 else ordered[half : half + 1]
    return float(np.mean(middle))
