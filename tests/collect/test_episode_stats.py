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
    tracker, by_row, mixed = EpisodeTracker(n), EpisodeTracker(n), EpisodeTracker(n)
    for a, b in zip([0, *cuts], [*cuts, rows], strict=True):
        if b > a:
            tracker.update(rewards[a:b], terminated[a:b], truncated[a:b])
    done = terminated | truncated
    for t in range(rows):
        by_row.add_row(rewards[t], terminated[t], truncated[t])
        assert by_row.complete == int(done[: t + 1].sum())  # buffered rows count at once
        if t % 7 < 3:  # rows and blocks interleaved keep their order
            mixed.add_row(rewards[t], terminated[t], truncated[t])
        else:
            mixed.update(rewards[t : t + 1], terminated[t : t + 1], truncated[t : t + 1])
    returns, lengths = _loop(rewards, done)
    for tr in (tracker, by_row, mixed):
        s = tr.summary()
        assert tr._returns == returns and tr._lengths == lengths  # chronological
        assert s.complete == len(returns)
        assert s.terminated == int(terminated.sum())
        assert s.truncated == int(truncated.sum())
        if returns:
            assert s.returns.mean == np.mean(returns) and s.lengths.max == max(lengths)
    for tr in (by_row, mixed):
        np.testing.assert_array_equal(tracker._length, tr._length)
        np.testing.assert_array_equal(tracker._return, tr._return)


def test_rows_past_one_block_reach_the_statistics() -> None:
    tracker = EpisodeTracker(2)
    for t in range(200):  # env 0 ends every 10 steps, env 1 never
        tracker.add_row(np.array([1.0, 2.0]), np.array([t % 10 == 9, False]), np.zeros(2, bool))
    assert tracker.complete == 20 and tracker.recent_mean_return() == 10.0
    summary = tracker.summary()
    assert (summary.complete, summary.incomplete, summary.lengths.max) == (20, 1, 10)
    assert tracker._return.tolist() == [0.0, 400.0]
