"""Parquet tables expcli did not write, written by the real libraries, read from their columns.

expcli's own file cut by polars, duckdb and pyarrow reads back expcli's rows of the episodes
kept; HF ``datasets`` with Minari's names, D4RL's names, a ``done`` alone, episodes out of
order: each read with one warning saying what was inferred. Ragged lists and columns that
cannot be tensors are refused in one line. About 7 s on two cores.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.errors import FormatError
from expcli.formats import Dataset, _table_order, parquet_format, read_dataset, write_dataset
from expcli.formats.layout_keys import SEAMS_KEY
from expcli.spec import CircularState

STEPS = ("observations", "next_observations", "actions", "rewards", "terminated", "truncated")


def collected(rows: int = 40, envs: int = 3, seed: int = 0, every: bool = False) -> Dataset:
    """An expcli dataset whose episodes end by both flags; ``every``: each next observation
    is the next row's, episode ends too (else an episode's last one is its own).

    Its observations are 64 bytes: expcli stores their next ones once, null where they are
    the next row's, and readers other than expcli see the nulls.
    """
    rng = np.random.default_rng(seed)
    observations = rng.normal(size=(rows, envs, 16)).astype(np.float32)
    at = np.arange(rows)[:, None] + np.arange(envs)[None, :]
    terminated = (at % 7 == 6)[..., None]
    truncated = (at % 11 == 10)[..., None] & ~terminated
    following = np.roll(observations, -1, axis=0)
    ends = (terminated | truncated)[..., 0] & (not every)
    ends[-1] = True
    following[ends] = rng.normal(size=(int(ends.sum()), 16)).astype(np.float32)
    tensors = {
        "observations": observations,
        "next_observations": following,
        "actions": rng.integers(0, 4, (rows, envs, 1)),
        "rewards": rng.normal(size=(rows, envs, 1)).astype(np.float32),
        "terminated": terminated,
        "truncated": truncated,
    }
    return Dataset(tensors, CircularState(0, 0, filled=True), {"env_id": "Test-v0"})


def read_warned(path: Path) -> tuple[Dataset, list[str]]:
    """The dataset read whole, and the warnings its reading gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = read_dataset(path)
    return dataset, [str(w.message) for w in caught]


def rows_of_episodes(dataset: Dataset, source: Path, kept: int) -> dict[str, np.ndarray]:
    """expcli's rows of the episodes numbered below ``kept``, env after env, in time order."""
    book = pq.read_table(source, columns=["index", "episode_index", "env", "row"])
    chosen = book.filter(pc.less(book["episode_index"], kept)).sort_by(
        [("env", "ascending"), ("index", "ascending")]
    )
    row, env = (chosen[c].to_numpy() for c in ("row", "env"))
    return {name: np.asarray(dataset.tensors[name])[row, env] for name in STEPS}


def flat(dataset: Dataset) -> dict[str, np.ndarray]:
    """Each tensor's rows of one env column, ``(T, *feature)``."""
    assert dataset.num_envs == 1
    return {name: np.asarray(t)[:, 0] for name, t in dataset.tensors.items()}


def test_a_polars_copy_of_a_whole_file_reads_back_every_tensor(tmp_path: Path) -> None:
    source = write_dataset(collected(), tmp_path / "own.parquet")
    copy = tmp_path / "copy.parquet"
    pl.read_parquet(source).write_parquet(copy)
    assert pq.read_table(copy).column("next_observations").null_count > 60
    dataset, said = read_warned(copy)
    assert said == [f"{copy}: no expcli metadata: read from its columns as expcli's columns"]
    original = collected()
    assert sorted(dataset.tensors) == sorted(original.tensors)
    for name, tensor in original.tensors.items():
        assert np.array_equal(dataset.tensors[name], tensor), name
    assert dataset.metadata["layout"] == "table"
    assert dataset.metadata["table"]["read"] == "no expcli metadata"


