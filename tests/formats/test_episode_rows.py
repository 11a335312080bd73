"""Tables of one row per episode (decision-transformer style), written by the real libraries.

Lists as long as each episode in every column of a role: read as transitions, one episode a
row, in Parquet (pyarrow over several row groups, polars, HF ``datasets``) and Arrow IPC;
lists of other lengths within a row are refused in one line naming the column and the row.
About 4 s on two cores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from expcli.errors import FormatError
from expcli.formats import Dataset, read_dataset
from tests.formats.test_foreign_tables import flat, one_line_exit_1, one_warning, read_warned

LENGTHS = (5, 3, 7, 4, 6)


def episodes(seed: int = 0) -> dict[str, list[np.ndarray]]:
    """Five episodes' steps: observations ``(n, 3)``, actions, rewards, terminals (the last)."""
    rng = np.random.default_rng(seed)
    return {
        "observations": [rng.normal(size=(n, 3)).astype(np.float32) for n in LENGTHS],
        "actions": [rng.integers(0, 4, n) for n in LENGTHS],
        "rewards": [rng.normal(size=n).astype(np.float32) for n in LENGTHS],
        "terminals": [np.arange(n) == n - 1 for n in LENGTHS],
    }


def as_columns(steps: dict[str, list[np.ndarray]]) -> dict[str, list[Any]]:
    """One list a row per episode, and an episode-level column (``seed``)."""
    columns: dict[str, list[Any]] = {k: [e.tolist() for e in v] for k, v in steps.items()}
    columns["seed"] = list(range(len(LENGTHS)))
    return columns


def assert_steps(dataset: Dataset, steps: dict[str, list[np.ndarray]]) -> None:
    """The dataset holds the episodes' steps, one after another, ended by their terminals."""
    got = flat(dataset)
    observations = np.concatenate(steps["observations"])
    assert np.array_equal(got["observations"], observations)
    assert np.array_equal(got["actions"][:, 0], np.concatenate(steps["actions"]))
    assert np.array_equal(got["rewards"][:, 0], np.concatenate(steps["rewards"]))
    assert np.array_equal(got["terminated"][:, 0], np.concatenate(steps["terminals"]))
    assert not got["truncated"].any()
    ends = np.cumsum(LENGTHS) - 1
    inside = np.setdiff1d(np.arange(sum(LENGTHS)), ends)
    following = got["next_observations"]
    assert np.array_equal(following[inside], observations[inside + 1])  # within its episode
    assert np.array_equal(following[ends], observations[ends])  # unknown: its own, and said


@pytest.mark.parametrize("writer", ["pyarrow", "polars", "feather"])
def test_one_row_per_episode_is_read_as_its_steps(tmp_path: Path, writer: str) -> None:
    steps = episodes()
    table = pa.table(as_columns(steps))
    path = tmp_path / ("episodes.feather" if writer == "feather" else "episodes.parquet")
    if writer == "pyarrow":
        pq.write_table(table, path, row_group_size=2)  # episodes over three row groups
    elif writer == "polars":
        pl.from_arrow(table).write_parquet(path)
    else:
        feather.write_feather(table, str(path), chunksize=2)
    dataset, said = read_warned(path)
    assert len(said) == 1 and "one row per episode (seed left out)" in said[0]
    assert "no next observations" in said[0]
    assert_steps(dataset, steps)
    assert dataset.metadata["table"]["convention"] == "D4RL's columns"


def test_hf_datasets_sequences_of_one_row_per_episode(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    steps = episodes(1)
    path = tmp_path / "hf.parquet"
    datasets.Dataset.from_dict(as_columns(steps)).to_parquet(path)
    kind = pq.read_schema(path).field("observations").type
    assert pa.types.is_list(kind) and pa.types.is_list(kind.value_type)  # list<list<double>>
    dataset, said = read_warned(path)
    assert len(said) == 1 and "one row per episode" in said[0]
    steps["observations"] = [o.astype(np.float64) for o in steps["observations"]]
    steps["rewards"] = [r.astype(np.float64) for r in steps["rewards"]]
    assert_steps(dataset, steps)


def test_lists_of_other_lengths_within_a_row_are_one_line_naming_column_and_row(
    tmp_path: Path,
) -> None:
    columns = as_columns(episodes())
    columns["actions"][3] = columns["actions"][3][:-1]  # episode 3: 4 rewards, 3 actions
    path = tmp_path / "ragged.parquet"
    pq.write_table(pa.table(columns), path, row_group_size=2)
    with pytest.raises(FormatError, match=r"row 3 \(an episode\) holds 3 steps where") as info:
        read_warned(path)
    assert info.value.key == "actions" and "where 'rewards' holds 4" in str(info.value)
    line = one_line_exit_1(path)
    assert "'actions'" in line and "row 3 (an episode) holds 3 steps" in line


def test_a_null_episode_is_refused_naming_its_row(tmp_path: Path) -> None:
    columns = as_columns(episodes())
    columns["actions"][2] = None
    path = tmp_path / "null.arrow"
    feather.write_feather(pa.table(columns), str(path))
    with pytest.raises(FormatError, match=r"row 2 \(an episode\) is null") as info:
        read_warned(path)
    assert info.value.key == "actions"


def test_step_rows_with_list_observations_stay_step_rows(tmp_path: Path) -> None:
    """Scalar rewards: a row a step, whatever its observations' lists."""
    path = tmp_path / "steps.parquet"
    pq.write_table(pa.table({"obs": [[1.0, 2.0], [3.0, 4.0]], "reward": [0.5, 1.5]}), path)
    dataset, said = read_warned(path)
    assert len(said) == 1 and "one row per episode" not in said[0]
    assert np.asarray(dataset.tensors["observations"]).shape == (2, 1, 2)


@pytest.mark.parametrize("command", ["inspect", "convert"])
def test_the_cli_reads_one_row_per_episode(tmp_path: Path, command: str) -> None:
    steps = episodes()
    path = tmp_path / "episodes.parquet"
    pq.write_table(pa.table(as_columns(steps)), path, row_group_size=2)
    target = tmp_path / "out.npz"
    stdout, line = one_warning(command, path, target)
    assert "one row per episode" in line
    if command == "convert":
        assert_steps(read_dataset(target), steps)
    else:
        assert f"{sum(LENGTHS)} valid transitions" in stdout
        assert f"{len(LENGTHS)} complete ({len(LENGTHS)} terminated, 0 truncated)" in stdout
