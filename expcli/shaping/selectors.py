"""Which episodes ``expcli filter`` keeps, and the seeded split of episodes by fractions.

Every selector reads an episode table (field name -> 1-d array, one entry per episode, rows
in episode order) and answers a bool mask over its rows. ``select`` ANDs the selectors it is
given, and applies ``--top`` last: ``--top 10% --where 'terminated'`` keeps the best tenth of
the terminated episodes, not the terminated ones among the best tenth.

``--episodes`` counts rows of the table (0 is the first episode, -1 the last), with Python's
slice semantics; ``--envs`` reads the ``env`` column, its ranges written as slices too.
``split_episodes`` deals out episode numbers into parts of exact, largest-remainder sizes
by a seeded permutation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from expcli.errors import ConfigError, InvalidValueError, quoted
from expcli.shaping._table import did_you_mean, episode_count, field_list, numbers
from expcli.shaping.where import Expression, parse_where

__all__ = [
    "EpisodeRange",
    "Top",
    "parse_envs",
    "parse_episode_range",
    "parse_fractions",
    "parse_top",
    "old_env_ranges",
    "select",
    "split_episodes",
]

_INDEX = r"[+-]?[0-9]+"
_DECIMAL = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_COUNT = re.compile(r"\s*([0-9]+)\s*")
_PERCENT = re.compile(r"\s*([0-9]+\.?[0-9]*|\.[0-9]+)\s*%\s*")
_ENVS = re.compile(r"\s*([0-9]+)\s*(?:([-:])\s*([0-9]*)\s*)?")
_NO_END = 1 << 62  # ``4:``: every env from 4 on
_SUM_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class Top:
    """How many episodes ``--top`` keeps: ``count`` of them, or a ``fraction`` (rounded up).

    Rounding up keeps at least one episode of any non-empty selection (10% of 5 is 1) and
    is exact: a ``Fraction`` makes 10% of 30 three episodes, where a float would make four.
    """

    count: int | None = None
    fraction: Fraction | None = None

    def __post_init__(self) -> None:
        if (self.count is None) == (self.fraction is None):
            raise InvalidValueError("Top takes a count or a fraction, one of them")
        if self.count is not None and self.count < 1:
            raise ConfigError(f"--top: {self.count} keeps no episode; give 1 or more")
        if self.fraction is not None and not 0 < self.fraction <= 1:
            raise ConfigError(f"--top: {float(self.fraction):.4g} is not a fraction in (0, 1]")

    def size(self, available: int) -> int:
        """How many of ``available`` episodes to keep."""
        if self.count is not None:
            return min(self.count, available)
        assert self.fraction is not None
        return min(math.ceil(self.fraction * available), available)


@dataclass(frozen=True, slots=True)
class EpisodeRange:
    """The episodes ``--episodes`` names: slices and single row numbers, as Python's.

    A slice past the end is cut short, as Python's; a single number past the end is an
    error, since it names an episode that is not there.
    """

    parts: tuple[slice | int, ...]

    def mask(self, count: int) -> npt.NDArray[np.bool_]:
        """The rows of a table of ``count`` episodes that the range names.

        Raises:
            ConfigError: A single number is out of range.
        """
        mask = np.zeros(count, dtype=bool)
        for part in self.parts:
            if isinstance(part, int) and not -count <= part < count:
                last = f"0 to {count - 1}" if count else "none"
                raise ConfigError(
                    f"--episodes: episode {part} is out of range: the table has {count} "
                    f"episodes ({last})"
                )
            mask[part] = True
        return mask


def parse_top(text: str) -> Top:
    """``--top 10`` (a count) or ``--top 10%`` (a share, rounded up) as a :class:`Top`.

    Raises:
        ConfigError: Neither a whole count nor a percentage in (0, 100].
    """
    if count := _COUNT.fullmatch(text):
        return Top(count=int(count[1]))
    if percent := _PERCENT.fullmatch(text):
        share = Fraction(percent[1])
        if not 0 < share <= 100:
            raise ConfigError(f"--top: {quoted(text.strip())} is not a percentage in (0, 100]")
        return Top(fraction=share / 100)
    raise ConfigError(f"--top: expected a count (10) or a percentage (10%), got {quoted(text)}")


def parse_episode_range(text: str) -> EpisodeRange:
    """``--episodes``: ``0:100``, ``5:``, ``:10``, ``-10:``, ``0:100:2``, ``3,7,9``, ``0:5,9``.

    Raises:
        ConfigError: A part is neither a whole number nor a slice of them, or a step is 0.
    """
    parts: list[slice | int] = []
    for item in text.split(","):
        bounds = [b.strip() for b in item.split(":")]
        if len(bounds) > 3 or not all(re.fullmatch(_INDEX, b) or b == "" for b in bounds):
            raise ConfigError(
                f"--episodes: {quoted(item.strip())} is not a number or a slice start:stop:step "
                f"in {quoted(text)} (such as 0:100, -10:, 0:100:2 or 3,7,9)"
            )
        if len(bounds) == 1:
            if not bounds[0]:
                raise ConfigError(f"--episodes: an empty part in {quoted(text)}")
            parts.append(int(bounds[0]))
            continue
        start, stop, step = (int(b) if b else None for b in [*bounds, ""][:3])
        if step == 0:
            raise ConfigError(
                f"--episodes: {quoted(item.strip())} has a step of 0 in {quoted(text)}"
            )
        parts.append(slice(start, stop, step))
    return EpisodeRange(tuple(parts))


def parse_envs(text: str) -> tuple[range, ...]:
    """``--envs``: env numbers and ranges ``start:stop`` as ``--episodes`` writes them.

    ``0,3``, ``0:4`` (envs 0 to 3), ``0:4,7``, ``4:`` (4 and above); ``start:stop`` stops
    before ``stop``, as a Python slice. The old spelling ``0-3`` (inclusive) is still read
    (``old_env_ranges`` tells a caller to say how it was read).

    Raises:
        ConfigError: A part is none of these, or a range runs backwards.
    """
    ranges: list[range] = []
    for item in text.split(","):
        match = _ENVS.fullmatch(item)
        if match is None or (match[2] == "-" and not match[3]):
            raise ConfigError(
                f"--envs: {quoted(item.strip())} is not an env number or a range start:stop "
                f"in {quoted(text)} (such as 3, 0:4 or 4:)"
            )
        low = int(match[1])
        if match[2] == "-":  # the old spelling: an inclusive range
            stop = int(match[3]) + 1
        elif match[2] == ":":
            stop = int(match[3]) if match[3] else _NO_END
        else:
            stop = low + 1
        if stop <= low:
            raise ConfigError(f"--envs: {quoted(item.strip())} runs backwards in {quoted(text)}")
        ranges.append(range(low, stop))
    return tuple(ranges)


def old_env_ranges(text: str) -> str | None:
    """``--envs`` in today's spelling when ``text`` uses the old one (``0-3``), else None."""
    parts = [item.strip() for item in text.split(",")]
    if not any("-" in part for part in parts):
        return None
    try:
        ranges = parse_envs(text)
    except ConfigError:
        return None
    return ",".join(
        str(r.start) if len(r) == 1 else f"{r.start}:{'' if r.stop == _NO_END else r.stop}"
        for r in ranges
    )