@pytest.mark.parametrize("tool", ["duckdb", "polars"])
def test_a_copy_of_some_episodes_reads_back_expcli_rows_of_them(tmp_path: Path, tool: str) -> None:
    source = write_dataset(collected(), tmp_path / "own.parquet")
    cut = tmp_path / f"{tool}.parquet"
    if tool == "duckdb":
        duckdb.sql(f"COPY (SELECT * FROM '{source}' WHERE episode_index < 6) TO '{cut}'")
    else:
        pl.scan_parquet(source).filter(pl.col("episode_index") < 6).sink_parquet(cut)
    dataset, said = read_warned(cut)
    assert len(said) == 1 and "one env column, env after env" in said[0]
    expected = rows_of_episodes(collected(), source, 6)
    got = flat(dataset)
    for name in STEPS:
        assert np.array_equal(got[name], expected[name]), name
    assert SEAMS_KEY not in dataset.metadata  # every episode kept ends with its own flag


def test_a_pyarrow_cut_keeps_the_footer_and_is_read_from_its_columns(tmp_path: Path) -> None:
    source = write_dataset(collected(), tmp_path / "own.parquet")
    table = pq.read_table(source)
    cut = tmp_path / "cut.parquet"
    pq.write_table(table.filter(pc.less(table["episode_index"], 6)), cut)
    assert b"expcli" in (pq.read_metadata(cut).metadata or {})
    dataset, said = read_warned(cut)
    rows = len(dataset)
    assert said[0].startswith(
        f"{cut}: its rows disagree with its expcli metadata ({rows} rows, 120 recorded): "
        "read from its columns"
    )
    expected = rows_of_episodes(collected(), source, 6)
    for name, values in flat(dataset).items():
        assert np.array_equal(values, expected[name]), name


@pytest.mark.parametrize(
    ("every", "kept"), [(True, "episode_index < 6"), (False, "frame_index % 2 = 0")]
)
def test_a_lost_next_row_of_a_null_next_observation_is_refused(
    tmp_path: Path, every: bool, kept: str
) -> None:
    """Stored once, a next observation is null where it was the next row's observation
    (``every``: an episode's last too): that row cut away, nothing may stand in for it."""
    source = write_dataset(collected(every=every), tmp_path / "own.parquet")
    cut = tmp_path / "cut.parquet"
    duckdb.sql(f"COPY (SELECT * FROM '{source}' WHERE {kept}) TO '{cut}'")
    with pytest.raises(FormatError, match="is null, stored once .* not in the table") as info:
        read_warned(cut)
    assert info.value.key == "next_observations" and info.value.path == str(cut)


