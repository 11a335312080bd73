"""``select`` and ``split_episodes`` against plain numpy and Python selections of the same rows."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from expcli.errors import ConfigError
from expcli.shaping.selectors import (
    EpisodeRange,
    Top,
    parse_envs,
    parse_episode_range,
    parse_fractions,
    parse_top,
    select,
    split_episodes,
)


def _table(returns: np.ndarray) -> dict[str, np.ndarray]:
    n = len(returns)
    return {
        "return": returns,
        "length": np.arange(n) % 4,
        "env": np.arange(n) % 3,
        "index": np.arange(n),
        "terminated": np.arange(n) % 2 == 0,
    }


@settings(max_examples=100, deadline=None)
@given(
    returns=arrays(
        np.float64,
        st.integers(0, 30),
        elements=st.one_of(st.integers(-2, 2).map(float), st.just(np.nan), st.just(-np.inf)),
    ),
    top=st.one_of(
        st.integers(1, 40).map(str),
        st.sampled_from(["10%", "12.5%", "33%", "50%", "100%", "0.5%"]),
    ),
    where=st.sampled_from([None, "terminated", "length >= 2"]),
)
def test_top_is_an_argsort_of_what_the_other_selectors_keep(
    returns: np.ndarray, top: str, where: str | None
) -> None:
    table = _table(returns)
    rows = np.flatnonzero(select(table, where=where))
    # stable argsort of the negated returns: highest first, earlier row on ties, NaN last
    ranked = rows[np.argsort(-returns[rows], kind="stable")]
    if top.endswith("%"):
        keep = math.ceil(Fraction(top[:-1]) * len(rows) / 100)
    else:
        keep = min(int(top), len(rows))
    expected = np.zeros(len(returns), dtype=bool)
    expected[ranked[:keep]] = True
    np.testing.assert_array_equal(select(table, where=where, top=top), expected)


def test_top_by_another_field_and_its_rounding() -> None:
    table = _table(np.array([5.0, 1.0, 5.0, 3.0, 9.0]))
    assert select(table, top="2", by="length").tolist() == [0, 0, 1, 1, 0]  # lengths 0 1 2 3 0
    assert select(table, top="2").tolist() == [1, 0, 0, 0, 1]  # 9, then the first 5
    assert select(table, top="10%").sum() == 1  # 10% of 5, rounded up
    assert select(_table(np.zeros(30)), top="10%").sum() == 3  # exactly: a float would give 4
    assert select(table, top="100").all()
    assert parse_top("12.5%") == Top(fraction=Fraction(1, 8))
    assert parse_top(" 7 ") == Top(count=7)


def test_top_applies_after_the_other_selectors() -> None:
    table = _table(np.array([9.0, 8.0, 1.0, 2.0]))  # terminated: rows 0 and 2
    assert select(table, top="1", where="not terminated").tolist() == [0, 1, 0, 0]
    assert select(table, top="1", episodes="2:").tolist() == [0, 0, 0, 1]
    assert select(table, top="1", envs="2").tolist() == [0, 0, 1, 0]


def test_selectors_combine_with_and_and_take_text_or_parsed_values() -> None:
    table = _table(np.arange(10.0))
    by_text = select(table, where="return >= 2", episodes="0:8", envs="0-1")
    parsed = select(
        table,
        where=None,
        episodes=parse_episode_range("0:8"),
        envs=[0, range(1, 2)],
    ) & (table["return"] >= 2)
    expected = (np.arange(10) >= 2) & (np.arange(10) < 8) & (np.arange(10) % 3 != 2)
    np.testing.assert_array_equal(by_text, expected)
    np.testing.assert_array_equal(parsed, expected)
    assert select(table).all() and select(table).shape == (10,)


slice_bound = st.one_of(st.none(), st.integers(-12, 12))


@settings(max_examples=100, deadline=None)
@given(
    count=st.integers(0, 10),
    parts=st.lists(
        st.tuples(slice_bound, slice_bound, st.one_of(st.none(), st.integers(-3, 3))), max_size=3
    ),
    singles=st.lists(st.integers(0, 9), max_size=3),
)
def test_episode_ranges_are_python_slices_of_the_rows(
    count: int, parts: list[tuple[int | None, int | None, int | None]], singles: list[int]
) -> None:
    parts = [p for p in parts if p[2] != 0]
    singles = [i for i in singles if i < count]
    if not parts and not singles:
        return

    def bound(b: int | None) -> str:
        return "" if b is None else str(b)

    items = [f"{bound(a)}:{bound(b)}" + (f":{c}" if c is not None else "") for a, b, c in parts]
    items += [str(i) for i in singles]
    expected = {i for a, b, c in parts for i in range(count)[a:b:c]} | set(singles)
    mask = parse_episode_range(",".join(items)).mask(count)
    assert set(np.flatnonzero(mask).tolist()) == expected


def test_episode_ranges_as_the_help_shows_them() -> None:
    rows = np.arange(12)
    for text, expected in {
        "0:5": rows[0:5],
        "5:": rows[5:],
        ":3": rows[:3],
        "-2:": rows[-2:],
        "0:10:4": rows[0:10:4],
        "3,7,9": [3, 7, 9],
        "0:2, 9": [0, 1, 9],
        "-1": [11],
    }.items():
        assert np.flatnonzero(parse_episode_range(text).mask(12)).tolist() == list(expected)
    assert parse_episode_range("1:4:2") == EpisodeRange((slice(1, 4, 2),))


def test_envs_are_numbers_and_slices_and_the_old_inclusive_ranges() -> None:
    assert parse_envs("0,3") == (range(1), range(3, 4))
    assert parse_envs("0-3, 7") == (range(4), range(7, 8))  # the old spelling
    assert parse_envs("0:4, 7:8") == (range(4), range(7, 8))
    table = _table(np.zeros(9))  # envs 0 1 2 0 1 2 ...
    assert select(table, envs="1-2").tolist() == [0, 1, 1] * 3
    assert select(table, envs="1:3").tolist() == [0, 1, 1] * 3
    assert select(table, envs="1:").tolist() == [0, 1, 1] * 3
    assert select(table, envs="0-1000000000").all()  # a wide range is two comparisons


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (parse_top, "0", "--top: 0 keeps no episode"),
        (parse_top, "0%", "--top: '0%' is not a percentage in (0, 100]"),
        (parse_top, "101%", "--top: '101%' is not a percentage in (0, 100]"),
        (parse_top, "1.5", "--top: expected a count (10) or a percentage (10%), got '1.5'"),
        (parse_top, "-3", "got '-3'"),
        (parse_episode_range, "", "--episodes: an empty part in ''"),
        (parse_episode_range, "1,,2", "--episodes: an empty part in '1,,2'"),
        (parse_episode_range, "1:2:0", "--episodes: '1:2:0' has a step of 0 in '1:2:0'"),
        (parse_episode_range, "a:3", "--episodes: 'a:3' is not a number or a slice"),
        (parse_episode_range, "1:2:3:4", "'1:2:3:4' is not a number or a slice"),
        (parse_episode_range, "1_000", "'1_000' is not a number or a slice"),
        (parse_envs, "3-1", "--envs: '3-1' runs backwards in '3-1'"),
        (parse_envs, "-1", "--envs: '-1' is not an env number or a range start:stop in '-1'"),
        (parse_envs, "0,", "--envs: '' is not an env number"),
        (parse_envs, "3:3", "--envs: '3:3' runs backwards in '3:3'"),
        (parse_fractions, "0.9,0.2", "--fractions: the fractions sum to 1.1, not 1, in '0.9,0.2'"),
        (parse_fractions, "1,0", "--fractions: every fraction must be a positive number"),
        (parse_fractions, "0.5,half", "--fractions: 'half' is not a decimal number in '0.5,half'"),
        (parse_fractions, "nan,1", "'nan' is not a decimal number"),
    ],
)
def test_bad_text_names_the_option_and_the_text(parse: object, text: str, message: str) -> None:
    assert callable(parse)
    with pytest.raises(ConfigError) as caught:
        parse(text)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_bad_selections_of_a_table() -> None:
    table = _table(np.zeros(5))
    with pytest.raises(ConfigError, match=r"--episodes: episode 5 is out of range: .* 5 episodes"):
        select(table, episodes="0,5")
    with pytest.raises(ConfigError, match="--by: unknown field 'retrun'; did you mean 'return'?"):
        select(table, top="1", by="retrun")
    with pytest.raises(ConfigError, match="--where: unknown field 'x' at column 1"):
        select(table, where="x > 1")


@settings(max_examples=100, deadline=None)
@given(
    count=st.integers(0, 200),
    weights=st.lists(st.integers(1, 20), min_size=1, max_size=5),
    seed=st.integers(0, 2**32),
)
def test_a_split_is_an_exact_reproducible_partition(
    count: int, weights: list[int], seed: int
) -> None:
    fractions = [w / sum(weights) for w in weights]
    parts = split_episodes(count, fractions, seed=seed)
    assert parts.shape == (count,) and parts.dtype == np.int64
    sizes = np.bincount(parts, minlength=len(fractions))
    assert len(sizes) == len(fractions) and sizes.sum() == count  # each episode in one part
    quotas = np.asarray(fractions) * count
    assert np.all(np.abs(sizes - quotas) < 1)  # largest remainder: floor or ceil of its share
    np.testing.assert_array_equal(parts, split_episodes(count, fractions, seed=seed))
    # part i holds the episodes the seeded permutation deals it, in order
    order = np.random.default_rng(seed).permutation(count)
    np.testing.assert_array_equal(parts[order], np.sort(parts))


def test_split_sizes_by_largest_remainder() -> None:
    def sizes(count: int, fractions: list[float]) -> list[int]:
        parts = split_episodes(count, fractions, seed=0)
        return np.bincount(parts, minlength=len(fractions)).tolist()

    assert sizes(10, [0.7, 0.2, 0.1]) == [7, 2, 1]
    assert sizes(100, [0.29, 0.71]) == [29, 71]  # 0.29 * 100 is 28.999...
    assert sizes(10, [1 / 3] * 3) == [4, 3, 3]  # equal remainders: the earlier part
    assert sizes(7, [0.5, 0.25, 0.25]) == [3, 2, 2]  # remainders .5 .75 .75
    assert sizes(1, [0.9, 0.1]) == [1, 0]
    assert sizes(0, [0.5, 0.5]) == [0, 0]
    equal = split_episodes(10, None, seed=3, names=["a", "b", "c"])
    assert np.bincount(equal).tolist() == [4, 3, 3]


def test_different_seeds_deal_differently() -> None:
    a = split_episodes(100, [0.5, 0.5], seed=0)
    b = split_episodes(100, [0.5, 0.5], seed=1)
    assert not np.array_equal(a, b)
    assert np.bincount(a).tolist() == np.bincount(b).tolist() == [50, 50]


@pytest.mark.parametrize(
    ("fractions", "names", "seed", "message"),
    [
        ([0.5, 0.6], None, 0, "--fractions: the fractions sum to 1.1, not 1"),
        ([0.5, 0.5 + 2e-9], None, 0, "sum to 1.000000002, not 1"),
        ([1.5, -0.5], None, 0, "every fraction must be a positive number"),
        ([float("nan"), 1.0], None, 0, "every fraction must be a positive number"),
        ([], None, 0, "every fraction must be a positive number"),
        ([0.5, 0.5], ["train"], 0, "--fractions: 2 fractions for 1 parts (train)"),
        (None, None, 0, "--fractions: give fractions, or names for equal parts"),
        ([1.0], None, -1, "--seed: -1 is negative"),
    ],
)
def test_bad_splits(
    fractions: list[float] | None, names: list[str] | None, seed: int, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        split_episodes(10, fractions, seed=seed, names=names)
    assert message in str(caught.value)


def test_fractions_within_a_billionth_of_one_are_accepted() -> None:
    assert parse_fractions("0.9, 0.1") == (0.9, 0.1)
    assert parse_fractions("0.3333333333,0.3333333333,0.3333333334") == (
        0.3333333333,
        0.3333333333,
        0.3333333334,
    )
    assert np.bincount(split_episodes(3, [0.5, 0.5 + 5e-10], seed=0)).tolist() == [1, 2]
