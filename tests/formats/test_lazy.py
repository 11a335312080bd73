"""LazyRows: slices equal numpy's, sequential slices are read ahead, errors surface."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.formats.lazy import LazyRows, row_chunks


def lazy_over(array: np.ndarray, calls: list[tuple[int, int]]) -> LazyRows:
    def read(start: int, stop: int) -> np.ndarray:
        calls.append((start, stop))
        return array[start:stop].copy()

    return LazyRows(array.shape, array.dtype, read)


@settings(max_examples=50, deadline=None)
@given(
    st.integers(0, 40), st.lists(st.tuples(st.integers(-50, 50), st.integers(-50, 50)), max_size=8)
)
def test_slices_match_numpy(rows: int, slices: list[tuple[int, int]]) -> None:
    array = np.arange(rows * 6, dtype=np.float32).reshape(rows, 2, 3)
    lazy = lazy_over(array, [])
    for a, b in slices:
        np.testing.assert_array_equal(lazy[a:b], array[a:b])
    np.testing.assert_array_equal(np.asarray(lazy), array)
    np.testing.assert_array_equal(lazy[::2], array[::2])
    assert (len(lazy), lazy.ndim, lazy.nbytes) == (rows, 3, array.nbytes)


def test_sequential_slices_are_read_ahead_once() -> None:
    array = np.arange(100).reshape(100, 1)
    calls: list[tuple[int, int]] = []
    lazy = lazy_over(array, calls)
    for start in range(0, 100, 30):
        np.testing.assert_array_equal(lazy[start : start + 30], array[start : start + 30])
    assert sorted(calls) == [(0, 30), (30, 60), (60, 90), (90, 100)]


def test_errors_of_a_read_ahead_surface_when_the_rows_are_asked_for() -> None:
    def read(start: int, stop: int) -> np.ndarray:
        if start >= 10:
            raise OSError("disk gone")
        return np.zeros((stop - start, 1))

    lazy = LazyRows((20, 1), np.dtype(float), read)
    lazy[0:10]
    with pytest.raises(OSError, match="disk gone"):
        lazy[10:20]


def test_row_chunks_cover_every_row() -> None:
    array = np.zeros((1000, 4, 256), dtype=np.float64)
    chunks = row_chunks(array, chunk_bytes=100_000)
    assert chunks.step == 100_000 // (4 * 256 * 8) and chunks[-1] + chunks.step >= 1000
