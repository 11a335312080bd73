"""Episode fingerprints against numpy, and the ``duplicates`` and ``leakage`` checks.

The reference cuts each env column's valid rows (the layouts' ``column_rows``) at its done
flags in a Python loop, numbers the episodes by where their last transition falls in the
order the memory wrote them (the flat position after the write head), and calls two
episodes equal when every tensor's rows have the same bytes: bit for bit, so NaN equals NaN
and 0.0 differs from -0.0.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from expcli import summarize
from expcli.formats import Dataset, write_dataset
from expcli.formats.layouts._episodes import SEAMS_KEY, column_rows, episode_bounds
from expcli.spec import CircularState, overwritten_columns
from expcli.summary.duplicates import duplicate_finding
from expcli.summary.fingerprints import episode_fingerprints
from tests.format_catalogue import SUFFIXES
from tests.memory_probe import assert_flat, frames_data, run_child
from tests.summary.datasets import random_dataset


def reference(dataset: Dataset) -> list[dict[str, Any]]:
    """Every episode: its env, rows (stored, in order), whether complete, in index order."""
    tensors = {name: np.asarray(array) for name, array in dataset.tensors.items()}
    size, envs, state = dataset.memory_size, dataset.num_envs, dataset.state
    done = np.zeros((size, envs), dtype=bool)
    for name in ("terminated", "truncated"):
        if name in tensors:
            done |= tensors[name].reshape(size, envs, -1).any(axis=2)
    wrapped = overwritten_columns(state, size, envs, dataset.metadata)
    seams = set(dataset.metadata.get(SEAMS_KEY, [])) if envs == 1 else set()
    head = state.memory_index * envs + state.env_index if state.filled else 0
    closed, still_open = [], []
    for j, rows in enumerate(column_rows(dataset)):
        for k, (start, stop) in enumerate(episode_bounds(done[rows, j])):
            last = int(rows[stop - 1])
            ended = bool(done[last, j])
            episode = {
                "env": j,
                "rows": rows[start:stop],
                "complete": ended and not (k == 0 and wrapped[j]) and last not in seams,
                "written": (last * envs + j - head) % (size * envs),
            }
            (closed if ended else still_open).append(episode)
    return sorted(closed, key=lambda e: e["written"]) + still_open


def same_data(dataset: Dataset, a: dict[str, Any], b: dict[str, Any]) -> bool:
    if len(a["rows"]) != len(b["rows"]):
        return False
    return all(
        np.asarray(t)[a["rows"], a["env"]].tobytes() == np.asarray(t)[b["rows"], b["env"]].tobytes()
        for t in dataset.tensors.values()
    )


@st.composite
def small_datasets(draw: st.DrawFn) -> Dataset:
    """Few rows, envs and values, so that equal episodes are common; wrapped or not."""
    size, envs = draw(st.integers(1, 7)), draw(st.integers(1, 4))
    filled = draw(st.booleans())
    state = CircularState(draw(st.integers(0, size - 1)), draw(st.integers(0, envs - 1)), filled)
    shape = (size, envs, 1)
    floats = st.sampled_from([0.0, -0.0, 1.0, np.nan])
    tensors = {
        "observations": draw(hnp.arrays(np.int8, (size, envs, 2), elements=st.integers(0, 1))),
        "rewards": draw(hnp.arrays(np.float32, shape, elements=floats)),
        "terminated": draw(hnp.arrays(np.bool_, shape)),
    }
    if draw(st.booleans()):
        tensors["truncated"] = draw(hnp.arrays(np.bool_, shape))
    metadata = {}
    if envs == 1 and draw(st.booleans()):
        metadata[SEAMS_KEY] = draw(st.lists(st.integers(0, size - 1), max_size=3))
    return Dataset(tensors, state, metadata)


@settings(max_examples=150, deadline=None)
@given(small_datasets(), st.integers(1, 64))
def test_fingerprints_equal_exactly_when_the_episodes_bytes_are(
    dataset: Dataset, chunk_bytes: int
) -> None:
    records = episode_fingerprints(dataset, chunk_bytes=chunk_bytes)
    episodes = reference(dataset)
    assert records["index"].tolist() == list(range(len(episodes)))
    assert records["env"].tolist() == [e["env"] for e in episodes]
    assert records["length"].tolist() == [len(e["rows"]) for e in episodes]
    assert records["complete"].tolist() == [e["complete"] for e in episodes]
    for (i, a), (j, b) in itertools.combinations(enumerate(episodes), 2):
        equal = records["digest"][i] == records["digest"][j]
        assert equal == same_data(dataset, a, b), (i, j)


def test_chunks_do_not_change_fingerprints_of_a_wrapped_dataset() -> None:
    dataset = random_dataset(size=40, envs=3, state=CircularState(17, 2, True), done_rate=0.2)
    whole = episode_fingerprints(dataset)
    assert np.array_equal(whole, episode_fingerprints(dataset, chunk_bytes=1))
    assert np.array_equal(whole, episode_fingerprints(dataset, chunk_bytes=500))
    assert len(np.unique(whole["digest"])) == len(whole)  # random floats: all distinct


def test_a_dataset_without_flags_is_one_open_episode_per_column() -> None:
    dataset = random_dataset(size=5, envs=3)
    del dataset.tensors["terminated"], dataset.tensors["truncated"]
    records = episode_fingerprints(dataset)
    assert records["env"].tolist() == [0, 1, 2] and records["length"].tolist() == [5, 5, 5]
    assert not records["complete"].any()


def planted(seed: int = 0) -> tuple[Dataset, int, int]:
    """Random data whose complete episode at rows 2..4 of env 0 is copied to rows 6..8 of env 2.

    Returns the dataset and the indexes of the original and of the copy.
    """
    dataset = random_dataset(size=12, envs=3, seed=seed, done_rate=0.0)
    tensors = dataset.tensors
    tensors["terminated"][[1, 4], 0] = True
    tensors["terminated"][[5, 8], 2] = True
    for array in tensors.values():
        array[6:9, 2] = array[2:5, 0]
    # closed episodes by last transition: (1, 0), (4, 0), (5, 2), (8, 2); then the open ones
    return dataset, 1, 3


def test_a_planted_duplicate_fails_the_check_with_its_indexes(tmp_path: Path) -> None:
    dataset, original, copy = planted()
    records = episode_fingerprints(dataset)
    assert records["digest"][original] == records["digest"][copy]
    assert (records["env"][original], records["env"][copy]) == (0, 2)
    summary = summarize(write_dataset(dataset, tmp_path / "d.h5"), check=True)
    [finding] = [f for f in summary.checks or () if f.check == "duplicates"]
    assert finding.failed and summary.failed
    assert finding.count == 1 and finding.episodes == ((copy, 2, original, 0),)
    clean = summarize(write_dataset(random_dataset(size=12, envs=3), tmp_path / "c.h5"), check=True)
    [finding] = [f for f in clean.checks or () if f.check == "duplicates"]
    assert finding.status == "passed" and "no complete episode repeats" in finding.message


def test_repeats_where_distinct_episodes_end_alike_are_a_note() -> None:
    """One-step episodes over two observations: chance repeats them, as Blackjack does."""
    obs = np.array([0, 0, 1, 1], np.int8).reshape(4, 1, 1)
    tensors = {
        "observations": obs,
        "next_observations": np.ones((4, 1, 1), np.int8),  # every episode ends in state 1
        "actions": np.array([0, 0, 0, 1]).reshape(4, 1, 1),
        "terminated": np.ones((4, 1, 1), bool),
    }
    finding = duplicate_finding(episode_fingerprints(Dataset(tensors, CircularState(0, 0, True))))
    assert finding.status == "note" and finding.count == 1
    assert finding.episodes == ((1, 0, 0, 0),)


def test_leakage_between_two_files_sharing_one_episode(tmp_path: Path) -> None:
    train = random_dataset(size=12, envs=3, seed=1, done_rate=0.0)
    val = random_dataset(size=10, envs=2, seed=2, done_rate=0.0)
    for data in (train, val):
        data.tensors["terminated"][3::4] = True
    for array_train, array_val in zip(train.tensors.values(), val.tensors.values(), strict=True):
        array_val[4:8, 1] = array_train[0:4, 2]  # train's first episode of env 2, in val's env 1
    train_path = write_dataset(train, tmp_path / "train.npz")
    val_path = write_dataset(val, tmp_path / "val.h5")
    summary = summarize(train_path, against=[val_path])
    [finding] = [f for f in summary.checks or () if f.check == "leakage"]
    assert finding.failed and finding.count == 1 and str(val_path) in finding.message
    # train's episodes ending at row 3 are 0, 1, 2 (env 2: index 2); val's at row 3: 0, 1,
    # at row 7: 2, 3 (env 1: index 3)
    assert finding.episodes == ((2, 2, 3, 1),)
    assert not [f for f in summary.checks or () if f.check == "duplicates" and f.failed]
    other = write_dataset(random_dataset(seed=3), tmp_path / "other.npz")
    summary = summarize(train_path, against=[other, val_path])
    found = [f.status for f in summary.checks or () if f.check == "leakage"]
    assert found == ["passed", "failed"]


def test_fingerprinting_a_file_holds_a_chunk_not_the_data(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom expcli.summary.fingerprints import episode_fingerprints\n"
        "assert len(episode_fingerprints(sys.argv[1])) > 4\n"
    )
    imports = ("expcli.summary.fingerprints", "expcli.formats.npz_format")

    def fingerprint(mib: float) -> Any:
        data = Dataset(frames_data(mib, compressible=False), CircularState(0, 0, True))
        source = write_dataset(data, tmp_path / f"{mib:.0f}.npz")
        run = run_child(["-c", code, str(source)], imports=imports)
        source.unlink()
        return run

    assert_flat(fingerprint, 24, 120)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_a_file_gives_the_fingerprints_of_its_dataset(tmp_path: Path, suffix: str) -> None:
    dataset, _, _ = planted()
    path = write_dataset(dataset, tmp_path / f"p{suffix}")
    from_file = episode_fingerprints(path)
    assert np.array_equal(from_file, episode_fingerprints(dataset))