def select(
    table: Mapping[str, np.ndarray],
    *,
    where: Expression | str | None = None,
    top: Top | str | None = None,
    by: str = "return",
    episodes: EpisodeRange | str | None = None,
    envs: Iterable[int | range] | str | None = None,
    among: npt.NDArray[np.bool_] | None = None,
) -> npt.NDArray[np.bool_]:
    """Which episodes of ``table`` every given selector keeps (all of them when none is).

    Each selector takes its parsed form or the option's text. ``top`` ranks the episodes
    the other selectors keep, highest ``by`` first; ties go to the earlier episode and NaN
    ranks below every number, so the choice is deterministic.

    Args:
        table: Field name -> 1-d array, one entry per episode; the fields the selectors read
            (``env`` for ``envs``, ``by`` for ``top``, the condition's for ``where``).
        where: A condition (:func:`~expcli.shaping.where.parse_where`), parsed over the
            table's fields when given as text.
        top: How many of the selected episodes to keep (:func:`parse_top`).
        by: The field ``top`` ranks by.
        episodes: Rows of the table (:func:`parse_episode_range`).
        envs: Env numbers, ``range`` objects among them (:func:`parse_envs`).
        among: The only episodes that may be kept (the complete ones, say), before ``top``
            ranks them.

    Raises:
        ConfigError: An option's text is invalid, ``by`` is not a field, or ``episodes``
            names a single episode that is not there.
        InvalidValueError: The table lacks a column a selector reads, or is malformed.
    """
    count = episode_count(table)
    mask = np.ones(count, dtype=bool) if among is None else np.array(among, dtype=bool)
    if where is not None:
        mask &= (parse_where(where, table) if isinstance(where, str) else where).evaluate(table)
    if episodes is not None:
        if isinstance(episodes, str):
            episodes = parse_episode_range(episodes)
        mask &= episodes.mask(count)
    if envs is not None:
        mask &= _env_mask(
            numbers(table, "env"), parse_envs(envs) if isinstance(envs, str) else envs
        )
    if top is not None:
        if by not in table:
            raise ConfigError(
                f"--by: unknown field {quoted(by)}{did_you_mean(by, table)} ({field_list(table)})"
            )
        mask = _best(numbers(table, by), mask, parse_top(top) if isinstance(top, str) else top)
    return mask


