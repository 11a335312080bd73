"""One episode accounting: every count of complete episodes agrees with a numpy reference.

The reference never looks at the circular state: it replays the writes (row by row, as a
memory takes them), keeps each env column's newest ``memory_size`` transitions, and calls an
episode complete when it ends with a done flag and began inside the data (after a done flag
kept, or at the column's first write). Each consumer must agree with it: ``Memory.episodes()``,
``EpisodeIndex``, the replay buffer, a saved file read back, ``summarize`` (what ``inspect
--json`` prints) and, for real runs, collect's summary line, its metadata and ``inspect --json``.
The hard case is a memory that is exactly full, or that wrapped whole laps: both end
``filled`` with the write head at row 0, and only the recorded ``written`` tells them apart.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import expcli
from expcli import EpisodeIndex, RandomMemory, ReplayBuffer
from expcli.formats import read_dataset, write_dataset
from expcli.formats.dataset import Dataset
from expcli.spec import CircularState, overwritten_columns
from expcli.summary import summarize
from tests.format_catalogue import SUFFIXES

KINDS = ("partial", "exactly full", "wrapped partly", "wrapped whole laps", "grown after wrapping")


@dataclass(frozen=True)
class Counts:
    """Complete and incomplete episodes per env column, and whether any column wrapped."""

    complete: tuple[int, ...]
    incomplete: tuple[int, ...]
    wrapped: bool

    @property
    def totals(self) -> tuple[int, int, bool]:
        return sum(self.complete), sum(self.incomplete), self.wrapped


def reference(done: np.ndarray, num_envs: int, sizes: list[tuple[int, int]]) -> Counts:
    """Counts from the done flags of every transition ever written, in write order.

    ``sizes``: ``(transitions written before, memory_size from then on)`` pairs, the first
    at 0 (a memory that grows keeps what it holds and then keeps more).
    """
    columns: list[deque[int]] = [deque() for _ in range(num_envs)]
    for k in range(len(done)):
        limit = [size for start, size in sizes if start <= k][-1]
        column = columns[k % num_envs]
        column.append(k)
        while len(column) > limit:
            column.popleft()
    complete, incomplete, wrapped = [], [], False
    for env, kept in enumerate(columns):
        ok = bad = 0
        started = not kept or kept[0] == env  # its first write ever is kept
        wrapped |= not started
        for k in kept:
            if done[k]:
                ok, bad = (ok + 1, bad) if started else (ok, bad + 1)
                started = True
        if kept and not done[kept[-1]]:
            bad += 1
        complete.append(ok)
        incomplete.append(bad)
    return Counts(tuple(complete), tuple(incomplete), wrapped)


def table_counts(book: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per-column complete and incomplete episodes of an ``episodes()`` table."""
    table = book.episodes()
    n = book._episode_source()[3]
    ok = np.bincount(table.env[table.complete], minlength=n)
    bad = np.bincount(table.env[~table.complete], minlength=n)
    return tuple(ok.tolist()), tuple(bad.tolist())


def summary_counts(summary: Any) -> Counts:
    per_env = summary.episodes.per_env
    return Counts(
        tuple(e.complete for e in per_env), tuple(e.incomplete for e in per_env), summary.wrapped
    )


def assert_consumers_agree(memory: RandomMemory, path: Path, want: Counts) -> None:
    """Every way of counting the memory's episodes, and its file's, gives ``want``."""
    books = [memory, EpisodeIndex(memory.to_dataset()), ReplayBuffer(memory)]
    memory.save(path)
    loaded = expcli.load(path)
    books += [EpisodeIndex(loaded), ReplayBuffer(loaded), RandomMemory.from_file(path)]
    for book in books:
        assert table_counts(book) == (want.complete, want.incomplete), type(book).__name__
    assert summary_counts(summarize(path)) == want
    assert bool(overwritten_columns(loaded.state, *loaded.tensors["rewards"].shape[:2]).any()) == (
        want.wrapped
    )


