"""SumTree, compiled and numpy: draws in proportion to priorities, sums that never drift,
the smallest priority kept right, agreement with numpy's cumsum/searchsorted."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from expcli.errors import MissingDependencyError
from expcli.replay import SumTree
from expcli.replay import sum_tree as sum_tree_module

BACKENDS = [
    pytest.param(False, id="numpy"),
    pytest.param(
        True,
        id="compiled",
        marks=pytest.mark.skipif(
            not sum_tree_module.compiled_available(), reason="numba is not installed"
        ),
    ),
]


def random_updates(tree: SumTree, expected: np.ndarray, rounds: int, seed: int) -> None:
    """Batches of 256 with repeated indexes, zeros and values of very different sizes."""
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        index = rng.integers(0, len(expected), 256)
        values = rng.random(256) * 10.0 ** rng.integers(-6, 7, 256)
        values[rng.random(256) < 0.2] = 0.0
        tree.update(index, values)
        expected[index] = values  # numpy's fancy assignment: the last one wins, as in the tree


@pytest.mark.parametrize("compiled", BACKENDS)
@pytest.mark.parametrize("capacity", [12, 50_000])  # the top level alone; levels below it
def test_draw_frequencies_match_priorities_within_three_standard_errors(
    capacity: int, compiled: bool
) -> None:
    rng = np.random.default_rng(7)
    items = np.sort(rng.choice(capacity, 12, replace=False))  # spread over the tree
    priorities = rng.random(12) * 5
    priorities[[2, 9]] = 0.0  # never drawn
    tree = SumTree(capacity, compiled=compiled)
    tree.update(items, priorities)
    n = 100_000
    drawn, drawn_priority = tree.draw(n, rng)
    assert np.isin(drawn, items[priorities > 0]).all()
    assert np.array_equal(drawn_priority, tree.leaves[drawn])
    counts = np.array([(drawn == i).sum() for i in items])
    p = priorities / priorities.sum()
    standard_error = np.sqrt(n * p * (1 - p))
    assert (np.abs(counts - n * p) <= 3 * standard_error).all(), (counts, n * p)


@pytest.mark.parametrize("compiled", BACKENDS)
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
def test_sums_finds_and_minimum_agree_with_numpy(
    compiled: bool, capacity: int, updates: list[tuple[int, np.ndarray]]
) -> None:
    tree = SumTree(capacity, compiled=compiled)
    expected = np.zeros(capacity)
    for seed, values in updates:
        index = np.random.default_rng(seed).integers(0, capacity, len(values))
        tree.update(index, values)
        for i, v in zip(index, values, strict=True):  # last one wins, as in numpy
            expected[i] = v
        positive = expected[expected > 0]
        assert tree.min_positive() == (positive.min() if positive.size else 0.0)
    assert np.array_equal(tree.leaves, expected)
    assert tree.total() == pytest.approx(expected.sum(), rel=1e-9, abs=1e-9)
    if expected.sum() > 0:
        cumulative = np.cumsum(expected)
        mass = np.random.default_rng(1).random(64) * cumulative[-1]
        mass = np.minimum(mass, np.nextafter(cumulative[-1], 0))  # below the total
        found = tree.find(mass)
        assert (expected[found] > 0).all()
        assert np.array_equal(found, np.searchsorted(cumulative, mass, side="right"))


@pytest.mark.parametrize("compiled", BACKENDS)
def test_many_random_updates_leave_no_drift(compiled: bool) -> None:
    capacity = 70_000  # three levels below the numpy top, five in the compiled tree
    tree = SumTree(capacity, compiled=compiled)
    expected = np.zeros(capacity)
    random_updates(tree, expected, rounds=3000, seed=3)
    assert np.array_equal(tree.leaves, expected)
    levels = tree.levels
    for below, level in zip(levels, levels[1:], strict=False):
        rows = below.reshape(len(level), -1)
        if compiled:  # added child after child, as the descent scans them
            assert np.array_equal(level, np.cumsum(rows, axis=1)[:, -1])
        else:
            np.testing.assert_allclose(level, rows.sum(axis=1), rtol=1e-12, atol=0)
        assert (level[rows.max(axis=1) == 0] == 0).all()  # empty subtrees hold exactly 0
    assert tree.total() == pytest.approx(math.fsum(expected), rel=1e-12)
    cumulative = np.cumsum(expected)
    mass = np.random.default_rng(4).random(10_000) * cumulative[-1] * (1 - 1e-12)
    assert np.array_equal(tree.find(mass), np.searchsorted(cumulative, mass, side="right"))
    positive = expected[expected > 0]
    assert tree.min_positive() == positive.min()
    # setting everything to 0 leaves exact zeros, not the residue of added changes
    tree.update(np.arange(capacity), 0.0)
    tree.update(np.array([7, 7, 7]), np.array([1.0, 2.0, 3.0]))
    assert tree.total() == 3.0
    assert (tree.sample(1000, np.random.default_rng(5)) == 7).all()


@pytest.mark.skipif(not sum_tree_module.compiled_available(), reason="numba is not installed")
def test_compiled_and_numpy_trees_find_the_same_leaves() -> None:
    capacity = 300_000
    trees = [SumTree(capacity, compiled=False), SumTree(capacity, compiled=True)]
    expected = np.zeros(capacity)
    for tree in trees:
        random_updates(tree, expected, rounds=200, seed=6)
    mass = np.random.default_rng(8).random(50_000) * trees[0].total() * (1 - 1e-9)
    assert np.array_equal(trees[0].find(mass), trees[1].find(mass))
    assert trees[0].min_positive() == trees[1].min_positive()


@pytest.mark.parametrize("compiled", BACKENDS)
def test_zero_priorities_are_never_drawn_even_at_the_edges(compiled: bool) -> None:
    capacity = 5000
    tree = SumTree(capacity, compiled=compiled)
    rng = np.random.default_rng(9)
    live = np.sort(rng.choice(np.arange(100, 4900), 40, replace=False))  # zeros at both ends
    tree.update(live, rng.random(40) * 1e-300)  # tiny: sums close to underflow
    tree.update(live[:5], 1e300)  # and huge ones beside them
    drawn = tree.sample(50_000, rng)
    assert np.isin(drawn, live).all()
    # mass past the total (rounding) ends on the last positive leaf
    assert tree.find(np.array([tree.total(), 2 * tree.total()])).tolist() == [live[-1]] * 2


@pytest.mark.parametrize("compiled", BACKENDS)
def test_smallest_priority_follows_updates_that_lower_and_raise_it(compiled: bool) -> None:
    tree = SumTree(1000, compiled=compiled)
    tree.update(np.arange(1000), 1.0)
    assert tree.min_positive() == 1.0
    tree.update(np.array([3, 3, 4]), np.array([0.1, 0.5, 0.2]))  # 3 ends at 0.5
    assert tree.min_positive() == 0.2
    tree.update(np.array([4, 5]), np.array([0.2, 0.2]))  # a second holder of the minimum
    tree.update(np.array([4]), np.array([2.0]))
    assert tree.min_positive() == 0.2  # 5 still holds it
    tree.update(np.array([5]), np.array([0.0]))
    assert tree.min_positive() == 0.5
    tree.update(np.arange(1000), 0.0)
    assert tree.min_positive() == 0.0


@pytest.mark.parametrize("compiled", BACKENDS)
def test_refuses_bad_input(compiled: bool) -> None:
    tree = SumTree(4, compiled=compiled)
    with pytest.raises(ValueError, match="every priority is zero"):
        tree.sample(1, np.random.default_rng())
    with pytest.raises(ValueError, match="out of range"):
        tree.update(np.array([4]), 1.0)
    with pytest.raises(ValueError, match="out of range"):
        tree.update(np.array([-1]), 1.0)
    for bad in (-1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="non-negative"):
            tree.update(np.array([0]), bad)
    with pytest.raises(ValueError, match="capacity"):
        SumTree(0, compiled=compiled)


def test_asking_for_a_compiled_tree_without_numba_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(sum_tree_module, "_kernels", lambda: None)
    with pytest.raises(MissingDependencyError, match=r"expcli\[fast\]"):
        SumTree(10, compiled=True)
    assert not SumTree(10).compiled  # the default falls back to numpy


def test_numba_is_imported_only_when_a_tree_is_built() -> None:
    code = (
        "import sys\n"
        "import expcli.replay\n"
        "assert 'numba' not in sys.modules, 'imported with the package'\n"
        "expcli.replay.SumTree(4, compiled=False)\n"
        "assert 'numba' not in sys.modules, 'imported by a numpy tree'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