def test_hf_datasets_with_minari_names(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rng = np.random.default_rng(1)
    observations = rng.normal(size=(12, 2)).astype(np.float32)
    terminations = np.zeros(12, bool)
    terminations[4] = True
    truncations = np.zeros(12, bool)
    truncations[9] = True
    path = tmp_path / "minari.parquet"
    datasets.Dataset.from_dict(
        {
            "observations": observations.tolist(),
            "actions": rng.integers(0, 3, 12).tolist(),
            "rewards": rng.normal(size=12).tolist(),
            "terminations": terminations.tolist(),
            "truncations": truncations.tolist(),
        }
    ).to_parquet(path)
    dataset, said = read_warned(path)
    assert len(said) == 1 and "as Minari's columns (terminated=terminations" in said[0]
    assert "no next observations" in said[0]
    got = flat(dataset)
    assert np.array_equal(got["observations"], observations)
    assert np.array_equal(got["terminated"][:, 0], terminations)
    assert np.array_equal(got["truncated"][:, 0], truncations)
    following = got["next_observations"]
    assert np.array_equal(following[:4], observations[1:5])  # the next row's, in its episode
    assert np.array_equal(following[4], observations[4])  # unknown: its own, and said
    assert np.array_equal(following[11], observations[11])  # the last row: none after it
    assert dataset.metadata["table"]["unknown"][0].startswith("no next observations")


def test_d4rl_names_with_their_next_observations(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    observations = rng.normal(size=(10, 3)).astype(np.float32)
    following = rng.normal(size=(10, 3)).astype(np.float32)
    terminals, timeouts = np.zeros(10, bool), np.zeros(10, bool)
    terminals[3], timeouts[7] = True, True
    table = pa.table(
        {
            "observations": pa.FixedSizeListArray.from_arrays(observations.reshape(-1), 3),
            "actions": rng.normal(size=10).astype(np.float32),
            "rewards": rng.normal(size=10),
            "terminals": terminals,
            "timeouts": timeouts,
            "next_observations": pa.FixedSizeListArray.from_arrays(following.reshape(-1), 3),
        }
    )
    path = tmp_path / "d4rl.parquet"
    pq.write_table(table, path)
    dataset, said = read_warned(path)
    assert said == [
        f"{path}: no expcli metadata: read from its columns as D4RL's columns "
        "(terminated=terminals, truncated=timeouts)"
    ]
    got = flat(dataset)
    assert np.array_equal(got["next_observations"], following)
    assert np.array_equal(got["terminated"][:, 0], terminals)
    assert np.array_equal(got["truncated"][:, 0], timeouts)
    assert got["rewards"].dtype == np.float64 and got["actions"].shape == (10, 1)


def test_done_alone_is_taken_as_terminated_and_episodes_out_of_order_are_sorted(
    tmp_path: Path,
) -> None:
    episodes = [np.arange(5) * 10 + e for e in range(3)]  # observation = 10 * step + episode
    rows = [(e, s) for e in range(3) for s in range(5)]
    shuffled = np.random.default_rng(3).permutation(len(rows))
    table = pa.table(
        {
            "episode_id": [rows[i][0] for i in shuffled],
            "step": [rows[i][1] for i in shuffled],
            "obs": [float(episodes[rows[i][0]][rows[i][1]]) for i in shuffled],
            "action": [rows[i][1] % 2 for i in shuffled],
            "done": [rows[i][1] == 4 for i in shuffled],
        }
    )
    path = tmp_path / "done.parquet"
    pq.write_table(table, path, row_group_size=4)
    dataset, said = read_warned(path)
    assert len(said) == 1
    for words in (
        "'done' does not tell termination from truncation: taken as terminated",
        "no rewards: the dataset has no rewards tensor",
        "its rows sorted by episode and step",
    ):
        assert words in said[0]
    got = flat(dataset)
    assert np.array_equal(got["observations"][:, 0], np.concatenate(episodes).astype(float))
    assert np.array_equal(got["terminated"][:, 0], np.tile(np.arange(5) == 4, 3))
    assert not got["truncated"].any() and "rewards" not in got


def test_episodes_without_flags_end_where_their_column_says_marked_truncated(
    tmp_path: Path,
) -> None:
    """An episode column across row groups of 3 rows; no flag: each end is a seam."""
    path = tmp_path / "episodes.parquet"
    table = pa.table({"episode_index": [0] * 4 + [1] * 5 + [2] * 2, "action": list(range(11))})
    pq.write_table(table, path, row_group_size=3)
    dataset, said = read_warned(path)
    assert "no done flags: each episode's end marked truncated" in said[0]
    assert np.flatnonzero(flat(dataset)["truncated"][:, 0]).tolist() == [3, 8]  # the last: open
    assert dataset.metadata[SEAMS_KEY] == [3, 8]
    assert "observations" not in dataset.tensors


def test_a_table_to_sort_beyond_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_table_order, "MAX_SORTED_ROWS", 5)
    path = tmp_path / "spread.parquet"
    pq.write_table(pa.table({"episode": [0, 1, 0, 1, 0, 1], "obs": [0.0] * 6}), path)
    with pytest.raises(
        FormatError, match="not contiguous .*(6 rows, more than the 5 sorted|past 5 runs)"
    ):
        read_warned(path)
    interleaved = tmp_path / "interleaved.parquet"  # envs in turn, but in no fixed cycle
    envs = [0, 1, 2, 1, 0, 2, 0, 1, 2, 2, 1, 0]
    pq.write_table(pa.table({"env": envs, "obs": [0.0] * 12}), interleaved, row_group_size=4)
    with pytest.raises(FormatError, match="interleave in no fixed order: past 5 runs of rows by"):
        read_warned(interleaved)


def test_envs_beyond_the_limit_go_in_one_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_table_order, "MAX_ENV_COLUMNS", 1)
    path = tmp_path / "envs.parquet"
    pq.write_table(pa.table({"env": [0, 1, 0, 1], "obs": [0.0, 1.0, 2.0, 3.0]}), path)
    dataset, said = read_warned(path)
    assert "(or are over 1): one env column, env after env" in said[0]
    assert np.asarray(dataset.tensors["observations"]).reshape(-1).tolist() == [0, 2, 1, 3]


