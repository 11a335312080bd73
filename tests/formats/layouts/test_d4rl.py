"""D4RL HDF5 files, laid out as D4RL documents them (``OfflineEnv.get_dataset``)."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from expcli.errors import ConfigError, FormatError, SchemaError
from expcli.formats import Dataset
from expcli.formats.layouts import read_foreign_hdf5, write_layout
from expcli.spec import CircularState
from tests.formats.layouts.sample import CHRONOLOGICAL, N, T

# Writing lossy datasets in foreign layouts on purpose: their one-line warning of what the
# layout does not keep is tested in tests/formats/layouts/test_layout_losses.py.
pytestmark = pytest.mark.filterwarnings("ignore:.*layout does not keep:UserWarning")

ROWS = 7
TERMINALS = [False, False, True, False, False, False, False]
TIMEOUTS = [False, False, False, False, False, True, False]


def d4rl_file(path: Path, *, next_observations: bool = False, flags: bool = True) -> Path:
    observations = np.arange(ROWS * 3, dtype=np.float32).reshape(ROWS, 3)
    with h5py.File(path, "w") as h5:
        h5["observations"] = observations
        h5["actions"] = np.linspace(-1, 1, ROWS * 2, dtype=np.float32).reshape(ROWS, 2)
        h5["rewards"] = np.arange(ROWS, dtype=np.float32) / 2
        if flags:
            h5["terminals"] = np.array(TERMINALS)
            h5["timeouts"] = np.array(TIMEOUTS)
        if next_observations:
            h5["next_observations"] = observations + 100
        h5["infos/qpos"] = np.arange(ROWS * 2, dtype=np.float64).reshape(ROWS, 2)
        h5["infos/action_log_probs"] = np.full(ROWS, -0.5, dtype=np.float32)
        h5["metadata/algorithm"] = b"SAC"
        h5["metadata/iteration"] = 12
        h5["metadata/policy/fc0/weight"] = np.ones((4, 3), dtype=np.float32)
    return path


def read(path: Path, num_envs: int | None = None) -> Dataset:
    with h5py.File(path, "r") as h5:
        dataset = read_foreign_hdf5(h5, path, num_envs)
    assert dataset is not None
    return dataset


def test_reads_one_column_with_derived_next_observations(tmp_path: Path) -> None:
    dataset = read(d4rl_file(tmp_path / "hopper.hdf5"))
    tensors = dataset.tensors
    assert dataset.state == CircularState(0, 0, True)
    assert (dataset.memory_size, dataset.num_envs) == (ROWS, 1)
    observations = np.arange(ROWS * 3, dtype=np.float32).reshape(ROWS, 1, 3)
    assert np.array_equal(tensors["observations"], observations)
    # next row within the episode; at an episode's end (terminal row 2, timeout row 5 and
    # the last row) the row's own observation
    following = observations[[1, 2, 2, 4, 5, 5, 6], 0]
    assert np.array_equal(tensors["next_observations"][:, 0], following)
    assert tensors["rewards"].shape == (ROWS, 1, 1)
    assert tensors["rewards"][:, 0, 0].tolist() == [i / 2 for i in range(ROWS)]
    assert tensors["terminated"][:, 0, 0].tolist() == TERMINALS
    assert tensors["truncated"][:, 0, 0].tolist() == TIMEOUTS
    assert tensors["actions"].shape == (ROWS, 1, 2)
    assert tensors["infos/qpos"].shape == (ROWS, 1, 2)
    assert tensors["infos/action_log_probs"].shape == (ROWS, 1, 1)
    assert dataset.metadata["layout"] == "d4rl"
    assert dataset.metadata["d4rl"] == {
        "metadata": {"algorithm": "SAC", "iteration": 12},
        "derived": ["next_observations"],
    }


def test_stored_next_observations_are_kept(tmp_path: Path) -> None:
    dataset = read(d4rl_file(tmp_path / "d.hdf5", next_observations=True))
    expected = np.arange(ROWS * 3, dtype=np.float32).reshape(ROWS, 1, 3) + 100
    assert np.array_equal(dataset.tensors["next_observations"], expected)
    assert "derived" not in dataset.metadata["d4rl"]


def test_file_without_terminals_and_timeouts_is_one_episode_and_says_so(tmp_path: Path) -> None:
    dataset = read(d4rl_file(tmp_path / "d.hdf5", flags=False))
    assert dataset.metadata["d4rl"]["missing"] == ["terminals", "timeouts"]
    assert not dataset.tensors["terminated"].any() and not dataset.tensors["truncated"].any()
    observations = dataset.tensors["observations"]
    assert np.array_equal(dataset.tensors["next_observations"][:-1], observations[1:])


def test_num_envs_splits_rows_env_by_env(tmp_path: Path) -> None:
    path = tmp_path / "d.hdf5"
    with h5py.File(path, "w") as h5:
        h5["observations"] = np.arange(8, dtype=np.float32)[:, None]
        h5["actions"] = np.zeros((8, 1), dtype=np.float32)
        h5["rewards"] = np.zeros(8, dtype=np.float32)
    dataset = read(path, num_envs=2)
    assert dataset.tensors["observations"][:, :, 0].T.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # each column's last row has no later row: its own observation
    assert dataset.tensors["next_observations"][:, :, 0].T.tolist() == [[1, 2, 3, 3], [5, 6, 7, 7]]
    with pytest.raises(ConfigError, match="num_envs=3"):
        read(path, num_envs=3)


def test_arrays_of_different_lengths_are_named(tmp_path: Path) -> None:
    path = d4rl_file(tmp_path / "d.hdf5")
    with h5py.File(path, "a") as h5:
        del h5["rewards"]
        h5["rewards"] = np.zeros(ROWS - 1, dtype=np.float32)
    with pytest.raises(SchemaError) as info:
        read(path)
    assert info.value.key == "rewards" and info.value.path == str(path)
    assert "has 6 rows; expected 7" in str(info.value)


def test_flags_other_than_zero_and_one_are_refused(tmp_path: Path) -> None:
    path = d4rl_file(tmp_path / "d.hdf5")
    with h5py.File(path, "a") as h5:
        del h5["terminals"]
        h5["terminals"] = np.array([0, 0, 2, 0, 0, 0, 0], dtype=np.float32)
    with pytest.raises(SchemaError) as info:
        read(path)
    assert info.value.key == "terminals"


def test_float_flags_of_zero_and_one_are_read_as_booleans(tmp_path: Path) -> None:
    path = d4rl_file(tmp_path / "d.hdf5")
    with h5py.File(path, "a") as h5:
        del h5["terminals"]
        h5["terminals"] = np.array(TERMINALS, dtype=np.float32)
    dataset = read(path)
    assert dataset.tensors["terminated"].dtype == np.bool_
    assert dataset.tensors["terminated"][:, 0, 0].tolist() == TERMINALS


def test_write_lays_columns_out_env_by_env(tmp_path: Path, dataset: Dataset) -> None:
    path = write_layout(dataset, tmp_path / "out.hdf5", "d4rl", overwrite=False)
    rows = np.array(CHRONOLOGICAL[0] + CHRONOLOGICAL[1])
    envs = np.repeat(np.arange(N), T)
    with h5py.File(path, "r") as h5:
        assert "expcli" not in h5.attrs  # not expcli's own format
        assert np.array_equal(h5["observations"][()], dataset.tensors["observations"][rows, envs])
        assert np.array_equal(
            h5["next_observations"][()], dataset.tensors["next_observations"][rows, envs]
        )
        assert h5["rewards"].shape == (2 * T,)
        assert h5["actions"].shape == (2 * T,)  # Discrete: one integer per step
        assert h5["infos/lives"].shape == (2 * T,)
        assert np.array_equal(h5["log_prob"][()], dataset.tensors["log_prob"][rows, envs, 0])
        terminals = h5["terminals"][()]
        timeouts = h5["timeouts"][()]
        saved = json.loads(h5["metadata/expcli"][()])
    assert np.flatnonzero(terminals).tolist() == [1, 4, 7]
    # column 0 ends mid-episode (row 2) before column 1 starts: the seam is a timeout
    assert np.flatnonzero(timeouts).tolist() == [5, 9]
    assert saved.pop("lost_in_layout") == [
        "the 2 env columns and circular state (laid out env by env, oldest first: read back "
        "as one env column unless --num-envs 2)"
    ]
    assert saved == {"env_id": "Toy-v0", "seed": 3}


def test_written_file_reads_back_per_column(tmp_path: Path, dataset: Dataset) -> None:
    path = write_layout(dataset, tmp_path / "out.hdf5", "d4rl", overwrite=False)
    back = read(path, num_envs=N)
    assert back.metadata["env_id"] == "Toy-v0" and back.metadata["layout"] == "d4rl"
    for name, array in dataset.tensors.items():
        expected = np.stack([array[rows, j] for j, rows in enumerate(CHRONOLOGICAL)], axis=1)
        if name == "truncated":
            expected = expected.copy()
            expected[T - 1, 0] = True  # the seam
        assert np.array_equal(back.tensors[name], expected), name


def test_write_needs_the_standard_tensors(tmp_path: Path, dataset: Dataset) -> None:
    del dataset.tensors["actions"]
    with pytest.raises(SchemaError) as info:
        write_layout(dataset, tmp_path / "out.hdf5", "d4rl", overwrite=False)
    assert info.value.key == "actions"
    assert list(tmp_path.iterdir()) == []


def test_string_infos_are_skipped_and_named(tmp_path: Path) -> None:
    path = d4rl_file(tmp_path / "d.hdf5")
    with h5py.File(path, "a") as h5:
        h5["infos/names"] = np.array([b"a"] * ROWS)
        h5["env_name"] = b"hopper-medium-v2"  # a root scalar: metadata
    dataset = read(path)
    assert dataset.metadata["d4rl"]["skipped"] == ["infos/names"]
    assert dataset.metadata["d4rl"]["metadata"]["env_name"] == "hopper-medium-v2"
    assert "infos/names" not in dataset.tensors


def test_string_observations_are_refused(tmp_path: Path) -> None:
    path = d4rl_file(tmp_path / "d.hdf5")
    with h5py.File(path, "a") as h5:
        del h5["actions"]
        h5["actions"] = np.array([b"left"] * ROWS)
    with pytest.raises(FormatError) as info:
        read(path)
    assert info.value.key == "actions"