def _env_mask(env: np.ndarray, envs: Iterable[int | range]) -> npt.NDArray[np.bool_]:
    mask = np.zeros(len(env), dtype=bool)
    singles: list[int] = []
    for part in envs:
        if isinstance(part, range) and part.step == 1:
            mask |= (env >= part.start) & (env < part.stop)
        else:
            singles.extend(part if isinstance(part, range) else [part])
    return mask | np.isin(env, singles)


def _best(keys: np.ndarray, mask: npt.NDArray[np.bool_], top: Top) -> npt.NDArray[np.bool_]:
    """``mask`` narrowed to its ``top`` rows by ``keys``: highest first, earlier on ties."""
    rows = np.flatnonzero(mask)
    values = keys[rows]
    known = ~np.isnan(values) if values.dtype.kind == "f" else np.ones(len(rows), dtype=bool)
    # ascending by (known, value, -row), reversed: known first, highest, earliest row
    order = np.lexsort((-rows, values, known))[::-1]
    best = np.zeros(len(mask), dtype=bool)
    best[rows[order[: top.size(len(rows))]]] = True
    return best


def parse_fractions(text: str) -> tuple[float, ...]:
    """``0.9,0.1``: the share of the episodes each part of a split gets.

    Raises:
        ConfigError: A part is not a decimal number, or the shares are not positive
            or do not sum to 1 (within 1e-9).
    """
    values = []
    for item in text.split(","):
        if not _DECIMAL.fullmatch(item.strip()):
            raise ConfigError(
                f"--fractions: {quoted(item.strip())} is not a decimal number in {quoted(text)}"
            )
        values.append(float(item))
    return _checked(values, text)


def split_episodes(
    count: int,
    fractions: Sequence[float] | None,
    *,
    seed: int,
    names: Sequence[str] | None = None,
) -> npt.NDArray[np.int64]:
    """Deal ``count`` episodes into parts: each episode's part, ``0`` to ``len(parts) - 1``.

    Part ``i`` gets ``fractions[i]`` of the episodes, by largest remainder, so that the
    sizes sum to ``count`` exactly (equal remainders favour the earlier part). Which
    episodes go where is ``numpy.random.default_rng(seed).permutation(count)``: the same
    seed deals the same split. A small count may leave a part empty.

    Args:
        count: How many episodes there are.
        fractions: Each part's share, positive and summing to 1 (within 1e-9); None for
            equal shares, one per name.
        seed: The seed of the permutation, 0 or more.
        names: The parts' names; as many as ``fractions``, or needed without them.

    Raises:
        ConfigError: The fractions or names are invalid, or the seed is negative.
    """
    if count < 0:
        raise InvalidValueError(f"split_episodes: count {count} is negative")
    if seed < 0:
        raise ConfigError(f"--seed: {seed} is negative; give 0 or more")
    if fractions is None:
        if not names:
            raise ConfigError("--fractions: give fractions, or names for equal parts")
        fractions = [1 / len(names)] * len(names)
    shares = _checked(fractions, ",".join(f"{f:g}" for f in fractions))
    if names is not None and len(names) != len(shares):
        raise ConfigError(
            f"--fractions: {len(shares)} fractions for {len(names)} parts ({', '.join(names)})"
        )
    quotas = np.asarray(shares) / math.fsum(shares) * count
    sizes = np.floor(quotas).astype(np.int64)
    short = count - int(sizes.sum())  # 0 <= short < len(sizes)
    by_remainder = np.lexsort((np.arange(len(sizes)), sizes - quotas))
    sizes[by_remainder[:short]] += 1
    parts = np.empty(count, dtype=np.int64)
    parts[np.random.default_rng(seed).permutation(count)] = np.repeat(np.arange(len(sizes)), sizes)
    return parts


def _checked(fractions: Sequence[float], text: str) -> tuple[float, ...]:
    values = tuple(float(f) for f in fractions)
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise ConfigError(
            f"--fractions: every fraction must be a positive number, in {quoted(text)}"
        )
    total = math.fsum(values)
    if abs(total - 1) > _SUM_TOLERANCE:
        raise ConfigError(
            f"--fractions: the fractions sum to {total:.10g}, not 1, in {quoted(text)}"
        )
    return values