def test_ragged_lists_are_refused_naming_the_column_and_the_first_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "ragged.parquet"
    table = pa.table({"obs": [[1.0, 2.0], [3.0, 4.0], [5.0], [6.0, 7.0]], "reward": [0.0] * 4})
    pq.write_table(table, path, row_group_size=2)
    with pytest.raises(FormatError, match="row 2 holds lists of 1 values where row 0 holds 2"):
        read_warned(path)
    line = one_line_exit_1(path)
    assert "obs" in line and "ragged" in line


@pytest.mark.parametrize(
    ("column", "words"),
    [
        (pa.array(["no", "yes"]), "column is string; expected numbers or booleans"),
        (pa.array([{"a": 1}, {"a": 2}]), "column is struct<a: int64>"),
    ],
)
def test_a_column_of_another_type_is_refused_naming_its_type(
    tmp_path: Path, column: Any, words: str
) -> None:
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.table({"obs": [0.5, 1.5], "done": column}), path)
    with pytest.raises(FormatError, match=words) as info:
        read_warned(path)
    assert info.value.key == "done"


def test_nulls_are_refused_where_nothing_fills_them(tmp_path: Path) -> None:
    """Next observations without observations beside them: a null is no value."""
    path = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"action": [0, 1, 2], "next_obs": [0.5, None, 1.5]}), path)
    with pytest.raises(FormatError, match="row 1 is null; expected a value") as info:
        read_warned(path)
    assert info.value.key == "next_obs"


def test_a_table_of_no_known_columns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "prices.parquet"
    pq.write_table(pa.table({"price": [1.0, 2.0]}), path)
    with pytest.raises(FormatError, match="no column expcli recognises as observations"):
        read_warned(path)


