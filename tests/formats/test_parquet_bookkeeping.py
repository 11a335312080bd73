"""The Parquet bookkeeping columns, written a chunk at a time, against a plain loop.

``episode_index`` and ``frame_index`` follow each env column through time: an episode
begins at a column's first transition and after each done one, and episodes are numbered
in the order they begin. A file (or a folder of shards) is written a row group at a time,
so the numbering carries from chunk to chunk; whatever the chunks, it is the loop's.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.formats._parquet_columns import Carry, positions, transition_chunk


def reference(flat: np.ndarray, done: np.ndarray, envs: int) -> tuple[list[int], list[int]]:
    """Episode and frame of each transition, one at a time (-1 past ``len(done)``)."""
    episode, frame = [-1] * len(flat), [-1] * len(flat)
    current: dict[int, list[int]] = {}  # env -> [episode, frame, ended]
    begun = 0
    for i in range(len(done)):
        n = int(flat[i]) % envs
        if n not in current or current[n][2]:
            current[n] = [begun, 0, int(done[i])]
            begun += 1
        else:
            current[n] = [current[n][0], current[n][1] + 1, int(done[i])]
        episode[i], frame[i] = current[n][0], current[n][1]
    return episode, frame


@st.composite
def runs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int, list[int]]:
    envs = draw(st.integers(1, 5))
    size = draw(st.integers(1, 30))
    cells = size * envs
    start = draw(st.integers(0, cells - 1))
    count = draw(st.integers(0, cells))
    valid = draw(st.integers(0, count))
    done = np.array(draw(st.lists(st.booleans(), min_size=valid, max_size=valid)), bool)
    cuts = sorted(draw(st.lists(st.integers(0, count), max_size=6)))
    return positions(start, count, cells), done, envs, cuts


@settings(max_examples=300, deadline=None)
@given(run=runs())
def test_chunks_number_episodes_and_frames_as_the_loop_does(
    run: tuple[np.ndarray, np.ndarray, int, list[int]],
) -> None:
    flat, done, envs, cuts = run
    carry = Carry.start(envs)
    books = []
    for first, stop in zip([0, *cuts], [*cuts, len(flat)], strict=True):
        book, carry = transition_chunk(flat[first:stop], done[first:stop], envs, carry)
        books.append(book)
    episode, frame = reference(flat, done, envs)
    got = {name: np.concatenate([b[name] for b in books]) for name in books[0]}
    assert got["episode_index"].tolist() == episode
    assert got["frame_index"].tolist() == frame
    assert got["index"].tolist() == list(range(len(flat)))
    assert got["env"].tolist() == (flat % envs).tolist()
    assert got["row"].tolist() == (flat // envs).tolist()
    assert carry.index == len(flat) and carry.next_episode == max(episode, default=-1) + 1


def test_a_carried_episode_goes_on_in_the_next_chunk() -> None:
    """Two envs; env 0 ends at its second step, env 1 runs on across the cut."""
    flat = positions(0, 8, 8)
    done = np.array([0, 0, 1, 0, 0, 0, 0, 0], bool)
    first, carry = transition_chunk(flat[:4], done[:4], 2, Carry.start(2))
    second, carry = transition_chunk(flat[4:], done[4:], 2, carry)
    assert first["episode_index"].tolist() + second["episode_index"].tolist() == [
        0, 1, 0, 1, 2, 1, 2, 1,
    ]  # fmt: skip
    assert second["frame_index"].tolist() == [0, 2, 1, 3]
    assert carry.next_episode == 3
