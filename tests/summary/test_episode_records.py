"""``summarize(episode_records=True)``: every complete episode, in the order they ended, at its
place (env column, last row) with its return, length and ending, as a plain walk finds them;
and a pass watcher sees every valid transition once, with the statistics' own episode cut."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.formats import write_dataset
from expcli.formats.layouts._episodes import column_rows, episode_bounds
from expcli.spec import CircularState
from expcli.summary import chronology, summarize
from tests.summary.datasets import random_dataset


def walk(dataset) -> list[tuple[int, int, tuple[int, ...], float, bool]]:
    """(step of the end, column, rows, return, terminated) of each complete episode."""
    tensors = {k: np.asarray(v) for k, v in dataset.tensors.items()}
    size, envs = dataset.memory_size, dataset.num_envs
    term = tensors["terminated"].reshape(size, envs)
    done = term | tensors["truncated"].reshape(size, envs)
    rewards = tensors["rewards"].reshape(size, envs).astype(np.float64)
    wrapped = dataset.state.filled and (dataset.state.memory_index, dataset.state.env_index) != (
        0,
        0,
    )
    out = []
    for j, rows in enumerate(column_rows(dataset)):
        for k, (start, stop) in enumerate(episode_bounds(done[rows, j])):
            if (k == 0 and wrapped) or not done[rows[stop - 1], j]:
                continue
            mine = rows[start:stop]
            ret = float(np.sum(rewards[mine, j]))
            out.append((stop - 1, j, tuple(mine.tolist()), ret, bool(term[mine[-1], j])))
    return sorted(out, key=lambda e: (e[0], e[1]))


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 12),
    envs=st.integers(1, 4),
    done_rate=st.sampled_from([0.0, 0.2, 0.6]),
    chunk_bytes=st.sampled_from([1, 64, 1 << 20]),
    data=st.data(),
)
def test_records_are_the_complete_episodes_in_the_order_they_ended(
    size: int, envs: int, done_rate: float, chunk_bytes: int, data: st.DataObject
) -> None:
    filled = data.draw(st.booleans())
    state = CircularState(data.draw(st.integers(0, size - 1)), data.draw(st.integers(0, envs - 1)),
                          filled)  # fmt: skip
    dataset = random_dataset(size, envs, state, seed=data.draw(st.integers(0, 99)),
                             done_rate=done_rate)  # fmt: skip
    dataset.tensors["rewards"] = np.nan_to_num(dataset.tensors["rewards"])
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        path = write_dataset(dataset, Path(tmp) / "d.npz")
        patch.setattr(chronology.chunks, "__defaults__", (chunk_bytes,))
        summary = summarize(path, episode_records=True)
    assert summary.episodes is not None and summary.episodes.records is not None
    records = summary.episodes.records
    expected = walk(dataset)
    assert len(records) == summary.episodes.complete == len(expected)
    for i, (_, column, rows, ret, terminated) in enumerate(expected):
        assert records.columns[i] == column and records.last_rows[i] == rows[-1]
        assert records.lengths[i] == len(rows) and records.terminated[i] == terminated
        assert records.returns[i] == pytest.approx(ret, rel=1e-12, abs=1e-12)


def test_records_are_off_unless_asked(tmp_path: Path) -> None:
    path = write_dataset(random_dataset(), tmp_path / "d.npz")
    stats = summarize(path).episodes
    assert stats is not None and stats.records is None


class Counter:
    def __init__(self) -> None:
        self.transitions = 0
        self.complete = 0
        self.chunks = 0

    def update(self, chunk, pieces) -> None:
        self.chunks += 1
        self.transitions += (chunk.stop - chunk.start) * (chunk.last - chunk.first)
        if pieces is not None:
            self.complete += int(pieces.complete.sum())


def test_a_watcher_sees_every_valid_transition_once_with_the_same_episodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = random_dataset(40, 3, CircularState(17, 2, True), done_rate=0.3)
    path = write_dataset(dataset, tmp_path / "d.h5")
    monkeypatch.setattr(chronology.chunks, "__defaults__", (256,))
    seen: list[Counter] = []

    def watch(opened):
        assert opened.memory_size == 40 and opened.num_envs == 3
        seen.append(Counter())
        return seen[0]

    summary = summarize(path, watch=watch)
    assert summary.episodes is not None
    assert seen[0].chunks > 3  # the pass came in several chunks
    assert seen[0].transitions == summary.transitions == len(dataset)
    assert seen[0].complete == summary.episodes.complete