def one_line_exit_1(path: Path) -> str:
    """``expcli inspect PATH``'s one error line (beside the warning line that it was read
    from its columns: the fuzzer's rule too), exit 1."""
    out = subprocess.run(
        [sys.executable, "-m", "expcli", "inspect", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    errors = [line for line in lines if not line.startswith("warning:")]
    assert len(lines) <= 2 and len(errors) == 1 and "Traceback" not in out.stderr
    assert errors[0].startswith(f"error: {path}")
    return errors[0]


def one_warning(command: str, source: Path, target: Path) -> tuple[str, str]:
    """``expcli inspect SOURCE`` or ``expcli convert SOURCE TARGET``, exit 0: its standard
    output and its one line on standard error (the warning that it was read from columns)."""
    args = [str(source)] + ([str(target)] if command == "convert" else [])
    out = subprocess.run(
        [sys.executable, "-m", "expcli", command, *args], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    return out.stdout, lines[0]


@pytest.mark.parametrize("command", ["inspect", "convert"])
def test_the_cli_reads_a_foreign_table_with_one_warning_line(tmp_path: Path, command: str) -> None:
    source = write_dataset(collected(), tmp_path / "own.parquet")
    copy = tmp_path / "copy.parquet"
    duckdb.sql(f"COPY (SELECT * FROM '{source}' WHERE episode_index < 6) TO '{copy}'")
    target = tmp_path / "out.npz"
    _, line = one_warning(command, copy, target)
    assert line.startswith(f"warning: {copy}: no expcli metadata")
    if command == "convert":
        converted = read_dataset(target)
        assert converted.metadata["table"]["columns"]["episode"] == "episode_index"
        assert np.array_equal(converted.tensors["actions"], read_warned(copy)[0].tensors["actions"])


@settings(max_examples=15, deadline=None)
@given(
    rows=st.integers(1, 30),
    envs=st.integers(1, 4),
    seed=st.integers(0, 2**16),
    group=st.integers(1, 50),
)
def test_any_collected_dataset_survives_a_polars_round_trip(
    tmp_path_factory: pytest.TempPathFactory, rows: int, envs: int, seed: int, group: int
) -> None:
    folder = tmp_path_factory.mktemp("round")
    source = write_dataset(collected(rows, envs, seed), folder / "own.parquet")
    copy = folder / "copy.parquet"
    pl.read_parquet(source).write_parquet(copy, row_group_size=group)
    dataset, said = read_warned(copy)
    assert len(said) == 1
    for name, tensor in collected(rows, envs, seed).tensors.items():
        assert np.array_equal(dataset.tensors[name], tensor), name


@settings(max_examples=25, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 6), min_size=1, max_size=8),
    envs=st.integers(1, 3),
    shuffle=st.booleans(),
    group=st.integers(1, 20),
    seed=st.integers(0, 2**16),
)
def test_rows_are_placed_by_env_episode_and_step_whatever_their_order(
    tmp_path_factory: pytest.TempPathFactory,
    lengths: list[int],
    envs: int,
    shuffle: bool,
    group: int,
    seed: int,
) -> None:
    """Each row once; per env column, an episode's rows together, its steps in order."""
    rng = np.random.default_rng(seed)
    env = [e % envs for e, n in enumerate(lengths) for _ in range(n)]
    episode = [e for e, n in enumerate(lengths) for _ in range(n)]
    step = [s for n in lengths for s in range(n)]
    order = rng.permutation(len(step)) if shuffle else np.arange(len(step))
    code = np.asarray(episode) * 100 + np.asarray(step)  # the observation tells the row
    table = pa.table(
        {
            "env": np.asarray(env)[order],
            "episode_id": np.asarray(episode)[order],
            "step": np.asarray(step)[order],
            "obs": code[order].astype(np.float64),
        }
    )
    path = tmp_path_factory.mktemp("placed") / "t.parquet"
    pq.write_table(table, path, row_group_size=group)
    dataset, said = read_warned(path)
    assert len(said) == 1
    observed = np.asarray(dataset.tensors["observations"])[..., 0].astype(int)
    assert sorted(observed.reshape(-1).tolist()) == sorted(code.tolist())
    for column in observed.T:
        episodes, steps = column // 100, column % 100
        starts = np.flatnonzero(np.diff(episodes)) + 1
        assert len(set(episodes.tolist())) == len(starts) + 1  # each episode in one piece
        for piece in np.split(steps, starts):
            assert piece.tolist() == list(range(len(piece)))
    ends = np.asarray(dataset.tensors["truncated"])[..., 0]  # no flags: each end a seam
    assert ends.sum() == len(lengths) - observed.shape[1]  # all but each column's last


def test_an_env_column_without_episodes_ends_episodes_at_the_flags(tmp_path: Path) -> None:
    """Rows of two envs interleaved, as a vectorised collector logs them: two env columns."""
    done = np.zeros((6, 2), bool)
    done[2, 0] = done[4, 1] = True
    table = pa.table(
        {
            "env": np.tile([0, 1], 6),
            "obs": np.arange(12, dtype=np.float32),
            "action": np.arange(12) % 3,
            "reward": np.ones(12),
            "terminal": done.reshape(-1),
        }
    )
    path = tmp_path / "envs.parquet"
    pq.write_table(table, path, row_group_size=5)
    dataset, said = read_warned(path)
    assert "terminated=terminal" in said[0] and "no next observations" in said[0]
    observations = np.asarray(dataset.tensors["observations"])[..., 0]
    assert observations.tolist() == np.arange(12).reshape(6, 2).tolist()
    assert np.array_equal(np.asarray(dataset.tensors["terminated"])[..., 0], done)
    following = np.asarray(dataset.tensors["next_observations"])[..., 0]
    assert following[:, 0].tolist() == [2, 4, 4, 8, 10, 10]  # 4: env 0's episode ends at t 2


def test_structured_observations_survive_a_polars_copy(tmp_path: Path) -> None:
    """Dict leaves (``observations/pos``...), their next ones stored once: null, filled."""
    rng = np.random.default_rng(5)
    pos, vel = rng.normal(size=(20, 2, 16)), rng.normal(size=(20, 2, 2))
    tensors = {"observations/pos": pos, "observations/vel": vel, "actions": vel[..., :1]}
    for name in ("pos", "vel"):
        following = np.roll(tensors[f"observations/{name}"], -1, axis=0)
        following[-1] = 0
        tensors[f"next_observations/{name}"] = following
    original = Dataset(tensors, CircularState(0, 0, filled=True))
    source = write_dataset(original, tmp_path / "own.parquet")
    copy = tmp_path / "copy.parquet"
    pl.read_parquet(source).write_parquet(copy)
    assert pq.read_table(copy).column("next_observations/pos").null_count > 30
    dataset, _ = read_warned(copy)
    for name, tensor in tensors.items():
        assert np.array_equal(dataset.tensors[name], tensor), name


def _keys_in_groups(keys: dict[str, np.ndarray], group: int) -> Any:
    count = len(next(iter(keys.values())))
    return lambda: (
        (first, {k: v[first : first + group] for k, v in keys.items()})
        for first in range(0, count, group)
    )


@settings(max_examples=40, deadline=None)
@given(
    steps=st.integers(1, 40),
    envs=st.integers(2, 5),
    group=st.integers(1, 17),
    broken=st.integers(-1, 60),
    seed=st.integers(0, 2**16),
)
def test_rows_cycling_through_envs_are_runs_of_stride_n(
    steps: int, envs: int, group: int, broken: int, seed: int
) -> None:
    """expcli's order (env 0..N-1 at each time) makes runs of its episodes, not of its rows;
    a table that stops cycling somewhere is placed row by row, the same cells either way."""
    rng = np.random.default_rng(seed)
    count = steps * envs
    env = np.arange(count) % envs
    done = rng.random((steps, envs)) < 0.2
    episode = np.cumsum(np.vstack([np.zeros((1, envs), bool), done[:-1]]), 0) * envs + np.arange(
        envs
    )
    step = np.zeros((steps, envs), np.int64)
    for t in range(1, steps):
        step[t] = np.where(done[t - 1], 0, step[t - 1] + 1)
    keys = {"env": env, "episode": episode.reshape(-1), "step": step.reshape(-1)}
    if 0 <= broken < count - 1:  # two rows of the same time swapped: no more a cycle
        t = broken - broken % envs
        if t + 1 < count and env[t] != env[t + 1]:
            for name in keys:
                keys[name] = keys[name].copy()
                keys[name][[t, t + 1]] = keys[name][[t + 1, t]]
    placement = _table_order.place(
        _keys_in_groups(keys, group), count, lambda: keys, Path("t.parquet")
    )
    cells = placement.cells(0, placement.shape[0])
    assert sorted(cells.reshape(-1).tolist()) == list(range(count))  # each row once
    for column in cells.T:
        assert len(set(keys["env"][column].tolist())) == 1 or placement.envs_glued
        pairs = list(zip(keys["episode"][column], keys["step"][column], strict=True))
        for (e0, s0), (e1, s1) in zip(pairs, pairs[1:], strict=False):
            assert e0 != e1 or s1 == s0 + 1
    if placement.stride > 1:
        episodes = len(np.unique(keys["episode"]))
        assert sum(len(s) for s in placement.starts) == episodes


def test_columns_of_no_numbers_are_left_out_and_said(tmp_path: Path) -> None:
    """Text and dates beside the tensors (an instruction, a wall clock) are no tensor: left
    out, named with their types in the warning and the metadata; a role's column is not."""
    path = tmp_path / "text.parquet"
    table = {
        "obs": [[1.0, 2.0]] * 4,
        "action": [0, 1, 0, 1],
        "language_instruction": ["pick"] * 4,
        "wall": pa.array([1, 2, 3, 4], pa.timestamp("ms")),
    }
    pq.write_table(pa.table(table), path)
    dataset, said = read_warned(path)
    assert set(dataset.tensors) >= {"observations", "actions"}
    assert not {"language_instruction", "wall"} & set(dataset.tensors)
    left = ["language_instruction (string)", "wall (timestamp[ms])"]
    assert dataset.metadata["table"]["not_numbers"] == left
    assert f"columns of no numbers left out: {', '.join(left)}" in said[0]
    pq.write_table(pa.table(table | {"done": ["no", "no", "no", "yes"]}), path)
    with pytest.raises(FormatError, match="'done': column is string"):
        read_warned(path)


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.lists(st.integers(1, 5), min_size=1, max_size=6), min_size=1, max_size=3),
    stride=st.integers(1, 3),
    window=st.tuples(st.floats(0, 1), st.floats(0, 1)),
    seed=st.integers(0, 2**16),
)
def test_placement_cells_are_each_rows_run_start_plus_its_place_in_the_run(
    lengths: list[list[int]], stride: int, window: tuple[float, float], seed: int
) -> None:
    """Differential: ``cells`` against the row-by-row rule (a search for each row's run)."""
    rng = np.random.default_rng(seed)
    rows = sum(lengths[0])
    ends = [np.cumsum(rng.permutation(lengths[0])).astype(np.int64)]
    ends += [np.array([rows], np.int64) for _ in lengths[1:]]  # other columns: one run
    starts = [rng.integers(0, 1000, len(e)).astype(np.int64) for e in ends]
    placement = _table_order.Placement(starts, ends, None, False, False, stride)
    first, stop = sorted(int(w * rows) for w in window)
    at = np.arange(first, stop)
    for column, (begin, end) in enumerate(zip(starts, ends, strict=True)):
        run = np.searchsorted(end, at, side="right")
        before = np.where(run > 0, end[np.maximum(run - 1, 0)], 0)
        expected = begin[run] + (at - before) * stride
        assert np.array_equal(placement.cells(first, stop)[:, column], expected)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.integers(1, 30),
    envs=st.integers(1, 4),
    order=st.sampled_from(["cycled", "env after env", "shuffled"]),
    group=st.integers(1, 13),
    window=st.tuples(st.floats(0, 1), st.floats(0, 1)),
    seed=st.integers(0, 2**16),
)
def test_a_placement_in_file_order_finds_its_cells_without_its_runs(
    steps: int, envs: int, order: str, group: int, window: tuple[float, float], seed: int
) -> None:
    """Differential: a placement whose columns are each one arithmetic run of file rows
    (``offsets``) gives the cells its runs give, and says it is one run of file rows
    (``contiguous``) exactly where those cells are consecutive."""
    rng = np.random.default_rng(seed)
    count = steps * envs
    env = np.arange(count) % envs if order == "cycled" else np.repeat(np.arange(envs), steps)
    episode = env * 1000 + np.cumsum(rng.random(count) < 0.2)
    keys = {"env": env, "episode": episode, "step": np.arange(count)}
    if order == "shuffled":
        keys = {name: values[rng.permutation(count)] for name, values in keys.items()}
    placement = _table_order.place(
        _keys_in_groups(keys, group), count, lambda: keys, Path("t.parquet")
    )
    rows = placement.shape[0]
    first, stop = sorted(int(w * rows) for w in window)
    by_runs = dataclasses.replace(placement, offsets=None).cells(first, stop)
    assert np.array_equal(placement.cells(first, stop), by_runs)
    flat = by_runs.reshape(-1)
    consecutive = len(flat) > 0 and np.array_equal(flat, np.arange(flat[0], flat[0] + len(flat)))
    begin = placement.contiguous(first, stop)
    assert (begin is not None) == (consecutive and placement.offsets is not None)
    if begin is not None:
        assert begin == flat[0]
    cycled = order == "cycled" and group >= envs  # the cycle seen in the first group
    in_order = cycled or (envs == 1 and order != "shuffled")
    if in_order:  # read in file order: every slice one run
        assert placement.offsets is not None and placement.contiguous(0, rows) == 0