@st.composite
def histories(draw: st.DrawFn) -> tuple[str, int, int, list[int], list[tuple[int, int]], int]:
    """A memory's life: (kind, num_envs, memory_size, sample counts per call, sizes, seed)."""
    kind = draw(st.sampled_from(KINDS))
    n, size = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    if kind == "wrapped partly":
        size = max(size, 2)  # a one-slot memory wraps only whole laps
    capacity = size * n
    sizes = [(0, size)]
    if kind == "partial":
        total = draw(st.integers(1, capacity - 1)) if capacity > 1 else 0
    elif kind == "exactly full":
        total = capacity
    elif kind == "wrapped whole laps":
        total = capacity * draw(st.integers(2, 4))
    elif kind == "wrapped partly":
        total = capacity * draw(st.integers(1, 3)) + draw(st.integers(1, capacity - 1))
    else:  # grow a wrapped memory between whole rows, then write on (and perhaps wrap again)
        before = capacity + n * draw(st.integers(1, 2 * size))
        grown = size + draw(st.integers(1, 4))
        sizes.append((before, grown))
        total = before + draw(st.integers(0, 2 * grown * n))
    calls: list[int] = []
    written = 0
    while written < total:
        if n == 1:
            k = draw(st.integers(1, 5))
        else:
            k = draw(st.sampled_from([n, 1, 2, 3])) if written % n == 0 else 1
            k = min(k, n - written % n)
        k = min(k, total - written)
        if len(sizes) > 1 and written < sizes[1][0]:
            k = min(k, sizes[1][0] - written)  # the grow comes between whole rows
        calls.append(k)
        written += k
    return kind, n, size, calls, sizes, draw(st.integers(0, 2**16))


def write_history(
    n: int, size: int, calls: list[int], sizes: list[tuple[int, int]], seed: int
) -> tuple[RandomMemory, np.ndarray]:
    """Write the history into a new memory; also return every done flag written, in order."""
    memory = RandomMemory(size, n, "cpu")
    memory.create_tensor("observations", 2, torch.float32)
    memory.create_tensor("rewards", 1, torch.float32)
    memory.create_tensor("terminated", 1, torch.bool)
    memory.create_tensor("truncated", 1, torch.bool)
    rng = np.random.default_rng(seed)
    dones: list[np.ndarray] = []
    written = 0
    for k in calls:
        for start, grown in sizes[1:]:
            if written == start and memory.memory_size != grown:
                memory.grow(grown)
        done = rng.random(k) < 0.3
        truncated = done & (rng.random(k) < 0.3)
        memory.add_samples(
            observations=rng.normal(size=(k, 2)).astype(np.float32),
            rewards=rng.integers(-2, 3, (k, 1)).astype(np.float32),
            terminated=(done & ~truncated)[:, None],
            truncated=truncated[:, None],
        )
        dones.append(done)
        written += k
    for start, grown in sizes[1:]:
        if written == start and memory.memory_size != grown:
            memory.grow(grown)
    return memory, np.concatenate(dones) if dones else np.zeros(0, dtype=bool)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=histories(), suffix=st.sampled_from(SUFFIXES))
def test_every_consumer_counts_the_episodes_of_a_memory_as_the_reference(
    tmp_path: Path,
    history: tuple[str, int, int, list[int], list[tuple[int, int]], int],
    suffix: str,
) -> None:
    kind, n, size, calls, sizes, seed = history
    memory, done = write_history(n, size, calls, sizes, seed)
    want = reference(done, n, sizes)
    if kind in ("partial", "exactly full"):
        assert not want.wrapped
    elif kind != "grown after wrapping":
        assert want.wrapped
    assert memory.state.written == len(done)
    assert_consumers_agree(memory, tmp_path / f"memory{suffix}", want)


def test_an_exactly_full_memory_and_one_that_wrapped_whole_laps_differ(tmp_path: Path) -> None:
    """Same circular state (filled, head at row 0), different histories, different counts."""
    full, full_done = write_history(2, 6, [2] * 6, [(0, 6)], 0)
    laps, laps_done = write_history(2, 3, [2] * 6, [(0, 3)], 0)
    assert full.state == CircularState(0, 0, True) == laps.state
    assert_consumers_agree(full, tmp_path / "full.h5", reference(full_done, 2, [(0, 6)]))
    assert_consumers_agree(laps, tmp_path / "laps.h5", reference(laps_done, 2, [(0, 3)]))
    assert not summarize(tmp_path / "full.h5").wrapped and summarize(tmp_path / "laps.h5").wrapped


