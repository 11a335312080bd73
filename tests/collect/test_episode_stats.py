"""EpisodeTracker against a plain Python loop over the same rows."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from expcli.collect.episode_stats import EpisodeTracker


def _loop(rewards: np.ndarray, done: np.ndarray) -> tuple[list[float], list[int]]:
    returns, lengths = [], []
    ret = np.zeros(rewards.shape[1])
    length = np.zeros(rewards.shape[1], dtype=int)
    for t in range(rewards.shape[0]):
        for j in range(rewards.shape[1]):
            ret[j] += rewards[t, j]
            length[j] += 1
            if done[t, j]:
                returns.append(float(ret[j]))
                lengths.append(int(length[j]))
                ret[j], length[j] = 0.0, 0
    return returns, lengths


@settings(max_examples=80, deadline=None)
@given(data=st.data(), n=st.integers(1, 5), rows=st.integers(1, 60))
def test_blocks_and_rows_agree_with_a_loop(data: st.DataObject, n: int, rows: int) -> None:
    rewards = data.draw(
        arrays(np.float32, (rows, n), elements=st.integers(-5, 5).map(float))
    ).astype(np.float32)
    terminated = data.draw(arrays(bool, (rows, n)))
    truncated = data.draw(arrays(bool, (rows, n))) & ~terminated
    cuts = sorted(data.draw(st.lists(st.integers(0, rows), max_size=4)))
    tracker, by_row = EpisodeTracker(n), EpisodeTracker(n)
    for a, b in zip([0, *cuts], [*cuts, rows], strict=True):
        if b > a:
            tracker.update(rewards[a:b], terminated[a:b], truncated[a:b])
    for t in range(rows):
        by_row.update_row(rewards[t], terminated[t], truncated[t])
    returns, lengths = _loop(rewards, terminated | truncated)
    for tr in (tracker, by_row):
        assert sorted(tr._returns) == sorted(returns)
        assert sorted(tr._lengths) == sorted(lengths)
        s = tr.summary()
        assert s.complete == len(returns)
        assert s.terminated == int(terminated.sum())
        assert s.truncated == int(truncated.sum())
        if returns:
            assert s.returns.mean == np.mean(returns) and s.lengths.max == max(lengths)
    np.testing.assert_array_equal(tracker._length, by_row._length)
    np.testing.assert_array_equal(tracker._return, by_row._return)
