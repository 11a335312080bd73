"""``--columns ROLE=COLUMN,...`` and ``--done-means``: tables whose names expcli does not know.

A table of made-up column names reads back its values in the roles the mapping gives them
(Dict leaves too, rows placed by the mapped episode and step columns); a mapping replaces
name recognition for its roles; ``done`` alone is terminated unless ``--done-means`` says,
and the written metadata records which. Every command that reads takes both options, and
each mistake is one line and exit 2. About 15 s on one core (the HTML report 6 s of it).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from expcli import ReplayBuffer, load
from expcli.cli import app
from expcli.errors import ConfigError
from expcli.formats import Dataset, write_dataset
from expcli.formats.column_roles import MAPPED_ROLES, ColumnRoles, DoneMeans, column_roles
from expcli.spec import CircularState

LENGTHS = (4, 3, 5)  # the episodes, stored out of order and shuffled
MAPPING = "observations/pos=p,observations/vel=v,actions=act,rewards=r,episode=traj,step=t"
READING = (
    "inspect",
    "convert",
    "sample",
    "merge",
    "split",
    "filter",
)


def frames() -> dict[str, np.ndarray]:
    """The steps of three episodes, in time order: what every reading must give back."""
    rng = np.random.default_rng(3)
    count = sum(LENGTHS)
    return {
        "p": rng.normal(size=(count, 3)).astype(np.float32),
        "v": rng.normal(size=(count, 2)).astype(np.float32),
        "act": rng.integers(0, 5, count),
        "r": rng.normal(size=count),
        "traj": np.repeat(np.arange(len(LENGTHS)), LENGTHS),
        "t": np.concatenate([np.arange(n) for n in LENGTHS]),
        "finished": np.concatenate([np.arange(n) == n - 1 for n in LENGTHS]),
    }


def arrow(values: dict[str, np.ndarray], order: np.ndarray) -> pa.Table:
    columns: dict[str, Any] = {}
    for name, column in values.items():
        picked = column[order]
        columns[name] = (
            pa.FixedSizeListArray.from_arrays(picked.reshape(-1), picked.shape[1])
            if picked.ndim == 2
            else pa.array(picked)
        )
    return pa.table(columns)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """A Parquet table of names no library writes, its rows shuffled, with a ``done``."""
    values = {**frames(), "done": frames()["finished"]}
    del values["finished"]
    order = np.random.default_rng(0).permutation(sum(LENGTHS))
    path = tmp_path / "mine.parquet"
    pq.write_table(arrow(values, order), path, row_group_size=5)
    return path


def read(path: Path, **options: Any) -> tuple[Dataset, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = load(path, **options)
    return dataset, [str(w.message) for w in caught]


def column(dataset: Dataset, name: str) -> np.ndarray:
    return np.asarray(dataset.tensors[name])[:, 0]


def run(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env={"NO_COLOR": "1", "COLUMNS": "200"})


def test_a_mapping_reads_each_column_in_its_role_and_places_rows_by_episode_and_step(
    table: Path,
) -> None:
    dataset, said = read(table, columns=MAPPING)
    want = frames()
    assert np.array_equal(column(dataset, "observations/pos"), want["p"])
    assert np.array_equal(column(dataset, "observations/vel"), want["v"])
    assert np.array_equal(column(dataset, "actions")[:, 0], want["act"])
    assert np.array_equal(column(dataset, "rewards")[:, 0], want["r"])
    assert np.array_equal(column(dataset, "terminated")[:, 0], want["finished"])
    assert not column(dataset, "truncated").any()
    following = np.roll(want["p"], -1, axis=0)
    ends = want["finished"]
    following[ends] = want["p"][ends]  # the last of each episode: unknown, its own
    assert np.array_equal(column(dataset, "next_observations/pos"), following)
    assert set(dataset.tensors) == {
        "observations/pos", "observations/vel", "next_observations/pos",
        "next_observations/vel", "actions", "rewards", "terminated", "truncated",
    }  # fmt: skip
    assert len(said) == 1 and "the columns given" in said[0] and "rewards=r" in said[0]
    table_read = dataset.metadata["table"]
    assert table_read["given"]["episode"] == "traj" and table_read["columns"]["done"] == "done"


def test_done_alone_is_terminated_said_with_how_to_choose_and_done_means_chooses(
    table: Path, tmp_path: Path
) -> None:
    default, said = read(table, columns=MAPPING)
    assert "taken as terminated (choose with --done-means terminated|truncated)" in said[0]
    assert default.metadata["table"]["done_means"] == "terminated"
    chosen, said = read(table, columns=MAPPING, done_means="truncated")
    assert "does not tell" not in said[0]
    assert np.array_equal(column(chosen, "truncated")[:, 0], frames()["finished"])
    assert not column(chosen, "terminated").any()
    out = tmp_path / "out.npz"
    result = run("convert", table, out, "--columns", MAPPING, "--done-means", "truncated")
    assert result.exit_code == 0, result.output
    written = load(out)
    assert written.metadata["table"]["done_means"] == "truncated"
    assert np.array_equal(column(written, "truncated"), column(chosen, "truncated"))


def test_a_mapping_replaces_the_names_for_its_roles_and_says_what_it_left_out(
    tmp_path: Path,
) -> None:
    values = frames()
    noise = np.zeros((len(values["p"]), 3), np.float32)
    given = {"observations": noise, "reward": values["r"] * 0, **values}
    path = tmp_path / "both.parquet"
    pq.write_table(arrow(given, np.arange(len(noise))), path)
    dataset, said = read(path, columns="observations=p,rewards=r,episode=traj,step=t")
    assert np.array_equal(column(dataset, "observations"), values["p"])
    assert np.array_equal(column(dataset, "rewards")[:, 0], values["r"])
    assert dataset.metadata["table"]["left_out"] == ["observations", "reward"]
    assert "observations, reward left out (their roles given to other columns)" in said[0]
    assert "v" in dataset.tensors and "act" in dataset.tensors  # no role: carried as they are


def test_an_arrow_ipc_file_takes_the_mapping_too(tmp_path: Path) -> None:
    values = {**frames(), "done": frames()["finished"]}
    del values["finished"]
    path = tmp_path / "mine.arrow"
    feather.write_feather(arrow(values, np.arange(sum(LENGTHS))), path)
    dataset, _ = read(path, columns=MAPPING, done_means=DoneMeans.TRUNCATED)
    assert np.array_equal(column(dataset, "observations/vel"), frames()["v"])
    assert np.array_equal(column(dataset, "truncated")[:, 0], frames()["finished"])


def test_a_file_expcli_wrote_is_read_by_its_columns_when_a_mapping_names_some(
    tmp_path: Path,
) -> None:
    """The caller's roles win (its metadata set aside, said); ``--done-means`` alone changes
    nothing there, as expcli keeps both flags."""
    rng = np.random.default_rng(1)
    rows = 12
    done = (np.arange(rows) % 4 == 3)[:, None, None]
    dataset = Dataset(
        {
            "observations": rng.normal(size=(rows, 1, 2)).astype(np.float32),
            "actions": rng.integers(0, 3, (rows, 1, 1)),
            "rewards": np.ones((rows, 1, 1), np.float32),
            "infos/shaped": rng.normal(size=(rows, 1, 1)).astype(np.float32),
            "terminated": done,
            "truncated": np.zeros_like(done),
        },
        CircularState(0, 0, filled=True),
    )
    path = write_dataset(dataset, tmp_path / "own.parquet")
    mapped, said = read(path, columns={"rewards": "infos/shaped"})
    assert np.array_equal(np.asarray(mapped.tensors["rewards"]), dataset.tensors["infos/shaped"])
    assert "its expcli metadata set aside" in said[0] and "rewards=infos/shaped" in said[0]
    assert mapped.metadata["table"]["left_out"] == ["rewards"]
    assert np.array_equal(np.asarray(mapped.tensors["terminated"]), done)
    plain, said = read(path, done_means="truncated")
    assert said == [] and "table" not in plain.metadata
    assert np.array_equal(np.asarray(plain.tensors["terminated"]), done)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--columns", "observations=nope"], ["mine.parquet", "'nope'", "has no column"]),
        (["--columns", "observations=p,observations=v"], ["'observations' given twice"]),
        (["--columns", "obs=p"], ["unknown role 'obs'", "observations/NAME"]),
        (["--columns", "observations=p,rewards=p"], ["column 'p' given for observations"]),
        (["--columns", "observations"], ["is not ROLE=COLUMN"]),
        (["--columns", "observations=p,observations/x=v"], ["both whole and by leaves"]),
        (["--columns", "observations=p,rewards=label"], ["mine.parquet", "'label'", "string"]),
        (["--columns", "observations=p,episode=r"], ["mine.parquet", "'r'", "expected integers"]),
        (["--done-means", "maybe"], ["unknown --done-means 'maybe'"]),
    ],
)
def test_each_mistake_is_one_line_naming_the_file_and_column_and_exit_2(
    table: Path, options: list[str], words: list[str], tmp_path: Path
) -> None:
    if "label" in " ".join(options):
        labelled = pq.read_table(table).append_column("label", pa.array(["a"] * sum(LENGTHS)))
        pq.write_table(labelled, table)
    result = run("inspect", table, *options)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_a_file_that_is_no_table_refuses_a_mapping_in_one_line(tmp_path: Path) -> None:
    dataset = Dataset(
        {"observations": np.zeros((3, 1, 2), np.float32), "terminated": np.zeros((3, 1, 1), bool)},
        CircularState(0, 0, filled=True),
    )
    path = write_dataset(dataset, tmp_path / "d.npz")
    result = run("inspect", path, "--done-means", "terminated")
    assert result.exit_code == 2
    assert "d.npz: --columns and --done-means read tables (Parquet, Arrow IPC)" in result.stderr
    with pytest.raises(ConfigError, match="from its path; this storage is a Dataset"):
        ReplayBuffer(dataset, columns={"observations": "p"})


@pytest.mark.filterwarnings("default::UserWarning")  # the CLI prints it as a warning: line
def test_every_command_that_reads_takes_columns_and_done_means(table: Path, tmp_path: Path) -> None:
    options = ["--columns", MAPPING, "--done-means", "truncated"]
    out = tmp_path / "o"
    runs = {
        "inspect": ["inspect", table, "--json", "--check"],
        "convert": ["convert", table, out / "c.npz"],
        "sample": ["sample", table, "-b", "4", "--json", "--seed", "0"],
        "merge": ["merge", table, table, "-o", out / "m.npz"],
        "split": ["split", table, "-o", out / "a.npz", "-o", out / "b.npz"],
        "filter": ["filter", table, "-o", out / "f.npz", "--episodes", "0:2"],
        "report": ["inspect", table, "--html", out / "r.html"],
    }
    assert set(runs) == {*READING, "report"}
    out.mkdir()
    results = {name: run(*args, *options) for name, args in runs.items()}
    for name, result in results.items():
        assert result.exit_code == 0, (name, result.output)
        assert result.stderr.startswith(f"warning: {table}: no expcli metadata"), name
        assert "--columns" in run(runs[name][0], "--help").stdout, name
    assert "observations/pos" in (out / "r.html").read_text()
    summary = json.loads(results["inspect"].stdout)
    assert summary["episodes"]["complete"] == len(LENGTHS)
    assert summary["episodes"]["truncated"] == len(LENGTHS)
    drawn = json.loads(results["sample"].stdout)
    assert set(drawn["tensors"]) >= {"observations/pos", "actions", "rewards"}
    merged, filtered = load(out / "m.npz"), load(out / "f.npz")
    assert len(merged) == 2 * sum(LENGTHS) and len(filtered) == sum(LENGTHS[:2])
    assert np.array_equal(column(filtered, "rewards")[:, 0], frames()["r"][: sum(LENGTHS[:2])])
    assert sum(len(load(out / f"{p}.npz")) for p in "ab") == sum(LENGTHS)


def test_a_replay_buffer_and_dataset_of_a_table_draw_from_the_mapped_columns(
    table: Path,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        buffer = ReplayBuffer(table, columns=MAPPING, seed=0)
        batch, info = buffer.sample_arrays(6)
        from expcli import ReplayDataset

        data = ReplayDataset(table, 4, columns=MAPPING, done_means="truncated")
        drawn, _ = data[np.arange(4)]
    assert np.array_equal(batch["rewards"][:, 0], frames()["r"][info["index"]])
    assert np.array_equal(drawn["observations/pos"].numpy(), frames()["p"][:4])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(MAPPED_ROLES)
            | st.from_regex(r"observations/[a-z]{1,5}", fullmatch=True),
            st.text("abcxyz_.-/ 0123456789", min_size=1, max_size=8).map(str.strip).filter(bool),
        ),
        max_size=6,
        unique_by=(lambda pair: pair[0], lambda pair: pair[1]),
    ).filter(
        lambda pairs: (
            not (
                {"observations"} & {r for r, _ in pairs}
                and any(r.startswith("observations/") for r, _ in pairs)
            )
        )
    ),
    st.sampled_from([None, *DoneMeans]),
)
def test_a_mapping_as_text_reads_back_as_the_mapping_given(
    pairs: list[tuple[str, str]], means: DoneMeans | None
) -> None:
    roles = column_roles(dict(pairs), means)
    if not pairs and means is None:
        assert roles is None
        return
    assert isinstance(roles, ColumnRoles) and roles.given == dict(pairs)
    assert column_roles(roles.described(), means) == roles
    assert column_roles(roles) == roles


def test_lerobots_column_names_are_recognised_without_flags(tmp_path: Path) -> None:
    """``observation.*`` as Dict leaves, ``next.reward``, ``next.done``; LeRobot's
    ``timestamp``, ``task_index`` and ``index`` left out (a table of one ``observation.*``:
    its observations)."""
    want = frames()
    count = len(want["p"])
    lerobot = {
        "observation.state": want["p"],
        "observation.images.top": want["v"],
        "action": want["act"],
        "next.reward": want["r"].astype(np.float32),
        "next.done": want["finished"],
        "timestamp": want["t"] / np.float32(10),
        "frame_index": want["t"],
        "episode_index": want["traj"],
        "index": np.arange(count),
        "task_index": np.zeros(count, np.int64),
    }
    path = tmp_path / "file-000.parquet"
    pq.write_table(arrow(lerobot, np.arange(count)), path)
    dataset, said = read(path)
    assert set(dataset.tensors) == {
        "observations/state", "observations/images.top", "next_observations/state",
        "next_observations/images.top", "actions", "rewards", "terminated", "truncated",
    }  # fmt: skip
    assert np.array_equal(column(dataset, "observations/images.top"), want["v"])
    assert np.array_equal(column(dataset, "rewards")[:, 0], lerobot["next.reward"])
    assert np.array_equal(column(dataset, "terminated")[:, 0], want["finished"])
    assert "as LeRobot's columns" in said[0] and "'next.done' does not tell" in said[0]
    del lerobot["observation.images.top"]
    pq.write_table(arrow(lerobot, np.arange(count)), path)
    alone, _ = read(path)
    assert np.array_equal(column(alone, "observations"), want["p"])