def _small_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spans of one row group (of a few rows): a read in order goes through many."""
    from expcli.formats import _table_groups

    monkeypatch.setattr(_table_groups, "GROUP_SPAN_BYTES", 1)


def test_a_column_read_in_order_decodes_ahead_on_its_own_handle_same_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read in order, every other span is decoded on a thread of its own (with a handle
    of its own): the values are those of a read without it, and closing stops it."""
    import threading

    _small_spans(monkeypatch)
    dataset = collected(rows=60, envs=3)
    path = tmp_path / "copy.parquet"
    write_dataset(dataset, tmp_path / "own.parquet")
    pq.write_table(
        pq.read_table(tmp_path / "own.parquet").replace_schema_metadata(None),
        path,
        row_group_size=7,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ahead, close = parquet_format.open_lazy(path)
    try:
        for name, tensor in ahead.tensors.items():
            rows = [np.asarray(tensor[t : t + 5]) for t in range(0, len(tensor), 5)]
            assert np.array_equal(np.concatenate(rows), dataset.tensors[name]), name
        decoding = [t for t in threading.enumerate() if t.name.startswith("expcli-table-decode")]
        assert decoding, "no span was decoded ahead"
    finally:
        close()
    for thread in decoding:
        thread.join(timeout=10)
        assert not thread.is_alive()  # closing the table stops its decoder


def test_a_foreign_table_replaced_while_read_in_order_is_refused_not_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decoding thread's handle is opened on the file that was checked, never on
    another put in its place."""
    _small_spans(monkeypatch)
    path = tmp_path / "copy.parquet"
    table = pa.table({"obs": [[float(i)] * 2 for i in range(200)], "action": list(range(200))})
    pq.write_table(table, path, row_group_size=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lazy, close = parquet_format.open_lazy(path)
    try:
        pq.write_table(table, tmp_path / "other.parquet", row_group_size=5)
        (tmp_path / "other.parquet").replace(path)
        actions = lazy.tensors["actions"]
        with pytest.raises(FormatError, match="replaced or changed while it was read"):
            for row in range(0, len(actions), 5):
                np.asarray(actions[row : row + 5])
    finally:
        close()


def test_next_frames_taken_from_the_observations_are_stored_once_without_a_compare(
    tmp_path: Path,
) -> None:
    """A table without next observations: each is the next row's, so ``kept_cells`` takes
    the cells that may differ (episodes' ends, the last row) without reading the frames;
    a superset of those that differ, and the npz written reads back every value."""
    from expcli.conversion import convert
    from expcli.formats import frames as frames_module

    rng = np.random.default_rng(3)
    steps = 30
    pixels = rng.integers(0, 4, (steps, 8 * 8), dtype=np.uint8)
    pixels[10] = pixels[9]  # a frame repeated across an episode's end
    done = np.zeros(steps, bool)
    done[[9, 20]] = True
    table = pa.table(
        {"observations": pixels.tolist(), "actions": list(range(steps)), "dones": done}
    )
    source = tmp_path / "frames.parquet"
    pq.write_table(table, source, row_group_size=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lazy, close = parquet_format.open_lazy(source)
    try:
        following, observations = lazy.tensors["next_observations"], lazy.tensors["observations"]
        known = frames_module.kept_cells(following, observations)
        assert known is not None
        assert known.tolist() == [9, 20, steps - 1]  # ends and the last row
        compared = frames_module.kept_cells(np.asarray(following), np.asarray(observations))
        assert compared is not None and set(compared.tolist()) <= set(known.tolist())
        assert 9 not in compared.tolist()  # equal to the next row's: not read, still kept
        expected = {name: np.asarray(t) for name, t in lazy.tensors.items()}
    finally:
        close()
    target = tmp_path / "out.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert(source, target)  # read lazily, as the command does
    with np.load(target) as stored:
        assert any(name.startswith(frames_module.PREFIX) for name in stored.files)
    back = read_dataset(target)
    for name, values in expected.items():
        assert np.array_equal(back.tensors[name], values), name
