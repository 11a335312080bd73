"""SumTree: sums, draws in proportion to priorities, batch updates with repeated indexes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from expcli.replay import SumTree
from expcli.replay import sum_tree as sum_tree_module


@pytest.mark.parametrize("capacity", [12, 50_000])  # the top level alone; two levels below it
def test_draw_frequencies_match_priorities_within_three_standard_errors(capacity: int) -> None:
    rng = np.random.default_rng(7)
    items = np.sort(rng.choice(capacity, 12, replace=False))  # spread over the tree
    priorities = rng.random(12) * 5
    priorities[[2, 9]] = 0.0  # never drawn
    tree = SumTree(capacity)
    tree.update(items, priorities)
    n = 100_000
    drawn = tree.sample(n, rng)
    assert np.isin(drawn, items[priorities > 0]).all()
    counts = np.array([(drawn == i).sum() for i in items])
    p = priorities / priorities.sum()
    standard_error = np.sqrt(n * p * (1 - p))
    assert (np.abs(counts - n * p) <= 3 * standard_error).all(), (counts, n * p)


@settings(max_examples=50, deadline=None)
@given(
    capacity=st.integers(1, 20_000),
    updates=st.lists(
        st.tuples(
            st.integers(0, 10**9),
            hnp.arrays(np.float64, st.integers(1, 40), elements=st.floats(0, 1e3)),
        ),
        min_size=1,
        max_size=5,
    ),
)
def test_sums_and_finds_agree_with_numpy(capacity: int, updates) -> None:
    tree = SumTree(capacity)
    expected = np.zeros(capacity)
    for seed, values in updates:
        index = np.random.default_rng(seed).integers(0, capacity, len(values))
        tree.update(index, values)
        for i, v in zip(index, values, strict=True):  # last one wins, as in numpy
            expected[i] = v
    assert np.array_equal(tree.leaves, expected)
    assert tree.total() == pytest.approx(expected.sum(), rel=1e-9, abs=1e-9)
    positive = expected[expected > 0]
    assert tree.min_positive() == (positive.min() if positive.size else 0.0)
    if expected.sum() > 0:
        cumulative = np.cumsum(expected)
        mass = np.random.default_rng(1).random(64) * cumulative[-1] * (1 - 1e-9)
        found = tree.find(mass)
        assert (expected[found] > 0).all()
        assert np.array_equal(found, np.searchsorted(cumulative, mass, side="right"))


def test_rebuild_clears_drift_and_repeated_updates_stay_exact(monkeypatch) -> None:
    monkeypatch.setattr(sum_tree_module, "REBUILD_EVERY", 50)
    tree = SumTree(5000)
    rng = np.random.default_rng(2)
    for _ in range(120):
        tree.update(rng.integers(0, 5000, 256), rng.random(256) * 1e6)
    tree.update(np.arange(5000), 0.0)
    tree.update(np.array([7, 7, 7]), np.array([1.0, 2.0, 3.0]))
    assert tree.total() == pytest.approx(3.0, abs=1e-6)
    assert (tree.sample(1000, rng) == 7).all()


def test_refuses_bad_input() -> None:
    tree = SumTree(4)
    with pytest.raises(ValueError, match="every priority is zero"):
        tree.sample(1, np.random.default_rng())
    with pytest.raises(ValueError, match="out of range"):
        tree.update(np.array([4]), 1.0)
    with pytest.raises(ValueError, match="non-negative"):
        tree.update(np.array([0]), -1.0)
    with pytest.raises(ValueError, match="capacity"):
        SumTree(0)
