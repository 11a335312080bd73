"""``Distribution`` gives numpy's figures; its median is ``np.median``'s, bit for bit."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from expcli.distribution import Distribution

floats = hnp.arrays(np.float64, st.integers(1, 40), elements=st.floats(width=64))
integers = hnp.arrays(np.int64, st.integers(1, 40), elements=st.integers(-(2**40), 2**40))


@given(values=st.one_of(floats, integers))
def test_the_figures_are_numpys(values: np.ndarray) -> None:
    with np.errstate(all="ignore"):  # inf - inf in std: NaN both ways
        got = Distribution.of(values)
        expected = [np.mean(values), np.std(values), np.min(values), np.median(values)]
        expected.append(np.max(values))
    for mine, theirs in zip(
        [got.mean, got.std, got.min, got.median, got.max], expected, strict=True
    ):
        assert (math.isnan(mine) and math.isnan(theirs)) or mine == float(theirs)


def test_no_values_give_nan_and_the_median_imports_no_masked_arrays() -> None:
    assert all(math.isnan(v) for v in Distribution.of(np.zeros(0)).to_json().values() if v)
    code = (
        "import sys, numpy as np\n"
        "from expcli.distribution import Distribution\n"
        "Distribution.of(np.arange(6.0))\n"
        "print('numpy.ma' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
