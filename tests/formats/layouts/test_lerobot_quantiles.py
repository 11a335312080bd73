"""An episode's quantiles are LeRobot's own numbers, however expcli finds them.

``lerobot_quantiles`` is LeRobot 0.4.4's computation for one episode (``compute_episode_stats``
hands ``RunningQuantileStats.update`` the episode whole; its bin edges, ``np.histogram`` and
``_compute_single_quantile``), copied here so that it runs without LeRobot's environment
(``tests/lerobot_env`` checks a written folder against LeRobot itself). expcli's edges are
computed only where asked, an episode given in one slice sorted (with others) instead of
histogrammed, one of several slices histogrammed: every way must give the same numbers, bit for bit.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.formats.layouts.lerobot import _stats
from expcli.formats.layouts.lerobot._stats import BINS, QUANTILES, _Episode


def lerobot_quantiles(values: np.ndarray) -> np.ndarray:
    """``(5, D)``: LeRobot's quantiles of an episode ``(n, D)``, one column at a time."""
    low, high = values.min(axis=0), values.max(axis=0)
    out = np.empty((len(QUANTILES), values.shape[1]))
    for d in range(values.shape[1]):
        edges = np.linspace(low[d] - 1e-10, high[d] + 1e-10, BINS + 1)
        hist = np.histogram(values[:, d], bins=edges)[0].astype(np.float64)
        cumsum = np.cumsum(hist)
        for k, q in enumerate(QUANTILES.values()):
            target = q * len(values)
            idx = int(np.searchsorted(cumsum, target))
            if idx == 0:
                out[k, d] = edges[0]
            elif idx >= len(cumsum):
                out[k, d] = edges[-1]
            elif cumsum[idx] - cumsum[idx - 1] == 0:
                out[k, d] = edges[idx]
            else:
                fraction = (target - cumsum[idx - 1]) / (cumsum[idx] - cumsum[idx - 1])
                out[k, d] = edges[idx] + fraction * (edges[idx + 1] - edges[idx])
    return out


def expcli_quantiles(values: np.ndarray, slices: int = 1) -> np.ndarray | None:
    """``_Episode``'s quantiles of the same episode, given in ``slices`` parts."""
    episode = _Episode(image=False, length=len(values))
    parts = [part for part in np.array_split(values, slices) if len(part)]
    if len(parts) > 1:  # as the writer does for an episode longer than a slice
        for part in parts:
            episode.widen(part)
    for part in parts:
        episode.add(part)
    return episode.quantiles()


def _episodes() -> st.SearchStrategy[np.ndarray]:
    """Episodes of 2..300 frames of 1..5 columns: floats of several scales, whole numbers,
    bytes; constant columns (a zero step in float32) among them."""
    dtypes = st.sampled_from([np.float32, np.float64, np.int64, np.uint8])
    shapes = st.tuples(st.integers(2, 300), st.integers(1, 5))

    @st.composite
    def episode(draw: st.DrawFn) -> np.ndarray:
        dtype, shape = draw(dtypes), draw(shapes)
        seed, scale = draw(st.integers(0, 2**32 - 1)), draw(st.sampled_from([1e-6, 1.0, 1e4]))
        rng = np.random.default_rng(seed)
        if np.dtype(dtype).kind == "f":
            values = (rng.normal(size=shape) * scale).astype(dtype)
        else:
            values = rng.integers(0, 7 if dtype == np.uint8 else 1000, shape).astype(dtype)
        if draw(st.booleans()):
            values[:, 0] = values[0, 0]  # a constant column
        return values

    return episode()


@given(_episodes(), st.integers(1, 4))
@settings(max_examples=60, deadline=None)
def test_an_episodes_quantiles_are_lerobots_bit_for_bit(values: np.ndarray, slices: int) -> None:
    want = lerobot_quantiles(values)
    got = expcli_quantiles(values, slices)
    assert got is not None
    np.testing.assert_array_equal(got, want)


@given(st.lists(_episodes(), min_size=2, max_size=6), st.integers(0, 2**32 - 1))
@settings(max_examples=30, deadline=None)
def test_episodes_side_by_side_are_each_alone(episodes: list[np.ndarray], seed: int) -> None:
    """Short episodes are sorted together (padded, with NaN and inf among their values):
    each one's numbers are its own, as its histograms (given in slices) say."""
    columns = episodes[0].shape[1]
    episodes = [
        v[:, :1].repeat(columns, axis=1) if v.shape[1] < columns else v[:, :columns]
        for v in episodes
    ]
    episodes = [v for v in episodes if v.dtype == episodes[0].dtype]
    rng = np.random.default_rng(seed)
    if episodes[0].dtype.kind == "f":
        for v in episodes:
            v[rng.random(v.shape) < 0.05] = rng.choice([np.nan, np.inf, -np.inf])
    together = _stats._episodes_quantiles(episodes)
    for v, found in zip(episodes, together, strict=True):
        np.testing.assert_array_equal(found, _stats._episodes_quantiles([v])[0])
        np.testing.assert_array_equal(found, expcli_quantiles(v, slices=2))


def test_edges_are_linspaces_own_numbers() -> None:
    """``_Edges.at`` is ``np.linspace``'s edge, a zero step's path and float16's too."""
    for dtype in (np.float16, np.float32, np.float64):
        low = np.array([-3.5, 0.0, 1e-3, 2.0, 7.0], dtype)
        high = np.array([4.25, 0.0, 1e-3, 2.0 + 1e-3, 9e3], dtype)
        edges = _stats._Edges(low, high)
        whole = np.stack([_stats._edges(lo, hi) for lo, hi in zip(low, high, strict=True)])
        k = np.tile(np.arange(BINS + 1)[:, None], (1, len(low)))
        np.testing.assert_array_equal(edges.at(k), whole.T, err_msg=str(dtype))
