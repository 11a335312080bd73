"""The Parquet bookkeeping columns, written a chunk at a time, against a plain loop.

``episode_index`` and ``frame_index`` follow each env column through time: an episode
begins at a column's first transition and after each done one, and episodes are numbered
in the order they begin. A file (or a folder of shards) is written a row group at a time,
so the numbering carries from chunk to chunk; whatever the chunks, it is the loop's. The
episode writer finds the same episodes from the flags alone (``find_episodes``).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.formats._parquet_columns import Carry, positions, transition_chunk
from expcli.formats._parquet_episodes import find_episodes


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


@st.composite
def carried_runs(draw: st.DrawFn) -> tuple[tuple[int, int, int], np.ndarray, list[int], Carry]:
    """A written run cut into chunks, after a carry an earlier shard could have left."""
    envs = draw(st.integers(1, 5))
    cells = draw(st.integers(1, 30)) * envs
    start = draw(st.integers(0, cells - 1))
    count = draw(st.integers(1, cells))
    done = np.array(draw(st.lists(st.booleans(), min_size=count, max_size=count)), bool)
    cuts = sorted(set(draw(st.lists(st.integers(1, count - 1), max_size=6)) if count > 1 else []))
    carry = Carry.start(envs)
    if draw(st.booleans()):  # an earlier shard: some envs' episodes go on
        ended = np.array(draw(st.lists(st.booleans(), min_size=envs, max_size=envs)), bool)
        frame = np.array(draw(st.lists(st.integers(0, 9), min_size=envs, max_size=envs)))
        top = draw(st.integers(envs, 3 * envs))
        episode = np.array(draw(st.permutations(range(top)))[:envs], np.int64)
        carry = Carry(draw(st.integers(0, 99)), 7, top, episode, frame.astype(np.int64), ended)
    return (start, cells, envs), done, cuts, carry


@settings(max_examples=300, deadline=None)
@given(run=carried_runs())
def test_episodes_found_from_the_flags_are_those_the_bookkeeping_numbers(
    run: tuple[tuple[int, int, int], np.ndarray, list[int], Carry],
) -> None:
    """``find_episodes`` (flags alone) against ``transition_chunk`` (every column), chunked."""
    (start, cells, envs), done, cuts, carry = run
    flat = positions(start, len(done), cells)
    chunks = list(zip([0, *cuts], [*cuts, len(done)], strict=True))
    books, reference_carry = [], carry
    for first, stop in chunks:
        book, reference_carry = transition_chunk(
            flat[first:stop], done[first:stop], envs, reference_carry
        )
        books.append(book)
    episode = np.concatenate([b["episode_index"] for b in books])
    frame = np.concatenate([b["frame_index"] for b in books])
    numbers = np.unique(episode)
    held = [np.flatnonzero(episode == k) for k in numbers]

    def done_of(at: np.ndarray, n: int) -> np.ndarray:
        return done[(at[:n] - start) % cells]

    found, after = find_episodes(chunks, done_of, (start, cells, envs), carry)
    assert found.numbers.tolist() == numbers.tolist()
    assert found.firsts.tolist() == [int(h[0]) for h in held]
    assert found.frames.tolist() == [int(frame[h[0]]) for h in held]
    assert found.lasts.tolist() == [int(h[-1]) for h in held]
    assert found.offsets.tolist() == [0, *np.cumsum([len(h) for h in held]).tolist()]
    for name in ("index", "row", "next_episode"):
        assert getattr(after, name) == getattr(reference_carry, name)
    for name in ("episode", "frame", "ended"):
        assert getattr(after, name).tolist() == getattr(reference_carry, name).tolist()