@pytest.mark.parametrize(
    ("state", "steps", "wrapped"),
    [
        (CircularState(0, 0, True), None, False),  # exactly full, as far as anyone can tell
        (CircularState(0, 0, True), 100, False),  # the collector stored exactly the capacity
        (CircularState(0, 0, True), 101, True),  # it stored more: whole laps
        (CircularState(2, 0, True), None, True),  # the head moved past row 0
        (CircularState(2, 1, False), None, False),
    ],
)
def test_files_without_written_fall_back_to_the_state_and_the_collectors_steps(
    tmp_path: Path, state: CircularState, steps: int | None, wrapped: bool
) -> None:
    """Files from before ``written`` was recorded still read; the fallback is documented
    under ``spec.overwritten_columns``."""
    done = np.random.default_rng(0).random((25, 4, 1)) < 0.3
    tensors = {
        "rewards": np.ones((25, 4, 1), np.float32),
        "terminated": done,
        "truncated": np.zeros_like(done),
    }
    metadata = {} if steps is None else {"collector": {"steps": steps}}
    path = write_dataset(Dataset(tensors, state, metadata), tmp_path / "old.h5")
    loaded = read_dataset(path)
    assert loaded.state.written is None
    complete, incomplete = [], []
    for j in range(4):  # the column's valid rows, oldest first
        if state.filled:
            rows = [(state.memory_index + (j < state.env_index) + t) % 25 for t in range(25)]
        else:
            rows = list(range(state.memory_index + (j < state.env_index)))
        flags = done[rows, j, 0]
        cut = int(wrapped and flags.any())  # the first episode began in overwritten rows
        complete.append(int(flags.sum()) - cut)
        incomplete.append(cut + int(not flags[-1]))
    want = Counts(tuple(complete), tuple(incomplete), wrapped)
    assert summary_counts(summarize(path)) == want
    for book in (EpisodeIndex(loaded), ReplayBuffer(loaded), RandomMemory.from_file(path)):
        assert table_counts(book) == (want.complete, want.incomplete)


# ----------------------------------------------------------------------------- real runs

RUNNER = CliRunner()


