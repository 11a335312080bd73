"""How ``inspect`` and the checks print a Box: named bounds, ``-0`` as ``0``, uniform as one."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.summary.space_bounds import space_text


def _box(low: object, high: object, shape: list[int], dtype: str | None = "float32") -> str:
    description: dict[str, object] = {"type": "Box", "low": low, "high": high, "shape": shape}
    if dtype is not None:
        description["dtype"] = dtype
    return space_text(description)


def test_differing_bounds_are_listed_by_name_with_their_first_elements() -> None:
    low = [-10.0, -0.0, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0]
    high = [1.0, 10.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert _box(low, high, [8]) == (
        "Box(low=[-10, 0, -1, -2, ...], high=[1, 10, 1, 1, ...], shape=(8,), dtype=float32)"
    )


def test_equal_bounds_collapse_to_one_number() -> None:
    assert (
        _box([-0.0, -0.0], [1.5, 2.5], [2])
        == "Box(low=0, high=[1.5, 2.5], shape=(2,), dtype=float32)"
    )
    assert _box(-1.0, "inf", [4]) == "Box(low=-1, high=inf, shape=(4,), dtype=float32)"
    assert (
        _box(0, 255, [84, 84, 3], "uint8") == "Box(low=0, high=255, shape=(84, 84, 3), dtype=uint8)"
    )
    assert _box(0.0, 1.0, [], None) == "Box(low=0, high=1, shape=())"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.floats(allow_nan=False, allow_infinity=True, width=32) | st.just(-0.0),
        min_size=1,
        max_size=12,
    )
)
def test_any_bound_prints_without_minus_zero_and_collapses_when_uniform(
    values: list[float],
) -> None:
    text = _box(values, [v + 1 if np.isfinite(v) else v for v in values], [len(values)])
    low = text.split("low=", 1)[1].split(", high=", 1)[0]
    assert not re.search(r"(^|[\[ ])-0($|[,\]])", low), text
    if len(set(values)) == 1 or all(v == values[0] for v in values):
        assert not low.startswith("["), text
    else:
        assert low.startswith("[") and low.count(",") <= 4, text
