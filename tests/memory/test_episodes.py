"""Episode bookkeeping (prev/next, episodes, frame stacks, buffer indices) against brute force.

The same checks run on a Memory, on its Dataset, on that dataset saved and loaded back (a
memory-mapped .pt), and on a ReplayBuffer over each, since they share one implementation
over numpy arrays; and, for one env, against tianshou's own ReplayBuffer.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expcli import EpisodeIndex, RandomMemory, ReplayBuffer, load
from expcli.memory.episodes import EpisodeBookkeeping
from tests.replay.episode_data import Reference, make_memory, memories


def views(memory: RandomMemory, tmp_path) -> list[EpisodeBookkeeping]:
    path = tmp_path / "episodes.pt"
    memory.save(path)
    loaded = load(path)
    return [memory, EpisodeIndex(memory.to_dataset()), EpisodeIndex(loaded), ReplayBuffer(loaded)]


def check_against_reference(book: EpisodeBookkeeping, ref: Reference) -> None:
    valid = np.array(ref.valid(), dtype=np.int64)
    assert book.prev(valid).tolist() == [ref.prev(i) for i in valid]
    assert book.next(valid).tolist() == [ref.next(i) for i in valid]
    assert sorted(book.unfinished_index().tolist()) == sorted(ref.unfinished())
    table = book.episodes()
    rows = list(
        zip(
            table.env.tolist(),
            table.start.tolist(),
            table.last.tolist(),
            table.length.tolist(),
            table.returns.tolist(),
            table.terminated.tolist(),
            table.truncated.tolist(),
            table.complete.tolist(),
            strict=True,
        )
    )
    assert rows == ref.episodes()
    iterated = [
        (e.env, e.start, e.last, e.length, e.returns, e.terminated, e.truncated, e.complete)
        for e in table
    ]
    assert iterated == ref.episodes()
    if len(table):
        assert table[-1] == list(table)[-1] and table[0].stop == int(table.stop[0])
    assert (table.stop == table.start + table.length * ref.num_envs).all()
    for start, stop, length in zip(table.start, table.stop, table.length, strict=True):
        span = book.get_buffer_indices(int(start), int(stop))
        column = ref.columns[int(start) % ref.num_envs]
        first = column.index(int(start))
        assert span.tolist() == column[first : first + int(length)]
    if len(valid):
        stacked = book.get(valid, "clock", stack_num=4)
        clock = book._episode_source()[0]["clock"].reshape(-1)
        expected = np.array([[clock[i] for i in ref.stack(int(v), 4)] for v in valid])
        assert stacked.shape == (len(valid), 4, 1)
        assert (stacked[..., 0] == expected).all()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(memory=memories)
def test_bookkeeping_matches_brute_force_on_every_view(memory: RandomMemory, tmp_path) -> None:
    ref = Reference.of(memory)
    for book in views(memory, tmp_path):
        check_against_reference(book, ref)


@settings(max_examples=40, deadline=None)
@given(memory=memories, max_len=st.none() | st.integers(1, 5))
def test_episodes_batch_pads_each_episode(memory: RandomMemory, max_len: int | None) -> None:
    ref = Reference.of(memory)
    batch = memory.episodes_batch(["clock", "observations"], max_len=max_len)
    episodes = ref.episodes()
    assert batch.n_elems() == len(episodes)
    clock = memory.tensors["clock"].numpy().reshape(-1)
    for b, (env, start, _, length, *_rest) in enumerate(episodes):
        column = ref.columns[env]
        steps = column[column.index(start) :][:length]
        steps = steps[:max_len] if max_len else steps
        assert int(batch.lengths[b]) == len(steps)
        got = batch["clock"][b, :, 0].numpy()
        assert got[: len(steps)].tolist() == [clock[i] for i in steps]
        assert (got[len(steps) :] == 0).all()
        assert batch.mask()[b].tolist() == [1.0] * len(steps) + [0.0] * (batch.max_len - len(steps))
    if episodes:
        assert batch.max_len == max(int(n) for n in batch.lengths)


def test_wrapped_column_order_and_episode_across_the_wrap_point() -> None:
    # 2 envs, 4 rows; 6 steps: rows hold steps 4, 5, 2, 3 and the write head is row 2.
    memory = RandomMemory(4, 2, "cpu")
    memory.create_tensor("step", 1, torch.int64)
    memory.create_tensor("terminated", 1, torch.bool)
    for step in range(6):
        memory.add_samples(
            step=np.full((2, 1), step), terminated=np.array([[step == 1], [step == 3]])
        )
    # env 0: steps 2, 3, 4, 5 at rows 2, 3, 0, 1 -- one episode running over the wrap point
    table = memory.episodes()
    env0 = table.env == 0
    assert table.start[env0].tolist() == [4] and table.last[env0].tolist() == [2]
    assert table.stop[env0].tolist() == [12]
    assert memory.get_buffer_indices(4, 12).tolist() == [4, 6, 0, 2]
    assert memory.get_buffer_indices(6, 4).tolist() == [6, 0, 2]  # tianshou's form
    assert memory.prev(0) == 6 and memory.next(6) == 0
    assert memory.prev(4) == 4  # the oldest step: never across the write head
    assert memory.next(2) == 2  # the newest step
    # env 1: steps 2, 3 | 4, 5 -- the episode ending at step 3 (row 3) is cut there
    assert memory.next(7) == 7 and memory.prev(1) == 1
    assert memory.unfinished_index().tolist() == [2, 3]
    frames = memory.get(np.array([2, 3]), "step", stack_num=3)[..., 0]
    assert frames.tolist() == [[3, 4, 5], [4, 4, 5]]


def test_next_observations_stack_as_the_next_step_sees_them() -> None:
    # One env, frames f0..f5; episodes f0 f1 f2 | f3 f4 (f2 and f5 final observations).
    memory = RandomMemory(5, 1, "cpu")
    for name in ("observations", "next_observations"):
        memory.create_tensor(name, 1, torch.int64)
    memory.create_tensor("terminated", 1, torch.bool)
    for obs, nxt, end in ((0, 1, 0), (1, 2, 1), (3, 4, 0), (4, 5, 1)):
        memory.add_samples(
            observations=[[obs]], next_observations=[[nxt]], terminated=[[bool(end)]]
        )
    index = np.arange(4)
    assert memory.get(index, "observations", 3)[..., 0].tolist() == [
        [0, 0, 0], [0, 0, 1], [3, 3, 3], [3, 3, 4]
    ]  # fmt: skip
    # Each next stack is the observation stack of the step after: [f0 f0 f1] at a start.
    assert memory.get(index, "next_observations", 3)[..., 0].tolist() == [
        [0, 0, 1], [0, 1, 2], [3, 3, 4], [3, 4, 5]
    ]  # fmt: skip
    assert memory.get(index, "next_observations", 2)[..., 0].tolist() == [
        [0, 1], [1, 2], [3, 4], [4, 5]
    ]  # fmt: skip


def test_get_buffer_indices_like_tianshou_and_refuses_other_columns() -> None:
    memory = make_memory(5, 2, [2] * 5, seed=0)
    assert memory.get_buffer_indices(4, 8).tolist() == [4, 6]
    assert memory.get_buffer_indices(8, 4).tolist() == [8, 0, 2]
    assert memory.get_buffer_indices(8, 10).tolist() == [8]  # stop at the column's end
    assert memory.get_buffer_indices(8, 12).tolist() == [8, 0]  # or past it
    assert memory.get_buffer_indices(3, 3).tolist() == []
    with pytest.raises(ValueError, match="same env column"):
        memory.get_buffer_indices(4, 7)
    with pytest.raises(ValueError, match="outside"):
        memory.get_buffer_indices(10, 0)
    with pytest.raises(ValueError, match="at most 18"):
        memory.get_buffer_indices(8, 20)


def test_indexes_without_data_are_refused() -> None:
    memory = make_memory(5, 2, [2, 1], seed=0)  # row 0 full, row 1 has env 0 only
    assert memory.prev(np.array([0, 1])).tolist() == [0, 1]  # the oldest steps
    assert memory.prev(2) in (0, 2)
    with pytest.raises(IndexError, match="holds no data"):
        memory.next(3)
    with pytest.raises(IndexError, match="out of range"):
        memory.prev(10)
    with pytest.raises(ValueError, match="stack_num"):
        memory.get(0, "clock", stack_num=0)
    with pytest.raises(KeyError, match="nothing"):
        memory.get(0, "nothing")


def test_a_memory_without_done_flags_has_one_open_episode_per_env() -> None:
    memory = RandomMemory(3, 2, "cpu")
    memory.create_tensor("observations", 1, torch.float32)
    for _ in range(4):
        memory.add_samples(observations=np.zeros((2, 1)))
    table = memory.episodes()
    assert table.length.tolist() == [3, 3] and not table.complete.any()
    assert np.isnan(table.returns).all()


# --------------------------------------------------------------- add_samples report


def reference_report(ref_steps):
    """Running return/length per env from (env, reward, done, index) in write order."""
    running: dict[int, list] = {}
    out = []
    for env, reward, done, index in ref_steps:
        ret, length, start = running.get(env, [0.0, 0, index])
        if length == 0:
            start = index
        ret, length = ret + reward, length + 1
        out.append((ret if done else 0.0, length if done else 0, start))
        running[env] = [0.0, 0, index] if done else [ret, length, start]
    return out


@settings(max_examples=60, deadline=None)
@given(
    memory_size=st.integers(1, 6),
    num_envs=st.integers(1, 3),
    chunks=st.lists(st.integers(1, 8), min_size=1, max_size=25),
    seed=st.integers(0, 1000),
)
def test_add_samples_reports_episode_return_and_length(memory_size, num_envs, chunks, seed):
    memory = RandomMemory(memory_size, num_envs, "cpu")
    memory.create_tensor("rewards", 1, torch.float32)
    memory.create_tensor("terminated", 1, torch.bool)
    memory.create_tensor("truncated", 1, torch.bool)
    memory.report_episodes()
    rng = np.random.default_rng(seed)
    steps, reports = [], []
    for chunk in chunks:
        n = chunk if num_envs == 1 else min(chunk, num_envs - memory.env_index)
        head = memory.memory_index * num_envs + memory.env_index
        reward = rng.integers(0, 5, n).astype(np.float32)
        term, trunc = rng.random(n) < 0.2, rng.random(n) < 0.1
        report = memory.add_samples(
            rewards=torch.from_numpy(reward)[:, None], terminated=term[:, None], truncated=trunc
        )
        index = (head + np.arange(n)) % (memory_size * num_envs)
        envs = index % num_envs
        assert report.index.tolist() == index.tolist() and report.env.tolist() == envs.tolist()
        steps += list(
            zip(
                envs.tolist(), reward.tolist(), (term | trunc).tolist(), index.tolist(), strict=True
            )
        )
        reports += list(
            zip(
                report.returns.tolist(),
                report.lengths.tolist(),
                report.starts.tolist(),
                strict=True,
            )
        )
        assert report.done.tolist() == (term | trunc).tolist()
    assert reports == reference_report(steps)


def test_add_samples_reports_nothing_unless_asked_and_matches_tianshou() -> None:
    tianshou = pytest.importorskip("tianshou.data")
    ours = RandomMemory(5, 1, "cpu")
    for name, dtype in (("observations", torch.float32), ("rewards", torch.float32)):
        ours.create_tensor(name, 1, dtype)
    ours.create_tensor("terminated", 1, torch.bool)
    ours.create_tensor("truncated", 1, torch.bool)
    assert ours.add_samples(observations=np.zeros((1, 1))) is None
    ours.reset()
    ours.report_episodes()
    theirs = tianshou.ReplayBuffer(5)
    rng = np.random.default_rng(3)
    for step in range(23):
        term, trunc = bool(rng.random() < 0.25), bool(rng.random() < 0.1)
        reward = float(rng.integers(1, 4))
        got = ours.add_samples(
            observations=np.array([[step]], np.float32),
            rewards=np.array([[reward]], np.float32),
            terminated=np.array([[term]]),
            truncated=np.array([[trunc]]),
        )
        ptr, ep_rew, ep_len, ep_start = theirs.add(
            tianshou.Batch(
                obs=np.array([step], np.float32),
                act=0,
                rew=reward,
                terminated=term,
                truncated=trunc,
                obs_next=np.array([step + 1], np.float32),
                info={},
            )
        )
        assert (got.index.tolist(), got.returns.tolist(), got.lengths.tolist()) == (
            ptr.tolist(),
            ep_rew.tolist(),
            ep_len.tolist(),
        )
        assert got.starts.tolist() == ep_start.tolist()
        index = np.arange(len(ours))
        assert ours.prev(index).tolist() == theirs.prev(index).tolist()
        assert ours.next(index).tolist() == theirs.next(index).tolist()
        assert ours.unfinished_index().tolist() == theirs.unfinished_index().tolist()
        stacked = ours.get(index, "observations", stack_num=3)[..., 0]
        assert stacked.tolist() == theirs.get(index, "obs", stack_num=3)[..., 0].tolist()


def test_episodes_iterate_as_frozen_rows_of_plain_values() -> None:
    memory = RandomMemory(7, 2, device="cpu")
    memory.create_tensor("rewards", 1, torch.float32)
    memory.create_tensor("terminated", 1, torch.bool)
    for t in range(6):
        memory.add_samples(
            rewards=np.full((2, 1), t, np.float32), terminated=np.array([[t == 2], [t == 4]])
        )
    episodes = list(memory.episodes())
    assert [(e.env, e.length, e.returns, e.complete) for e in episodes] == [
        (0, 3, 3.0, True),
        (0, 3, 12.0, False),
        (1, 5, 10.0, True),
        (1, 1, 5.0, False),
    ]
    first = episodes[0]
    assert type(first.env) is int and type(first.returns) is float
    assert type(first.terminated) is bool
    with pytest.raises(AttributeError):
        first.length = 4  # type: ignore[misc]
    with pytest.raises(IndexError):
        memory.episodes()[4]