def cli(*args: str) -> str:
    from expcli.cli.app import app

    result = RUNNER.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def file_reference(dataset: Any, written: int) -> Counts:
    """The reference from a file's raw flags and the transitions its run stored.

    The file of a run that never grew after wrapping holds, per column, the newest writes
    of that column, the ``k``-th write in row ``k % memory_size``.
    """
    size, n = dataset.memory_size, dataset.num_envs
    flags = np.asarray(dataset.tensors["terminated"]) | np.asarray(dataset.tensors["truncated"])
    flags = flags.reshape(size, n)
    done = np.zeros(written, dtype=bool)
    for k in range(max(0, written - size * n), written):
        done[k] = flags[(k // n) % size, k % n]
    return reference(done, n, [(0, size)])


def summary_line(output: str) -> tuple[int, int, int | None]:
    """collect's "episodes" row: complete, incomplete, and complete in the file if said."""
    found = re.search(
        r"episodes\s*│\s*([\d,]+) complete, ([\d,]+) incomplete(?:; ([\d,]+))?", output
    )
    assert found, output
    numbers = [None if g is None else int(g.replace(",", "")) for g in found.groups()]
    return numbers[0], numbers[1], numbers[2]  # type: ignore[return-value]


def check_run_file(path: Path, output: str | None, want_wrapped: bool) -> Counts:
    """Every count of a collected file agrees with the reference; returns it."""
    dataset = expcli.load(path)
    collector = dataset.metadata["collector"]
    stored = collector["steps"]
    want = file_reference(dataset, stored)
    assert want.wrapped == want_wrapped
    assert dataset.state.written == stored
    assert collector["complete_episodes_in_file"] == sum(want.complete)
    inspected = json.loads(cli("inspect", str(path), "--json", "--per-env"))
    assert inspected["wrapped"] == want.wrapped
    assert inspected["episodes"]["complete"] == sum(want.complete)
    assert inspected["episodes"]["incomplete"] == sum(want.incomplete)
    assert [e["complete"] for e in inspected["episodes"]["per_env"]] == list(want.complete)
    for book in (EpisodeIndex(dataset), ReplayBuffer(dataset), RandomMemory.from_file(path)):
        assert table_counts(book) == (want.complete, want.incomplete)
    if output is not None:
        run_complete, run_incomplete, in_file = summary_line(output)
        assert run_complete == collector["episodes"]
        if want.wrapped:
            assert in_file == sum(want.complete)
        else:  # the run's counts are the file's: no second figure
            assert (run_complete, run_incomplete, in_file) == (*want.totals[:2], None)
    return want


RUN = ["collect", "CartPole-v1", "--envs", "4", "--seed", "3", "--steps", "400", "--overwrite"]


@pytest.mark.parametrize(
    ("options", "wrapped"),
    [
        (["--mode", "dummy"], False),  # 100 rows of 100: exactly full
        (["--mode", "dummy", "--memory-size", "30"], True),  # head at row 10 after 3 laps
        (["--mode", "dummy", "--memory-size", "25"], True),  # 4 whole laps: head at row 0
        (["--mode", "vector"], False),
    ],
    ids=["exactly-full", "wrapped-partly", "wrapped-whole-laps", "vector"],
)
def test_collected_files_count_episodes_as_the_reference(
    tmp_path: Path, options: list[str], wrapped: bool
) -> None:
    path = tmp_path / "run.h5"
    output = cli(*RUN, *options, "--output", str(path))
    check_run_file(path, output, wrapped)


def test_envpool_run_counts_episodes_as_the_reference(tmp_path: Path) -> None:
    pytest.importorskip("envpool")
    path = tmp_path / "run.npz"
    output = cli(*RUN, "--mode", "envpool", "--output", str(path))
    check_run_file(path, output, False)


def test_a_vector_run_stores_every_row_its_columns_reached(tmp_path: Path) -> None:
    """Vector envs spend a step on each reset, so columns fall out of step; the run stops
    as soon as every column has reached the last row, and only the transitions that the
    columns ahead took past it go unstored (not a block of steps past the target)."""
    from expcli.collect.job import CollectJob
    from expcli.collect.settings import CollectSettings

    job = CollectJob(
        CollectSettings(
            env_id="CartPole-v1",
            envs=4,
            steps=400,
            seed=3,
            mode="vector",
            output=tmp_path / "run.h5",
            quiet=True,
        )
    )
    job.start()
    try:
        stats = job.run()
    finally:
        job.close()
    # A column ahead of the slowest is ahead by the resets it did not need: at most one
    # per episode the slowest one ended.
    assert stats.steps == 400
    assert 0 <= stats.dropped <= 3 * (stats.episodes.complete // 4 + 2)
    assert stats.env_steps >= stats.steps + stats.dropped


def test_a_resumed_folder_run_counts_episodes_as_the_reference(tmp_path: Path) -> None:
    """A folder run stopped early, then resumed (and stopped again, then finished)."""
    from rich.console import Console

    from expcli.cli._collect_view import CollectView
    from expcli.collect.job import CollectJob
    from expcli.collect.resume import resume_settings
    from expcli.collect.settings import CollectSettings

    folder = tmp_path / "run"

    def stopped_after(job: CollectJob, steps: int) -> Any:
        job.start()
        collector = job.running
        policy, calls = collector.policy, [0]

        def counting(observations: Any) -> Any:
            calls[0] += 1
            if calls[0] == steps:
                job.stop()
            return policy(observations)

        collector.policy = counting
        try:
            stats = job.run()
        finally:
            job.close()
        return stats, job.save()

    settings = CollectSettings(
        env_id="CartPole-v1", envs=2, steps=400, seed=5, mode="dummy", output=folder, quiet=True
    )
    stopped_after(CollectJob(settings), 60)
    job = CollectJob(resume_settings(folder, quiet=True))
    stats, saved = stopped_after(job, 50)
    assert stats.interrupted and saved.transitions == 220  # 60 + 50 rows of 2 envs
    view = CollectView(job, quiet=False)
    view.err = Console(record=True, width=200)
    view.interrupted(saved)
    said = view.err.export_text()
    assert "saved 220 transitions to" in said and "newest" not in said
    output = cli("collect", "--resume", str(folder))
    want = check_run_file(folder, None, False)
    assert expcli.load(folder).metadata["collector"]["steps"] == 400
    run_complete, run_incomplete, in_file = summary_line(output)
    assert (run_complete, in_file) == (sum(want.complete), None)
